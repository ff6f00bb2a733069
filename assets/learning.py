"""Learning assets: feedback scores, daily decay snapshots, the memory audit and skill statistics."""

import time
from collections.abc import Iterator
from typing import Any

import dagster as dg
import polars as pl

from assets import groups
from assets.metadata import frame_metadata
from assets.partitions import DAILY, check_per_partition, daily_check
from assets.resources import MemorypackHome
from pipeline import contracts
from pipeline import skill_stats as skills
from pipeline.audit import (
    CONFLICT_SCHEMA,
    AuditConfig,
    audit,
    audit_figures,
    promotion_candidates,
)
from pipeline.decay import (
    DEFAULT_DECAY,
    as_of_for,
    known_memory_count,
    snapshot,
    snapshot_problems,
)
from pipeline.scoring import (
    DEFAULT_SCORING,
    compute_scores,
    deduplicate_votes,
    matched_feedback,
    orphan_feedback,
)
from pipeline.storage import Lake

SNAPSHOT_CHECKS = ("confidence_in_range", "every_memory_present", "status_consistent")
COMMENTS = {
    "feedback_scores": "Per memory: votes per signal, smoothed quality_score, Wilson quality_lower (rank by it), reputation.",
    "decay_snapshots": "Point-in-time confidence, status and flags of every memory, one partition per day (as_of = next 00:00 UTC).",
    "memory_audit": "Monthly review findings of the latest snapshot: re-check, stale patterns, archive summary, conflicts, promotions.",
    "promotion_candidates": "Inferred patterns that could become confirmed ones: listed for a person to confirm, never applied.",
    "skill_stats": "Per tenant × user × skill: usage, votes, positive share, EMA confidence (rate 0.1), mean reward.",
    "user_preferences": "Per tenant × user: preference vector in the skill-vector space, moved by votes (rate 0.1), unit length.",
    "skill_vectors": "Per tenant × skill: mean embedding of its interactions (one-hot when no embeddings), unit length.",
}


def _inputs(lake: Lake) -> tuple[pl.LazyFrame, pl.LazyFrame, pl.LazyFrame]:
    return (
        lake.read_or_empty("interactions", contracts.INTERACTION_SCHEMA),
        lake.read_or_empty("memory_statements", contracts.MEMORY_SCHEMA),
        lake.read_or_empty("feedback", contracts.FEEDBACK_SCHEMA),
    )


def _optional(lake: Lake, name: str) -> pl.LazyFrame | None:
    """A table another stage owns and may not have produced yet (then: treated as empty)."""
    return lake.read(name) if lake.exists(name) else None


def _refresh(home: MemorypackHome, name: str) -> None:
    home.warehouse.refresh(name, home.lake, comment=COMMENTS[name])


# ---------------------------------------------------------------------------------------- scores


@dg.asset(
    group_name=groups.FEEDBACK,
    deps=["interactions", "feedback", "memory_statements"],
    description=COMMENTS["feedback_scores"],
)
def feedback_scores(
    context: dg.AssetExecutionContext, home: MemorypackHome
) -> dg.MaterializeResult:
    lake = home.lake
    interactions, statements, feedback = _inputs(lake)
    started = time.perf_counter()
    scores = compute_scores(interactions, statements, feedback, DEFAULT_SCORING)
    seconds = time.perf_counter() - started
    matched = matched_feedback(interactions, statements, feedback)
    n_matched = matched.select(pl.len()).collect().item()
    n_counted = deduplicate_votes(matched).select(pl.len()).collect().item()
    orphans = orphan_feedback(interactions, statements, feedback)
    if orphans.height:
        context.log.warning(f"{orphans.height} feedback events target no known memory; not scored")
    lake.write("feedback_scores", scores)
    _refresh(home, "feedback_scores")
    voted = scores.filter(pl.col("n_feedback") > 0)
    return dg.MaterializeResult(
        metadata=frame_metadata(
            scores.sort("quality_lower", descending=True),
            {
                "memories": scores.height,
                "memories_with_feedback": voted.height,
                "feedback_events_matched": int(n_matched),
                "duplicate_votes_ignored": int(n_matched - n_counted),
                "orphan_feedback": orphans.height,
                "with_correction": int(scores["has_correction"].sum()),
                "mean_quality_score_voted": round(float(voted["quality_score"].mean() or 0.0), 4),
                "seconds": round(seconds, 3),
            },
            preview_columns=[
                "tenant_id",
                "memory_id",
                "n_feedback",
                "quality_score",
                "quality_lower",
                "naive_score",
            ],
        )
    )


@dg.asset_check(
    asset=feedback_scores,
    blocking=True,
    description="Scores in [−1, 1]; reputation 1.0 without votes.",
)
def feedback_scores_in_range(home: MemorypackHome) -> dg.AssetCheckResult:
    scores = home.lake.read("feedback_scores").collect()
    w = DEFAULT_SCORING.reputation_weight
    bad = scores.select(
        quality=(~pl.col("quality_score").is_between(-1, 1)).sum(),
        lower=(~pl.col("quality_lower").is_between(-1, 1)).sum(),
        lower_above_score=(pl.col("quality_lower") > pl.col("quality_score") + 1e-12).sum(),
        reputation=(~pl.col("reputation").is_between(1 - w, 1 + w)).sum(),
        reputation_without_votes=(
            (pl.col("n_feedback") == 0) & (pl.col("reputation") != 1.0)
        ).sum(),
    ).row(0, named=True)
    return dg.AssetCheckResult(
        passed=not any(bad.values()), metadata={f"rows_bad_{k}": int(v) for k, v in bad.items()}
    )


@dg.asset_check(
    asset=feedback_scores, blocking=True, description="One row per interaction and statement."
)
def feedback_scores_one_row_per_memory(home: MemorypackHome) -> dg.AssetCheckResult:
    lake = home.lake
    interactions, statements, _ = _inputs(lake)
    expected = sum(int(f.select(pl.len()).collect().item()) for f in (interactions, statements))
    scores = lake.read("feedback_scores").select("tenant_id", "memory_id").collect()
    duplicates = int(scores.is_duplicated().sum())
    return dg.AssetCheckResult(
        passed=scores.height == expected and duplicates == 0,
        metadata={"rows": scores.height, "memories": expected, "duplicate_keys": duplicates},
    )


# ------------------------------------------------------------------------------------- snapshots


def _snapshot_one(home: MemorypackHome, key: str) -> tuple[pl.DataFrame, int, bool]:
    """The snapshot of load date `key`, the memories it must hold, and whether it changed: an
    identical snapshot is not rewritten (the warehouse then has nothing to reload)."""
    lake = home.lake
    interactions, statements, feedback = _inputs(lake)
    as_of = as_of_for(key)
    reinforcement = _optional(lake, "memory_reinforcement")
    snap = snapshot(
        interactions, statements, feedback, reinforcement, as_of, DEFAULT_DECAY, DEFAULT_SCORING
    )
    path = home.paths.partition("decay_snapshots", key)
    changed = not (path.exists() and pl.read_parquet(path).equals(snap))
    if changed:
        lake.write_partition("decay_snapshots", key, snap)
    return snap, known_memory_count(interactions, statements, as_of), changed


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


@dg.asset(
    partitions_def=DAILY,
    backfill_policy=dg.BackfillPolicy.single_run(),
    group_name=groups.MEMORY,
    deps=[
        feedback_scores,
        "consolidated_summaries",
        "interactions",
        "feedback",
        "memory_statements",
    ],
    check_specs=[daily_check(name, "decay_snapshots") for name in SNAPSHOT_CHECKS],
    description=COMMENTS["decay_snapshots"],
)
def decay_snapshots(
    context: dg.AssetExecutionContext, home: MemorypackHome
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """One snapshot per partition key of the run, and again every later snapshot in the lake.

    A snapshot is a function of the lake and its date: when a run re-does an old date (late
    data), every snapshot from that date on is recomputed as a fresh backfill would make it, so
    the newest one (read by the audit and the packs) reflects the late data in the same run, and
    the decay history has no kink where the late data surfaced. Unchanged snapshots stay as they
    are; each rewritten later one is logged as a materialization of its own partition.
    """
    keys = sorted(context.partition_keys)
    later = [
        k for k in home.lake.partition_keys("decay_snapshots") if k > keys[0] and k not in keys
    ]
    per_key = {key: _snapshot_one(home, key) for key in keys + later}
    _refresh(home, "decay_snapshots")
    # Each partition carries its own snapshot's figures, not the last one's (one step, several keys).
    for key in keys:
        context.add_asset_metadata(
            _snapshot_metadata(home, key, per_key[key][0]), partition_key=key
        )
    rewritten = [key for key in later if per_key[key][2]]
    for key in rewritten:
        context.log_event(
            dg.AssetMaterialization(
                asset_key="decay_snapshots",
                partition=key,
                description=f"rewritten: the run of {keys[0]} changed what this date knows",
                metadata=_snapshot_metadata(home, key, per_key[key][0]),
            )
        )
    yield dg.MaterializeResult(metadata={"run_partitions": keys, "later_rewritten": rewritten})
    # Checked: every snapshot this run wrote, each under its own date.
    checked = {key: per_key[key] for key in keys + rewritten}
    problems = {
        key: snapshot_problems(snap, DEFAULT_DECAY) for key, (snap, _, _) in checked.items()
    }
    yield check_per_partition(
        context,
        "confidence_in_range",
        {
            key: (
                p["confidence_out_of_range"] == 0 and p["unknown_memory_type"] == 0,
                {
                    k: p[k]
                    for k in ("confidence_out_of_range", "unknown_memory_type", "negative_age")
                },
            )
            for key, p in problems.items()
        },
    )
    yield check_per_partition(
        context,
        "every_memory_present",
        {
            key: (
                snap.height == expected and problems[key]["duplicate_memories"] == 0,
                {
                    "rows": snap.height,
                    "memories": expected,
                    "duplicate_memories": problems[key]["duplicate_memories"],
                },
            )
            for key, (snap, expected, _) in checked.items()
        },
    )
    yield check_per_partition(
        context,
        "status_consistent",
        {
            key: (p["status_inconsistent"] == 0, {"rows_inconsistent": p["status_inconsistent"]})
            for key, p in problems.items()
        },
    )


# ----------------------------------------------------------------------------------------- audit


def _snapshot_key(lake: Lake) -> str | None:
    """The newest decay snapshot: the audit describes now, also when a run re-does an old date."""
    available = lake.partition_keys("decay_snapshots")
    return available[-1] if available else None


@dg.asset(
    group_name=groups.MEMORY,
    deps=[decay_snapshots, "memory_conflicts", "memory_statements"],
    description=COMMENTS["memory_audit"],
)
def memory_audit(context: dg.AssetExecutionContext, home: MemorypackHome) -> dg.MaterializeResult:
    lake = home.lake
    key = _snapshot_key(lake)
    if key is None:
        raise dg.Failure(
            "memory_audit: no decay snapshot in the lake yet; materialize decay_snapshots first"
        )
    snap = pl.read_parquet(home.paths.partition("decay_snapshots", key))
    conflicts = _optional(lake, "memory_conflicts")
    conflicts = conflicts.select(*CONFLICT_SCHEMA) if conflicts is not None else None
    statements = lake.read_or_empty("memory_statements", contracts.MEMORY_SCHEMA)
    findings = audit(snap, conflicts, statements)
    candidates = promotion_candidates(snap, conflicts, statements)
    lake.write("memory_audit", findings)
    lake.write("promotion_candidates", candidates)
    _refresh(home, "memory_audit")
    _refresh(home, "promotion_candidates")
    summaries = findings.filter(pl.col("check") == "archived_inferences_summary")[
        "detail"
    ].to_list()
    return dg.MaterializeResult(
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
        )
    )


@dg.asset_check(
    asset=memory_audit,
    description="Every promotion candidate meets the rule and none is in a conflict.",
)
def promotion_candidates_eligible(home: MemorypackHome) -> dg.AssetCheckResult:
    lake = home.lake
    candidates = lake.read("promotion_candidates").collect()
    conflicts = _optional(lake, "memory_conflicts")
    conflicted: set[str] = set()
    if conflicts is not None:
        pairs = conflicts.select("memory_id_a", "memory_id_b").collect()
        conflicted = set(pairs["memory_id_a"]) | set(pairs["memory_id_b"])
    bad = candidates.filter(
        (pl.col("memory_type") != "inferred_pattern")
        | (pl.col("repeats") < AuditConfig().promotion_min_repeats)
        | pl.col("memory_id").is_in(list(conflicted))
    )
    return dg.AssetCheckResult(
        passed=bad.is_empty(), metadata={"candidates": candidates.height, "ineligible": bad.height}
    )


# ------------------------------------------------------------------------------------------ skills


@dg.asset(
    group_name=groups.EXAMPLES,
    deps=["interactions", "feedback", "memory_embeddings", feedback_scores],
    description=COMMENTS["skill_stats"],
)
def skill_stats(context: dg.AssetExecutionContext, home: MemorypackHome) -> dg.MaterializeResult:
    lake = home.lake
    interactions, _, feedback = _inputs(lake)
    embeddings = home.embeddings("interaction")
    if embeddings.is_empty():
        context.log.info("no memory_embeddings table: skills get one-hot vectors")
    stats = skills.skill_stats(interactions, feedback)
    vectors = skills.skill_vectors(
        interactions, embeddings, home.vectors(embeddings) if embeddings.height else None
    )
    preferences = skills.user_preferences(interactions, feedback, vectors)
    for name, frame in (
        ("skill_stats", stats),
        ("user_preferences", preferences),
        ("skill_vectors", vectors),
    ):
        lake.write(name, frame)
        _refresh(home, name)
    effectiveness = skills.learning_effectiveness(stats)
    n_votes = int(stats["n_feedback"].sum())
    return dg.MaterializeResult(
        metadata=frame_metadata(
            stats,
            {
                "users": preferences.height,
                "skills": vectors.height,
                "vector_source": dict(
                    vectors.group_by("vector_source").len().sort("vector_source").iter_rows()
                ),
                "votes": n_votes,
                "positive_share": round(int(stats["n_positive"].sum()) / n_votes, 4)
                if n_votes
                else 0.0,
                "positive_share_by_skill": effectiveness["positive_share_by_skill"],
                "mean_reward_by_user": dict(
                    list(effectiveness["mean_reward_by_user"].items())[:50]
                ),
            },
            preview_columns=[
                "tenant_id",
                "user_id",
                "skill_id",
                "usage",
                "positive_share",
                "ema_confidence",
            ],
        )
    )


@dg.asset_check(
    asset=skill_stats,
    blocking=True,
    description="Confidences and shares in [0, 1]; unit or zero vectors.",
)
def skill_stats_in_range(home: MemorypackHome) -> dg.AssetCheckResult:
    lake = home.lake
    stats = lake.read("skill_stats").collect()
    bad_stats = stats.filter(
        ~pl.col("ema_confidence").is_between(0, 1)
        | ~pl.col("positive_share").is_between(0, 1).fill_null(True)
        | (pl.col("n_positive") + pl.col("n_negative") > pl.col("n_feedback"))
    ).height
    norms = (
        lake.read("user_preferences")
        .select(
            norm=pl.col("preference_vector")
            .list.eval(pl.element().cast(pl.Float64).pow(2))
            .list.sum()
            .sqrt()
        )
        .collect()["norm"]
    )
    bad_vectors = int((~((norms - 1).abs() < 1e-3) & (norms > 1e-9)).sum())
    return dg.AssetCheckResult(
        passed=bad_stats == 0 and bad_vectors == 0,
        metadata={"rows_bad_stats": bad_stats, "vectors_not_unit": bad_vectors},
    )


ASSETS = [feedback_scores, decay_snapshots, memory_audit, skill_stats]
CHECKS = [
    feedback_scores_in_range,
    feedback_scores_one_row_per_memory,
    promotion_candidates_eligible,
    skill_stats_in_range,
]
