"""Quarantine rows, counted rather than stored one by one where the lines say nothing new: the
blank lines of a file are one row, and so are the identical rejected lines of a file (same
reason, same text). Each row says how many landing lines it stands for (`lines`) and the numbers
of the first few (`line_nos`); `line_no` is the first. So a file of a billion newlines costs one
row, and `lines read = accepted + duplicates + Σ lines` still holds (SPEC §2)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import polars as pl

from pipeline.ingest.contracts import QUARANTINE_SCHEMA, Reason
from pipeline.ingest.lines import EXAMPLE_LINES, BlankLines, Lines, file_lines

# Rows alike in these are one row (an erased line keeps no text: those stay one row a line).
_SAME = ["load_date", "file", "reason", "raw", "raw_bytes", "tenant_id", "event_id"]
COMPACT_ROWS = 200_000  # counted rows held before they are counted together again


def as_quarantine(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows of one line each (`lines` 1, `line_nos` [line_no]) in the quarantine's columns."""
    return rows.with_columns(
        pl.lit(1, dtype=pl.Int64).alias("lines"),
        pl.concat_list(pl.col("line_no").cast(pl.Int64)).alias("line_nos"),
    ).select([pl.col(c).cast(t) for c, t in QUARANTINE_SCHEMA.items()])


def with_counts(rows: pl.DataFrame) -> pl.DataFrame:
    """Quarantine rows of a partition written before rows were counted (no `lines`, `line_nos`,
    or nulls there): one line each, as they were."""
    first = pl.concat_list(pl.col("line_no").cast(pl.Int64))
    for name, value in (("lines", pl.lit(1, dtype=pl.Int64)), ("line_nos", first)):
        rows = rows.with_columns(
            pl.coalesce(pl.col(name), value) if name in rows.columns else value.alias(name)
        )
    return rows


def counted(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows alike (`_SAME`, with a text) counted as one: the first line's number, the sum of
    their `lines`, the first EXAMPLE_LINES of their line numbers; sorted by file and line."""
    text = pl.col("raw").is_not_null() | pl.col("raw_bytes").is_not_null()
    alike = (
        rows.filter(text)
        .group_by(_SAME, maintain_order=True)
        .agg(
            pl.col("line_no").min(),
            pl.col("lines").sum(),
            pl.col("line_nos").explode().sort().head(EXAMPLE_LINES),
        )
    )
    return (
        pl.concat([rows.filter(~text), alike.select(rows.columns)])
        .select([pl.col(c).cast(t) for c, t in QUARANTINE_SCHEMA.items()])
        .sort("file", "line_no")
    )


def blank_rows(file: str, blank: BlankLines, load_date: date) -> pl.DataFrame:
    """A file's blank lines (counted by the splitter) as one `empty_line` row."""
    if not blank.count:
        return pl.DataFrame(schema=QUARANTINE_SCHEMA)
    row = {
        "load_date": load_date,
        "file": file,
        "line_no": blank.first[0],
        "reason": Reason.EMPTY_LINE.value,
        "raw": "",
        "lines": blank.count,
        "line_nos": blank.first,
    }
    return pl.DataFrame([row], schema=QUARANTINE_SCHEMA)


class QuarantineRows:
    """Quarantine rows as they come, counted together whenever many have piled up."""

    def __init__(self) -> None:
        self.parts: list[pl.DataFrame] = []
        self.held = 0
        self.compacted = 0

    def add(self, rows: pl.DataFrame) -> None:
        if rows.height:
            self.parts.append(rows)
            self.held += rows.height
        if self.held > max(COMPACT_ROWS, 2 * self.compacted):
            whole = self.frame()
            self.parts, self.held, self.compacted = [whole], whole.height, whole.height

    def merge(self, other: QuarantineRows) -> None:
        for part in other.parts:
            self.add(part)

    def frame(self) -> pl.DataFrame:
        return counted(pl.concat([pl.DataFrame(schema=QUARANTINE_SCHEMA), *self.parts]))

    @property
    def lines(self) -> int:
        return sum(int(p["lines"].sum()) for p in self.parts)


def with_raw_text(rows: pl.DataFrame, folder: Path) -> pl.DataFrame:
    """Rows whose raw text was not kept while the folder was read (duplicates conflicting with
    another partition's event: found once the folder's last event has been seen) get it, read
    again from their landing files (only the files that hold one)."""
    missing = rows.filter(
        (pl.col("reason") == Reason.CONFLICTING_DUPLICATE.value) & pl.col("raw").is_null()
    )
    if missing.is_empty():
        return rows
    found = []
    for (file,), wanted in missing.group_by("file", maintain_order=True):
        numbers = set(wanted["line_no"].to_list())
        for batch in file_lines(folder / str(file)):
            if isinstance(batch, Lines):
                found.append(
                    batch.frame.filter(pl.col("line_no").is_in(numbers)).select(
                        "file", "line_no", pl.col("raw").alias("text")
                    )
                )
    texts = pl.concat(
        [pl.DataFrame(schema={"file": pl.String, "line_no": pl.Int64, "text": pl.String}), *found]
    )
    return (
        rows.join(texts, on=["file", "line_no"], how="left")
        .with_columns(pl.coalesce("raw", "text").alias("raw"))
        .drop("text")
    )
