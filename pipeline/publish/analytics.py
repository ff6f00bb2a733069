"""The analyst snapshot (SPEC §6): `<home>/analytics.duckdb`, rebuilt from the lake and swapped atomically."""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from pipeline import tables
from pipeline.config import Paths
from pipeline.pii.redactor import Redactor
from pipeline.publish.snapshot_names import spread_in_snapshot
from pipeline.publish.snapshot_redaction import redacting
from pipeline.publish.store import list_versions, tenant_folders
from pipeline.storage.lake import Lake
from pipeline.storage.warehouse import (
    DIGEST,
    LOADED_FILES,
    STORAGE_VERSION,
    Warehouse,
    comment_columns,
    duckdb_config,
)
from pipeline.stores.disk import fsync_path
from pipeline.stores.local import sql_quote
from pipeline.tables import COMMENTS

# The lake tables an analyst snapshot holds, in data order (comments: pipeline.tables).
TABLES: dict[str, str] = {
    name: COMMENTS[name]
    for name in (
        "events",
        "quarantine",
        "ingest_stats",
        "interactions",
        "feedback",
        "memory_statements",
        "feedback_scores",
        "pack_usage",
        "pack_uplift",
        "decay_snapshots",
        "consolidated_summaries",
        "memory_conflicts",
        "few_shot_sets",
        "preference_pairs",
        "dpo_runs",
        "template_history",
        "skill_stats",
        "promotion_candidates",
        "pack_versions",
    )
}
# The warehouse holds these lake tables too (the stages' side tables, which each stage loaded
# into it before the analytics build did it for every tenant at once); the snapshot, a copy of
# the warehouse, holds them as well.
WAREHOUSE_TABLES: dict[str, str] = TABLES | {
    name: COMMENTS[name]
    for name in (
        "memory_embeddings",
        "memory_reinforcement",
        "memory_audit",
        "user_preferences",
        "skill_vectors",
    )
}
# Views: name -> (tables it needs, comment, SQL).
VIEWS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "latest_decay": (
        ("decay_snapshots",),
        "The most recent decay snapshot of each tenant: current confidence of every memory.",
        "SELECT * FROM decay_snapshots QUALIFY as_of = max(as_of) OVER (PARTITION BY tenant_id)",
    ),
    "decay_by_type": (
        ("decay_snapshots",),
        "Mean confidence and active share per snapshot date and memory type (decay curves).",
        "SELECT as_of, tenant_id, memory_type, count(*) AS memories, avg(confidence) AS mean_confidence,"
        " avg(CASE WHEN status = 'active' THEN 1 ELSE 0 END) AS active_share"
        " FROM decay_snapshots GROUP BY ALL ORDER BY ALL",
    ),
    "feedback_daily": (
        ("feedback",),
        "Feedback signals per tenant, day and signal.",
        "SELECT tenant_id, CAST(ts AS DATE) AS day, signal, count(*) AS signals"
        " FROM feedback GROUP BY ALL ORDER BY ALL",
    ),
    "few_shot_coverage": (
        ("interactions", "few_shot_sets"),
        "Per tenant x system x kind: interactions seen, few-shot examples available, mean quality.",
        "WITH seen AS (SELECT tenant_id, system, kind, count(*) AS interactions FROM interactions GROUP BY ALL),"
        " shots AS (SELECT tenant_id, system, kind, count(DISTINCT memory_id) AS examples,"
        " avg(quality_lower) AS mean_quality_lower FROM few_shot_sets GROUP BY ALL)"
        " SELECT seen.*, coalesce(shots.examples, 0) AS examples, shots.mean_quality_lower,"
        " coalesce(shots.examples, 0) > 0 AS covered FROM seen LEFT JOIN shots USING (tenant_id, system, kind)"
        " ORDER BY tenant_id, system, kind",
    ),
    "live_packs": (
        ("pack_versions",),
        "The pack each tenant's apps load right now.",
        "SELECT * FROM pack_versions WHERE is_latest",
    ),
}
# The columns a view computes; a view's other columns are its first table's, described there.
VIEW_COLUMNS: dict[str, dict[str, str]] = {
    "decay_by_type": {
        "memories": "memories of the type in the snapshot",
        "mean_confidence": "their mean confidence, 0 to 1",
        "active_share": "share of them whose status is active, 0 to 1",
    },
    "feedback_daily": {
        "day": "the UTC day of the feedback's ts",
        "signals": "feedback events of the signal that day",
    },
    "few_shot_coverage": {
        "interactions": "interactions of the system × kind",
        "examples": "distinct few-shot examples the packs hold for it",
        "mean_quality_lower": "their mean quality_lower, −1 to 1 (a lower bound, no probability)",
        "covered": "at least one example",
    },
}
CONTENTS_TABLE = "snapshot_contents"
CONTENTS_COLUMNS = {
    "name": "a table or view of this snapshot, or one missing",
    "kind": "table | view | skipped view | missing",
    "rows": "a table's rows (null for a view)",
    "note": "what it holds, or why it is missing",
    "built_at": "when this snapshot was built",
}
# The build's DuckDB memory (DUCKDB_MEMORY in all) between its two files, loaded at the same time:
# the base's rows come through the redaction in slices, the warehouse's stream from the lake.
BASE_MEMORY, WAREHOUSE_MEMORY = "768MiB", "256MiB"
BASE = "analytics-base.duckdb"  # the snapshot's redacted base, in the home's local folder
BASE_STAMP = BASE + ".redaction"  # beside it: the detector, key and format it was made with


@dataclass
class SnapshotReport:
    path: Path
    tables: dict[str, int] = field(default_factory=dict)  # name -> rows
    views: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)  # PII found per kind, in new rows
    seconds: float = 0.0


def _sql(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[object, ...]]:
    """Run and drain (DuckDB 2 refuses new work while a result is still open)."""
    return con.execute(sql).fetchall()


def pack_versions_frame(paths: Paths) -> pl.DataFrame:
    """One row per kept pack version of every tenant (read from the packs folder itself)."""
    rows = []
    for tenant_dir in tenant_folders(paths.packs):
        if paths.tenant is not None and tenant_dir.name != paths.tenant:
            continue
        for info in list_versions(tenant_dir):
            rows.append(
                {
                    "tenant_id": tenant_dir.name,
                    "version": info.version,
                    "as_of": info.as_of,
                    "created_at": info.created_at,
                    "n_memories": info.n_memories,
                    "bytes": info.bytes,
                    "is_latest": info.is_latest,
                    "redacted": info.manifest.get("redactions", {}).get("total"),
                    "dagster_run_id": info.manifest.get("producer", {}).get("dagster_run_id"),
                }
            )
    # The manifests hold times as ISO text: parsed into the declared type below.
    schema = {**tables.schema("pack_versions"), "as_of": pl.String(), "created_at": pl.String()}
    frame = pl.DataFrame(rows, schema=schema)
    return frame.with_columns(
        pl.col("as_of").str.to_datetime(time_zone="UTC", strict=False),
        pl.col("created_at").str.to_datetime(time_zone="UTC", strict=False),
    )


@contextmanager
def _redacted_base(
    paths: Paths, found: Counter[str], report: Callable[[str], None] | None
) -> Iterator[Warehouse]:
    """The snapshot's base: a DuckDB file mirroring the lake's rows redacted, converged like the
    warehouse (only what changed is loaded, so a night redacts only its new rows). A new
    detector, key or storage format makes a new base: its identity is kept next to it. Texts
    no pack analysed are analysed over every core (`AnalysisPool`) until the context ends."""
    redactor = Redactor.for_home(paths, workers=len(os.sched_getaffinity(0)))
    redact = redacting(redactor, found, report)
    base = Warehouse(paths, paths.local / BASE, rows=redact, memory=BASE_MEMORY)
    key = hashlib.sha256(redactor.key).hexdigest()[:16]
    identity = f"{redactor.version} key {key} storage {STORAGE_VERSION} rows {DIGEST}"
    stamp = paths.local / BASE_STAMP
    if not stamp.exists() or stamp.read_text() != identity:
        remove_redacted_base(paths)
        stamp.write_text(identity)
    try:
        yield base
    finally:
        redactor.pool.close()


def remove_redacted_base(paths: Paths) -> None:
    """Delete the snapshot's base (an erasure: deleted rows stay in a DuckDB file's free blocks);
    the next build loads it whole."""
    for name in (BASE, BASE + ".wal", BASE_STAMP):
        (paths.local / name).unlink(missing_ok=True)


def _comment_view_columns(con: duckdb.DuckDBPyConnection, view: str, source: str) -> None:
    """Each column of `view` commented: as VIEW_COLUMNS says, else as lake table `source`
    describes it."""
    query = "SELECT column_name FROM duckdb_columns() WHERE table_name = ?"
    for (column,) in con.execute(query, [view]).fetchall():
        text = VIEW_COLUMNS.get(view, {}).get(column) or tables.table(source).description(column)
        if text:
            _sql(con, f'COMMENT ON COLUMN "{view}"."{column}" IS {sql_quote(text)}')


def _drop_bookkeeping(con: duckdb.DuckDBPyConnection) -> None:
    """What the base keeps for its converges, not for analysts: its record of the lake files and
    its rows' digests."""
    _sql(con, f"DROP TABLE IF EXISTS {LOADED_FILES}")
    for (name,) in _sql(
        con, f"SELECT table_name FROM duckdb_columns() WHERE column_name = '{DIGEST}'"
    ):
        _sql(con, f'ALTER TABLE "{name}" DROP COLUMN {DIGEST}')


def _converge(
    paths: Paths, found: Counter[str], report: Callable[[str], None] | None = None
) -> Warehouse:
    """The warehouse and the redacted base caught up with the lake; returns the base. Two files,
    so two writers at once: the warehouse's loads are DuckDB's own work, the base's mostly its
    redaction; side by side they use both cores. They share the spill folder: DuckDB 2 names its
    temporary files per instance (duckdb#24811)."""
    lake = Lake(paths)
    with (
        ThreadPoolExecutor(1, thread_name_prefix="warehouse") as beside,
        _redacted_base(paths, found, report) as base,
    ):
        warehouse = Warehouse(paths, memory=WAREHOUSE_MEMORY)
        converged = beside.submit(warehouse.converge, lake, WAREHOUSE_TABLES)
        base.converge(lake, WAREHOUSE_TABLES)
        converged.result()
    return base


def _write_contents(
    con: duckdb.DuckDBPyConnection, notes: list[tuple[str, str, int | None, str]], began: datetime
) -> None:
    """The snapshot's own table of contents: each table and view, what was missing, when."""
    _sql(
        con,
        f'CREATE OR REPLACE TABLE "{CONTENTS_TABLE}" (name VARCHAR, kind VARCHAR, "rows" BIGINT, note VARCHAR,'
        " built_at TIMESTAMPTZ)",
    )
    con.executemany(
        f'INSERT INTO "{CONTENTS_TABLE}" VALUES (?, ?, ?, ?, ?)',
        [(*note, began) for note in notes],
    ).fetchall()
    _sql(
        con,
        f"COMMENT ON TABLE \"{CONTENTS_TABLE}\" IS 'What this snapshot holds, what was missing, and when it was built.'",
    )
    for column, text in CONTENTS_COLUMNS.items():
        _sql(con, f'COMMENT ON COLUMN "{CONTENTS_TABLE}"."{column}" IS {sql_quote(text)}')


def build_snapshot(paths: Paths, progress: Callable[[str], None] | None = None) -> SnapshotReport:
    """Build a complete snapshot next to the live one, then replace it in one rename.

    The warehouse and the snapshot's redacted base first converge to the lake: they load only
    what changed since (a load date's new partitions; of a tenant's rewritten tables, the rows
    they gained or lost), so a night neither re-reads nor re-redacts the history. The snapshot
    is a copy of the base (in a format 1.x clients read; only redacted rows, in its free blocks
    too, where a lake row leaves at most its 64-bit hash, the column dropped). An analyst
    holding `analytics.duckdb` open keeps reading the old file (its inode lives on); the pipeline
    never opens the live file for writing, so it can never be blocked by one. The redaction's
    progress goes to `progress`, a line every PROGRESS_EVERY_SECONDS.
    """
    began = datetime.now(UTC)
    paths.local.mkdir(parents=True, exist_ok=True)
    target = paths.analytics
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    report, found = SnapshotReport(target), Counter[str]()
    try:
        base = _converge(paths, found, progress)
        shutil.copyfile(base.path, temp)
        con = duckdb.connect(str(temp), config=duckdb_config(paths))
        try:
            _drop_bookkeeping(con)
            # Names found since a row entered the base leave it too (the base keeps old rows).
            redactor = Redactor.for_home(paths)
            tenants = Lake(paths).tenants("pii_names")
            found.update({"person": sum(spread_in_snapshot(con, redactor, tenants).values())})
            found = +found  # nothing found is no key
            assert base.rows is not None
            con.register("_versions", base.rows(pack_versions_frame(paths).to_arrow()))
            _sql(con, 'CREATE OR REPLACE TABLE "pack_versions" AS SELECT * FROM _versions')
            con.unregister("_versions")
            present = {r[0] for r in _sql(con, "SELECT table_name FROM duckdb_tables()")}
            notes: list[tuple[str, str, int | None, str]] = []
            for name, comment in WAREHOUSE_TABLES.items():  # every table the snapshot holds
                if name not in present:
                    if name in TABLES:  # an analysts' table; the others are extras
                        report.missing.append(name)
                        notes.append((name, "missing", None, "not in the lake yet (stage not run)"))
                    continue
                _sql(con, f'COMMENT ON TABLE "{name}" IS {sql_quote(comment)}')
                comment_columns(con, name)
                report.tables[name] = int(str(_sql(con, f'SELECT count(*) FROM "{name}"')[0][0]))
                notes.append((name, "table", report.tables[name], comment))
            report.redactions = dict(sorted(found.items()))
            for view, (needs, comment, sql) in VIEWS.items():
                absent = [t for t in needs if t not in report.tables]
                if absent:
                    notes.append((view, "skipped view", None, f"needs {', '.join(absent)}"))
                    continue
                _sql(con, f'CREATE OR REPLACE VIEW "{view}" AS {sql}')
                _sql(con, f'COMMENT ON VIEW "{view}" IS {sql_quote(comment)}')
                _comment_view_columns(con, view, needs[0])
                report.views.append(view)
                notes.append((view, "view", None, comment))
            _write_contents(con, notes, began)
            _sql(con, "CHECKPOINT")
        finally:
            con.close()
        fsync_path(temp)
        os.replace(temp, target)
        fsync_path(target.parent)
    finally:
        for path in (temp, temp.with_name(temp.name + ".wal")):
            path.unlink(missing_ok=True)
    report.seconds = (datetime.now(UTC) - began).total_seconds()
    return report
