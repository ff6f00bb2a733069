"""Pairs from one request's own evidence: a correction beats the output it corrects, a better rated
regeneration beats the original, and ranked siblings by their rank."""

from __future__ import annotations

import polars as pl

from pipeline.contracts import Signal
from pipeline.pairs.table import PairConfig, PairSource


def interaction_columns(interactions: pl.DataFrame) -> pl.DataFrame:
    return interactions.select(
        "tenant_id", "event_id", "skill_id", "input", "output", "parent_event_id", "metadata"
    )


def correction_pairs(
    interactions: pl.DataFrame, feedback: pl.DataFrame, config: PairConfig | None = None
) -> pl.DataFrame:
    """A correction's corrected output ≻ the original output, for the original's prompt."""
    config = config or PairConfig()
    fixes = feedback.filter(
        (pl.col("signal") == Signal.CORRECTION) & pl.col("corrected_output").is_not_null()
    ).select(
        "tenant_id",
        pl.col("target_id").alias("event_id"),
        pl.col("event_id").alias("chosen_id"),
        "corrected_output",
    )
    return (
        interaction_columns(interactions)
        .join(fixes, on=["tenant_id", "event_id"], how="inner")
        .select(
            "tenant_id",
            pl.col("input").alias("prompt"),
            pl.col("corrected_output").alias("chosen"),
            pl.col("output").alias("rejected"),
            pl.lit(PairSource.CORRECTION.value).alias("source"),
            pl.lit(config.correction_margin).alias("margin"),
            "skill_id",
            "chosen_id",
            pl.col("event_id").alias("rejected_id"),
        )
    )


def _with_scores(
    frame: pl.DataFrame, scores: pl.DataFrame, id_col: str, prefix: str
) -> pl.DataFrame:
    cols = scores.select(
        "tenant_id",
        pl.col("memory_id").alias(id_col),
        *(
            pl.col(c).alias(f"{prefix}{c}")
            for c in ("quality_score", "quality_lower", "n_feedback", "n_positive", "n_negative")
        ),
    )
    return frame.join(cols, on=["tenant_id", id_col], how="left")


def regenerate_pairs(
    interactions: pl.DataFrame, scores: pl.DataFrame, config: PairConfig | None = None
) -> pl.DataFrame:
    """B regenerates A (`B.parent_event_id = A`) and B was rated positively: B.output ≻ A.output."""
    config = config or PairConfig()
    base = interaction_columns(interactions)
    children = base.filter(pl.col("parent_event_id").is_not_null()).select(
        "tenant_id",
        pl.col("event_id").alias("chosen_id"),
        pl.col("parent_event_id").alias("rejected_id"),
        pl.col("output").alias("chosen"),
    )
    parents = base.select(
        "tenant_id",
        pl.col("event_id").alias("rejected_id"),
        pl.col("input").alias("prompt"),
        pl.col("output").alias("rejected"),
        "skill_id",
    )
    joined = children.join(parents, on=["tenant_id", "rejected_id"], how="inner")
    joined = _with_scores(joined, scores, "chosen_id", "c_")
    joined = _with_scores(joined, scores, "rejected_id", "r_")
    chosen_q = pl.col("c_quality_score").fill_null(0.0)
    rejected_q = pl.col("r_quality_score").fill_null(0.0)
    positive = (chosen_q > config.regenerate_min_quality) | (
        pl.col("c_n_positive").fill_null(0) > pl.col("c_n_negative").fill_null(0)
    )
    return joined.filter(positive & (chosen_q > rejected_q)).select(
        "tenant_id",
        "prompt",
        "chosen",
        "rejected",
        pl.lit(PairSource.REGENERATE.value).alias("source"),
        (chosen_q - rejected_q).alias("margin"),
        "skill_id",
        "chosen_id",
        "rejected_id",
    )


def ranked_pairs(interactions: pl.DataFrame, config: PairConfig | None = None) -> pl.DataFrame:
    """Imported siblings (same `metadata.parent_id`) with a human `metadata.rank`: lower rank ≻ higher."""
    ranked = (
        interaction_columns(interactions)
        .with_columns(
            pl.col("metadata")
            .str.json_path_match("$.rank")
            .cast(pl.Int64, strict=False)
            .alias("rank"),
            pl.col("metadata").str.json_path_match("$.parent_id").alias("parent_id"),
        )
        .filter(pl.col("rank").is_not_null() & pl.col("parent_id").is_not_null())
        .with_columns(pl.len().over("tenant_id", "parent_id").alias("n_siblings"))
        .filter(pl.col("n_siblings") > 1)
    )
    left = ranked.select(
        "tenant_id",
        "parent_id",
        "n_siblings",
        pl.col("event_id").alias("chosen_id"),
        pl.col("input").alias("prompt"),
        pl.col("output").alias("chosen"),
        pl.col("rank").alias("chosen_rank"),
        "skill_id",
    )
    right = ranked.select(
        "tenant_id",
        "parent_id",
        pl.col("event_id").alias("rejected_id"),
        pl.col("output").alias("rejected"),
        pl.col("rank").alias("rejected_rank"),
    )
    return (
        left.join(right, on=["tenant_id", "parent_id"], how="inner")
        .filter(pl.col("chosen_rank") < pl.col("rejected_rank"))
        .select(
            "tenant_id",
            "prompt",
            "chosen",
            "rejected",
            pl.lit(PairSource.RANKED.value).alias("source"),
            ((pl.col("rejected_rank") - pl.col("chosen_rank")) / (pl.col("n_siblings") - 1))
            .cast(pl.Float64)
            .alias("margin"),
            "skill_id",
            "chosen_id",
            "rejected_id",
        )
    )
