"""Phones of every region (SPEC §5 round 4) at a bounded cost: after the regions most texts need
(`rules.PHONE_REGIONS`), the others — CN first, then the rest in order — are tried only while a
run of digits is left unexplained, and only the regions where one of those runs could be a valid
national number (phonenumbers' own metadata: its lengths, trunk prefix and number pattern). An
order number left unexplained costs a length lookup and a few regex matches per region that fits
it, not phonenumbers' matcher over the text in 245 regions (~0.2-1.3 ms each)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from pipeline.pii.rules import PHONE_REGIONS, PLAIN_PHONE_MIN_DIGITS

FIRST_OF_THE_REST = ("CN",)  # 13812345678: a Chinese mobile, no trunk prefix
MAX_DIGITS = 17  # the longest national number with its trunk prefix
MIN_DIGITS = 7


@lru_cache(maxsize=1)
def more_regions() -> tuple[str, ...]:
    """Every region phonenumbers knows that `PHONE_REGIONS` does not name and whose national
    numbers have a trunk prefix, in the order tried. In a region without one (DK, NO, LU…) any
    8-digit figure or date parses as a phone ("INV-2026-0042", "2026.11.02"): its numbers are
    found written internationally (+45 …), as every region's are, by the first region tried."""
    import phonenumbers
    from phonenumbers import PhoneMetadata

    rest = sorted(set(phonenumbers.SUPPORTED_REGIONS) - set(PHONE_REGIONS) - set(FIRST_OF_THE_REST))
    regions = (*FIRST_OF_THE_REST, *rest)
    return tuple(r for r in regions if _trunk_prefix(PhoneMetadata.metadata_for_region(r)))


def _trunk_prefix(metadata: Any) -> str:
    return (metadata.national_prefix or "") if metadata is not None else ""


def keeps(region: str, match: Any) -> bool:
    """Whether a number one of `more_regions` found counts: written with the region's trunk
    prefix, or a mobile number of PLAIN_PHONE_MIN_DIGITS digits or more (dialled without one:
    "13812345678"). A shorter or fixed-line number without its prefix is as likely a figure."""
    import phonenumbers
    from phonenumbers import PhoneMetadata, PhoneNumberType

    digits = "".join(c for c in match.raw_string if c.isdigit())
    if digits.startswith(_trunk_prefix(PhoneMetadata.metadata_for_region(region))):
        return True
    mobile = (PhoneNumberType.MOBILE, PhoneNumberType.FIXED_LINE_OR_MOBILE)
    return (
        len(digits) >= PLAIN_PHONE_MIN_DIGITS and phonenumbers.number_type(match.number) in mobile
    )


@lru_cache(maxsize=1)
def _by_length() -> dict[int, list[tuple[int, re.Pattern[str], str]]]:
    """Number of digits -> (rank in `more_regions`, national number pattern, trunk prefix) of
    each region whose numbers, with or without its trunk prefix, can have that many digits."""
    from phonenumbers import PhoneMetadata

    index: dict[int, list[tuple[int, re.Pattern[str], str]]] = {}
    for rank, region in enumerate(more_regions()):
        metadata = PhoneMetadata.metadata_for_region(region)
        if metadata is None or metadata.general_desc is None:
            continue
        general = metadata.general_desc
        pattern = re.compile(general.national_number_pattern or "(?!)")
        prefix = metadata.national_prefix or ""
        for length in general.possible_length or ():
            if length > 0:
                index.setdefault(length, []).append((rank, pattern, ""))
                if prefix:
                    index.setdefault(length + len(prefix), []).append((rank, pattern, prefix))
    return index


def _numbers(run: str) -> set[str]:
    """The digit strings a run may hold a national number in: its digit groups joined, every
    stretch of whole groups of MIN_DIGITS to MAX_DIGITS digits (a run written with + is
    international: the first region's matcher already read it whatever the region)."""
    if run.lstrip("(").startswith("+"):
        return set()
    groups = re.findall(r"\d+", run)
    out = set()
    for i in range(len(groups)):
        digits = ""
        for group in groups[i:]:
            digits += group
            if len(digits) > MAX_DIGITS:
                break
            if len(digits) >= MIN_DIGITS:
                out.add(digits)
    return out


def fitting_regions(runs: Iterable[str]) -> list[str]:
    """The regions of `more_regions` (in its order) where one of `runs` could be a number."""
    index = _by_length()
    ranks: set[int] = set()
    for digits in set().union(*(_numbers(run) for run in runs)):
        for rank, pattern, prefix in index.get(len(digits), ()):
            # as `keeps` takes them: with the trunk prefix, or long enough for a mobile without
            long_enough = prefix or len(digits) >= PLAIN_PHONE_MIN_DIGITS
            fits = (
                long_enough
                and digits.startswith(prefix)
                and pattern.fullmatch(digits[len(prefix) :])
            )
            if rank not in ranks and fits:
                ranks.add(rank)
    regions = more_regions()
    return [regions[rank] for rank in sorted(ranks)]
