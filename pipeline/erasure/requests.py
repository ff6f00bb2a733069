"""Erasure requests that arrived as `erasure` events: carried out after the night's partitions
are in the lake, as the CLI's `forget` does, and the run's own copies of that night scrubbed.

A request that cannot be carried out fails that request alone, never the night: it is reported in
one line, and its tenant's pack is withheld (pipeline.storage.withheld) — the other tenants
publish — until a later night or `memorypack forget` carries it out."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline.erasure.files import erase_in_text
from pipeline.erasure.person import forget
from pipeline.erasure.scrub import Needles, scrub_frame
from pipeline.errors import UserError, one_line
from pipeline.ingest.tombstones import Tombstones, tombstone_hash
from pipeline.storage.homelock import ANALYTICS, tenant_locks, training_scope
from pipeline.storage.lake import Lake
from pipeline.storage.withheld import withheld, withhold


@dataclass
class Erasures:
    """What the night's requests came to: what found each person erased (for what the run still
    holds of that night, `forget_in_memory`), and tenant → one line per request that failed."""

    erased: list[Needles] = field(default_factory=list)
    failed: dict[str, list[str]] = field(default_factory=dict)


def carry_out_erasures(
    lake: Lake,
    requests: Iterable[tuple[str, str]],
    log: logging.Logger,
    landing: Path | None = None,
) -> Erasures:
    """Erase every person an erasure event asked for and no tombstone covers yet (a re-ingested
    request is already done, unless it failed before), by `forget` as the CLI does: lake,
    caches, models, packs, run history, the home's landing folder and `landing` (the one the night
    read); the warehouse and snapshot rebuilt. Runs after the night's partitions are in the
    lake, so their lines of that night go too."""
    paths = lake.paths
    done = Tombstones.load(paths)
    outcome = Erasures()
    for tenant, contact in dict.fromkeys(requests):
        request = tombstone_hash(done.key, tenant, "contact", contact)
        if done.erased(tenant, contact) and request not in withheld(paths, tenant):
            continue
        scopes = (tenant, training_scope(tenant), ANALYTICS)  # no policy trains meanwhile
        try:
            with tenant_locks(paths.local, "erasure request", *scopes):
                report = forget(paths, tenant, contact, source="log", landing=landing)
        except Exception as error:  # this request only: the other requests and tenants go on
            why = str(error) if isinstance(error, UserError) else one_line(error)
            why = why.replace(contact, "<their id>") if contact.strip() else why  # no id in logs
            line = (
                f"an erasure request could not be carried out ({why}): the tenant's pack is "
                "withheld until a later night or `memorypack forget` erases the person"
            )
            log.exception(f"tenant {tenant}: {line}")
            withhold(paths, tenant, request, line)
            outcome.failed.setdefault(tenant, []).append(line)
            continue
        outcome.erased.append(report.needles)
        log.info(f"erasure request of tenant {tenant} carried out: " + "; ".join(report.lines()))
    return outcome


def forget_in_memory(
    frame: pl.DataFrame, texts: dict[str, str], erased: list[Needles]
) -> tuple[pl.DataFrame, dict[str, str]]:
    """Rows and texts taken before the erasure, scrubbed as the lake (rows) and the run history
    (texts) were."""
    for needles in erased:
        frame = scrub_frame(frame, needles).frame
        texts = {name: erase_in_text(text, needles) for name, text in texts.items()}
    return frame, texts
