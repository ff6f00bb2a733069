"""The analyst snapshot's redacted parts (SPEC §5, §6): each tenant's rows redacted in its own run,
where its pack's are (its redaction cache and names), the rows of ingest's own tables in the
ingest run; the analytics build only puts the parts together (`pipeline.publish.analytics`)."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pipeline.config import Paths
from pipeline.pii import pii_key
from pipeline.pii.redactor import Redactor
from pipeline.publish.snapshot_names import spread_in_snapshot
from pipeline.publish.snapshot_redaction import redacting
from pipeline.storage import homelock
from pipeline.storage.lake import Lake, file_identity
from pipeline.storage.warehouse import (
    DIGEST,
    LOADED_FILES,
    STORAGE_VERSION,
    Warehouse,
    duckdb_config,
)
from pipeline.stores.disk import fsync_path
from pipeline.stores.local import sql_quote
from pipeline.tables import SHARED_TABLES

PARTS = homelock.PARTS  # the parts' folder, in the home's local folder (its lock cleans copies)
INGEST_PART = ".ingest"  # the part of ingest's own tables: a name no tenant id can be
INGEST_TABLES = frozenset({"quarantine", "ingest_stats"})  # lines of no tenant among them
BUILD_TABLES = frozenset({"pack_versions"})  # the build writes it, from the packs folder
# A part's DuckDB memory: tenant runs build theirs side by side.
PART_MEMORY = "512MiB"
STAMP = "_part_redaction"  # the detector, key and format a part was made with (bookkeeping)
# The tables whose lake files say whether a tenant's part is current: its own folders (its rows of
# `events` come with them: a tenant whose events changed has new interactions, so a run).
TENANT_SOURCES = ("interactions", "feedback", "memory_statements")


@dataclass
class PartReport:
    name: str
    tables: dict[str, int] = field(default_factory=dict)  # table -> rows
    redactions: dict[str, int] = field(default_factory=dict)  # PII found per kind, in new rows
    texts_analysed: int = 0  # texts the NER analysed (not served by the cache)
    seconds: float = 0.0


@dataclass(frozen=True)
class PartState:
    """A part as the build finds it: `current`, `stale` (the lake changed since: `changed` names
    the tables; its rows are the previous night's) or `missing` (its rows are not in the
    snapshot)."""

    name: str
    state: str
    changed: tuple[str, ...] = ()


def part_path(paths: Paths, name: str) -> Path:
    return paths.local / PARTS / f"{name}.duckdb"


def part_tables(name: str, tables: Mapping[str, str]) -> dict[str, str]:
    """The tables (name → comment) part `name` holds: ingest's own, or a tenant's (its rows of
    `events` included)."""
    if name == INGEST_PART:
        return {t: c for t, c in tables.items() if t in INGEST_TABLES}
    return {t: c for t, c in tables.items() if t not in INGEST_TABLES | BUILD_TABLES}


def _view(paths: Paths, name: str) -> Paths:
    return paths.for_tenant(None if name == INGEST_PART else name)


def _identity(redactor: Redactor) -> str:
    """The detector, key and format of a part's rows: a part made with others is made anew."""
    key = hashlib.sha256(redactor.key).hexdigest()[:16]
    return f"{redactor.version} key {key} storage {STORAGE_VERSION} rows {DIGEST}"


def _stamp(con: duckdb.DuckDBPyConnection) -> str | None:
    found = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [STAMP]
    ).fetchall()
    if not found[0][0]:
        return None
    row = con.execute(f"SELECT identity FROM {STAMP}").fetchone()
    return str(row[0]) if row else None


def build_part(
    paths: Paths,
    name: str,
    tables: Mapping[str, str],
    progress: Callable[[str], None] | None = None,
    done: list[int] | None = None,
    workers: int = 1,
) -> PartReport:
    """Part `name` caught up with the lake, redacted as the packs are: a copy of the previous
    part converges (only rows the lake gained are redacted: texts the tenant's pack redacted come
    from its cache) and replaces it in one rename, so a run that fails leaves the previous part
    whole. The names the tenant's pack found since are spread into its older rows
    (`snapshot_names`). Another detector, key or format starts the part anew. `done` counts the rows redacted
    (`snapshot_redaction.redacting`); `workers` analyse the texts no cache holds (a run: 1, its
    pack redacted them; a build outside the night: every core)."""
    view = _view(paths, name)
    redactor = Redactor.for_home(view, workers)
    found: Counter[str] = Counter()
    final = part_path(paths, name)
    final.parent.mkdir(parents=True, exist_ok=True)
    temp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    where = {t: f"tenant_id = {sql_quote(name)}" for t in tables if t in SHARED_TABLES}
    part = Warehouse(
        view,
        temp,
        rows=redacting(redactor, found, progress, done),
        memory=PART_MEMORY,
        where={} if name == INGEST_PART else where,
    )
    report = PartReport(name)
    try:
        if final.exists():
            shutil.copyfile(final, temp)
            with part.connect() as con:
                kept = _stamp(con) == _identity(redactor)
            if not kept:
                temp.unlink()
        report.tables = part.converge(Lake(view), part_tables(name, tables))
        with part.connect() as con:
            if name != INGEST_PART:  # names its pack found since leave the older rows too
                spread = spread_in_snapshot(con, redactor, [name], of_no_tenant=False)
                found.update({"person": sum(spread.values())})
            con.execute(
                f"CREATE OR REPLACE TABLE {STAMP} AS SELECT ? AS identity", [_identity(redactor)]
            )
            con.execute("CHECKPOINT")
        fsync_path(temp)
        os.replace(temp, final)
        fsync_path(final.parent)
    finally:
        for path in (temp, temp.with_name(temp.name + ".wal")):
            path.unlink(missing_ok=True)
        redactor.pool.close()
    report.redactions = dict(sorted((+found).items()))
    report.texts_analysed, report.seconds = redactor.analysed, redactor.seconds
    return report


def remove_parts(paths: Paths, names: list[str]) -> list[str]:
    """Delete these parts (an erasure: deleted rows stay in a DuckDB file's free blocks); returns
    the ones that existed."""
    removed = []
    for name in names:
        path = part_path(paths, name)
        if path.exists():
            removed.append(name)
        for each in (path, path.with_name(path.name + ".wal")):
            each.unlink(missing_ok=True)
    return removed


def tenants_with_data(paths: Paths) -> list[str]:
    lake = Lake(paths)
    return sorted({t for table in TENANT_SOURCES for t in lake.tenants(table)})


def part_states(paths: Paths, tables: Mapping[str, str]) -> list[PartState]:
    """Every part the snapshot needs (ingest's, each tenant's with data in the lake, and any
    other part there is), and whether the lake changed since it was made: a table whose lake
    files differ from the ones the part recorded (of the tenant's own folders; of ingest's
    tables for ingest's part), or `redaction` for a part made with another detector or key."""
    folder = paths.local / PARTS
    made = (
        {p.name.removesuffix(".duckdb") for p in folder.glob("*.duckdb")}
        if folder.exists()
        else set()
    )
    states, made_with = [], _identity(Redactor(pii_key(paths.home)))
    for name in sorted({INGEST_PART, *tenants_with_data(paths), *made}):
        path = part_path(paths, name)
        if not path.exists():
            states.append(PartState(name, "missing"))
            continue
        own = [
            t for t in part_tables(name, tables) if t not in SHARED_TABLES or name == INGEST_PART
        ]
        lake = Lake(_view(paths, name))
        with duckdb.connect(str(path), read_only=True, config=duckdb_config(paths)) as con:
            redaction = () if _stamp(con) == made_with else ("redaction",)
            recorded: dict[str, dict[str, str]] = {}
            for table, key, file in con.execute(
                f"SELECT table_name, part, identity FROM {LOADED_FILES}"
            ).fetchall():
                recorded.setdefault(str(table), {})[str(key)] = str(file)
        changed = redaction + tuple(
            t
            for t in own
            if recorded.get(t, {}) != {k: file_identity(f) for k, f in lake.files(t).items()}
        )
        states.append(PartState(name, "stale" if changed else "current", changed))
    return states
