"""Postcodes beside an address or a place join its span (SPEC §5 round 4): `10115 Berlin` becomes
one placeholder, not `10115 [LOCATION]`. A postcode alone stays: a bare 5-digit number is as
likely a quantity, a price or an order number."""

from __future__ import annotations

import re
from collections.abc import Iterator

from pipeline.pii.places import known_place

# The common formats: DE/FR/ES/IT/US (5 digits, a US ZIP+4), BR (01310-100), NL (1012 AB), PL
# (00-950), PT (1000-001), SE (114 55), JP (〒100-0001), CA (K1A 0B1), UK (SW1A 1AA), and 4 digits
# (AT, CH, BE, DK, NO, AU…) but not 1900-2099 ("the 2019 Paris agreement": a year).
_FIVE = r"\d{5}(?:-\d{3,4})?"
_CA = r"[A-Z]\d[A-Z] ?\d[A-Z]\d"
_UK = r"[A-Z]{1,2}\d[A-Z\d]? ?\d[A-Z]{2}"
_BEFORE_PLACE = (
    rf"{_FIVE}|\d{{4}} ?[A-Z]{{2}}|\d{{2}}-\d{{3}}|\d{{4}}-\d{{3}}|\d{{3}} \d{{2}}|〒? ?\d{{3}}-\d{{4}}"
    rf"|{_CA}|{_UK}|(?!19\d\d|20\d\d)\d{{4}}"
)
# Written before the place, optionally with a country letter ("D-10115", "CH-8001").
_BEFORE = re.compile(rf"(?<![\w.,/-])(?:[A-Z]{{1,2}}-)?(?:{_BEFORE_PLACE})[ \t]+\Z")
# Written after it: a 5-digit code, or a Canadian one after its province ("Ottawa, ON K1A 0B1").
_AFTER = re.compile(rf",?[ \t]+(?:{_FIVE}|(?:[A-Z]{{2}}[ \t]+)?{_CA})(?![\w-]|[.,]\d)")
REACH = 24  # the longest postcode with its country letters and spaces


def widen(text: str, start: int, end: int, taken: list[tuple[int, int]]) -> tuple[int, int]:
    """The span text[start:end] of an address or place, widened over a postcode written right
    before or after it that no other span in `taken` holds."""
    before = _BEFORE.search(text, max(0, start - REACH), start)
    if before and not any(s < start and before.start() < e for s, e in taken):
        start = before.start()
    after = _AFTER.match(text, end)
    if after and not any(s < after.end() and end < e for s, e in taken if s >= end):
        end = after.end()
    return start, end


# A postcode of a shape of its own (NL 1012 AB, PL 00-950, PT 1000-001, BR 01310-100, SE 114 55,
# JP 〒100-0001) before capitalised words is a place whatever the NER says ("1000-001 Lisbon");
# a plain 4 or 5 digits only before a place a list knows ("10115 Berlin").
_CAPITAL = r"[A-ZÀ-ÖØ-ÞĀ-Ž][^\W\d_]+"
_PLACE = re.compile(
    r"(?<![\w.,/-])(?:[A-Z]{1,2}-)?"
    r"(?:(?P<shaped>\d{4} ?[A-Z]{2}|\d{2}-\d{3}|\d{4}-\d{3}|\d{5}-\d{3}|\d{3} \d{2}|〒 ?\d{3}-\d{4})"
    r"|(?P<plain>\d{4,5}))"
    rf"[ \t]+(?P<place>{_CAPITAL}(?:[ -]{_CAPITAL}){{0,2}})"
)


def postcode_places(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each postcode and the place after it (see `_PLACE`)."""
    for match in _PLACE.finditer(text):
        if match.group("shaped") or known_place(match.group("place").split()[0]):
            yield match.start(), match.end()
