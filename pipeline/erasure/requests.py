"""Erasure requests that arrived as `erasure` events: carried out after the night's partitions
are in the lake, as the CLI's `forget` does, and the run's own copies of that night scrubbed."""

from __future__ import annotations

import logging
from collections.abc import Iterable

import polars as pl

from pipeline.erasure.files import erase_in_text
from pipeline.erasure.person import forget
from pipeline.erasure.scrub import Needles, scrub_frame
from pipeline.ingest.tombstones import Tombstones
from pipeline.storage.homelock import ANALYTICS, tenant_locks, training_scope
from pipeline.storage.lake import Lake


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
        scopes = (tenant, training_scope(tenant), ANALYTICS)  # no policy trains meanwhile
        with tenant_locks(paths.local, "erasure request", *scopes):
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
