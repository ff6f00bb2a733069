"""Memory stage: what we believe about each person today — daily decay snapshots and the audit."""

from collections.abc import Iterator
from typing import Any

import dagster as dg
import polars as pl

from assets import groups
from assets.config import StageSettings
from assets.handoffs import reads
from assets.metadata import frame_metadata
from assets.partitions import BLOCKING, TENANTS, asset_spec, declared_columns
from assets.resources import MemorypackHome
from pipeline import tables
from pipeline.memory.audit import (
    audit,
    audit_figures,
    promotion_candidates,
)
from pipeline.memory.decay import DecayConfig, as_of_for, snapshot_problems
from pipeline.memory.decay_days import DaySnapshot, snapshots_over
from pipeline.storage.lake import Lake, read_file
from pipeline.tables import COMMENTS

# Each check of a decay snapshot (SPEC §4.2) and what it holds to, per snapshot date.
SNAPSHOT_CHECKS = {
    "confidence_in_range": "Every confidence lies in [0, its memory type's cap] and every "
    "memory type is known (negative ages are counted beside).",
    "every_memory_present": "One row per memory the tenant holds as of the snapshot: none "
    "missing, none twice.",
    "status_consistent": "Each status follows the rules: archived past the type's age limit "
    "(single inferences 30 days, temporaries 48 h), inactive below the type's threshold, else "
    "active.",
}


def _write_if_changed(home: MemorypackHome, key: str, snap: pl.DataFrame) -> bool:
    """Write the snapshot of load date `key` unless the lake holds it already: an identical
    snapshot is not rewritten (the warehouse then has nothing to reload)."""
    path = home.paths.partition("decay_snapshots", key)
    changed = not (path.exists() and read_file(path).equals(snap))
    if changed:
        home.lake.write_partition("decay_snapshots", key, snap)
    return changed


def _snapshot_metadata(home: MemorypackHome, key: str, snap: pl.DataFrame) -> dict[str, Any]:
    figures: dict[str, object] = {
        "as_of": str(as_of_for(key)),
        "by_status": dict(snap.group_by("status").len().sort("status").iter_rows()),
        "mean_confidence_by_type": {
            t: round(float(c), 4)
            for t, c in snap.group_by("memory_type")
            .agg(pl.col("confidence").mean())
            .sort("memory_type")
            .iter_rows()
        },
        "needs_reconfirmation": int(snap["needs_reconfirmation"].sum()),
        "stale": int(snap["stale"].sum()),
        "reinforcement_table": home.lake.exists("memory_reinforcement"),
    }
    return frame_metadata(
        snap,
        figures,
        preview_columns=[
            "tenant_id",
            "memory_id",
            "memory_type",
            "confidence",
            "status",
            "age_days",
        ],
    )


class SnapshotConfig(dg.Config):
    """Which load dates this run snapshots (what the night ingested); none: the tenant's newest."""

    load_dates: list[str] = []  # noqa: RUF012 (a dg.Config field: pydantic copies it)


def _combined(
    results: dict[str, tuple[bool, dict[str, Any]]],
) -> tuple[bool, dict[str, Any]]:
    """One check result over the run's snapshot dates: passes when every date passes; the
    figures of each date are kept under it."""
    failed = sorted(key for key, (passed, _) in results.items() if not passed)
    return not failed, {"failed_dates": failed, **{k: m for k, (_, m) in results.items()}}


@dg.asset(
    partitions_def=TENANTS,
    group_name=groups.MEMORY,
    metadata=declared_columns("decay_snapshots"),
    # What a snapshot reads: the events, and how often consolidation found each statement
    # repeated (it scores the feedback as of each date itself, with the `scoring` settings).
    ins=reads("interactions", "feedback", "memory_statements", "memory_reinforcement"),
    # Recorded per tenant (as they were per load date): a tenant's result never hides another's.
    check_specs=[
        dg.AssetCheckSpec(
            name,
            asset="decay_snapshots",
            blocking=True,
            partitions_def=TENANTS,
            description=text + BLOCKING,
        )
        for name, text in SNAPSHOT_CHECKS.items()
    ],
    description=COMMENTS["decay_snapshots"],
)
def decay_snapshots(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    settings: StageSettings,
    config: SnapshotConfig,
    interactions: pl.LazyFrame,
    feedback: pl.LazyFrame,
    memory_statements: pl.LazyFrame,
    memory_reinforcement: pl.LazyFrame | None,
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """The tenant's snapshot of each load date of the run, and again every later one in the lake.

    A snapshot is a function of the lake and its date: when a run re-does an old date (late
    data), every snapshot from that date on is recomputed as a fresh backfill would make it, so
    the newest one (read by the audit and the packs) reflects the late data in the same run, and
    the decay history has no kink where the late data surfaced. Unchanged snapshots stay as they
    are. A date asked for without data (nothing became known since the date before) is the date
    before's snapshot aged: a night over a long sparse range costs what its data days cost. A
    date neither changed nor asked has no snapshot: its belief is the latest earlier snapshot
    aged to it (`pipeline.memory.decay.aged`), nothing new being known.
    """
    keys = sorted(config.load_dates) or home.lake.partition_keys("interactions")[-1:]
    if not keys:
        raise dg.Failure(description=f"decay_snapshots: tenant {home.tenant} has no load date")
    later = [
        k for k in home.lake.partition_keys("decay_snapshots") if k > keys[0] and k not in keys
    ]
    # A date where nothing became known is the date before's snapshot aged (pipeline.memory.decay_days).
    over = snapshots_over(
        keys + later,
        interactions,
        memory_statements,
        feedback,
        memory_reinforcement,
        settings.stage("decay"),
        settings.stage("scoring"),
    )
    days = {d.key: d for d in over}
    changed = {key: _write_if_changed(home, key, d.snapshot) for key, d in days.items()}
    rewritten = [key for key in later if changed[key]]
    newest = max(days)
    yield dg.MaterializeResult(
        metadata={
            **_snapshot_metadata(home, newest, days[newest].snapshot),
            "snapshot_dates": keys,
            "later_rewritten": rewritten,
            "aged_dates": [key for key, d in days.items() if d.aged_from is not None],
        }
    )
    # Checked: every snapshot this run wrote.
    checked = {key: days[key] for key in keys + rewritten}
    for name, per_date in _check_results(checked, settings.stage("decay")).items():
        passed, metadata = _combined(per_date)
        yield dg.AssetCheckResult(check_name=name, passed=passed, metadata=metadata)


def _check_results(
    checked: dict[str, DaySnapshot], decay: DecayConfig
) -> dict[str, dict[str, tuple[bool, dict[str, Any]]]]:
    """Each snapshot check's result and figures per date checked."""
    problems = {key: snapshot_problems(d.snapshot, decay) for key, d in checked.items()}
    return {
        "confidence_in_range": {
            key: (
                p["confidence_out_of_range"] == 0 and p["unknown_memory_type"] == 0,
                {
                    k: p[k]
                    for k in ("confidence_out_of_range", "unknown_memory_type", "negative_age")
                },
            )
            for key, p in problems.items()
        },
        "every_memory_present": {
            key: (
                d.snapshot.height == d.memories and problems[key]["duplicate_memories"] == 0,
                {
                    "rows": d.snapshot.height,
                    "memories": d.memories,
                    "duplicate_memories": problems[key]["duplicate_memories"],
                },
            )
            for key, d in checked.items()
        },
        "status_consistent": {
            key: (p["status_inconsistent"] == 0, {"rows_inconsistent": p["status_inconsistent"]})
            for key, p in problems.items()
        },
    }


def _snapshot_key(lake: Lake) -> str | None:
    """The newest decay snapshot: the audit describes now, also when a run re-does an old date."""
    available = lake.partition_keys("decay_snapshots")
    return available[-1] if available else None


AUDIT_INS = reads("decay_snapshots", "memory_conflicts", "memory_statements")


@dg.multi_asset(
    specs=[
        asset_spec("memory_audit", groups.MEMORY, list(AUDIT_INS)),
        asset_spec("promotion_candidates", groups.MEMORY, list(AUDIT_INS)),
    ],
    ins=AUDIT_INS,
)
def memory_audit(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    settings: StageSettings,
    decay_snapshots: pl.LazyFrame,
    memory_conflicts: pl.LazyFrame | None,
    memory_statements: pl.LazyFrame,
) -> Iterator[dg.MaterializeResult]:
    lake = home.lake
    key = _snapshot_key(lake)
    if key is None:
        raise dg.Failure(
            "memory_audit: no decay snapshot in the lake yet; materialize decay_snapshots first"
        )
    day = pl.lit(key).str.to_date()
    snap = decay_snapshots.filter(pl.col("snapshot_date") == day).collect()
    conflicts = memory_conflicts
    conflicts = (
        conflicts.select(tables.columns("memory_conflicts")) if conflicts is not None else None
    )
    statements = memory_statements
    audit_config, decay = settings.stage("audit"), settings.stage("decay")
    findings = audit(snap, conflicts, statements, audit_config, decay)
    candidates = promotion_candidates(snap, conflicts, statements, audit_config, decay)
    lake.write("memory_audit", findings)
    lake.write("promotion_candidates", candidates)
    summaries = findings.filter(pl.col("check") == "archived_inferences_summary")[
        "detail"
    ].to_list()
    yield dg.MaterializeResult(
        asset_key="memory_audit",
        metadata=frame_metadata(
            findings,
            {
                "snapshot": key,
                "findings_by_check": audit_figures(findings),
                "promotion_candidates": candidates.height,
                "conflicts_table": conflicts is not None,
                "archive_summary": summaries[:20],
            },
            preview_columns=["tenant_id", "check", "memory_id", "confidence", "detail"],
        ),
    )
    yield dg.MaterializeResult(
        asset_key="promotion_candidates", metadata=frame_metadata(candidates)
    )


@dg.asset_check(
    partitions_def=TENANTS,
    asset="promotion_candidates",
    additional_ins=reads("memory_conflicts"),
    description="Every promotion candidate meets the rule and none is in a conflict.",
)
def promotion_candidates_eligible(
    home: MemorypackHome, settings: StageSettings, memory_conflicts: pl.LazyFrame | None
) -> dg.AssetCheckResult:
    candidates = home.lake.read("promotion_candidates").collect()
    conflicts = memory_conflicts
    conflicted: set[str] = set()
    if conflicts is not None:
        pairs = conflicts.select("memory_id_a", "memory_id_b").collect()
        conflicted = set(pairs["memory_id_a"]) | set(pairs["memory_id_b"])
    bad = candidates.filter(
        (pl.col("memory_type") != "inferred_pattern")
        | (pl.col("repeats") < settings.stage("audit").promotion_min_repeats)
        | pl.col("memory_id").is_in(list(conflicted))
    )
    return dg.AssetCheckResult(
        passed=bad.is_empty(), metadata={"candidates": candidates.height, "ineligible": bad.height}
    )


ASSETS = [decay_snapshots, memory_audit]
CHECKS = [promotion_candidates_eligible]
