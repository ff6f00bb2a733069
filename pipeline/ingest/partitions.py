"""One ingest run over several daily partitions: each landing folder deduplicated against the
lake's other partitions, then the erasure requests the night's events carried."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import date
from pathlib import Path

import polars as pl

from pipeline.erasure.files import erase_in_text
from pipeline.erasure.person import Tombstones, forget
from pipeline.erasure.scrub import Needles, scrub_frame
from pipeline.ingest.folder import IngestResult, ingest_folder
from pipeline.storage.homelock import ANALYTICS, tenant_locks
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


def carry_out_erasures(
    lake: Lake, requests: Iterable[tuple[str, str]], log: logging.Logger
) -> list[Needles]:
    """Erase every person an erasure event asked for and no tombstone covers yet (a re-ingested
    request is already done), by `forget` as the CLI does: lake, caches, models, packs, run
    history; the warehouse and snapshot rebuilt. Runs after the night's partitions are in the
    lake, so their lines of that night go too. Returns what found each person erased: what the
    run still holds of that night (its previews) must pass through `forget_in_memory` before the
    run stores it."""
    paths = lake.paths
    done = Tombstones.load(paths)
    erased = []
    for tenant, contact in dict.fromkeys(requests):
        if done.erased(tenant, contact):
            continue
        with tenant_locks(paths.local, "erasure request", tenant, ANALYTICS):
            report = forget(paths, tenant, contact, source="log")
        erased.append(report.needles)
        log.info(f"erasure request of tenant {tenant} carried out: " + "; ".join(report.lines()))
    return erased


def forget_in_memory(
    frame: pl.DataFrame, texts: dict[str, str], erased: list[Needles]
) -> tuple[pl.DataFrame, dict[str, str]]:
    """Rows and texts taken before the erasure, scrubbed as the lake (rows) and the run history
    (texts) were."""
    for needles in erased:
        frame = scrub_frame(frame, needles).frame
        texts = {name: erase_in_text(text, needles) for name, text in texts.items()}
    return frame, texts
