"""The publish guard's own PII detector: independent of the redactor (no presidio, spaCy or
phonenumbers: its own patterns, Luhn and mod-97 checksums, the standard library's `ipaddress`),
so a bug or a gap in one is caught by the other.

It covers the kinds with a shape (email, phone, card, IBAN, SSN, national id, IP address) and
placeholders glued to what is left of a value (`mü[EMAIL]`, `+31 6 [PHONE]`). Names and places
have no shape: only the redactor's NER and name lists find them. What is *not* PII is one rule
for both (pipeline.pii.rules: `phone_shape`, `not_pii_before`; national ids and their look-alikes:
pipeline.pii.national_ids), so an identifier the redactor keeps (`ix-000394-153365`, a counter) is
not flagged here, and the redactor pseudonymizes every identifier this detector flags
(pipeline.pii.redactor). It reads text as the redactor does (pipeline.pii.normalise: NFKC, no
format characters, percent escapes decoded) and reports spans of the original text.
"""

from __future__ import annotations

import bisect
import hashlib
import importlib.metadata
import ipaddress
import re
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import polars as pl

from pipeline.pii import national_ids, normalise, rules
from pipeline.pii.national_ids import find_national_ids
from pipeline.pii.normalise import normalisable
from pipeline.pii.rules import NANP_PHONE, ipv4_padded, not_pii_before, phone_shape

# A local part is at most 64 characters (RFC 5321): unbounded, every position of a long run of
# word characters before no @ was a start scanning the whole run (the square of the text).
_EMAIL = re.compile(r"[\w.%+-]{1,64}@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}")
# Country code, two check digits, 11–30 alphanumerics, optionally grouped by 4 with spaces.
_IBAN = re.compile(r"(?<!\w)[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,4})?(?!\w)")
# 13–19 digits, optionally grouped with spaces, dashes or dots.
_CARD = re.compile(r"(?<![\w+.])\d(?:[ .-]?\d){12,18}(?![\w]|\.\d)")
_SSN = re.compile(r"(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])")
# Octets may be zero-padded (192.168.001.010: `ipv4_padded`).
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.]|\.\d)")
_IPV6 = re.compile(r"(?<![\w:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,7}(?![\w:])")
# +CC then groups, or a national number with its trunk 0 (optionally in brackets) then groups (not
# inside a dotted version: "10.0.19045.3803"), or a North American number (555.123.4567: `NANP_PHONE`, the redactor's pattern).
_PHONE = re.compile(
    r"(?<![\w+])(?<!\d\.)(?:\+\d{1,3}|\(?0\d{0,4}\)?)(?:[ ./-]{0,2}\(?\d{1,5}\)?){1,6}(?![\w])"
    rf"|{NANP_PHONE}"
)
# Unformatted: a national number with its trunk 0 (0612345678) or a Chinese mobile (13812345678).
_BARE_PHONE = re.compile(r"(?<![\w+.-])(?:0[1-9]\d{8,9}|1[3-9]\d{9})(?![\w]|[.-]\d)")
_VERSION_BEFORE = re.compile(r"\bv\W{0,3}$", re.IGNORECASE)  # v1.2.3.4 (words: `not_pii_before`)
_SHAPED = "EMAIL|PHONE|CARD|IBAN|SSN|NATIONAL_ID|IP"  # the placeholders of the kinds above
_GLUED = re.compile(rf"[^\W_]\[(?:{_SHAPED})\]|\[(?:{_SHAPED})\][^\W_]|\+\d[\d ().-]*\[PHONE\]")
# What every finding above contains, as one pattern polars runs in Rust over a whole column: each
# kind's pattern without its look-arounds and checks (an email's @, an IBAN's country and check
# digits, 8 digits at most 4 separators apart for a phone, a card or an SSN, an IPv4's dotted
# quad, an IPv6's two colons, a placeholder; a national id's seven digits in a row, its letters
# before two digits, a Finnish id's century sign) — or anything normalisation changes (a
# full-width @, a zero-width space between digits, `%40`: `normalise.normalisable`). Texts that
# miss it are never scanned in Python: on a tenant's pack, 77,123 of 124,633 distinct texts are
# scanned (1.3 s) instead of the 114,775 that hold a digit, an @ or a colon (4.2 s).
MAYBE_PII = (
    r"@|[A-Za-z]{2}\d{2}|[A-Za-z]{2} \d{2} ?\d{2}|\d(?:[ ./()-]{0,4}\d){7}|\d{7}|\d{6}[A-Za-z+]\d{3}"
    r"|\d{1,3}(?:\.\d{1,3}){3}|:[0-9A-Fa-f]{0,4}:"
    rf"|\[(?:{_SHAPED})\]|{normalisable()}"
)


def luhn_valid(number: str) -> bool:
    digits = [int(c) for c in number if c.isdigit()]
    if not 13 <= len(digits) <= 19:
        return False
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def iban_valid(candidate: str) -> bool:
    compact = candidate.replace(" ", "").upper()
    if not 15 <= len(compact) <= 34 or not compact.isalnum():
        return False
    rearranged = compact[4:] + compact[:4]
    numeric = "".join(str(int(c, 36)) for c in rearranged)
    return int(numeric) % 97 == 1


def _ip(candidate: str, text: str, start: int) -> bool:
    try:
        ipaddress.ip_address(candidate)
    except ValueError:
        if not ipv4_padded(candidate):
            return False
    if "." not in candidate:
        return True
    # The words just before it: the longest `_VERSION_BEFORE` ("firmware" and 3) and its boundary.
    before = text[max(0, start - 16) : start]
    return not _VERSION_BEFORE.search(before) and not not_pii_before(text, start)


def _phone(candidate: str, text: str, start: int) -> bool:
    digits = sum(c.isdigit() for c in candidate)
    grouped = candidate.startswith("+") or any(c in candidate for c in " ./-()")
    return (
        8 <= digits <= 15 and grouped and phone_shape(candidate) and not not_pii_before(text, start)
    )


def find_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every PII value left in `text`, the first kind to claim it: found in
    the normalised text, reported as the span of the original that wrote it."""
    normal = normalise.normalise(text)
    return [(*normal.span(start, end), kind) for start, end, kind in _spans(normal.text)]


def _spans(text: str) -> list[tuple[int, int, str]]:
    found: list[tuple[int, int, str]] = []
    # The claimed spans by start (they never overlap, so their ends are in order too): a claim
    # checks the one span before its end, not every span found (the square of a text full of
    # values).
    taken: list[tuple[int, int]] = []

    def claim(kind: str, span: tuple[int, int]) -> None:
        start, end = span
        at = bisect.bisect_left(taken, (end,))  # the first span starting at or after `end`
        if at == 0 or taken[at - 1][1] <= start:
            taken.insert(at, (start, end))
            found.append((start, end, kind))

    for match in _EMAIL.finditer(text):
        claim("email", match.span())
    for match in _IBAN.finditer(text):
        if iban_valid(match.group()):
            claim("iban", match.span())
    for match in _CARD.finditer(text):
        if luhn_valid(match.group()):
            claim("card", match.span())
    for match in _SSN.finditer(text):
        claim("ssn", match.span())
    for start, end, kind in find_national_ids(text):
        claim(kind, (start, end))
    for pattern in (_IPV4, _IPV6):
        for match in pattern.finditer(text):
            if _ip(match.group(), text, match.start()):
                claim("ip_address", match.span())
    for match in _PHONE.finditer(text):
        if _phone(match.group(), text, match.start()):
            claim("phone", match.span())
    for match in _BARE_PHONE.finditer(text):
        if not not_pii_before(text, match.start()):
            claim("phone", match.span())
    for match in _GLUED.finditer(text):
        claim("half_redacted", match.span())
    return found


def find_pii(text: str) -> Counter[str]:
    """Counts per kind of the PII values left in `text`."""
    return Counter(kind for _, _, kind in find_spans(text))


def candidates(series: pl.Series) -> pl.Series:
    """The values of a String or List(String) column that `find_pii` must look at: the others
    cannot hold what it finds (`MAYBE_PII`)."""
    if series.dtype == pl.List(pl.String):
        series = series.explode()
    values = series.drop_nulls()
    return values.filter(values.str.contains(MAYBE_PII))


@lru_cache(maxsize=1)
def guard_version() -> str:
    """Names this detector: its code, the shared rules it applies, python-stdnum's version
    (national ids) and the Python it runs on (`re`, `ipaddress`, `unicodedata`). A text it found
    clean is remembered under this name (pipeline.publish.masking), and the redactor's identifiers
    are cached under it too, so a changed detector scans every text again."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for module in (rules, normalise, national_ids):
        digest.update(Path(str(module.__file__)).read_bytes())
    digest.update(importlib.metadata.version("python-stdnum").encode())
    code = digest.hexdigest()[:12]
    return f"guard-{code}-py{sys.version_info.major}.{sys.version_info.minor}"
