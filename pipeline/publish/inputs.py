"""Reading one tenant's pack inputs from the lake: scans of its folders of every table as of the
run."""

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


def load_inputs(lake: Lake, tenant: str, as_of: datetime) -> PackInputs:
    """Scans of every pack input of `tenant`, read from its own folders (`tenant_id=<tenant>`) of
    the lake whatever view `lake` has; records the tables that are not in the lake yet."""
    if lake.paths.tenant not in (None, tenant):
        raise ValueError(f"{tenant}'s pack inputs read from {lake.paths.tenant}'s view of the lake")
    lake = Lake(lake.paths.for_tenant(tenant))
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
    inputs = PackInputs(tenant, as_of, tables, missing, snapshot_key)
    inputs.redactor = Redactor.for_home(lake.paths)
    inputs.models_dir = lake.paths.models / "embeddings"
    if "memory_embeddings" in tables:
        inputs.cache = EmbeddingCache(lake.paths.embedding_cache)
    # Its own typed tables, never ingest's shared ones (which hold every tenant's rows).
    inputs.load_dates, inputs.event_counts = _own_counts(lake, run_date)
    return inputs


def _own_counts(lake: Lake, run_date: date) -> tuple[list[str], dict[str, int]]:
    """The tenant's load dates and events by type up to `run_date`, from its typed tables."""
    dates: set[str] = set()
    counts: dict[str, int] = {}
    for name, (kind, _) in TYPED_TABLES.items():
        if not lake.exists(name):
            continue
        frame = (
            lake.read(name)
            .filter(pl.col("load_date").cast(pl.Date) <= run_date)
            .select("load_date")
            .collect()
        )
        dates |= {str(d) for d in frame["load_date"].unique().to_list()}
        if frame.height:
            counts[kind.value] = frame.height
    return sorted(dates), counts
