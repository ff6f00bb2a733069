"""Mined pairs into the table: texts attached, deduplicated by content id, split by prompt, and
checked."""

from __future__ import annotations

import polars as pl

from pipeline.preference.pairs.same_prompt import same_prompt_pairs
from pipeline.preference.pairs.sources import (
    PairTexts,
    correction_pairs,
    ranked_pairs,
    regenerate_pairs,
)
from pipeline.preference.pairs.table import (
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


TEXTS = ("prompt", "chosen", "rejected")


def _usable() -> pl.Expr:
    """Every text present and not empty, and chosen != rejected (texts already stripped)."""
    return pl.all_horizontal(pl.col(c).is_not_null() & (pl.col(c) != "") for c in TEXTS) & (
        pl.col("chosen") != pl.col("rejected")
    )


def _pair_ids(pairs: pl.DataFrame) -> pl.Series:
    """sha256(tenant, prompt, chosen, rejected)[:16], null for a pair that is not `_usable`."""
    joined = pairs.select(
        pl.when(_usable()).then(pl.concat_str(["tenant_id", *TEXTS], separator="\x1f"))
    ).to_series()
    return sha256_hex(joined).str.slice(0, 16).alias("pair_id")


def _kept(pairs: pl.DataFrame) -> pl.Series:
    """Row numbers of the pairs kept: one per pair_id (rows without one are dropped), the most
    direct source first (then the widest margin), in pair_id order."""
    return (
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
        .drop_nulls("pair_id")
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


def finalize_pairs(mined: pl.DataFrame, config: PairConfig | None = None) -> pl.DataFrame:
    """Mined rows with their texts (MINED_COLUMNS) into the `preference_pairs` table: texts
    stripped, pairs without two different answers dropped, one row per pair_id, split. Rows
    without a load date (planted pairs: no events behind them) get none."""
    if "load_date" not in mined.columns:
        mined = mined.with_columns(pl.lit(None, pl.Date).alias("load_date"))
    pairs = (
        mined.select(MINED_COLUMNS)
        .cast({c: PAIR_SCHEMA[c] for c in MINED_COLUMNS})  # type: ignore[arg-type]
        .with_columns(pl.col(c).str.strip_chars() for c in TEXTS)
    )
    pairs = pairs.with_columns(_pair_ids(pairs))
    return assign_split(pairs[_kept(pairs)], config or PairConfig()).select(list(PAIR_SCHEMA))


def mine_pairs(
    interactions: pl.DataFrame,
    feedback: pl.DataFrame,
    scores: pl.DataFrame,
    text_hashes: pl.DataFrame | None = None,
    prompt_edges: pl.DataFrame | None = None,
    config: PairConfig | None = None,
    chunk: int = 200_000,
) -> pl.DataFrame:
    """Every source (near-identical prompts need `text_hashes` and the prompt neighbor index's
    `prompt_edges`) into the `preference_pairs` table, as `finalize_pairs` makes it.

    The sources name texts by event (`PairTexts`): the ids are computed a `chunk` of pairs at a
    time, and only the pairs kept get their texts, so the texts of the mined pairs are never all
    held at once."""
    config = config or PairConfig()
    mined = [
        correction_pairs(interactions, feedback, config),
        regenerate_pairs(interactions, scores, config),
        ranked_pairs(interactions, config),
    ]
    if text_hashes is not None and prompt_edges is not None:
        mined.append(same_prompt_pairs(interactions, scores, text_hashes, prompt_edges, config))
    refs = pl.concat(mined)
    del mined  # below, the pairs not kept are let go before the texts are copied
    texts = PairTexts.of(interactions, feedback)
    ids = [_pair_ids(texts.attach(refs.slice(at, chunk))) for at in range(0, refs.height, chunk)]
    refs = refs.with_columns(pl.concat(ids) if ids else pl.Series("pair_id", [], pl.String))
    refs = refs[_kept(refs)]
    return assign_split(texts.attach(refs), config).select(list(PAIR_SCHEMA))


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
