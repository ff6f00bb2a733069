"""The lake laid out by tenant: typed tables split per tenant, and the move from the earlier layout.

Ingest writes the shared tables (events, quarantine, ingest_stats: every tenant's rows, by load
date). From the events, each tenant gets its own typed tables, `lake/<table>/tenant_id=<id>/
load_date=<day>/data.parquet`, and every later table lives in the tenant's folder too, so a
tenant's run reads and writes only its own files (config.Paths.for_tenant).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline.config import TENANT_COLUMN, Paths
from pipeline.frames import detached_head
from pipeline.ingest.folder import TYPED_TABLES, typed_tables
from pipeline.storage.lake import Lake, read_file, scan_file, write_parquet_atomic
from pipeline.storage.owed import record
from pipeline.tables import SHARED_TABLES
from pipeline.tables import empty as empty_table

TYPED = "typed"  # the consumer name of the events partitions the typed tables were built from
CACHES = ("embedding_cache", "pii_cache")
# Written once the lake is in this layout: the move runs once, and never again drops the caches
# the whole home keeps outside tenant folders (the analytics snapshot's redactions).
LAYOUT_MARKER = ".layout-by-tenant"


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


def migrate_layout(paths: Paths) -> list[str]:
    """Move the tables of the earlier layout (every tenant's rows in one file) into tenant
    folders; drop the caches of that layout (they are rebuilt as texts come back) and the typed
    tables (rebuilt from the events). Returns the tables moved; a home of this layout: []."""
    moved: list[str] = []
    root = paths.lake
    if not isinstance(root, Path):  # object-store homes began in this layout: nothing to move
        return moved
    done = root / LAYOUT_MARKER
    if done.exists():  # moved once; the home's own caches (the snapshot's redactions) stay
        return moved
    for table in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if table.name in SHARED_TABLES:
            continue
        old = [p for p in table.iterdir() if not p.name.startswith(f"{TENANT_COLUMN}=")]
        if not old:
            continue
        if table.name in CACHES or table.name in TYPED_TABLES:
            for path in old:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
            continue
        prefix = f"{TENANT_COLUMN}="
        files = [
            f
            for f in sorted(table.rglob("data.parquet"))
            if not f.relative_to(table).parts[0].startswith(prefix)
        ]
        frames = {f: pl.read_parquet(f, hive_partitioning=False) for f in files}
        if any(TENANT_COLUMN not in frame.columns for frame in frames.values()):
            continue  # not a tenant's table: left as it is
        for file, frame in frames.items():
            relative = file.relative_to(table)
            for (tenant,), rows in frame.partition_by(TENANT_COLUMN, as_dict=True).items():
                write_parquet_atomic(rows, table / f"{TENANT_COLUMN}={tenant}" / relative)
        for path in old:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        moved.append(table.name)
    if root.is_dir():
        done.write_text("tables by tenant\n")
    return moved
