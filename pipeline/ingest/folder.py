"""Raw landing folder → validated events and quarantined lines, with counts that always add up."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import polars as pl

from pipeline.ingest.contracts import (
    FEEDBACK_COLUMNS,
    INTERACTION_COLUMNS,
    MEMORY_COLUMNS,
    QUARANTINE_SCHEMA,
    EventType,
    Reason,
)
from pipeline.ingest.lines import BOM, LANDING_PATTERNS, LINES_SCHEMA, landing_files, read_lines
from pipeline.ingest.rules import validate_lines
from pipeline.ingest.tombstones import Tombstones, erased_quarantine_rows, json_field

VALIDATE_CHUNK_LINES = 200_000

__all__ = [
    "BOM",
    "LANDING_PATTERNS",
    "TYPED_TABLES",
    "VALIDATE_CHUNK_LINES",
    "IngestResult",
    "deduplicate",
    "ingest_folder",
    "landing_files",
    "read_lines",
    "typed_tables",
    "validate_lines",
]


@dataclass
class IngestResult:
    """One landing folder, split: every line read is in exactly one of the three outcomes."""

    load_date: date
    events: pl.DataFrame
    quarantine: pl.DataFrame
    files: list[str] = field(default_factory=list)
    lines_read: int = 0
    duplicates: int = 0
    # (tenant_id, contact_id) of the erasure requests read: kept in memory only, for the run to
    # act on; the stored `erasure` events do not hold the id.
    erasures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def stats(self) -> dict[str, int | str]:
        return {
            "load_date": self.load_date.isoformat(),
            "files": len(self.files),
            "lines_read": self.lines_read,
            "accepted": self.events.height,
            "duplicates": self.duplicates,
            "quarantined": self.quarantine.height,
        }

    @property
    def conserved(self) -> bool:
        return self.lines_read == self.events.height + self.duplicates + self.quarantine.height


def deduplicate(
    events: pl.DataFrame, existing: pl.LazyFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Keep one copy of each (tenant_id, event_id), here and across other partitions.

    A re-sent identical event is a duplicate (counted, not stored twice); the same id with
    different content is quarantined as `conflicting_duplicate`: the first accepted copy stays.
    Returns (kept events sorted by tenant_id, event_id; conflicting rows as events; number of
    identical duplicates). The decisions are made on the key columns alone and the wide rows
    gathered once: a day's events (~700 MB at 670,000 lines) are never copied whole in between.
    """
    key = ["tenant_id", "event_id"]
    keys = (
        events.select(*key, "content_hash", "source_file", "line_no")
        .with_row_index("_row")
        .sort("source_file", "line_no")
    )
    first = keys.unique(subset=key, keep="first", maintain_order=True)
    rest = keys.join(first.select("_row"), on="_row", how="anti").join(
        first.select(*key, pl.col("content_hash").alias("kept_hash")), on=key, how="left"
    )
    duplicates = rest.filter(pl.col("content_hash") == pl.col("kept_hash")).height
    conflicts = [rest.filter(pl.col("content_hash") != pl.col("kept_hash"))["_row"]]
    if existing is not None:
        seen = (
            existing.select(*key, pl.col("content_hash").alias("seen_hash"))
            .join(first.lazy().select(key), on=key, how="semi")
            .collect()
        )
        first = first.join(seen, on=key, how="left")
        duplicates += first.filter(pl.col("seen_hash") == pl.col("content_hash")).height
        conflicts.append(first.filter(pl.col("seen_hash") != pl.col("content_hash"))["_row"])
        first = first.filter(pl.col("seen_hash").is_null())
    kept = first.sort(key)["_row"]
    return _rows(events, kept), _rows(events, pl.concat(conflicts)), duplicates


def _rows(frame: pl.DataFrame, rows: pl.Series) -> pl.DataFrame:
    return frame.select(pl.all().gather(rows))


def _conflicts_to_quarantine(
    conflicts: pl.DataFrame, lines: pl.DataFrame, load_date: date
) -> pl.DataFrame:
    return (
        conflicts.select("source_file", "line_no", "tenant_id", "event_id")
        .join(
            lines.select(pl.col("file").alias("source_file"), "line_no", "raw"),
            on=["source_file", "line_no"],
            how="left",
        )
        .select(
            pl.lit(load_date, dtype=pl.Date).alias("load_date"),
            pl.col("source_file").alias("file"),
            "line_no",
            pl.lit(Reason.CONFLICTING_DUPLICATE.value).alias("reason"),
            "raw",
            pl.lit(None, dtype=pl.Binary).alias("raw_bytes"),
            "tenant_id",
            "event_id",
        )
    )


def _drop_erased(
    events: pl.DataFrame, quarantine: pl.DataFrame, tombstones: Tombstones | None, load_date: date
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Lines of erased people (by contact or user id, or naming one of their events) become
    `erased_contact` quarantine rows without their text: re-ingesting old files never brings an
    erased person back. Erasure requests themselves stay (they hold the id they tombstone)."""
    if not tombstones:
        return events, quarantine
    requests = events["event_type"] == EventType.ERASURE.value
    erased = (
        tombstones.matches(
            events, ("contact_id", "user_id"), ("event_id", "target_id", "parent_event_id")
        )
        & ~requests
    )
    raw = pl.col("raw")
    named = quarantine.select(
        pl.coalesce(json_field(raw, "tenant_id"), pl.col("tenant_id")).alias("tenant_id"),
        *(json_field(raw, name).alias(name) for name in ("contact_id", "user_id", "target_id")),
    )
    gone = tombstones.matches(named, ("contact_id", "user_id"), ("target_id",))
    gone = gone | tombstones.line_hits(quarantine["raw"])
    dropped = erased_quarantine_rows(events.filter(erased), load_date, "source_file", "line_no")
    quarantine = pl.concat(
        [
            quarantine.filter(~gone),
            erased_quarantine_rows(quarantine.filter(gone), load_date, "file", "line_no"),
            dropped.cast(pl.Schema(QUARANTINE_SCHEMA)),
        ]
    )
    return events.filter(~erased), quarantine


def _erasure_requests(events: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[str, str]]]:
    """Erasure events stored without the person's id (or any other field than the request's
    own), with a content hash that does not derive from it; and the requests, in file order."""
    requests = pl.col("event_type") == EventType.ERASURE.value
    asked = events.filter(requests).sort("source_file", "line_no")
    if asked.is_empty():  # most nights: every column stays as it is (no copy)
        return events, []
    pairs = list(asked.select("tenant_id", "contact_id").unique(maintain_order=True).iter_rows())
    kept = ["tenant_id", "event_id", "event_type", "ts", "load_date", "schema_version"]
    kept += ["source_file", "line_no"]
    blank = [
        pl.when(requests).then(None).otherwise(pl.col(c)).alias(c)
        for c in events.columns
        if c not in kept and c != "content_hash"
    ]
    request_hash = (
        pl.concat_str(
            [pl.col("tenant_id"), pl.col("event_id"), pl.lit(EventType.ERASURE.value)],
            separator="\x00",
        )
        .hash()
        .cast(pl.String)
    )
    events = events.with_columns(
        *blank,
        pl.when(requests)
        .then(request_hash)
        .otherwise(pl.col("content_hash"))
        .alias("content_hash"),
    )
    return events, [(str(t), str(c)) for t, c in pairs]


def ingest_folder(
    folder: Path,
    load_date: date,
    existing: pl.LazyFrame | None = None,
    tombstones: Tombstones | None = None,
) -> IngestResult:
    """Read every `*.jsonl`/`*.jsonl.gz` of one landing folder and split it three ways.

    `existing` holds (tenant_id, event_id, content_hash) of the events of every *other* partition,
    so a re-sent event is stored once however many days it arrives on. Lines of people in
    `tombstones` are counted as `erased_contact` quarantine rows; erasure requests are returned in
    `erasures` for the run to carry out.
    """
    files = landing_files(folder)
    frames = [read_lines(path) for path in files]
    lines = pl.concat(frames) if frames else pl.DataFrame(schema=LINES_SCHEMA)
    # Lines are independent until dedupe: validating in slices bounds the memory of the wide
    # parsed frame (70 columns) whatever the size of the folder.
    parts = [
        validate_lines(chunk, load_date) for chunk in lines.iter_slices(VALIDATE_CHUNK_LINES)
    ] or [validate_lines(lines, load_date)]
    events = pl.concat([valid for valid, _ in parts])
    quarantine = pl.concat([rejected for _, rejected in parts])
    events, quarantine = _drop_erased(events, quarantine, tombstones, load_date)
    events, erasures = _erasure_requests(events)
    kept, conflicts, duplicates = deduplicate(events, existing)
    quarantine = pl.concat([quarantine, _conflicts_to_quarantine(conflicts, lines, load_date)])
    return IngestResult(
        load_date=load_date,
        events=kept,
        quarantine=quarantine.select(
            [pl.col(c).cast(t) for c, t in QUARANTINE_SCHEMA.items()]
        ).sort("file", "line_no"),
        files=[p.name for p in files],
        lines_read=lines.height,
        duplicates=duplicates,
        erasures=erasures,
    )


TYPED_TABLES: dict[str, tuple[EventType, list[str]]] = {
    "interactions": (EventType.INTERACTION, INTERACTION_COLUMNS),
    "feedback": (EventType.FEEDBACK, FEEDBACK_COLUMNS),
    "memory_statements": (EventType.MEMORY, MEMORY_COLUMNS),
}


def typed_tables(events: pl.LazyFrame) -> dict[str, pl.DataFrame]:
    """The typed tables (SPEC §3) of some events: one load date's, in the lake, where `events` are
    already unique per (tenant_id, event_id) across load dates (see `deduplicate`)."""
    return {
        name: events.filter(pl.col("event_type") == kind.value)
        .select(columns)
        .unique(subset=["tenant_id", "event_id"], keep="first")
        .sort("tenant_id", "ts", "event_id")
        .collect()
        for name, (kind, columns) in TYPED_TABLES.items()
    }
