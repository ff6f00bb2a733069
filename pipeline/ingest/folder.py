"""Raw landing folder → validated events and quarantined lines, with counts that always add up.

The folder is read a batch of lines at a time (pipeline.ingest.lines), so memory is bounded by a
batch plus what is kept: each distinct accepted event, each distinct rejected line; blank and
identical rejected lines are counted (pipeline.ingest.quarantined), re-sent events deduplicated
as each batch comes (pipeline.ingest.dedup)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

import polars as pl

from pipeline.ingest.contracts import (
    EVENT_SCHEMA,
    FEEDBACK_COLUMNS,
    FILE_REASONS,
    INTERACTION_COLUMNS,
    MEMORY_COLUMNS,
    QUARANTINE_SCHEMA,
    EventType,
)
from pipeline.ingest.dedup import KEY_COLUMNS, conflict_rows, deduplicate
from pipeline.ingest.lines import BATCH_LINES, Lines, Revoke, file_lines, refused_lines
from pipeline.ingest.listing import landing_entries
from pipeline.ingest.quarantined import QuarantineRows, as_quarantine, blank_rows, with_raw_text
from pipeline.ingest.rules import validate_lines
from pipeline.ingest.tombstones import Tombstones, erased_quarantine_rows, json_field

__all__ = [
    "TYPED_TABLES",
    "IngestResult",
    "deduplicate",
    "ingest_folder",
    "typed_tables",
    "validate_lines",
]


@dataclass
class IngestResult:
    """One landing folder, split: every line read is in exactly one of the three outcomes."""

    load_date: date
    events: pl.DataFrame
    quarantine: pl.DataFrame  # a row may stand for several lines: its `lines`
    files: list[str] = field(default_factory=list)
    lines_read: int = 0
    duplicates: int = 0
    # (tenant_id, contact_id) of the erasure requests read: kept in memory only, for the run to
    # act on; the stored `erasure` events do not hold the id.
    erasures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def quarantined(self) -> int:
        """Lines quarantined (a counted row stands for its `lines`)."""
        return int(self.quarantine["lines"].sum())

    @property
    def stats(self) -> dict[str, int | str]:
        return {
            "load_date": self.load_date.isoformat(),
            "files": len(self.files),
            "lines_read": self.lines_read,
            "accepted": self.events.height,
            "duplicates": self.duplicates,
            "quarantined": self.quarantined,
        }

    @property
    def conserved(self) -> bool:
        return self.lines_read == self.events.height + self.duplicates + self.quarantined

    @property
    def files_not_read(self) -> dict[str, str]:
        """File → one line saying why it (or its rest) was not read: refused, unreadable, damaged."""
        reasons = [r.value for r in FILE_REASONS]
        rows = self.quarantine.filter(pl.col("reason").is_in(reasons))
        return {r["file"]: f"{r['reason']}: {r['raw']}" for r in rows.iter_rows(named=True)}


@dataclass
class _Outcome:
    """What some lines came to: a file's lines not yet verified, or everything verified."""

    events: list[pl.DataFrame] = field(default_factory=list)  # kept: one copy of each key
    keys: list[pl.DataFrame] = field(default_factory=list)  # their KEY_COLUMNS
    quarantine: QuarantineRows = field(default_factory=QuarantineRows)
    erasures: list[tuple[str, str]] = field(default_factory=list)
    duplicates: int = 0
    lines: int = 0

    def merge(self, other: _Outcome) -> None:
        self.events += other.events
        self.keys += other.keys
        self.quarantine.merge(other.quarantine)
        self.erasures += other.erasures
        self.duplicates += other.duplicates
        self.lines += other.lines


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


class _Reader:
    """A folder's files, one after the other, into one `_Outcome` (`done`). Verified lines of
    small files are validated together (BATCH_LINES at a time: 3,000 tiny files are not 3,000
    validations); a gzip member too large for one batch is validated as it streams, its outcome
    pending until the member's CRC passes."""

    def __init__(self, load_date: date, tombstones: Tombstones | None) -> None:
        self.load_date, self.tombstones = load_date, tombstones
        self.done = _Outcome()
        self.pool: list[pl.DataFrame] = []  # verified lines not validated yet

    def file(self, batches: Iterable[Lines | Revoke]) -> None:
        pending = _Outcome()
        for batch in batches:
            if isinstance(batch, Revoke):
                pending = _Outcome()
            elif batch.exact:
                self.done.merge(pending)
                pending = _Outcome()
                self._counted(batch, self.done)
                self.pool.append(batch.frame)
                if sum(f.height for f in self.pool) >= BATCH_LINES:
                    self.flush()
            else:
                self.flush()  # earlier lines first: the first copy of an event is the one kept
                self._counted(batch, pending)
                self._validate(batch.frame, pending)

    def flush(self) -> None:
        if self.pool:
            lines, self.pool = pl.concat(self.pool), []
            self._validate(lines, self.done)

    def _counted(self, batch: Lines, into: _Outcome) -> None:
        into.quarantine.add(blank_rows(batch.file, batch.blank, self.load_date))
        into.lines += batch.frame.height + batch.blank.count

    def _validate(self, lines: pl.DataFrame, into: _Outcome) -> None:
        """Validate lines and add what they came to, deduplicated against the events kept
        before them."""
        valid, rejected = validate_lines(lines, self.load_date)
        valid, rejected = _drop_erased(
            valid, as_quarantine(rejected), self.tombstones, self.load_date
        )
        valid, erasures = _erasure_requests(valid)
        known = [self.done] if into is self.done else [self.done, into]
        kept, conflicts, duplicates = deduplicate(valid, _known_keys(known))
        into.events.append(kept)
        into.keys.append(kept.select(KEY_COLUMNS))
        into.quarantine.add(conflict_rows(conflicts, self.load_date, lines))
        into.quarantine.add(rejected)
        into.erasures += erasures
        into.duplicates += duplicates


def _known_keys(outcomes: list[_Outcome]) -> pl.LazyFrame | None:
    """The keys of the events the outcomes kept (each outcome's list made one frame)."""
    for outcome in outcomes:
        if len(outcome.keys) > 1:
            outcome.keys = [pl.concat(outcome.keys, rechunk=True)]
    keys = [k for outcome in outcomes for k in outcome.keys]
    return pl.concat(keys).lazy() if keys else None


def ingest_folder(
    folder: Path,
    load_date: date,
    existing: pl.LazyFrame | None = None,
    tombstones: Tombstones | None = None,
    root: Path | None = None,
) -> IngestResult:
    """Read every `*.jsonl`/`*.jsonl.gz` regular file of one landing folder and split its lines
    three ways. `root` is the landing folder (default: `folder`'s parent): no symbolic link may
    lead out of it (pipeline.ingest.listing).

    `existing` holds (tenant_id, event_id, content_hash) of the events of every *other* partition,
    so a re-sent event is stored once however many days it arrives on. Lines of people in
    `tombstones` are counted as `erased_contact` quarantine rows; erasure requests are returned in
    `erasures` for the run to carry out.
    """
    entries = landing_entries(folder, root)
    reader = _Reader(load_date, tombstones)
    for entry in entries:
        refusal = entry.refusal
        if refusal is None:
            reader.file(file_lines(entry.path))
        else:
            reader.file([refused_lines(entry.name, refusal.reason, refusal.detail)])
    reader.flush()
    done = reader.done
    events = pl.concat([pl.DataFrame(schema=EVENT_SCHEMA), *done.events])
    kept, conflicts, duplicates = deduplicate(events, existing)
    done.quarantine.add(conflict_rows(conflicts, load_date))  # with other partitions' events
    quarantine = with_raw_text(done.quarantine.frame(), folder)
    return IngestResult(
        load_date=load_date,
        events=kept,
        quarantine=quarantine,
        files=[entry.name for entry in entries],
        lines_read=done.lines,
        duplicates=done.duplicates + duplicates,
        erasures=list(dict.fromkeys(done.erasures)),
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
