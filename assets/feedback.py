"""Feedback stage: what people said about each answer and memory, scored per memory."""

import time

import dagster as dg
import polars as pl

from assets import groups
from assets.config import StageSettings
from assets.handoffs import reads
from assets.metadata import frame_metadata
from assets.partitions import BLOCKING, TENANTS, declared_columns
from assets.resources import MemorypackHome
from pipeline.feedback.scores import (
    compute_scores,
    deduplicate_votes,
    matched_feedback,
    orphan_feedback,
)
from pipeline.tables import COMMENTS


@dg.asset(
    partitions_def=TENANTS,
    group_name=groups.FEEDBACK,
    ins=reads("interactions", "feedback", "memory_statements"),
    description=COMMENTS["feedback_scores"],
    metadata=declared_columns("feedback_scores"),
)
def feedback_scores(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    settings: StageSettings,
    interactions: pl.LazyFrame,
    feedback: pl.LazyFrame,
    memory_statements: pl.LazyFrame,
) -> dg.MaterializeResult:
    lake, statements = home.lake, memory_statements
    started = time.perf_counter()
    scores = compute_scores(interactions, statements, feedback, settings.stage("scoring"))
    seconds = time.perf_counter() - started
    matched = matched_feedback(interactions, statements, feedback)
    n_matched = matched.select(pl.len()).collect().item()
    n_counted = deduplicate_votes(matched).select(pl.len()).collect().item()
    orphans = orphan_feedback(interactions, statements, feedback)
    if orphans.height:
        context.log.warning(f"{orphans.height} feedback events target no known memory; not scored")
    lake.write("feedback_scores", scores)
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
                "mean_quality_score_voted": round(float(voted["quality_score"].mean() or 0.0), 4),  # type: ignore[arg-type]
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
    partitions_def=TENANTS,
    asset=feedback_scores,
    blocking=True,
    description="Scores in [−1, 1]; reputation 1.0 without votes." + BLOCKING,
)
def feedback_scores_in_range(home: MemorypackHome, settings: StageSettings) -> dg.AssetCheckResult:
    scores = home.lake.read("feedback_scores").collect()
    w = settings.stage("scoring").reputation_weight
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
    partitions_def=TENANTS,
    asset=feedback_scores,
    blocking=True,
    description="One row per interaction and statement." + BLOCKING,
    additional_ins=reads("interactions", "memory_statements"),
)
def feedback_scores_one_row_per_memory(
    home: MemorypackHome, interactions: pl.LazyFrame, memory_statements: pl.LazyFrame
) -> dg.AssetCheckResult:
    expected = sum(
        int(f.select(pl.len()).collect().item()) for f in (interactions, memory_statements)
    )
    scores = home.lake.read("feedback_scores").select("tenant_id", "memory_id").collect()
    duplicates = int(scores.is_duplicated().sum())
    return dg.AssetCheckResult(
        passed=scores.height == expected and duplicates == 0,
        metadata={"rows": scores.height, "memories": expected, "duplicate_keys": duplicates},
    )


ASSETS = [feedback_scores]
CHECKS = [feedback_scores_in_range, feedback_scores_one_row_per_memory]
