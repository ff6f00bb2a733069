"""Issue 50: detection on normalised text, national ids by their checksums, phones of every region,
postcodes beside places, names in every script and in lower case — and the look-alikes that
must stay. Every reproduction of the issue's "text the detectors do not read" is a case here."""

from __future__ import annotations

import importlib

import polars as pl
import pytest
from stdnum.us import ssn as us_ssn

from pipeline.generate.pii_corpus import (
    GUARD_KINDS,
    LOOK_ALIKES_KEPT,
    evaluate,
    look_alikes_world,
    world_rows,
)
from pipeline.pii import analyse, detect, redact_text
from pipeline.pii.detect import may_hold_pii
from pipeline.pii.guard import MAYBE_PII, find_pii, find_spans
from pipeline.pii.national_ids import find_national_ids, formats
from pipeline.pii.normalise import normalise
from pipeline.pii.phones import fitting_regions, more_regions
from pipeline.pii.rules import may_hold_name

# The reproductions of issue 50, each as one sentence and what must come out.
ISSUE_50 = [
    ("Please call محمد الأحمد tomorrow.", "Please call [PERSON] tomorrow."),
    ("Please call 王小明 tomorrow.", "Please call [PERSON] tomorrow."),
    ("My mobile is 13812345678.", "My mobile is [PHONE]."),
    ("My NINO is QQ 12 34 56 C.", "My NINO is [NATIONAL_ID]."),
    ("My SSN is 123 45 6789.", "My SSN is [SSN]."),
    ("Aadhaar 2345 6789 0124 attached.", "Aadhaar [NATIONAL_ID] attached."),
    ("My DNI is 12345678Z.", "My DNI is [NATIONAL_ID]."),
    ("NIR 1 84 12 76 451 089 46 on file.", "NIR [NATIONAL_ID] on file."),
    ("Write to jane＠example.com today.", "Write to [EMAIL] today."),
    (
        "Open https://crm.example/c?to=jane%40example.com&tel=%2B14155550100 now",
        "Open https://crm.example/c?to=[EMAIL]&tel=[PHONE] now",
    ),
    (
        "Call +1\u200b415\u200b555\u200b0199 or mail jane\u200b.doe@example.com",
        "Call [PHONE] or mail [EMAIL]",
    ),
    ("ask sarah connor about it", "ask [PERSON] about it"),
    ("Ship it to 10115 Berlin.", "Ship it to [LOCATION]."),
]


@pytest.mark.parametrize(("text", "expected"), ISSUE_50)
def test_the_text_issue_50_found_unread_is_redacted_whole(text: str, expected: str) -> None:
    redacted, counts = redact_text(text)
    assert redacted == expected
    assert sum(counts.values()) == expected.count("[") - expected.count("[[")
    assert not find_pii(redacted)


def test_every_planted_value_beyond_english_is_redacted() -> None:
    """Recall 1.0 per kind on the national ids (26 formats), names in 13 scripts and in lower
    case, postcodes beside places, Chinese mobiles and every obfuscation."""
    rows = world_rows()
    found = [[(s.start, s.end, s.kind) for s in spans] for spans in detect([r.text for r in rows])]
    table = evaluate(rows, found)
    planted = {kind: row["planted"] for kind, row in table.items() if row["planted"]}
    assert planted["national_id"] >= 60 and planted["person"] >= 36
    assert {kind: table[kind]["recall"] for kind in planted} == dict.fromkeys(planted, 1.0)


def test_the_look_alikes_beyond_english_are_kept() -> None:
    """≥ 95 % of 117 texts without personal data come out unchanged (measured: 115; the NER
    calls "Safari" a person and "the Echo Show" a place)."""
    rows = look_alikes_world()
    assert len(rows) >= 100
    kept = [
        text
        for text, (redacted, _) in zip(rows, analyse([r.text for r in rows]), strict=True)
        if redacted == text.text
    ]
    assert len(kept) / len(rows) >= LOOK_ALIKES_KEPT
    assert not [r.text for r in rows if find_pii(r.text)]  # the guard is silent on every one


def test_the_guard_finds_the_shaped_kinds_beyond_english() -> None:
    rows = [r for r in world_rows() if r.values[0][0] in GUARD_KINDS]
    table = evaluate(rows, [find_spans(r.text) for r in rows], GUARD_KINDS)
    assert {k: v["recall"] for k, v in table.items() if v["planted"]} == {
        "email": 1.0,
        "phone": 1.0,
        "card": 1.0,
        "iban": 1.0,
        "ssn": 1.0,
        "national_id": 1.0,
    }
    assert all(v["precision"] == 1.0 for v in table.values())
    texts = pl.Series([r.text for r in rows])
    assert texts.str.contains(MAYBE_PII).all()  # its column prefilter keeps each one


def test_normalised_text_maps_back_to_the_original() -> None:
    plain = normalise("plain text, nothing to do")
    assert plain.starts is None and plain.text == plain.original
    assert normalise("محمد الأحمد").starts is None  # NFKC already, no format character
    text = "mail ｊａｎｅ\u200b@exa\u00admple.com or jane%40example.com, 100%AB"
    normal = normalise(text)
    assert normal.text == "mail jane@example.com or jane@example.com, 100%AB"
    first = normal.text.index("jane")
    assert normal.span(first, first + 16) == (5, 23)  # the zero-width space and soft hyphen too
    second = normal.text.index("jane", first + 1)
    assert text[slice(*normal.span(second, second + 16))] == "jane%40example.com"
    assert normalise("u\u0308ber").text == "über"  # a base and its combining mark compose


def test_national_ids_need_their_shape_or_a_context_word() -> None:
    assert len(formats()) >= 25
    pesel = "44051401359"  # valid PESEL, and as likely an order or ticket number
    assert find_national_ids(f"we processed {pesel} events") == []
    assert find_national_ids(f"PESEL: {pesel}") == [(7, 18, "national_id")]
    assert find_national_ids(f"{pesel} (PESEL)") == [(0, 11, "national_id")]
    assert find_national_ids(f"order PESEL {pesel}") == [(12, 23, "national_id")]
    assert find_national_ids(f"order {pesel}, pesel?") == []  # right after an order word
    assert find_national_ids("ticket 12345678Z") == []
    assert find_national_ids("id 12345678A") == []  # the DNI check letter is wrong
    # A US SSN written with spaces counts by its shape, whatever stdnum says of it.
    assert not us_ssn.is_valid("123 45 6789")
    assert find_national_ids("123 45 6789") == [(0, 11, "ssn")]
    # A shape other numbers share (3-3-3: Spanish phones) needs its word.
    assert find_national_ids("call 123 456 782") == []
    assert find_national_ids("SIN 123 456 782") == [(4, 15, "national_id")]


def test_phones_of_every_region_at_a_bounded_cost() -> None:
    regions = more_regions()
    assert regions[0] == "CN" and len(regions) > 100
    assert not {"DK", "NO", "LU"} & set(regions)  # 8-digit figures and dates would parse
    assert "CN" in fitting_regions(["13812345678"])
    # An order number left unexplained is tried in a few regions, not in 245.
    assert len(fitting_regions(["1234-5678-9012-3"])) < 40
    assert fitting_regions(["+86 138 1234 5678"]) == []  # international: read by the first
    assert redact_text("call 138 1234 5678 or 010 6552 9988")[0] == "call [PHONE] or [PHONE]"
    kept = "Invoice INV-2026-0042, batch 2026.11.02, 44051401359 events"
    assert redact_text(kept)[0] == kept


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hauptstraße 5, 10115 Berlin", "[ADDRESS], [LOCATION]"),
        ("Our office: 1012 AB Amsterdam.", "Our office: [LOCATION]."),
        ("Send it to 00-950 Warsaw.", "Send it to [LOCATION]."),
        ("Ottawa, ON K1A 0B1", "[LOCATION]"),
        ("We have 10115 units in stock.", "We have 10115 units in stock."),
        ("The 2019 Paris agreement", "The 2019 [LOCATION] agreement"),
    ],
)
def test_postcodes_join_the_place_beside_them(text: str, expected: str) -> None:
    assert redact_text(text)[0] == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Μίλησα με τον Γιώργος Παπαδόπουλος σήμερα.", "Μίλησα με τον [PERSON] σήμερα."),
        ("דיברתי עם דוד כהן היום.", "דיברתי עם [PERSON] היום."),
        ("मैंने आज राहुल शर्मा से बात की।", "मैंने आज [PERSON] से बात की।"),
        ("ติดต่อ ศศิธร เนื้อนุ่ม พรุ่งนี้", "ติดต่อ [PERSON] พรุ่งนี้"),
        ("田中太郎さんに連絡してください。", "[PERSON]さんに連絡してください。"),
        ("김서영 씨에게 연락하세요.", "[PERSON] 씨에게 연락하세요."),
        ("请把合同发给张伟。", "请把合同发给[PERSON]。"),
        ("王先生明天来。", "[PERSON]先生明天来。"),
        ("Tôi đã gặp Nguyễn Văn Minh hôm qua.", "Tôi đã gặp [PERSON] hôm qua."),
        ("Zeynep Yılmaz ile konuştum.", "[PERSON] ile konuştum."),
        ("Rozmawiałem z Łukasz Wiśniewski.", "Rozmawiałem z [PERSON]."),
        ("تحدثت مع خالد العلي اليوم.", "تحدثت مع [PERSON] اليوم."),
        # look-alikes: common words, places and products in those scripts stay
        ("我很高兴！王国的历史很长。", "我很高兴！王国的历史很长。"),
        ("이야기를 나누어서 좋았습니다.", "이야기를 나누어서 좋았습니다."),
        ("will smith and rose hill", "will smith and rose hill"),
        ("mark the bill as paid", "mark the bill as paid"),
    ],
)
def test_names_in_every_script(text: str, expected: str) -> None:
    assert redact_text(text)[0] == expected


def test_the_gates_let_every_new_kind_through() -> None:
    """A text that can hold a finding is never gated out: names without a capital letter or a
    digit, and percent-encoded or full-width values (the gates read the normalised text)."""
    for text in ("تحدثت مع خالد العلي", "请把合同发给张伟", "ask sarah connor"):
        assert not may_hold_name(text) and may_hold_pii(text), text
    assert not may_hold_pii("ask them about the order")
    assert detect(["mail jane%40example.com"])[0][0].kind == "email"
    engine = importlib.import_module("pipeline.pii.engine")
    names = {type(r).__name__ for r in engine.build_engine()[0].registry.recognizers}
    assert {"NationalIds", "ScriptNames", "PostcodePlaces"} <= names
