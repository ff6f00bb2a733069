"""The lake laid out by tenant: typed tables split per tenant.

Ingest writes the shared tables (events, quarantine, ingest_stats: every tenant's rows, by load
date). From the events, each tenant gets its own typed tables, `lake/<table>/tenant_id=<id>/
load_date=<day>/data.parquet`, and every later table lives in the tenant's folder too, so a
tenant's run reads and writes only its own files (config.Paths.for_tenant).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import polars as pl

from pipeline.config import TENANT_COLUMN, Paths
from pipeline.frames import detached_head
from pipeline.ingest.folder import TYPED_TABLES, typed_tables
from pipeline.storage.lake import Lake, read_file, scan_file
from pipeline.storage.owed import record
from pipeline.tables import empty as empty_table

TYPED = "typed"  # the consumer name of the events partitions the typed tables were built from


# What a build keeps of the rows it wrote, per table: the first few (a preview).
KEPT_ROWS = 5


@dataclass
class TypedBuild:
    dates: list[str] = field(default_factory=list)  # load dates rebuilt
    tenants: list[str] = field(default_factory=list)  # every tenant with typed tables
    changed: dict[str, list[str]] = field(default_factory=dict)  # tenant → dates that changed
    written: dict[str, pl.DataFrame] = field(default_factory=dict)  # table → first rows written
    rows: dict[str, int] = field(default_factory=dict)  # table → rows written
    problems: dict[str, list[str]] = field(default_factory=dict)  # table → `check`'s findings


def build_typed_tables(
    paths: Paths,
    lock: Callable[[str], AbstractContextManager[object]],
    check: Callable[[str, pl.DataFrame], str | None] = lambda name, frame: None,
) -> TypedBuild:
    """Rebuild each tenant's typed tables of the load dates whose events changed since they were
    last built. A tenant's partition is rewritten only when its rows changed (so an identical
    re-ingest launches no tenant run), and under `lock(tenant)`, so a running tenant never
    reads half of its night; the date is recorded as owed by the tenant's pack first
    (pipeline/storage/owed.py). `check(table, rows)` (a contract check: what is wrong, or None) sees
    each partition written; only counts, the first rows and its findings are kept, so a backfill
    never holds all its typed rows at once (holding them, a 7-day backfill of 1,000,000
    interactions peaked at 2.2 GiB; now 1.2 GiB)."""
    lake = Lake(paths)
    build = TypedBuild(dates=lake.stale_partitions("events", TYPED))
    written: dict[str, list[pl.DataFrame]] = {name: [] for name in TYPED_TABLES}
    build.rows = dict.fromkeys(TYPED_TABLES, 0)
    build.problems = {name: [] for name in TYPED_TABLES}
    for day in build.dates:
        tables = typed_tables(scan_file(paths.partition("events", day)))
        present = {t for frame in tables.values() for t in frame[TENANT_COLUMN].unique()}
        before = {t for name in TYPED_TABLES for t in _tenants_with(paths, name, day)}
        for tenant in sorted(present | before):
            mine = paths.for_tenant(tenant)
            frames = {n: f.filter(pl.col(TENANT_COLUMN) == tenant) for n, f in tables.items()}
            if all(_same(mine, name, day, frame) for name, frame in frames.items()):
                continue
            with lock(tenant):
                record(paths, tenant, day)  # first: a kill after the writes must not lose it
                for name, frame in frames.items():
                    Lake(mine).write_partition(name, day, frame)
                    _keep(build, written, name, frame, check)
            build.changed.setdefault(tenant, []).append(day)
        lake.mark_derived("events", day, TYPED)
    build.tenants = sorted({t for name in TYPED_TABLES for t in lake.tenants(name)})
    build.written = {
        name: pl.concat([empty_table(name), *frames]).head(KEPT_ROWS)
        for name, frames in written.items()
    }
    return build


def _keep(
    build: TypedBuild,
    written: dict[str, list[pl.DataFrame]],
    name: str,
    frame: pl.DataFrame,
    check: Callable[[str, pl.DataFrame], str | None],
) -> None:
    """Count and check one partition written; keep its first rows while fewer are kept."""
    build.rows[name] += frame.height
    problem = check(name, frame)
    if problem is not None:
        build.problems[name].append(problem)
    if sum(f.height for f in written[name]) < KEPT_ROWS:
        written[name].append(detached_head(frame, KEPT_ROWS))


def _tenants_with(paths: Paths, name: str, day: str) -> list[str]:
    return [
        t for t in Lake(paths).tenants(name) if paths.for_tenant(t).partition(name, day).exists()
    ]


def _same(paths: Paths, name: str, day: str, frame: pl.DataFrame) -> bool:
    path = paths.partition(name, day)
    return path.exists() and read_file(path).equals(frame)
