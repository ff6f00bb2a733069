"""The analyst snapshot (SPEC §6): `<home>/analytics.duckdb`, rebuilt from the lake and swapped atomically."""

from __future__ import annotations

import logging
import os
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import polars as pl

from pipeline import tables
from pipeline.config import Paths
from pipeline.errors import one_line
from pipeline.pii.redactor import Redactor
from pipeline.publish.snapshot_names import spread_in_snapshot
from pipeline.publish.snapshot_parts import (
    INGEST_TABLES,
    PartState,
    build_part,
    part_path,
    part_states,
)
from pipeline.publish.snapshot_redaction import redacting
from pipeline.publish.store import list_versions, tenant_folders
from pipeline.storage.lake import Lake
from pipeline.storage.warehouse import (
    DIGEST,
    Warehouse,
    comment_columns,
    duckdb_config,
)
from pipeline.stores.disk import fsync_path
from pipeline.stores.local import sql_quote
from pipeline.tables import COMMENTS

log = logging.getLogger(__name__)

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
    "name": "a table or view of this snapshot, one missing, or a part (`part <tenant>`) not current",
    "kind": "table | view | skipped view | missing | stale part | missing part",
    "rows": "a table's rows (null for a view)",
    "note": "what it holds, or why it is missing",
    "built_at": "when this snapshot was built",
}
# The build's DuckDB memory (DUCKDB_MEMORY in all) between its two files, written at the same
# time: the snapshot's tables copied from the parts, the warehouse's streamed from the lake.
SNAPSHOT_MEMORY, WAREHOUSE_MEMORY = "768MiB", "256MiB"
LEGACY_BASE = "analytics-base.duckdb"  # the build's one redacted base before the parts


@dataclass
class SnapshotReport:
    path: Path
    tables: dict[str, int] = field(default_factory=dict)  # name -> rows
    views: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    # PII found per kind: in the parts this build made, and names spread into ingest's part
    redactions: dict[str, int] = field(default_factory=dict)
    parts: list[PartState] = field(default_factory=list)
    texts_analysed: int = 0  # texts the build sent to the NER: none, the parts hold them redacted
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


def remove_legacy_base(paths: Paths) -> None:
    """Delete the single redacted base the build kept before the tenants' parts replaced it."""
    for name in (LEGACY_BASE, LEGACY_BASE + ".wal", LEGACY_BASE + ".redaction"):
        (paths.local / name).unlink(missing_ok=True)


def _comment_view_columns(con: duckdb.DuckDBPyConnection, view: str, source: str) -> None:
    """Each column of `view` commented: as VIEW_COLUMNS says, else as lake table `source`
    describes it."""
    query = "SELECT column_name FROM duckdb_columns() WHERE table_name = ?"
    for (column,) in con.execute(query, [view]).fetchall():
        text = VIEW_COLUMNS.get(view, {}).get(column) or tables.table(source).description(column)
        if text:
            _sql(con, f'COMMENT ON COLUMN "{view}"."{column}" IS {sql_quote(text)}')


def _assemble(
    con: duckdb.DuckDBPyConnection, paths: Paths, states: list[PartState], tables: list[str]
) -> None:
    """Each table of the snapshot: the union of the parts' (read-only; their bookkeeping and
    their rows' digests left out). A part missing adds nothing."""
    held = [s.name for s in states if s.state != "missing"]
    for i, name in enumerate(held):
        _sql(con, f"ATTACH {sql_quote(str(part_path(paths, name)))} AS part{i} (READ_ONLY)")
    present = set(
        _sql(
            con, "SELECT database_name, table_name FROM duckdb_tables() WHERE schema_name = 'main'"
        )
    )
    for table in tables:
        selects = [
            f'SELECT * EXCLUDE ({DIGEST}) FROM part{i}."{table}"'
            for i in range(len(held))
            if (f"part{i}", table) in present
        ]
        if selects:
            _sql(
                con, f'CREATE OR REPLACE TABLE "{table}" AS ' + " UNION ALL BY NAME ".join(selects)
            )
    for i in range(len(held)):
        _sql(con, f"DETACH part{i}")


def _parts_notes(states: list[PartState]) -> list[tuple[str, str, int | None, str]]:
    """A line of the contents per part that is not current: why its rows are old or absent."""
    notes: list[tuple[str, str, int | None, str]] = []
    for s in states:
        if s.state == "stale":
            note = f"the previous night's rows: changed since in {', '.join(s.changed)}"
            notes.append((f"part {s.name}", "stale part", None, note))
        elif s.state == "missing":
            notes.append((f"part {s.name}", "missing part", None, "its rows are not here yet"))
    return notes


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


# The states of a part that a build outside the night makes again (`PartState`).
PART_STATES = ("missing", "stale")


def make_parts(
    paths: Paths,
    found: Counter[str],
    progress: Callable[[str], None] | None,
    done: list[int],
    states: tuple[str, ...] = PART_STATES,
) -> None:
    """Every part in one of `states` made or caught up with the lake, here, counting what their
    redaction finds. A part that cannot be made stays as it was (the build names it), with a
    line for a person: one tenant's rows never stop the snapshot."""
    cores = len(os.sched_getaffinity(0))
    for state in part_states(paths, WAREHOUSE_TABLES):
        if state.state in states:
            try:
                part = build_part(paths, state.name, WAREHOUSE_TABLES, progress, done, cores)
            except Exception as error:  # reported; the snapshot goes on without it
                log.warning("analytics part %s not made: %s", state.name, one_line(error))
                continue
            found.update(part.redactions)


def build_snapshot(
    paths: Paths, progress: Callable[[str], None] | None = None, parts_made: bool = False
) -> SnapshotReport:
    """Build a complete snapshot next to the live one, then replace it in one rename.

    The warehouse converges to the lake (it loads only what changed since) while the snapshot's
    tables are put together from the redacted parts of the tenants and of ingest
    (`snapshot_parts`). With `parts_made` (the night: the tenant runs and the ingest run made
    them) the build analyses no text a run analysed: a stale part (its run failed after its lake
    changed) keeps its previous rows, and only a part this host never made (an upgrade, or a
    tenant whose runs ran on another host of an S3 home) is made here, so no tenant's rows are
    left out. Without it, every part not current is made first (`make_parts`). A part still
    not current is named in `report.parts` and the snapshot's contents. The snapshot is a new file of redacted rows only (in a format 1.x clients read). An
    analyst holding `analytics.duckdb` open keeps reading the old file (its inode lives on); the
    pipeline never opens the live file for writing, so it can never be blocked by one.
    """
    began = datetime.now(UTC)
    paths.local.mkdir(parents=True, exist_ok=True)
    remove_legacy_base(paths)
    target = paths.analytics
    temp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    report, found = SnapshotReport(target), Counter[str]()
    redactor = Redactor.for_home(paths)  # names and pack_versions' ids only: no text to analyse
    done = [0]  # rows redacted, for the progress lines
    try:
        make_parts(paths, found, progress, done, ("missing",) if parts_made else PART_STATES)
        report.parts = part_states(paths, WAREHOUSE_TABLES)
        with ThreadPoolExecutor(1, thread_name_prefix="warehouse") as beside:
            warehouse = Warehouse(paths, memory=WAREHOUSE_MEMORY)
            converged = beside.submit(warehouse.converge, Lake(paths), WAREHOUSE_TABLES)
            con = duckdb.connect(str(temp), config=duckdb_config(paths, SNAPSHOT_MEMORY))
            try:
                _assemble(con, paths, report.parts, list(WAREHOUSE_TABLES))
                # Each tenant's part spread its pack's names in its run; ingest's part was made
                # before tonight's packs found theirs, so the build spreads them there.
                tenants = Lake(paths).tenants("pii_names")
                spread = spread_in_snapshot(con, redactor, tenants, only=INGEST_TABLES)
                found.update({"person": sum(spread.values())})
                found = +found  # nothing found is no key
                redact = redacting(redactor, Counter(), progress, done)
                versions = redact(pack_versions_frame(paths).to_arrow())
                con.register("_versions", versions)
                _sql(con, 'CREATE OR REPLACE TABLE "pack_versions" AS SELECT * FROM _versions')
                con.unregister("_versions")
                report.redactions = dict(sorted(found.items()))
                _describe(con, report, began)
            finally:
                con.close()
            converged.result()
        report.texts_analysed = redactor.analysed
        fsync_path(temp)
        os.replace(temp, target)
        fsync_path(target.parent)
    finally:
        redactor.pool.close()
        for path in (temp, temp.with_name(temp.name + ".wal")):
            path.unlink(missing_ok=True)
    report.seconds = (datetime.now(UTC) - began).total_seconds()
    return report


def _describe(con: duckdb.DuckDBPyConnection, report: SnapshotReport, began: datetime) -> None:
    """Comments on every table, the views, and the snapshot's contents."""
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
    _write_contents(con, notes + _parts_notes(report.parts), began)
    _sql(con, "CHECKPOINT")
