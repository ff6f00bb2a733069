"""A landing file's bytes → batches of its lines (text, bytes, damage), before any JSON is parsed.

Streamed: a batch holds at most BATCH_LINES lines, whatever the file's size. Blank lines (nothing
but spaces, tabs and line ends) are counted, not made into rows: a gzip of newlines decompresses
to billions of them. A line over LINE_MAX_BYTES is cut as it streams (its first characters and its
size are kept). Lines inside a gzip member are handed on before the member's CRC is checked, as
`exact=False`; the consumer keeps them pending until a batch says `exact` (everything so far is
verified) or drops them at `REVOKE` (the member was corrupt)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline import tables
from pipeline.ingest.contracts import LINE_MAX_BYTES, RAW_KEPT_CHARS, Reason
from pipeline.ingest.landing import UNVERIFIED_KEPT_BYTES, Damage, Verified, landing_pieces

BOM = "\ufeff".encode()
BATCH_LINES = 200_000
BATCH_BYTES = 64 << 20
EXAMPLE_LINES = 5  # line numbers kept of lines that are counted, not stored one by one
_LOOKED_AT = 1024  # lines starting with whitespace checked one by one, at most, per chunk
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[list(b" \t\n\r\x0b\x0c")] = True

# A raw line as quarantine would keep it, and the reason decided before parsing, if any (the
# file's unreadable rest, a cut line).
LINES_SCHEMA: dict[str, pl.DataType] = {
    **tables.schema("quarantine", ("file", "line_no", "raw", "raw_bytes")),
    "damage": pl.String(),
}


@dataclass
class BlankLines:
    """Blank lines counted: how many, and the numbers of the first few."""

    count: int = 0
    first: list[int] = field(default_factory=list)

    def add(self, numbers: np.ndarray | range) -> None:
        self.count += len(numbers)
        if len(self.first) < EXAMPLE_LINES:
            self.first += [int(n) for n in numbers[: EXAMPLE_LINES - len(self.first)]]

    def merge(self, other: BlankLines) -> None:
        self.count += other.count
        self.first = (self.first + other.first)[:EXAMPLE_LINES]


@dataclass
class Lines:
    """A batch of a file's lines: the non-blank ones as rows, the blank ones counted. `exact`:
    these lines and every earlier one of the file are verified (commit what was pending)."""

    file: str
    frame: pl.DataFrame
    blank: BlankLines
    exact: bool


class Revoke:
    """The lines handed on since the last exact batch are not to be ingested (a corrupt member)."""


REVOKE = Revoke()


def cut_line(prefix: bytes, size: int) -> str:
    """What a line over LINE_MAX_BYTES keeps: its first RAW_KEPT_CHARS characters and its size."""
    text = prefix.decode("utf-8", "replace")[:RAW_KEPT_CHARS]
    return f"{text}… [cut: the line is {size} bytes]"


def file_lines(path: Path, name: str | None = None) -> Iterator[Lines | Revoke]:
    """The batches of one landing file, in order; a damaged or unreadable file ends with one
    more row standing for its unreadable rest (see `_Splitter.damage_row`)."""
    splitter = _Splitter(name or path.name)
    for piece in landing_pieces(path):
        if isinstance(piece, Verified):
            splitter.verified()
        elif isinstance(piece, Damage):
            yield from splitter.flush(final=False, keep_open=False)
            yield REVOKE
            yield Lines(splitter.label, splitter.damage_row(piece), BlankLines(), exact=True)
            return
        else:
            splitter.feed(piece)
            if splitter.full():
                yield from splitter.flush(final=False)
    splitter.end()
    yield from splitter.flush(final=True)


def refused_lines(label: str, reason: Reason, detail: str) -> Lines:
    """A file that is not read at all, as one line (numbered 1) with the refusal's reason."""
    row = _Splitter(label).damage_row(Damage(reason, 0, detail))
    return Lines(label, row, BlankLines(), exact=True)


def read_lines(path: Path, name: str | None = None) -> tuple[pl.DataFrame, BlankLines]:
    """A whole (small) file's non-blank lines and its blank lines counted, as ingest takes them
    (lines a REVOKE withdraws left out): tests, tools."""
    kept: list[Lines] = []
    pending: list[Lines] = []
    for batch in file_lines(path, name):
        if isinstance(batch, Revoke):
            pending = []
            continue
        pending.append(batch)
        if batch.exact:
            kept, pending = kept + pending, []
    blank = BlankLines()
    for batch in kept:
        blank.merge(batch.blank)
    return pl.concat([pl.DataFrame(schema=LINES_SCHEMA), *(b.frame for b in kept)]), blank


class _Splitter:
    """Cuts a stream of bytes into lines; keeps what a damage row needs (see `damage_row`)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.line_no = 0  # of the last line cut
        self.carry = b""  # the line in progress
        self.carry_start = 0  # its offset in the stream
        self.overlong: tuple[bytes, int] | None = None  # prefix and size of a line over the limit
        self.received = 0
        # Cut but not handed on: rows and blank counts before the last VERIFIED, and after it.
        self.exact: tuple[list[pl.DataFrame], BlankLines] = ([], BlankLines())
        self.open: tuple[list[pl.DataFrame], BlankLines] = ([], BlankLines())
        # At the last VERIFIED: lines cut, the line in progress and its offset.
        self.verified_at = (0, b"", 0)
        self.member_head, self.member_bytes = b"", 0  # the output since the last VERIFIED

    # ---- cutting ---------------------------------------------------------------------------
    def feed(self, piece: bytes) -> None:
        if not self.received and piece.startswith(BOM):
            piece, self.received, self.carry_start = piece[len(BOM) :], len(BOM), len(BOM)
        start = self.received
        self.received += len(piece)
        self.member_bytes += len(piece)
        if len(self.member_head) < UNVERIFIED_KEPT_BYTES:
            self.member_head += piece[: UNVERIFIED_KEPT_BYTES - len(self.member_head)]
        if self.overlong is not None:
            newline = piece.find(b"\n")
            prefix, size = self.overlong
            if newline < 0:
                self.overlong = (prefix, size + len(piece))
                return
            self._overlong_line(prefix, size + newline)
            piece, start = piece[newline + 1 :], start + newline + 1
            self.carry, self.carry_start = b"", start
        data = self.carry + piece
        last = data.rfind(b"\n")
        if last >= 0:
            self._cut(data[: last + 1])
            self.carry_start = start + (last + 1 - len(self.carry))
            self.carry = data[last + 1 :]
        else:
            self.carry = data
        if len(self.carry) > LINE_MAX_BYTES:
            self.overlong, self.carry = (self.carry[: 4 * RAW_KEPT_CHARS], len(self.carry)), b""

    def end(self) -> None:
        """The stream ended: the line in progress is a line (a last line without a newline)."""
        if self.overlong is not None:
            self._overlong_line(*self.overlong)
        elif self.carry:
            self._cut(self.carry + b"\n")
        self.carry = b""

    def _overlong_line(self, prefix: bytes, size: int) -> None:
        self.overlong = None
        self.line_no += 1
        row = {"file": self.label, "line_no": self.line_no, "raw": cut_line(prefix, size)}
        row["damage"] = Reason.LINE_TOO_LONG.value
        self.open[0].append(pl.DataFrame([row], schema=LINES_SCHEMA))

    def _cut(self, data: bytes) -> None:
        """Whole lines (`data` ends with a newline): blank ones counted, long ones cut, the rest
        rows."""
        first = self.line_no + 1
        count = data.count(b"\n")
        if count == len(data) or not data.strip():  # only blank lines: a flood's common case
            self.open[1].add(range(first, first + count))
            self.line_no += count
            return
        buf = np.frombuffer(data, dtype=np.uint8)
        ends = np.flatnonzero(buf == ord("\n"))
        offsets = np.concatenate(([0], ends + 1)).astype(np.int64)
        blank = _blank(data, buf, offsets, ends)
        numbers = np.arange(first, first + len(ends), dtype=np.int64)
        self.line_no += len(ends)
        self.open[1].add(numbers[blank])
        long = (ends - offsets[:-1]) > LINE_MAX_BYTES
        rows = _rows(data, buf, offsets, self.label, numbers).filter(pl.Series(~blank & ~long))
        for i in np.flatnonzero(long).tolist():
            line = data[offsets[i] : ends[i]].removesuffix(b"\r")
            cut = {"file": self.label, "line_no": int(numbers[i]), "raw": cut_line(line, len(line))}
            cut["damage"] = Reason.LINE_TOO_LONG.value
            rows = pl.concat([rows, pl.DataFrame([cut], schema=LINES_SCHEMA)])
        self.open[0].append(rows.sort("line_no") if long.any() else rows)

    # ---- handing on ------------------------------------------------------------------------
    def verified(self) -> None:
        """Everything cut so far is exact."""
        self.exact[0].extend(self.open[0])
        self.exact[1].merge(self.open[1])
        self.open = ([], BlankLines())
        self.verified_at = (self.line_no, self.carry, self.carry_start)
        self.member_head, self.member_bytes = b"", 0

    def full(self) -> bool:
        frames = self.exact[0] + self.open[0]
        return (
            sum(f.height for f in frames) >= BATCH_LINES
            or sum(f.estimated_size() for f in frames) >= BATCH_BYTES
        )

    def flush(self, final: bool, keep_open: bool = True) -> Iterator[Lines]:
        """What was cut, as at most two batches: the exact part, then the rest (exact when the
        file ended without damage; dropped when damage revokes it: `keep_open` False)."""
        parts = [(self.exact, True)] + ([(self.open, final)] if keep_open else [])
        for (frames, blank), exact in parts:
            if frames or blank.count:
                rows = pl.concat([pl.DataFrame(schema=LINES_SCHEMA), *frames])
                yield Lines(self.label, rows, blank, exact)
        self.exact, self.open = ([], BlankLines()), ([], BlankLines())

    def damage_row(self, damage: Damage) -> pl.DataFrame:
        """The unreadable rest of the file as one line, numbered after the last verified one.

        `raw` says what happened and where: the byte offset in the decompressed stream where
        the unreadable part starts (the start of the line the damage cut, so everything before
        it was ingested) and the compressed offset where the damage was seen. `raw_bytes` keeps
        what was not ingested but could be read: the partial line the damage cut and, for a
        corrupt gzip member, the first UNVERIFIED_KEPT_BYTES of its unverified output."""
        line_no, carry, carry_start = self.verified_at
        detail = damage.detail
        tail = carry
        if damage.corrupt:
            detail += (
                f": {self.member_bytes} decompressed bytes of the member not verifiable, not"
                " ingested"
            )
            tail += self.member_head
        if damage.reason is Reason.CORRUPT_GZIP:
            detail += (
                f" (unreadable from decompressed byte {carry_start};"
                f" damage at compressed byte {damage.compressed_offset})"
            )
        row = {"file": self.label, "line_no": line_no + 1, "raw": detail}
        row |= {"raw_bytes": tail or None, "damage": damage.reason.value}
        return pl.DataFrame([row], schema=LINES_SCHEMA)


def _blank(data: bytes, buf: np.ndarray, offsets: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per line: nothing but ASCII whitespace. Only an empty line or one that starts with
    whitespace can be; those few are looked at one by one (a log line starts with `{`)."""
    starts = offsets[:-1]
    empty = ends == starts
    first = buf[np.minimum(starts, len(buf) - 1)]
    maybe = np.flatnonzero(~empty & _WHITESPACE[first])
    if maybe.size > _LOOKED_AT:  # many: count content bytes per line instead (one pass)
        content = np.concatenate(([0], np.cumsum(~_WHITESPACE[buf], dtype=np.int64)))
        return np.asarray(content[offsets[1:]] == content[starts])
    blank = empty.copy()
    for i in maybe.tolist():
        blank[i] = not data[starts[i] : ends[i]].strip()
    return blank


def _rows(
    data: bytes, buf: np.ndarray, offsets: np.ndarray, label: str, numbers: np.ndarray
) -> pl.DataFrame:
    """One row per line of `data` (each ends with a newline), cut without a copy per line.

    The bytes become an Arrow string column directly: newline positions are the offsets, and
    Arrow checks UTF-8 for all of them at once (the happy path). Only lines holding invalid UTF-8
    are decoded one by one: they get no text, their bytes are kept (quarantined later)."""
    n = len(offsets) - 1
    raw_bytes = pl.repeat(None, n, dtype=pl.Binary, eager=True).alias("raw_bytes")
    try:
        text = _string_array(buf, offsets)
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere: find the lines, blank them, keep bytes
        bad = _invalid_utf8_lines(data, buf, offsets)
        buf = buf.copy()
        for i in bad.tolist():
            buf[offsets[i] : offsets[i + 1] - 1] = ord(" ")
        text = _string_array(buf, offsets, null=bad)
        lines = [data[offsets[i] : offsets[i + 1] - 1].removesuffix(b"\r") for i in bad.tolist()]
        raw_bytes = raw_bytes.scatter(bad, pl.Series(lines, dtype=pl.Binary))
    raw = pl.Series("raw", text).str.strip_suffix("\n").str.strip_suffix("\r")
    return pl.DataFrame({"raw": raw, "raw_bytes": raw_bytes}).select(
        pl.lit(label, dtype=pl.String).alias("file"),
        pl.Series("line_no", numbers, dtype=pl.Int64),
        "raw",
        "raw_bytes",
        pl.lit(None, dtype=pl.String).alias("damage"),
    )


def _string_array(buf: np.ndarray, offsets: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    """Arrow strings over `buf` cut at `offsets` (no copy), UTF-8 checked; rows in `null` null."""
    n = len(offsets) - 1
    nulls = 0 if null is None else int(null.size)
    validity = None
    if nulls:
        valid = np.ones(n, dtype=bool)
        valid[null] = False
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(
        pa.large_string(),
        n,
        [validity, pa.py_buffer(offsets), pa.py_buffer(buf)],
        null_count=nulls,
    )
    array.validate(full=True)
    return array


def _invalid_utf8_lines(data: bytes, buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Indexes of the lines that are not valid UTF-8: only lines with a byte ≥ 0x80 can be."""
    line_of = np.searchsorted(offsets, np.flatnonzero(buf >= 0x80), side="right") - 1
    candidates = np.unique(line_of).tolist()
    bad = [i for i in candidates if not _is_utf8(data[offsets[i] : offsets[i + 1]])]
    return np.array(bad, dtype=np.int64)


def _is_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
