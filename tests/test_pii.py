"""PII redaction: checksummed formats are recognised, look-alikes and ordinary numbers are left alone."""

import polars as pl
import pytest

from pipeline.pii import iban_valid, luhn_valid, redact_frame, redact_text


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        ("write to jane.doe@example.com today", "write to [EMAIL] today", "email"),
        ("call +1 (415) 555-0132 now", "call [PHONE] now", "phone"),
        ("mobile 0176 1234567", "mobile [PHONE]", "phone"),
        ("intl +4915112345678", "intl [PHONE]", "phone"),
        ("card 4111 1111 1111 1111 ok", "card [CARD] ok", "card"),
        ("card 5500-0000-0000-0004", "card [CARD]", "card"),
        ("iban DE89 3704 0044 0532 0130 00.", "iban [IBAN].", "iban"),
        ("iban GB82WEST12345698765432", "iban [IBAN]", "iban"),
        ("ssn 123-45-6789", "ssn [SSN]", "ssn"),
        ("host 192.168.10.20", "host [IP]", "ip_address"),
    ],
)
def test_redacts_each_kind(text: str, expected: str, kind: str) -> None:
    redacted, counts = redact_text(text)
    assert redacted == expected
    assert counts == {kind: 1}


@pytest.mark.parametrize(
    "text",
    [
        "card 4111 1111 1111 1112 fails Luhn",  # 16 digits, wrong check digit
        "iban DE00 3704 0044 0532 0130 00 fails mod-97",
        "on 2026-11-02 10:00 the order 12345 cost 3.50 (v2.3.1), id 1234567",
        "score 72/100, 1,250.00 EUR",
    ],
)
def test_leaves_look_alikes_alone(text: str) -> None:
    redacted, counts = redact_text(text)
    assert redacted == text
    assert not counts


def test_checksums() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("4111")  # too short to be a card
    assert iban_valid("DE89370400440532013000")
    assert iban_valid("de89 3704 0044 0532 0130 00")
    assert not iban_valid("DE89370400440532013001")


def test_redact_frame_counts_and_keeps_identifiers() -> None:
    frame = pl.DataFrame(
        {
            "memory_id": ["bob@example.com", "m2", "m3"],
            "text": ["mail bob@example.com or 4111111111111111", None, "nothing here"],
            "tags": [["vip", "bob@example.com"], None, []],
            "n": [1, 2, 3],
        }
    )
    out, counts = redact_frame(frame, keep={"memory_id"})
    assert out["memory_id"].to_list() == frame["memory_id"].to_list()
    assert out["text"].to_list() == ["mail [EMAIL] or [CARD]", None, "nothing here"]
    assert out["tags"].to_list() == [["vip", "[EMAIL]"], None, []]
    assert out["n"].to_list() == [1, 2, 3]
    assert counts == {"email": 2, "card": 1}
    assert out.schema == frame.schema
