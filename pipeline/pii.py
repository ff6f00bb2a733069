"""PII redaction for every text that leaves the pipeline: emails, phones, cards (Luhn), IBANs (mod-97)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import polars as pl

# Placeholders are plain tokens so a prompt that contains one still reads naturally.
PLACEHOLDER = {
    "email": "[EMAIL]",
    "iban": "[IBAN]",
    "card": "[CARD]",
    "ssn": "[SSN]",
    "ip_address": "[IP]",
    "phone": "[PHONE]",
}

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
# Country code, two check digits, 11–30 alphanumerics, optionally grouped by 4 with spaces.
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
# 13–19 digits, optionally grouped with spaces or dashes.
_CARD = re.compile(r"(?<![\w+])\d(?:[ -]?\d){12,18}(?![\w])")
_SSN = re.compile(r"(?<![\w-])\d{3}-\d{2}-\d{4}(?![\w-])")
_IP = re.compile(
    r"(?<![\w.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\w.])"
)
_PHONE = re.compile(
    r"(?<![\w+])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d{2,12}(?:[ .-]\d{2,12}){0,4}(?![\w])"
)
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}(?!\d)")
# Cheap pre-filter: a text without any of these cannot hold a PII value we detect.
_MAYBE_PII = r"@|\d{3}|[A-Z]{2}\d{2}"

PHONE_MIN_DIGITS = 7
PHONE_MAX_DIGITS = 15
PLAIN_PHONE_MIN_DIGITS = 10  # an unformatted run of digits is a phone only if this long


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


def _is_phone(candidate: str) -> bool:
    digits = sum(c.isdigit() for c in candidate)
    if not PHONE_MIN_DIGITS <= digits <= PHONE_MAX_DIGITS or _ISO_DATE.match(candidate):
        return False
    formatted = candidate.startswith("+") or any(c in candidate for c in " .-()")
    return formatted or digits >= PLAIN_PHONE_MIN_DIGITS


@dataclass(frozen=True)
class _Rule:
    kind: str
    pattern: re.Pattern[str]
    valid: Callable[[str], bool]


# Order matters: specific, checksummed formats first so a card is never counted as a phone.
_RULES = (
    _Rule("email", _EMAIL, lambda _: True),
    _Rule("iban", _IBAN, iban_valid),
    _Rule("card", _CARD, luhn_valid),
    _Rule("ssn", _SSN, lambda _: True),
    _Rule("ip_address", _IP, lambda _: True),
    _Rule("phone", _PHONE, _is_phone),
)


def redact_text(text: str) -> tuple[str, Counter[str]]:
    """The text with every detected PII value replaced by its placeholder, and counts per kind."""
    counts: Counter[str] = Counter()
    for rule in _RULES:

        def replace(match: re.Match[str], rule: _Rule = rule) -> str:
            if not rule.valid(match.group(0)):
                return match.group(0)
            counts[rule.kind] += 1
            return PLACEHOLDER[rule.kind]

        text = rule.pattern.sub(replace, text)
    return text, counts


def find_pii(text: str) -> Counter[str]:
    """What `redact_text` would redact (used by the pack guard to prove nothing slipped through)."""
    return redact_text(text)[1]


def _redact_values(values: Iterable[str | None], counts: Counter[str]) -> list[str | None]:
    out: list[str | None] = []
    for value in values:
        if value is None:
            out.append(None)
            continue
        redacted, found = redact_text(value)
        counts.update(found)
        out.append(redacted)
    return out


def redact_series(series: pl.Series) -> tuple[pl.Series, Counter[str]]:
    """Redact a String or List(String) column; only values passing the cheap pre-filter are parsed."""
    counts: Counter[str] = Counter()
    if series.dtype == pl.List(pl.String):
        mask = series.list.eval(pl.element().str.contains(_MAYBE_PII)).list.any().fill_null(False)
        if not mask.any():
            return series, counts
        lists = [
            _redact_values(items, counts) if flagged and items is not None else items
            for items, flagged in zip(series.to_list(), mask.to_list(), strict=True)
        ]
        return pl.Series(series.name, lists, dtype=series.dtype), counts
    if series.dtype != pl.String:
        return series, counts
    mask = series.str.contains(_MAYBE_PII).fill_null(False)
    if not mask.any():
        return series, counts
    positions = mask.arg_true()
    fixed = _redact_values(series.gather(positions).to_list(), counts)
    values = series.to_list()
    for position, value in zip(positions.to_list(), fixed, strict=True):
        values[position] = value
    return pl.Series(series.name, values, dtype=pl.String), counts


def redact_frame(
    frame: pl.DataFrame, keep: Iterable[str] = ()
) -> tuple[pl.DataFrame, Counter[str]]:
    """Redact every String / List(String) column except the identifier columns in `keep`."""
    keep = set(keep)
    counts: Counter[str] = Counter()
    columns = []
    for column in frame.columns:
        series = frame[column]
        if column not in keep and series.dtype in (pl.String, pl.List(pl.String)):
            series, found = redact_series(series)
            counts.update(found)
        columns.append(series)
    return pl.DataFrame(columns), counts
