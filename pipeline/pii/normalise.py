"""The text every PII detector reads (SPEC §5 round 4): NFKC, format characters removed,
percent-encoding decoded — with a map back to the original, so a finding redacts exactly the
characters that wrote it (`jane＠example.com`, `+1\u200b415\u200b555\u200b0199`,
`jane%40example.com`). The redactor (pipeline.pii.detect) and the publish guard
(pipeline.pii.guard) both read text through `normalise`, so the guard sees what the redactor sees.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

# A run of %XX escapes: decoded as UTF-8 where it is valid UTF-8 (`%40` @, `%2B` +, `%C3%BC` ü);
# an escape that decodes to nothing valid ("100%AB") stays as written.
_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
# Category Cf: zero-width space/joiners, bidi marks and isolates, soft hyphen, word joiner, BOM…
# They are invisible, so a value split by them reads whole to a person and must to a detector.


def _is_format(char: str) -> bool:
    return unicodedata.category(char) == "Cf"


# Format characters and the characters NFKC changes lie in the first two planes, but for the tags.
def _planes() -> Iterator[int]:
    yield from range(0xD800)  # not the surrogates
    yield from range(0xE000, 0x20000)
    yield from range(0xE0000, 0xE0080)


@lru_cache(maxsize=1)
def _format_chars() -> str:
    return "".join(chr(code) for code in _planes() if _is_format(chr(code)))


@lru_cache(maxsize=1)
def _changing_chars() -> str:
    """Every character NFKC changes or that is a format character: the characters whose
    presence makes normalisation do something."""
    return "".join(
        char
        for char in map(chr, _planes())
        if _is_format(char)
        # NFKC changes only a character with a decomposition (not all of them: "é" stays)
        or (unicodedata.decomposition(char) and unicodedata.normalize("NFKC", char) != char)
    )


def _ranges(chars: str) -> str:
    """`chars` (sorted code points) as a regex character class body of escaped ranges."""
    parts, codes = [], [ord(c) for c in chars]
    i = 0
    while i < len(codes):
        j = i
        while j + 1 < len(codes) and codes[j + 1] == codes[j] + 1:
            j += 1
        first, last = re.escape(chr(codes[i])), re.escape(chr(codes[j]))
        parts.append(first if i == j else f"{first}-{last}")
        i = j + 1
    return "".join(parts)


@lru_cache(maxsize=1)
def normalisable() -> str:
    """A regex (Python's `re` and polars' alike) matching what normalisation would change: a
    percent escape or a character NFKC changes or drops. A text without one is its own
    normal form (the fast path), and a column prefilter (pipeline.pii.guard.MAYBE_PII) keeps it."""
    return rf"%[0-9A-Fa-f]{{2}}|[{_ranges(_changing_chars())}]"


@dataclass(frozen=True)
class Normalised:
    """`text` is what the detectors read; `starts[i]`/`ends[i]` are where its i-th character came
    from in the original (None: the same as the original)."""

    original: str
    text: str
    starts: tuple[int, ...] | None = None
    ends: tuple[int, ...] | None = None

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span that wrote `text[start:end]` (a non-empty span)."""
        if self.starts is None or self.ends is None:
            return start, end
        start, end = self.starts[start], self.ends[end - 1]
        # and the format characters around it: a bidi isolate closing the value goes with it
        while start > 0 and _is_format(self.original[start - 1]):
            start -= 1
        while end < len(self.original) and _is_format(self.original[end]):
            end += 1
        return start, end

    def position(self, original: int) -> int:
        """The index in `text` of the first character written at or after `original`."""
        if self.starts is None:
            return original
        return bisect_right(self.starts, original - 1)


def _decoded(text: str) -> list[tuple[int, int, str]]:
    """(original start, original end, piece) with percent escapes decoded where they are UTF-8:
    a decoded character's piece spans the escapes that wrote it."""
    pieces: list[tuple[int, int, str]] = []
    at = 0
    for run in _PERCENT.finditer(text):
        pieces += [(i, i + 1, text[i]) for i in range(at, run.start())]
        data = bytes.fromhex(run.group().replace("%", ""))
        i = 0
        while i < len(data):  # longest valid UTF-8 character at each byte, else the escape stays
            for size in (1, 2, 3, 4):
                try:
                    char = data[i : i + size].decode("utf-8")
                except UnicodeDecodeError:
                    continue
                pieces.append((run.start() + 3 * i, run.start() + 3 * (i + size), char))
                i += size
                break
            else:
                start = run.start() + 3 * i
                pieces += [(start + k, start + k + 1, text[start + k]) for k in range(3)]
                i += 1
        at = run.end()
    pieces += [(i, i + 1, text[i]) for i in range(at, len(text))]
    return pieces


@lru_cache(maxsize=1)
def _format_or_percent() -> re.Pattern[str]:
    """A percent escape or a format character: what NFKC leaves but `normalise` changes."""
    return re.compile(rf"%[0-9A-Fa-f]{{2}}|[{_ranges(_format_chars())}]")


def normalise(text: str) -> Normalised:
    """`text` as the detectors read it: percent escapes decoded, then each character with the
    combining marks after it in NFKC, format characters dropped. Most texts need none of it:
    they are returned as they are (one regex search, no map)."""
    if text.isascii() and "%" not in text:
        return Normalised(text, text)
    if unicodedata.is_normalized("NFKC", text) and not _format_or_percent().search(text):
        return Normalised(text, text)
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    pieces = _decoded(text)
    i = 0
    while i < len(pieces):
        start, end, cluster = pieces[i]
        i += 1
        while i < len(pieces) and unicodedata.combining(pieces[i][2]):
            cluster += pieces[i][2]  # a base and its marks compose as one ("e" + U+0301: "é")
            end = pieces[i][1]
            i += 1
        for char in unicodedata.normalize("NFKC", cluster):
            if not _is_format(char):
                out.append(char)
                starts.append(start)
                ends.append(end)
    normal = "".join(out)
    if normal == text:
        return Normalised(text, text)
    return Normalised(text, normal, tuple(starts), tuple(ends))
