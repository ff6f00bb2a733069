"""Mined rows into the table: cleaned, deduplicated by content id, split by prompt, and checked."""

from __future__ import annotations

import polars as pl

from pipeline.pairs.same_prompt import same_prompt_pairs
from pipeline.pairs.sources import correction_pairs, ranked_pairs, regenerate_pairs
from pipeline.pairs.table import (
    MINED_COLUMNS,
    PAIR_SCHEMA,
    SOURCE_PRIORITY,
    SPLITS,
    PairConfig,
    PairSource,
    normalized_prompt,
    sha256_hex,
)


def assign_split(pairs: pl.DataFrame, config: PairConfig | None = None) -> pl.DataFrame:
    """`eval` when the hash bucket of the normalized prompt is below `eval_fraction`: every pair of
    one prompt lands in the same split, the same way on every run."""
    config = config or PairConfig()
    prompts = pairs.select(pl.col("prompt").unique())
    buckets = (
        prompts.with_columns(normalized_prompt().alias("_norm"))
        .with_columns(
            (pl.lit(config.split_salt + "\x1f") + pl.col("_norm"))
            .map_batches(sha256_hex, return_dtype=pl.String)
            .str.slice(0, 8)
            .str.to_integer(base=16)
            .alias("_bucket")
        )
        .select(
            "prompt",
            pl.when(pl.col("_bucket") / 2**32 < config.eval_fraction)
            .then(pl.lit("eval"))
            .otherwise(pl.lit("train"))
            .alias("split"),
        )
    )
    # A column looked up per distinct prompt (not a join): the other columns are not copied.
    return pairs.with_columns(
        pl.col("prompt").replace_strict(buckets["prompt"], buckets["split"]).alias("split")
    )


def _clean(mined: pl.DataFrame) -> pl.DataFrame:
    """Mined rows with stripped texts, none empty and none with chosen == rejected."""
    texts = ("prompt", "chosen", "rejected")
    return (
        mined.select(MINED_COLUMNS)
        .cast({c: PAIR_SCHEMA[c] for c in MINED_COLUMNS})  # type: ignore[arg-type]
        .with_columns(pl.col(c).str.strip_chars() for c in texts)
        .filter(
            pl.all_horizontal(pl.col(c).is_not_null() & (pl.col(c) != "") for c in texts)
            & (pl.col("chosen") != pl.col("rejected"))
        )
    )


def _pair_ids(pairs: pl.DataFrame, chunk: int = 200_000) -> pl.Series:
    """sha256(tenant, prompt, chosen, rejected)[:16], hashed a chunk at a time (the joined texts of
    every pair at once would be a second copy of the table)."""
    parts = [
        sha256_hex(
            pairs.slice(start, chunk)
            .select(pl.concat_str(["tenant_id", "prompt", "chosen", "rejected"], separator="\x1f"))
            .to_series()
        ).str.slice(0, 16)
        for start in range(0, pairs.height, chunk)
    ]
    return pl.concat(parts) if parts else pl.Series(dtype=pl.String)


def _dedupe(pairs: pl.DataFrame, config: PairConfig) -> pl.DataFrame:
    """One row per pair_id, the most direct source first (then the widest margin), in pair_id
    order, with its split. The choice is made on a narrow frame of keys; the texts are gathered
    once."""
    pairs = pairs.with_columns(_pair_ids(pairs).alias("pair_id"))
    keep = (
        pairs.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"),
            "pair_id",
            pl.col("source")
            .replace_strict({s.value: p for s, p in SOURCE_PRIORITY.items()}, return_dtype=pl.Int64)
            .alias("_priority"),
            "margin",
            "chosen_id",
            "rejected_id",
        )
        .sort(
            "pair_id",
            "_priority",
            "margin",
            "chosen_id",
            "rejected_id",
            descending=[False, False, True, False, False],
            nulls_last=True,
        )
        .unique(subset=["pair_id"], keep="first", maintain_order=True)["_row"]
    )
    return assign_split(pairs[keep], config).select(list(PAIR_SCHEMA))


def finalize_pairs(mined: pl.DataFrame, config: PairConfig | None = None) -> pl.DataFrame:
    """Clean, deduplicate, id and split mined pairs into the `preference_pairs` table."""
    return _dedupe(_clean(mined), config or PairConfig())


def mine_pairs(
    interactions: pl.DataFrame,
    feedback: pl.DataFrame,
    scores: pl.DataFrame,
    text_hashes: pl.DataFrame | None = None,
    prompt_edges: pl.DataFrame | None = None,
    config: PairConfig | None = None,
) -> pl.DataFrame:
    """Every source, then `finalize_pairs` (near-identical prompts need `text_hashes` and the
    prompt neighbor index's `prompt_edges`). Each source's rows are cleaned as soon as they are
    mined, so only one source's raw rows are held at a time."""
    config = config or PairConfig()
    cleaned = [
        _clean(correction_pairs(interactions, feedback, config)),
        _clean(regenerate_pairs(interactions, scores, config)),
        _clean(ranked_pairs(interactions, config)),
    ]
    if text_hashes is not None and prompt_edges is not None:
        cleaned.append(
            _clean(same_prompt_pairs(interactions, scores, text_hashes, prompt_edges, config))
        )
    return _dedupe(pl.concat(cleaned), config)


def split_leakage(pairs: pl.DataFrame) -> list[str]:
    """Normalized prompts that appear in both splits (must be empty)."""
    return (
        pairs.with_columns(normalized_prompt().alias("_norm"))
        .group_by("_norm")
        .agg(pl.col("split").n_unique().alias("n"))
        .filter(pl.col("n") > 1)["_norm"]
        .sort()
        .to_list()
    )


def format_problems(pairs: pl.DataFrame) -> dict[str, int]:
    """Counts of rows breaking the pair format (all zero for a valid table)."""
    missing = [c for c in PAIR_SCHEMA if c not in pairs.columns]
    if missing:
        return {f"missing_column:{c}": 1 for c in missing}
    texts = ("prompt", "chosen", "rejected")
    return {
        "empty_text": pairs.filter(
            pl.any_horizontal(pl.col(c).is_null() | (pl.col(c) == "") for c in texts)
        ).height,
        "chosen_equals_rejected": pairs.filter(pl.col("chosen") == pl.col("rejected")).height,
        "unknown_source": pairs.filter(
            ~pl.col("source").is_in([s.value for s in PairSource])
        ).height,
        "unknown_split": pairs.filter(~pl.col("split").is_in(list(SPLITS))).height,
        "negative_margin": pairs.filter(~(pl.col("margin") >= 0)).height,
        "duplicate_pair_id": pairs.height - pairs["pair_id"].n_unique(),
    }
