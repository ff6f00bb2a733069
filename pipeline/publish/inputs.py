"""Reading a pack's inputs from the lake: scans of every table as of the run, one tenant's rows at
a time."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import polars as pl

from pipeline.ingest.folder import TYPED_TABLES
from pipeline.pii.redactor import Redactor
from pipeline.publish.content import PackInputs
from pipeline.storage.lake import Lake, read_file, scan_file
from pipeline.storage.vectors import EmbeddingCache

# Lake tables a pack reads; any may be absent while a stage has not landed yet.
INPUT_TABLES = (
    "interactions",
    "memory_statements",
    "feedback_scores",
    "decay_snapshots",
    "memory_embeddings",
    "consolidated_summaries",
    "memory_conflicts",
    "few_shot_sets",
    "skill_stats",
    "user_preferences",
    "skill_vectors",
    "template_history",
    "dpo_runs",
)

# What the calls' receipts measured (SPEC §4.9): read when present, and not counted among the
# manifest's inputs, so a night without receipts builds the very pack it built before them.
USAGE_TABLES = ("pack_usage", "pack_uplift")


def _decay_snapshot(lake: Lake, run_date: date) -> tuple[pl.LazyFrame | None, str | None]:
    """The latest decay snapshot taken on or before the run's date."""
    keys = [k for k in lake.partition_keys("decay_snapshots") if k <= run_date.isoformat()]
    if keys:
        return scan_file(lake.paths.partition("decay_snapshots", keys[-1])), keys[-1]
    if lake.paths.table("decay_snapshots").exists():
        frame = read_file(lake.paths.table("decay_snapshots"))
        if "as_of" in frame.columns and frame.height:
            limit = datetime.combine(run_date + timedelta(days=1), datetime.min.time())
            eligible = frame.filter(pl.col("as_of").dt.replace_time_zone(None) <= limit)
            if eligible.height:
                latest = eligible["as_of"].max()
                return eligible.filter(pl.col("as_of") == latest).lazy(), str(latest)
        return frame.lazy(), None
    return None, None


def load_inputs(lake: Lake, as_of: datetime) -> PackInputs:
    """Scans of every pack input; records the ones that are not in the lake yet."""
    run_date = (as_of - timedelta(days=1)).date()
    tables: dict[str, pl.LazyFrame] = {}
    missing: list[str] = []
    snapshot_key = None
    for name in INPUT_TABLES:
        frame: pl.LazyFrame | None = None
        if name == "decay_snapshots":
            frame, snapshot_key = _decay_snapshot(lake, run_date)
        elif lake.exists(name):
            frame = lake.read(name)
        if frame is None:
            missing.append(name)
            continue
        if name in ("interactions", "memory_statements") and "load_date" in frame.collect_schema():
            frame = frame.filter(pl.col("load_date").cast(pl.Date) <= run_date)
        tables[name] = frame
    tables |= {name: lake.read(name) for name in USAGE_TABLES if lake.exists(name)}
    inputs = PackInputs(as_of, tables, missing, snapshot_key)
    inputs.redactor = Redactor.for_home(lake.paths)
    inputs.models_dir = lake.paths.models / "embeddings"
    if "memory_embeddings" in tables:
        inputs.cache = EmbeddingCache(lake.paths.embedding_cache)
    if lake.paths.tenant is not None:  # a tenant's run: its own tables, never the shared ones
        inputs.load_dates, inputs.event_counts = _own_counts(lake, run_date)
        return inputs
    if lake.exists("ingest_stats"):
        stats = lake.read("ingest_stats").collect()
        stats = stats.filter(pl.col("load_date").cast(pl.Date) <= run_date)
        inputs.load_dates = sorted(str(d) for d in stats["load_date"].unique().to_list())
        inputs.ingest_totals = {
            c: int(stats[c].sum())
            for c in ("lines_read", "accepted", "duplicates", "quarantined")
            if c in stats.columns
        }
    if lake.exists("events"):
        counts = (
            lake.read("events")
            .filter(pl.col("load_date").cast(pl.Date) <= run_date)
            .group_by("tenant_id", "event_type")
            .len()
            .collect()
        )
        for tenant, event_type, n in counts.iter_rows():
            inputs.event_counts.setdefault(tenant, {})[event_type] = int(n)
    return inputs


def _own_counts(lake: Lake, run_date: date) -> tuple[list[str], dict[str, dict[str, int]]]:
    """The tenant's load dates and events by type up to `run_date`, from its typed tables."""
    dates: set[str] = set()
    counts: dict[str, dict[str, int]] = {}
    for name, (kind, _) in TYPED_TABLES.items():
        if not lake.exists(name):
            continue
        frame = (
            lake.read(name)
            .filter(pl.col("load_date").cast(pl.Date) <= run_date)
            .select("tenant_id", "load_date")
            .collect()
        )
        dates |= {str(d) for d in frame["load_date"].unique().to_list()}
        for tenant, n in frame.group_by("tenant_id").len().iter_rows():
            counts.setdefault(tenant, {})[kind.value] = int(n)
    return sorted(dates), counts


def ensure_columns(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Add any guaranteed column the upstream table does not (yet) have, as nulls."""
    extra = [
        pl.lit(None, dtype=dtype).alias(c) for c, dtype in schema.items() if c not in frame.columns
    ]
    return frame.with_columns(extra) if extra else frame


def tenant_rows(
    inputs: PackInputs, name: str, tenant: str, schema: dict[str, pl.DataType]
) -> pl.DataFrame:
    frame = inputs.rows(name, tenant)
    if frame is None:
        return pl.DataFrame(schema=schema)
    return ensure_columns(frame, schema)
