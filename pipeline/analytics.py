"""The analyst snapshot (SPEC §6): `<home>/analytics.duckdb`, rebuilt from the lake and swapped atomically."""

from __future__ import annotations

import os
import shutil
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import polars as pl
import pyarrow as pa

from pipeline import tables
from pipeline.config import Paths
from pipeline.pack.disk import fsync_path
from pipeline.pack.store import list_versions, tenant_folders
from pipeline.storage import Lake
from pipeline.tables import COMMENTS
from pipeline.warehouse import LOADED_FILES, Warehouse, duckdb_config, lake_source, sql_quote

if TYPE_CHECKING:
    from pipeline.pii.redactor import Redactor

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
CONTENTS_TABLE = "snapshot_contents"
# Rows of a snapshot table redacted at a time. At 1,000,000 interactions the build peaks at
# 2,968 MiB with 250,000 and 2,790 MiB with 50,000 rows, which take a third longer (more cache flushes).
REDACT_ROWS = 250_000


@dataclass
class SnapshotReport:
    path: Path
    tables: dict[str, int] = field(default_factory=dict)  # name -> rows
    views: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)  # PII found per kind
    seconds: float = 0.0


def _sql(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[object, ...]]:
    """Run and drain (DuckDB 2 refuses new work while a result is still open)."""
    return con.execute(sql).fetchall()


def _load_from_lake(con: duckdb.DuckDBPyConnection, paths: Paths, name: str) -> bool:
    """Create table `name` from its lake files; False when the lake has none yet."""
    files = Lake(paths).files(name)
    if not files:
        return False
    with lake_source(con, list(files.values()), hive="" not in files) as source:
        _sql(con, f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM {source}')
    return True


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


# duckdb 2.0 writes storage version 69 by default, which DuckDB 1.x clients (e.g. the 1.5 CLI) cannot
# open; analysts use any client (SPEC §6), so the snapshot is written in a 1.x storage format.
ANALYTICS_STORAGE_VERSION = "v1.4.0"


def _copy_for_older_clients(paths: Paths, source: Path, target: Path) -> None:
    """Copy a database (tables, views, comments) into a file DuckDB 1.x clients can read."""
    with duckdb.connect(config=duckdb_config(paths)) as con:
        _sql(con, f"ATTACH {sql_quote(str(source))} AS src (READ_ONLY)")
        storage = sql_quote(ANALYTICS_STORAGE_VERSION)
        _sql(con, f"ATTACH {sql_quote(str(target))} AS dst (STORAGE_VERSION {storage})")
        _sql(con, "COPY FROM DATABASE src TO dst")
        _sql(con, "DETACH dst")


def _redact_tables(con: duckdb.DuckDBPyConnection, redactor: Redactor) -> dict[str, int]:
    """PII redaction of every table of the snapshot, as in a pack (SPEC §5): text columns
    redacted, PII-looking ids pseudonymized with the same key (so analysts can join them with the
    packs' ids), raw line bytes of quarantined lines cleared (their text is redacted in `raw`).
    Texts already seen by a pack or an earlier snapshot come from the redactor's cache."""
    found: Counter[str] = Counter()
    for table in [
        str(r[0]) for r in _sql(con, "SELECT table_name FROM duckdb_tables() ORDER BY 1")
    ]:
        found.update(_redact_table(con, redactor, table))
    return dict(sorted(found.items()))


def _redact_table(con: duckdb.DuckDBPyConnection, redactor: Redactor, table: str) -> Counter[str]:
    """Rewrite `table` with its texts redacted, streaming REDACT_ROWS rows at a time into a new
    table that then replaces it: memory is one slice's, and no row is addressed by position (an
    UPDATE keyed on `rowid` slice by slice left rows unredacted at 1M interactions)."""
    from pipeline.pack.content import DIGEST_COLUMNS, ENUM_COLUMNS, ID_COLUMNS

    columns = _sql(
        con,
        f"SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = {sql_quote(table)}",
    )
    blobs = [str(c) for c, t in columns if t == "BLOB"]
    texts = [
        str(c)
        for c, t in columns
        if t in ("VARCHAR", "VARCHAR[]") and c not in ENUM_COLUMNS | DIGEST_COLUMNS | {"tenant_id"}
    ]
    found: Counter[str] = Counter()
    if not texts and not blobs:
        return found
    tenant = ["tenant_id"] if any(c == "tenant_id" for c, _ in columns) else []
    rewritten = f"_redacted_{table}"
    _sql(con, f'CREATE TABLE "{rewritten}" AS FROM "{table}" LIMIT 0')
    written = 0
    with con.cursor() as reader:
        for batch in reader.sql(f'FROM "{table}"').to_arrow_reader(REDACT_ROWS):
            rows = pa.Table.from_batches([batch])
            written += rows.num_rows
            for column in blobs:
                rows = _set_column(rows, column, pa.nulls(rows.num_rows, pa.binary()))
            if texts:
                frame = pl.from_arrow(rows.select([*tenant, *texts]))
                assert isinstance(frame, pl.DataFrame)
                redacted, counts = redactor.frame(frame, identifiers=ID_COLUMNS)
                found.update(counts)
                for column in texts:
                    rows = _set_column(rows, column, redacted[column].to_arrow())
            con.register("_rows", rows)
            _sql(con, f'INSERT INTO "{rewritten}" SELECT * FROM _rows')
            con.unregister("_rows")
            redactor.flush()  # the slice's analyses go to the cache, not into the next slice's memory
    expected = int(str(_sql(con, f'SELECT count(*) FROM "{table}"')[0][0]))
    if written != expected:  # never replace a table by a shorter one
        raise RuntimeError(f"redacting {table}: {written} rows rewritten of {expected}")
    _sql(con, f'DROP TABLE "{table}"')
    _sql(con, f'ALTER TABLE "{rewritten}" RENAME TO "{table}"')
    return found


def _set_column(rows: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    return rows.set_column(rows.schema.get_field_index(name), name, values)


def build_snapshot(paths: Paths) -> SnapshotReport:
    """Build a complete snapshot next to the live one, then replace it in one rename.

    The warehouse first converges to the lake: it reloads only the lake files that changed since
    (a tenant's tables, a load date's partitions), so a night does not re-read the history. The
    snapshot starts as a copy of it; a table it lacks is loaded from the lake. An analyst
    holding `analytics.duckdb` open keeps reading the old file (its inode lives on); the pipeline
    never opens the live file for writing, so it can never be blocked by one.
    """
    began = datetime.now(UTC)
    paths.local.mkdir(parents=True, exist_ok=True)
    target = paths.analytics
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    readable = temp.with_name(temp.name.replace(".tmp", ".v1.tmp"))
    report = SnapshotReport(target)
    try:
        Warehouse(paths).converge(Lake(paths), WAREHOUSE_TABLES)
        shutil.copyfile(paths.warehouse, temp)
        con = duckdb.connect(str(temp), config=duckdb_config(paths))
        try:
            _sql(con, f"DROP TABLE IF EXISTS {LOADED_FILES}")  # the warehouse's bookkeeping
            present = {r[0] for r in _sql(con, "SELECT table_name FROM duckdb_tables()")}
            notes: list[tuple[str, str, int | None, str]] = []
            for name, comment in WAREHOUSE_TABLES.items():  # every table the snapshot holds
                source: str | None = None
                if name == "pack_versions":
                    con.register("pack_versions_frame", pack_versions_frame(paths).to_arrow())
                    source = "pack_versions_frame"
                elif name not in present and not _load_from_lake(con, paths, name):
                    if name in TABLES:  # an analysts' table; the others are extras
                        report.missing.append(name)
                        notes.append((name, "missing", None, "not in the lake yet (stage not run)"))
                    continue
                if source is not None:
                    _sql(con, f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM {source}')
                report.tables[name] = int(str(_sql(con, f'SELECT count(*) FROM "{name}"')[0][0]))
                notes.append((name, "table", report.tables[name], comment))
            con.unregister("pack_versions_frame")
            from pipeline.pii.redactor import Redactor

            report.redactions = _redact_tables(con, Redactor.for_home(paths))
            for name in report.tables:  # after the redaction, which rewrites the tables
                _sql(con, f'COMMENT ON TABLE "{name}" IS {sql_quote(WAREHOUSE_TABLES[name])}')
            for view, (needs, comment, sql) in VIEWS.items():
                absent = [t for t in needs if t not in report.tables]
                if absent:
                    notes.append((view, "skipped view", None, f"needs {', '.join(absent)}"))
                    continue
                _sql(con, f'CREATE OR REPLACE VIEW "{view}" AS {sql}')
                _sql(con, f'COMMENT ON VIEW "{view}" IS {sql_quote(comment)}')
                report.views.append(view)
                notes.append((view, "view", None, comment))
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
            _sql(con, "CHECKPOINT")
        finally:
            con.close()
        _copy_for_older_clients(paths, temp, readable)
        fsync_path(readable)
        os.replace(readable, target)
        fsync_path(target.parent)
    finally:
        for leftover in (temp, readable):
            for path in (leftover, leftover.with_name(leftover.name + ".wal")):
                path.unlink(missing_ok=True)
    report.seconds = (datetime.now(UTC) - began).total_seconds()
    return report
