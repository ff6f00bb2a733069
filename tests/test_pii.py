"""PII redaction (presidio + spaCy + phonenumbers), keyed pseudonyms for identifiers, the cache,
and the publish guard's independent detector: every leak of issue 17 is a case here."""

import importlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.generate.pii_corpus import GUARD_KINDS, corpus, evaluate
from pipeline.pii import PLACEHOLDER, PSEUDONYM, analyse, detect, pseudonym, redact_text
from pipeline.pii.detect import may_hold_pii
from pipeline.pii.guard import MAYBE_PII, find_pii, guard_version, iban_valid, luhn_valid
from pipeline.pii.names import tenant_names
from pipeline.pii.redactor import IDENTIFIERS_KEY, RedactionCache, Redactor

KEY = b"test-key"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Leaked verbatim before: phones without a run of three digits, national formats.
        ("call +33 6 12 34 56 78 now", "call [PHONE] now"),
        ("call 06 12 34 56 78 now", "call [PHONE] now"),
        ("call (06) 12-34-56-78 now", "call [PHONE] now"),
        ("call 030/12345678 now", "call [PHONE] now"),
        ("call +1 (415) 555-0132 now", "call [PHONE] now"),
        ("mobile 0176 1234567", "mobile [PHONE]"),
        # IPv4 without three-digit groups, and every IPv6.
        ("dns 8.8.8.8 and 10.0.0.1", "dns [IP] and [IP]"),
        ("from fe80::1 and 2001:db8::8a2e:370:7334", "from [IP] and [IP]"),
        # Street addresses.
        ("ship to 221B Baker Street, please", "ship to [ADDRESS], please"),
        ("ship to Hauptstraße 5 today", "ship to [ADDRESS] today"),
        # Cards with dots, lowercase IBANs, bare 9-digit SSNs.
        ("card 4111.1111.1111.1111 ok", "card [CARD] ok"),
        ("iban de89370400440532013000.", "iban [IBAN]."),
        ("iban GB82 WEST 1234 5698 7654 32", "iban [IBAN]"),
        ("my SSN is 536904399", "my SSN is [SSN]"),
        ("ssn 536-90-4399", "ssn [SSN]"),
        # Half-redacted before: the whole value goes.
        ("mail jürgen.müller@example.de", "mail [EMAIL]"),
        ("call +31 6 12345678", "call [PHONE]"),
        # People's names (the demo pack showed this one).
        ('Scan this message from Priya Lopez: "hi"', 'Scan this message from [PERSON]: "hi"'),
        ("Maria Lopez reports to Kenji Tanaka.", "[PERSON] reports to [PERSON]."),
    ],
)
def test_redacts_the_leaks_of_issue_17(text: str, expected: str) -> None:
    redacted, counts = redact_text(text)
    assert redacted == expected
    assert sum(counts.values()) == expected.count("[")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Issue 40: what reached packs past the guard.
        ("call 555.123.4567 now", "call [PHONE] now"),
        ("call (555) 123-4567 now", "call [PHONE] now"),
        ("login from 192.168.001.010 today", "login from [IP] today"),
        ("Meet Siobhan O'Callaghan and Priya Raghunathan.", "Meet [PERSON] and [PERSON]."),
        ("221B Baker Street, London NW1 6XE", "[ADDRESS], [LOCATION] [ADDRESS]"),
        (
            "1600 Pennsylvania Ave NW, Washington, DC 20500",
            "[ADDRESS], [LOCATION], [ADDRESS]",
        ),
    ],
)
def test_redacts_the_misses_of_issue_40(text: str, expected: str) -> None:
    assert redact_text(text)[0] == expected
    assert not find_pii(expected)


@pytest.mark.parametrize(
    "text",
    [
        "Order #12345678901 shipped.",  # was #[PHONE]
        "Please upgrade to version 1.2.3.4 today.",  # was [IP]
        "card 4111 1111 1111 1112 fails Luhn",
        "iban DE00 3704 0044 0532 0130 00 fails mod-97",
        "on 2026-11-02 10:00 the order 12345 cost 3.50 (v2.3.1), id 1234567",
        "score 72/100, 1,250.00 EUR, ticket 123456789",
        "Mark the ticket as urgent. May we call on Monday?",
        "My SSN is not something I share.",
        "Order 555.123.4567 and version 192.168.001.010, firmware 001.002.003.010",
        "Event ix-000394-153365 and row 000123-456789 of 2026.11.02",
    ],
)
def test_leaves_look_alikes_alone(text: str) -> None:
    redacted, counts = redact_text(text)
    assert redacted == text
    assert not counts


# Floors per kind on the labelled corpus, the values beyond English included
# (pipeline/generate/pii_world.py). Measured: every kind 1.0 but person recall 0.95 (61 of 64) —
# "Priyanka Raghunathan" (twice) and "Olusegun Adeyemi" (once) are in no name list and the NER
# misses them there (the tenant's name lexicon takes the first: the last test here) — and
# location recall 0.94: spaCy's small model misses "Lyon" (2 of 32). A regression drops below.
REDACTOR_FLOORS = {
    "email": (1.0, 1.0),
    "phone": (1.0, 1.0),
    "card": (1.0, 1.0),
    "iban": (1.0, 1.0),
    "ssn": (1.0, 1.0),
    "national_id": (1.0, 1.0),
    "ip_address": (1.0, 1.0),
    "person": (0.95, 1.0),
    "address": (1.0, 1.0),
    "location": (0.9, 0.9),
}
GUARD_FLOORS = {kind: (1.0, 1.0) for kind in GUARD_KINDS}


@pytest.fixture(scope="module")
def labelled():
    rows = corpus()
    spans = detect([r.text for r in rows])
    return rows, [[(s.start, s.end, s.kind) for s in found] for found in spans]


def test_redactor_precision_and_recall_per_kind(labelled) -> None:
    rows, found = labelled
    table = evaluate(rows, found)
    for kind, (recall, precision) in REDACTOR_FLOORS.items():
        assert table[kind]["planted"] >= 6, kind
        assert table[kind]["recall"] >= recall, (kind, table[kind])
        assert table[kind]["precision"] >= precision, (kind, table[kind])
    look_alikes = [f for r, f in zip(rows, found, strict=True) if not r.values]
    assert look_alikes and not any(look_alikes)


def test_guard_is_independent_and_finds_the_shaped_kinds() -> None:
    rows = corpus()
    table = evaluate(rows, [_guard_spans(r.text) for r in rows], GUARD_KINDS)
    for kind, (recall, precision) in GUARD_FLOORS.items():
        assert table[kind]["recall"] >= recall, (kind, table[kind])
        assert table[kind]["precision"] >= precision, (kind, table[kind])
    import pipeline.pii.guard as guard

    source = Path(guard.__file__).read_text()
    assert (
        "presidio" not in source.split('"""', 2)[2]
        and "phonenumbers" not in source.split('"""', 2)[2]
    )


def _guard_spans(text: str) -> list[tuple[int, int, str]]:
    from pipeline.pii.guard import find_spans

    return find_spans(text)


def test_guard_finds_what_a_broken_redactor_leaves() -> None:
    assert find_pii("mail jürgen.mü[EMAIL] or +31 6 [PHONE]") == {"half_redacted": 2}
    assert find_pii("card 4111.1111.1111.1111, iban de89370400440532013000") == {
        "card": 1,
        "iban": 1,
    }
    assert find_pii("8.8.8.8 or fe80::1, call 06 12 34 56 78") == {"ip_address": 2, "phone": 1}
    redacted, _ = redact_text("Order #12345678901, version 1.2.3.4, mail a@b.example")
    assert not find_pii(redacted)


_PIECES = st.sampled_from(
    [
        *"0123456789",
        *" ./()-+@:",
        *("12", "345", "6789", "06", "+31", "(0)", "4111", "192.168."),
        *("a", "Z", "DE89", "fe80", "::", "[EMAIL]", "[PHONE]", "[IP]", "x@y.org"),
        # national ids, and what normalisation undoes: full-width, format characters, escapes
        *("QQ", "C", "X", "A", "[NATIONAL_ID]", "＠", "１", "\u200b", "\u00ad", "%40", "%2B"),
    ]
)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(st.lists(_PIECES, max_size=30).map("".join))
def test_every_text_the_guard_flags_passes_its_column_prefilter(text: str) -> None:
    """The guard scans in Python only texts its Rust prefilter (MAYBE_PII) keeps: whatever
    find_pii flags must be kept, so the prefilter never hides a leak."""
    if find_pii(text):
        assert pl.Series([text]).str.contains(MAYBE_PII).item(), text


def test_the_prefilter_keeps_every_corpus_text_the_guard_flags() -> None:
    texts = [row.text for row in corpus()] + ["mail jürgen.mü[EMAIL] or +31 6 [PHONE]"]
    flagged = pl.Series([t for t in texts if find_pii(t)])
    assert flagged.len() > 50 and flagged.str.contains(MAYBE_PII).all()
    assert (
        not pl.Series(["version 2 of the plan", "see you at 10", "ok"])
        .str.contains(MAYBE_PII)
        .any()
    )


def test_checksums() -> None:
    assert luhn_valid("4111.1111.1111.1111")
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("4111")  # too short to be a card
    assert iban_valid("DE89370400440532013000")
    assert iban_valid("de89 3704 0044 0532 0130 00")
    assert not iban_valid("DE89370400440532013001")


def test_frame_redacts_texts_and_pseudonymizes_pii_ids() -> None:
    frame = pl.DataFrame(
        {
            "tenant_id": ["acme", "acme", "acme"],
            "contact_id": ["jane.doe@example.com", "c00006", "jane.doe@example.com"],
            "kind": ["note", "note", "note"],
            "text": ["mail bob@example.com or 4111111111111111", None, "nothing here"],
            "tags": [["vip", "bob@example.com"], None, []],
            "n": [1, 2, 3],
        }
    )
    redactor = Redactor(KEY)
    out, counts = redactor.frame(frame, identifiers={"contact_id"}, keep={"kind"})
    hashed = pseudonym(KEY, "acme", "jane.doe@example.com")
    # A PII-looking id becomes the same pseudonym everywhere (joins hold); c00006 stays.
    assert out["contact_id"].to_list() == [hashed, "c00006", hashed]
    assert pl.Series([hashed]).str.contains(PSEUDONYM).all()
    assert out["text"].to_list() == ["mail [EMAIL] or [CARD]", None, "nothing here"]
    assert out["tags"].to_list() == [["vip", "[EMAIL]"], None, []]
    assert out["n"].to_list() == [1, 2, 3] and out["kind"].to_list() == frame["kind"].to_list()
    assert counts == {"email": 4, "card": 1}
    assert out.schema == frame.schema
    # Stable per tenant, different across tenants, unknown without the key.
    assert pseudonym(KEY, "acme", "jane.doe@example.com") == hashed
    assert pseudonym(KEY, "globex", "jane.doe@example.com") != hashed
    assert pseudonym(b"other", "acme", "jane.doe@example.com") != hashed


def test_a_frame_of_many_tenants_is_looked_up_once_and_redacted_per_tenant(tmp_path: Path) -> None:
    """Texts of every column and tenant are hashed and looked up together, once, and so are ids
    (in the caches of the frame's tenants); ids get their own tenant's pseudonyms, in the frame's
    row order; the result is each tenant's rows redacted alone."""
    lookups: list[tuple[str, list[str] | None]] = []

    class Counted(RedactionCache):
        def lookup(
            self, version: str, hashes: pl.Series, tenants: Sequence[str] | None = None
        ) -> pl.DataFrame:
            lookups.append((version, None if tenants is None else list(tenants)))
            return super().lookup(version, hashes, tenants)

    frame = pl.DataFrame(
        {
            "tenant_id": ["acme", "globex", "acme", "globex"],
            "contact_id": ["jane@example.com", "jane@example.com", "c00001", None],
            "member_ids": [["i_1", "jane@example.com"], [], None, ["bob@example.com"]],
            "prompt": ["mail bob@example.com", "hi", None, "mail bob@example.com"],
            "answer": ["hi", "call 06 12 34 56 78", "ok", "hi"],
            "tags": [["bob@example.com"], None, [], ["x"]],
        }
    )
    redactor = Redactor(KEY, Counted(tmp_path / "pii_cache"))
    out, counts = redactor.frame(frame, identifiers={"contact_id", "member_ids"})
    # One lookup of the texts, one of the ids (the e-mails are not plain ids).
    tenants = ["acme", "globex"]
    assert lookups == [(redactor.version, tenants), (redactor._cache_key(ner=False), tenants)]
    assert redactor._cache_key(ner=False).endswith(f"+{guard_version()}{IDENTIFIERS_KEY}")
    alone = [
        Redactor(KEY).frame(frame.filter(pl.col("tenant_id") == t), {"contact_id", "member_ids"})
        for t in ("acme", "globex")
    ]
    expected = pl.concat([alone[0][0][0:1], alone[1][0][0:1], alone[0][0][1:2], alone[1][0][1:2]])
    assert out.equals(expected)
    assert counts == alone[0][1] + alone[1][1] == {"email": 7, "phone": 1}
    assert out["contact_id"][0] == pseudonym(KEY, "acme", "jane@example.com")
    assert out["contact_id"][1] == pseudonym(KEY, "globex", "jane@example.com")
    assert out["prompt"].to_list() == ["mail [EMAIL]", "hi", None, "mail [EMAIL]"]


def test_frame_takes_any_iterable_and_any_column_name() -> None:
    """One-shot iterables of identifiers and kept columns; text columns named like the
    redactor's own working columns."""
    frame = pl.DataFrame(
        {
            "tenant_id": ["acme"],
            "contact_id": ["jane@example.com"],
            "n": ["mail bob@example.com"],
            "text": ["call 06 12 34 56 78"],
            "kind": ["Bob"],
        }
    )
    out, _ = Redactor(KEY).frame(frame, identifiers=iter(["contact_id"]), keep=iter(["kind"]))
    email = pseudonym(KEY, "acme", "jane@example.com")
    assert out.row(0) == ("acme", email, "mail [EMAIL]", "call [PHONE]", "Bob")


def test_each_distinct_text_is_analysed_once(tmp_path: Path) -> None:
    cache = RedactionCache(tmp_path / "pii_cache")
    texts = pl.Series("text", ["call 06 12 34 56 78", "hello", "call 06 12 34 56 78"])
    first = Redactor(KEY, cache)
    out, counts = first.series(texts)
    assert out.to_list() == ["call [PHONE]", "hello", "call [PHONE]"]
    assert counts == {"phone": 2}
    assert (first.analysed, first.served) == (2, 0)
    first.flush()
    again = Redactor(KEY, cache)
    out_again, counts_again = again.series(texts.append(pl.Series("text", ["new text"])))
    assert out_again.to_list()[:3] == out.to_list() and counts_again == counts
    assert (again.analysed, again.served) == (1, 2)
    # A new detector version never gets the old redactions.
    other = Redactor(KEY, cache, version="another-detector")
    other.series(texts)
    assert other.served == 0


def test_a_large_batch_is_analysed_in_worker_processes_with_the_same_findings(
    monkeypatch,
) -> None:
    detect_module = importlib.import_module("pipeline.pii.detect")  # not `detect`, the function
    monkeypatch.setattr(detect_module, "POOL_MIN", 40)
    monkeypatch.setattr(detect_module, "POOL_CHUNK", 7)
    # A pool starts once it was given POOL_MIN texts, for a batch of two chunks (14) or more.
    texts = [row.text for row in corpus()[:60]] + ["Priya Lopez in Berlin", "no pii here"]
    pool = detect_module.AnalysisPool(workers=2)
    try:
        assert pool.analyse(texts[:39]) == analyse(texts[:39]) and pool._pool is None
        assert pool.analyse(texts[:13]) == analyse(texts[:13]) and pool._pool is None
        found = pool.analyse(texts)
        assert pool._pool is not None  # the batch went to the processes
        assert found == analyse(texts)
        assert found[-2:] == [
            ("[PERSON] in [LOCATION]", ["person", "location"]),
            ("no pii here", []),
        ]
        assert pool.analyse(texts[:14], ner=False) == analyse(texts[:14], ner=False)
    finally:
        pool.close()
    assert pool._pool is None and pool.analyse(texts) == found and pool._pool is None


def test_identifiers_are_analysed_once_and_kept_apart_from_texts(tmp_path: Path) -> None:
    cache = RedactionCache(tmp_path / "pii_cache")
    ids = pl.Series("contact_id", ["jane.doe@example.com", "ord-42", "ord-42", "i_00000042", None])
    first = Redactor(KEY, cache)
    out, counts = first.series(ids, tenant_id="acme")
    assert out.to_list() == [pseudonym(KEY, "acme", "jane.doe@example.com"), *ids[1:]]
    # A plain id (i_00000042: `rules.PLAIN_ID`) cannot hold PII: neither analysed nor cached.
    assert counts == {"email": 1} and first.ids_analysed == 2
    first.flush()
    again = Redactor(KEY, cache)
    out_again, counts_again = again.series(ids.append(pl.Series(["ord-43", "i_7"])), "acme")
    assert out_again.to_list()[:5] == out.to_list() and counts_again == counts
    assert again.ids_analysed == 1  # only the new id that is not plain
    again.flush()
    # The cache keeps no readable form of an identifier, and texts are not served from it.
    cached = pl.read_parquet(tmp_path / "pii_cache" / f"*{IDENTIFIERS_KEY}" / "*.parquet")
    assert cached["redacted"].null_count() == cached.height == 3
    text = Redactor(KEY, cache)
    assert text.series(pl.Series(["jane.doe@example.com"]))[0].to_list() == ["[EMAIL]"]
    assert (text.analysed, text.served) == (1, 0)


def test_a_lookup_reads_the_caches_of_the_tenants_asked_for(tmp_path: Path) -> None:
    """The home's cache reads its own rows and those of the tenants' packs asked for (None: every
    tenant's); a text only another tenant's pack met is analysed again, to the same result."""
    root = tmp_path / "pii_cache"
    packs = {t: root / f"tenant_id={t}" for t in ("acme", "globex")}
    for tenant, text in (("acme", "mail ann@example.com"), ("globex", "call bob@example.com")):
        pack = Redactor(KEY, RedactionCache(packs[tenant]))
        pack.series(pl.Series([text]))
        pack.flush()
    home = Redactor(KEY, RedactionCache(root, packs))
    texts = pl.Series(["mail ann@example.com", "call bob@example.com"])
    hashes = home._hash(texts)
    assert home.cache is not None
    assert home.cache.lookup(home.version, hashes).height == 2
    assert home.cache.lookup(home.version, hashes, ["acme"])["text_hash"].to_list() == [hashes[0]]
    assert home.cache.lookup(home.version, hashes, ["initech"]).is_empty()
    frame = pl.DataFrame({"tenant_id": ["acme", "acme"], "prompt": texts})
    out, counts = home.frame(frame)
    assert out["prompt"].to_list() == ["mail [EMAIL]", "call [EMAIL]"]
    assert (home.served, home.analysed, counts) == (1, 1, {"email": 2})


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(alphabet="aZé_-@:.+ 019٣\n", max_size=14),
            st.from_regex(
                r"[A-Za-z](?:[A-Za-z]{2,})?[0-9]+|[A-Za-z]+_[0-9]{1,12}\n?", fullmatch=True
            ),
        ),
        max_size=20,
    )
)
def test_plain_identifiers_are_exactly_the_ones_may_hold_pii_skips(values: list[str]) -> None:
    """The vectorised prefilter agrees value by value with `rules.PLAIN_ID.fullmatch`, which
    `may_hold_pii(…, names=False)` skips: it never lets an id that could hold PII through."""
    from pipeline.pii import rules
    from pipeline.pii.redactor import plain_identifiers

    found = plain_identifiers(pl.Series(values, dtype=pl.String)).to_list()
    assert found == [rules.PLAIN_ID.fullmatch(v) is not None for v in values]
    assert all(
        not may_hold_pii(v, names=False) for v, plain in zip(values, found, strict=True) if plain
    )


def test_key_file_is_created_once_and_private(tmp_path: Path, monkeypatch) -> None:
    from pipeline.pii import KEY_ENV, pii_key

    monkeypatch.delenv(KEY_ENV, raising=False)
    key = pii_key(tmp_path)
    path = tmp_path / "secrets" / "pii.key"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len(key) == 64 and pii_key(tmp_path) == key
    monkeypatch.setenv(KEY_ENV, "from-the-environment")
    assert pii_key(tmp_path) == b"from-the-environment"


def _first_key(home: str) -> bytes:
    from pipeline.pii import pii_key

    return pii_key(Path(home))


def test_first_runs_racing_for_the_key_agree_on_one(tmp_path: Path, monkeypatch) -> None:
    """Eight processes create the key at once, 5 times: all read one whole key, no temp is left."""
    from concurrent.futures import ProcessPoolExecutor

    from pipeline.pii import KEY_ENV

    monkeypatch.delenv(KEY_ENV, raising=False)
    with ProcessPoolExecutor(8) as pool:
        for round_ in range(5):
            home = str(tmp_path / str(round_))
            keys = set(pool.map(_first_key, [home] * 8))
            assert len(keys) == 1 and len(keys.pop()) == 64
            assert [p.name for p in (tmp_path / str(round_) / "secrets").iterdir()] == ["pii.key"]


@pytest.mark.parametrize(
    ("text", "needs_ner"),
    [
        ("Thank them for the feedback and ask for one concrete example.", False),
        ("Decide your boundary first. Then call them back (#12).", False),
        ("My landlord cancelled again. How should I respond?", False),
        ("Their name is Carlos. What do I say?", True),  # a proper word inside a sentence
        ("Priya called yesterday.", True),  # a known name opening the text
        ("Thanks. Lopez will call.", True),  # a known last name opening a sentence
        ('He wrote: "Meet me in Lyon"', True),
        ("Berlin is cold this week.", True),  # a known place opening the text
        ("Texas", True),  # a tag
        ("Zorblatt called.", False),  # what the gate gives up: an unknown name opening a sentence
        ("all lower case, no names at all", False),
    ],
)
def test_ner_runs_only_where_a_name_could_be_kept(text: str, needs_ner: bool) -> None:
    from pipeline.pii.rules import may_hold_name

    assert may_hold_name(text) is needs_ner


def test_gated_texts_keep_every_other_kind_and_sentence_initial_names() -> None:
    """Texts the NER skips still get the pattern kinds; a name opening a sentence still goes."""
    texts = [
        "Thank them and mail bob@example.com or call +33 6 12 34 56 78.",
        "Priya Lopez called yesterday.",
        "Ship it to 221B Baker Street today.",
    ]
    assert [r for r, _ in analyse(texts)] == [
        "Thank them and mail [EMAIL] or call [PHONE].",
        "[PERSON] called yesterday.",
        "Ship it to [ADDRESS] today.",
    ]


def test_plain_ids_skip_analysis_and_the_other_shapes_do_not() -> None:
    from pipeline.pii.detect import may_hold_pii

    assert not any(may_hold_pii(i, names=False) for i in ("m0000042", "i0000042", "evt4155550132"))
    # Two letters could open an IBAN; an underscore or dash lets a phone start after it.
    assert all(
        may_hold_pii(i, names=False)
        for i in ("de89370400440532013000", "u_4155550132", "a-536904399")
    )
    found = detect(["u_4155550132", "m4155550132", "de89370400440532013000"], ner=False)
    assert [[s.kind for s in spans] for spans in found] == [["phone"], [], ["iban"]]


def test_short_bare_digit_runs_skip_the_phone_regions_and_change_no_finding(monkeypatch) -> None:
    import re

    from pipeline.pii import rules

    texts = [
        "f_00000001",
        "i_123456789",
        "order 1234567 shipped, call 0612345678",
        "ref 7654321 or +33 6 12 34 56 78 and 12345",
        "call 555 1234 at 9876543",
        "u_4155550132",
        "appelez le 06\u00a012345678 ou 01\u201312345678",  # joined by a no-break space, a dash
        "ref 123x4567 or [020]79460001",
    ]
    assert not may_hold_pii("f_00000001", names=False)
    assert not rules.digit_runs("order 1234567 and ref f_00000001")
    assert rules.digit_runs("appelez le 06\u00a012345678")  # may be one number: tried
    shortcut = [detect(texts, ner=False), detect(texts)]
    # Every neighbour may join a short run to more digits: the short-run shortcut never applies.
    monkeypatch.setattr(rules, "_PHONE_JOINER", re.compile(""))
    monkeypatch.setattr(rules, "PLAIN_ID", re.compile(r"[A-Za-z](?:[A-Za-z]{2,})?[0-9]+"))
    assert shortcut == [detect(texts, ner=False), detect(texts)]
    kinds = [[s.kind for s in spans] for spans in shortcut[1]]
    assert kinds[:2] == [[], []] and kinds[2] == ["phone"] and "phone" in kinds[3]


def test_one_rule_for_identifiers_in_the_redactor_and_the_guard() -> None:
    """Issue 40: counters are no phones in either (`rules.phone_shape`); an id only the guard
    flags is pseudonymized by the redactor too, so the guard never finds one the redactor left."""
    ids = ["ix-000394-153365", "ix-000001-000002", "ord-0042-1234567", "u_4155550132"]
    frame = pl.DataFrame({"tenant_id": ["acme"] * 4, "memory_id": ids})
    out, counts = Redactor(KEY).frame(frame, identifiers={"memory_id"})
    kept = out["memory_id"].to_list()
    assert kept[:2] == ids[:2] and not find_pii(ids[0]) and not find_pii(ids[1])
    # 0042-1234567: no valid number for phonenumbers, a phone's shape for the guard: pseudonymized
    assert analyse(ids[2:3], ner=False)[0][1] == [] and find_pii(ids[2]) == {"phone": 1}
    assert kept[2:] == [pseudonym(KEY, "acme", i) for i in ids[2:]]
    assert counts == {"phone": 2}
    assert not [v for v in kept if find_pii(v)]


def test_the_tenant_name_pass_recovers_missed_people_and_spares_look_alikes(labelled) -> None:
    """The corpus as one tenant's texts: a name the detector found in one text is redacted where
    it missed it ("Priyanka Raghunathan", once "Priya Raghunathan" was found), and no look-alike
    text changes (measured: the 2 texts of "Priyanka Raghunathan" recovered, no other changed)."""
    rows, found = labelled
    redacted = []
    for row, spans in zip(rows, found, strict=True):
        text = row.text
        for start, end, kind in sorted(spans, reverse=True):
            text = text[:start] + PLACEHOLDER[kind] + text[end:]
        redacted.append(text)
    table = pl.DataFrame(
        {
            "text": [r.text for r in rows],
            "redacted": redacted,
            "kinds": [sorted({k for _, _, k in spans}) for spans in found],
        }
    )
    names = tenant_names(table, table["text"])
    after, n = names.redact(pl.Series(redacted))
    changed = [(r, a) for r, b, a in zip(rows, redacted, after.to_list(), strict=True) if a != b]
    assert n >= 2 and changed
    assert all(any(kind == "person" for kind, _ in r.values) for r, _ in changed)
    # A person is gone from every text, or left in each: the NER calls "Olusegun Adeyemi" a place
    # where it finds him, but no word of his is a place, so he is taken as a person and spread.
    left: dict[str, list[bool]] = {}
    for row, text in zip(rows, after.to_list(), strict=True):
        for kind, value in row.values:
            if kind == "person":
                left.setdefault(value, []).append(any(w in text for w in value.split()))
    assert {v: f for v, f in left.items() if len(set(f)) > 1} == {}
    assert not any(left["Olusegun Adeyemi"])
    assert not any(left["Priyanka Raghunathan"])
