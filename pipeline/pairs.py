"""Preference pairs (SPEC §4.6): (prompt, chosen, rejected) mined from corrections, regenerations,
near-identical prompts and ranked siblings, deduplicated, with a train/eval split grouped by prompt."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

import polars as pl

from pipeline.contracts import Signal


class PairSource(StrEnum):
    CORRECTION = "correction"
    RANKED = "ranked"
    REGENERATE = "regenerate"
    SAME_PROMPT = "same_prompt"


# When two sources produce the same pair, the more direct evidence is kept.
SOURCE_PRIORITY = {
    PairSource.CORRECTION: 0,
    PairSource.RANKED: 1,
    PairSource.REGENERATE: 2,
    PairSource.SAME_PROMPT: 3,
}
SPLITS = ("train", "eval")

PAIR_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "pair_id": pl.String(),
    "prompt": pl.String(),
    "chosen": pl.String(),
    "rejected": pl.String(),
    "source": pl.String(),
    # How clearly chosen beats rejected: corrections `correction_margin`; regenerations and
    # near-identical prompts the quality gap (quality_score / quality_lower units, 0–2); ranked
    # siblings the rank gap / (siblings − 1), in (0, 1].
    "margin": pl.Float64(),
    "skill_id": pl.String(),
    "split": pl.String(),
    "chosen_id": pl.String(),
    "rejected_id": pl.String(),
}
_MINED = [c for c in PAIR_SCHEMA if c not in ("pair_id", "split")]
SCORE_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "memory_id": pl.String(),
    "n_feedback": pl.Int64(),
    "quality_score": pl.Float64(),
    "quality_lower": pl.Float64(),
    "n_positive": pl.Int64(),
    "n_negative": pl.Int64(),
}


@dataclass(frozen=True)
class PairConfig:
    """Knobs of pair mining (SPEC §4.6)."""

    eval_fraction: float = 0.2  # share of prompt hash buckets held out for eval
    split_salt: str = (
        "memorypack-split-v1"  # change to draw a different (still deterministic) split
    )
    correction_margin: float = 1.0
    regenerate_min_quality: float = 0.0  # the regeneration's quality_score must exceed this
    # Cosine of the prompt embeddings, same tenant × skill. A pair on two different requests
    # teaches DPO noise: the loosest value on a 0.05 grid whose precision stays ≥ 0.95 on both
    # halves of 480 STS-B pairs scored by people (`python -m bench.run --only paraphrase`):
    # precision 0.95 / 0.96, recall 0.16 / 0.18 (0.90 falls to 0.94 on one half).
    similarity_threshold: float = 0.95
    min_quality_gap: float = 0.2  # quality_lower gap for near-identical prompts
    max_neighbors: int = 5  # per interaction, bounds the pairs a popular prompt can produce


def _sha256_hex(values: pl.Series) -> pl.Series:
    # hashlib (not pl.hash) because ids and splits must be stable across polars versions.
    return pl.Series(
        [hashlib.sha256(v.encode("utf-8")).hexdigest() if v is not None else None for v in values],
        dtype=pl.String,
    )


def normalized_prompt() -> pl.Expr:
    return pl.col("prompt").str.strip_chars().str.to_lowercase().str.replace_all(r"\s+", " ")


def _interaction_cols(interactions: pl.DataFrame) -> pl.DataFrame:
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
        _interaction_cols(interactions)
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
    base = _interaction_cols(interactions)
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
        _interaction_cols(interactions)
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


PROMPT_KEYS = ("tenant_id", "skill_id")  # near-identical prompts are searched within these


def prompt_texts(interactions: pl.DataFrame, text_hashes: pl.DataFrame) -> pl.DataFrame:
    """(tenant_id, skill_id, text_hash) of every interaction with a skill: what the prompt
    neighbor index (`pipeline.neighbors`) covers. Unrated ones too: they may be rated tomorrow."""
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


_BEST_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "skill_id": pl.String(),
    "chosen_id": pl.String(),
    "rejected_id": pl.String(),
    "margin": pl.Float64(),
}


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
    `quality_lower`: the better-rated output ≻ the worse one.

    `text_hashes` (tenant_id, memory_id, text_hash) says which prompt each interaction asked;
    `edges` are the near-identical prompt pairs of each tenant × skill (cosine ≥
    `similarity_threshold`, from `pipeline.neighbors`). Each interaction is paired with at most
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
    texts = _interaction_cols(interactions).select("tenant_id", "event_id", "input", "output")
    return (
        best.join(
            texts.rename({"event_id": "chosen_id", "input": "prompt", "output": "chosen"}),
            on=["tenant_id", "chosen_id"],
            how="left",
        )
        .join(
            texts.select(
                "tenant_id",
                pl.col("event_id").alias("rejected_id"),
                pl.col("output").alias("rejected"),
            ),
            on=["tenant_id", "rejected_id"],
            how="left",
        )
        .select(
            "tenant_id",
            "prompt",
            "chosen",
            "rejected",
            pl.lit(PairSource.SAME_PROMPT.value).alias("source"),
            "margin",
            "skill_id",
            "chosen_id",
            "rejected_id",
        )
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
            .map_batches(_sha256_hex, return_dtype=pl.String)
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
        mined.select(_MINED)
        .cast({c: PAIR_SCHEMA[c] for c in _MINED})  # type: ignore[arg-type]
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
        _sha256_hex(
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
