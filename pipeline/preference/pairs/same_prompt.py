"""Pairs across near-identical prompts of one tenant × skill: the clearest quality gaps among
neighbours found by the prompt neighbor index."""

from __future__ import annotations

import polars as pl

from pipeline import tables
from pipeline.preference.pairs.sources import pair_refs
from pipeline.preference.pairs.table import PairConfig, PairSource

PROMPT_KEYS = ("tenant_id", "skill_id")  # near-identical prompts are searched within these


def prompt_texts(interactions: pl.DataFrame, text_hashes: pl.DataFrame) -> pl.DataFrame:
    """(tenant_id, skill_id, text_hash) of every interaction with a skill: what the prompt
    neighbor index (`pipeline.preference.pairs.neighbors`) covers. Unrated ones too: they may be rated tomorrow."""
    return (
        interactions.select("tenant_id", "event_id", "skill_id")
        .filter(pl.col("skill_id").is_not_null())
        .join(
            text_hashes.select("tenant_id", pl.col("memory_id").alias("event_id"), "text_hash"),
            on=["tenant_id", "event_id"],
        )
        .select(*PROMPT_KEYS, "text_hash")
        .unique()
    )


_BEST_SCHEMA = tables.schema(
    "preference_pairs", ("tenant_id", "skill_id", "chosen_id", "rejected_id", "margin")
)


def _clearest_gaps(rated: pl.DataFrame, edges: pl.DataFrame, config: PairConfig) -> pl.DataFrame:
    """(chosen_id, rejected_id, margin) of one tenant × skill: see `same_prompt_pairs`."""
    keys = list(PROMPT_KEYS)
    k = config.max_neighbors
    links = pl.concat(  # prompt → every prompt its askers may be compared with (itself too)
        [
            edges.select(*keys, "text_hash_a", "text_hash_b", "similarity"),
            edges.select(
                *keys,
                pl.col("text_hash_b").alias("text_hash_a"),
                pl.col("text_hash_a").alias("text_hash_b"),
                "similarity",
            ),
            rated.select(
                *keys,
                pl.col("text_hash").alias("text_hash_a"),
                pl.col("text_hash").alias("text_hash_b"),
                pl.lit(1.0, pl.Float32).alias("similarity"),
            ).unique(),
        ]
    ).rename({"text_hash_a": "text_hash", "text_hash_b": "partner_hash"})
    pool = links.join(
        rated.select(
            *keys,
            pl.col("text_hash").alias("partner_hash"),
            pl.col("event_id").alias("partner_id"),
            pl.col("quality_lower").alias("partner_quality"),
        ),
        on=[*keys, "partner_hash"],
    )
    prompt = [*keys, "text_hash"]
    partner = pl.struct("partner_id", "partner_quality", "similarity")
    order = ["partner_quality", "partner_id"]  # ties: the smaller id first, for a stable choice
    ends = pool.group_by(prompt).agg(
        partner.top_k_by(order, k + 1, reverse=[False, True]).alias("best"),
        partner.bottom_k_by(order, k + 1, reverse=[False, False]).alias("worst"),
    )
    extremes = pl.concat(
        [
            ends.select(*prompt, pl.col(side).alias("p")).explode("p").unnest("p")
            for side in ("best", "worst")
        ]
    ).unique([*prompt, "partner_id"])
    gap = (pl.col("quality_lower") - pl.col("partner_quality")).abs()
    chosen_first = pl.col("quality_lower") >= pl.col("partner_quality")
    return (
        rated.join(extremes, on=prompt)
        .filter((pl.col("event_id") != pl.col("partner_id")) & (gap >= config.min_quality_gap))
        .with_columns(margin=gap)
        .sort(
            "tenant_id",
            "event_id",
            "margin",
            "similarity",
            "partner_id",
            descending=[False, False, True, True, False],
        )
        .group_by("tenant_id", "event_id", maintain_order=True)
        .head(k)
        .select(
            "tenant_id",
            "skill_id",
            pl.when(chosen_first).then("event_id").otherwise("partner_id").alias("chosen_id"),
            pl.when(chosen_first).then("partner_id").otherwise("event_id").alias("rejected_id"),
            pl.col("margin").cast(pl.Float64),
        )
        .unique(["tenant_id", "chosen_id", "rejected_id"])
    )


def same_prompt_pairs(
    interactions: pl.DataFrame,
    scores: pl.DataFrame,
    text_hashes: pl.DataFrame,
    edges: pl.DataFrame,
    config: PairConfig | None = None,
) -> pl.DataFrame:
    """Same tenant × skill, identical or near-identical prompts, clearly different
    `quality_lower`: the better-rated output ≻ the worse one, for the better one's prompt.

    `text_hashes` (tenant_id, memory_id, text_hash) says which prompt each interaction asked;
    `edges` are the near-identical prompt pairs of each tenant × skill (cosine ≥
    `similarity_threshold`, from `pipeline.preference.pairs.neighbors`). Each interaction is paired with at most
    `max_neighbors` others: those with the clearest quality gap (≥ `min_quality_gap`), then the
    most similar prompt. Only the `max_neighbors + 1` best and worst rated interactions of a
    prompt's pool can be among them, so a prompt asked thousands of times costs as much as one
    asked `max_neighbors` times.
    """
    config = config or PairConfig()
    keys = list(PROMPT_KEYS)
    rated = (
        interactions.select("tenant_id", "event_id", "skill_id")
        .filter(pl.col("skill_id").is_not_null())
        .join(
            text_hashes.select("tenant_id", pl.col("memory_id").alias("event_id"), "text_hash"),
            on=["tenant_id", "event_id"],
        )
        .join(
            scores.filter(pl.col("n_feedback") > 0).select(
                "tenant_id", pl.col("memory_id").alias("event_id"), "quality_lower"
            ),
            on=["tenant_id", "event_id"],
        )
    )
    edges = edges.filter(pl.col("similarity") >= config.similarity_threshold)
    by_group = edges.partition_by(keys, as_dict=True)
    empty_edges = edges.clear()
    # One tenant × skill at a time: memory is bounded by the largest group, not the tenant set.
    found = [
        _clearest_gaps(group, by_group.get(key, empty_edges), config)
        for key, group in rated.partition_by(keys, as_dict=True, maintain_order=True).items()
    ]
    best = pl.concat(found) if found else pl.DataFrame(schema=_BEST_SCHEMA)
    return best.select(pair_refs(PairSource.SAME_PROMPT, pl.col("margin"), "chosen_id"))
