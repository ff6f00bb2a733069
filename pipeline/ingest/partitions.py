"""One ingest run over several daily partitions: each landing folder deduplicated against the
lake's other partitions (the erasure requests the night's events carried are then carried out by
`pipeline.erasure.requests`)."""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

import polars as pl

from pipeline.ingest.folder import IngestResult, ingest_folder
from pipeline.ingest.tombstones import Tombstones
from pipeline.storage.lake import Lake, scan_files


def other_partitions_events(lake: Lake, key: str) -> pl.LazyFrame | None:
    """The (tenant_id, event_id, content_hash) of every events partition but `key`: what a
    re-sent event is a duplicate of. None when there is no other partition."""
    others = [k for k in lake.partition_keys("events") if k != key]
    if not others:
        return None
    return scan_files(
        [lake.paths.partition("events", k) for k in others],
        columns=["tenant_id", "event_id", "content_hash"],
    )


def ingest_partition(
    lake: Lake, landing: Path, key: str, tombstones: Tombstones, log: logging.Logger
) -> IngestResult:
    """Ingest the landing folder of load date `key` against the events the lake already holds in
    its other partitions (a missing folder is an empty partition, with a warning). The caller
    writes the result (`events`, `quarantine`, `stats_frame`) before the next partition, which
    deduplicates against it."""
    folder = landing / key
    if not folder.is_dir():
        log.warning(f"no landing folder {folder}: partition {key} is empty")
    existing = other_partitions_events(lake, key)
    return ingest_folder(folder, date.fromisoformat(key), existing, tombstones)


def stats_frame(result: IngestResult) -> pl.DataFrame:
    """The partition's row of `ingest_stats`."""
    return pl.DataFrame([result.stats]).with_columns(pl.col("load_date").str.to_date())
