"""Landing files → one row per line (text, bytes, damage), before any JSON is parsed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.ingest.contracts import (
    Reason,
)
from pipeline.ingest.landing import Damage, read_landing_bytes

BOM = "\ufeff"
LANDING_PATTERNS = ("*.jsonl", "*.jsonl.gz")

LINES_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "line_no": pl.Int64(),
    "raw": pl.String(),
    "raw_bytes": pl.Binary(),
    "damage": pl.String(),  # the reason of a row standing for a file's unreadable rest
}


def landing_files(folder: Path) -> list[Path]:
    return sorted({p for pattern in LANDING_PATTERNS for p in folder.glob(pattern)})


def read_lines(path: Path, name: str | None = None) -> pl.DataFrame:
    """One row per line: text when it is valid UTF-8, otherwise the bytes (quarantined later).

    A file that is damaged (corrupt gzip) or unreadable keeps the whole lines read before the
    damage and ends with one more row standing for the unreadable rest (see `_damage_row`).
    """
    data, damage = read_landing_bytes(path)
    label = name or path.name
    if damage is None:
        return _split_lines(data, label)
    cut = data.rfind(b"\n") + 1  # a line cut by the damage is not a whole line
    lines = _split_lines(data[:cut], label)
    tail = data[cut:] + damage.unverified
    return pl.concat([lines, _damage_row(damage, label, lines.height + 1, cut, tail)])


def _damage_row(damage: Damage, label: str, line_no: int, offset: int, tail: bytes) -> pl.DataFrame:
    """The unreadable rest of a file as one line: quarantined with the damage's reason.

    `raw` says what happened and where: `offset` is the byte offset in the decompressed stream
    where the unreadable part starts (the start of the line the damage cut, so everything before
    it was ingested), the compressed offset is where zlib saw the damage. `raw_bytes` keeps what
    was not ingested but could be decompressed: the partial line the damage cut and any
    unverified output of a corrupt member.
    """
    where = ""
    if damage.reason is Reason.CORRUPT_GZIP:
        where = (
            f" (unreadable from decompressed byte {offset};"
            f" damage at compressed byte {damage.compressed_offset})"
        )
    return pl.DataFrame(
        {
            "file": [label],
            "line_no": [line_no],
            "raw": [f"{damage.detail}{where}"],
            "raw_bytes": [tail or None],
            "damage": [damage.reason.value],
        },
        schema=LINES_SCHEMA,
    )


def _split_lines(data: bytes, label: str) -> pl.DataFrame:
    """The lines of a file's bytes, cut without a copy per line.

    The bytes become an Arrow string column directly: newline positions (numpy) are the offsets,
    and Arrow checks UTF-8 for the whole file at once (the happy path). Only a file holding
    invalid UTF-8 has its non-ASCII lines decoded one by one, so one bad line costs that line
    alone (no Python object per line, unlike `bytes.decode().split()`).
    """
    if b"\r" in data:  # memchr: the copy below is only paid by files that have a CR
        data = data.replace(b"\r\n", b"\n")
    data = data.removeprefix(BOM.encode())
    if not data:
        return pl.DataFrame(schema=LINES_SCHEMA)
    if not data.endswith(b"\n"):
        data += b"\n"
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == ord("\n"))
    offsets = np.concatenate(([0], ends + 1)).astype(np.int64)
    n = len(ends)
    raw_bytes = pl.repeat(None, n, dtype=pl.Binary, eager=True).alias("raw_bytes")
    try:
        text = _string_array(buf, offsets)
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere: find the lines, blank them, keep bytes
        bad = _invalid_utf8_lines(data, buf, offsets)
        buf = buf.copy()
        for i in bad.tolist():
            buf[offsets[i] : offsets[i + 1] - 1] = ord(" ")
        text = _string_array(buf, offsets, null=bad)
        lines = [data[offsets[i] : offsets[i + 1] - 1] for i in bad.tolist()]
        raw_bytes = raw_bytes.scatter(bad, pl.Series(lines, dtype=pl.Binary))
    raw = pl.Series("raw", text).str.strip_suffix("\n")
    return pl.DataFrame({"raw": raw, "raw_bytes": raw_bytes}).select(
        pl.lit(label, dtype=pl.String).alias("file"),
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("line_no"),
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
