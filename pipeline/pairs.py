"""Preference pairs (SPEC §4.6): (prompt, chosen, rejected) mined from corrections, regenerations,
near-identical prompts and ranked siblings, deduplicated, with a train/eval split grouped by prompt."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
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
EMBEDDING_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "memory_id": pl.String(),
    "memory_kind": pl.String(),
    "text_hash": pl.String(),
    "embedding": pl.List(pl.Float32()),
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
    similarity_threshold: float = 0.95  # cosine of the prompt embeddings, same tenant × skill
    min_quality_gap: float = 0.2  # quality_lower gap for near-identical prompts
    max_neighbors: int = 5  # per prompt, bounds the pairs a large duplicate cluster can produce
    block_size: int = 2048  # rows per block of the blocked similarity search


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


def _embedding_matrix(series: pl.Series) -> np.ndarray:
    if isinstance(series.dtype, pl.List):
        width = int(series.list.len().max() or 0)  # type: ignore[arg-type]
        series = series.cast(pl.Array(pl.Float32, width))
    matrix = series.to_numpy().astype(np.float32, copy=False)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)


def near_neighbor_pairs(
    matrix: np.ndarray,
    threshold: float,
    max_neighbors: int,
    block_size: int = 2048,
    max_block_cells: int = 8_000_000,
) -> tuple[np.ndarray, np.ndarray]:
    """Index pairs (i < j) with cosine ≥ threshold among unit rows, at most `max_neighbors` per i.

    Blocked matrix products: a block holds at most `max_block_cells` similarities (≈ 100 MB with
    its index arrays) whatever n, never the full n × n matrix.
    """
    n = matrix.shape[0]
    left: list[np.ndarray] = []
    right: list[np.ndarray] = []
    k = max(1, min(max_neighbors, n - 1))
    rows_per_block = max(1, min(block_size, max_block_cells // max(n, 1)))
    columns = np.arange(n)
    for start in range(0, n, rows_per_block):
        stop = min(start + rows_per_block, n)
        sims = matrix[start:stop] @ matrix.T
        sims[columns[None, :] <= np.arange(start, stop)[:, None]] = -np.inf  # i < j, no self
        if k < n:
            top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
        else:
            top = np.broadcast_to(columns, sims.shape)
        top_sims = np.take_along_axis(sims, top, axis=1)
        hit_rows, hit_cols = np.nonzero(top_sims >= threshold)
        left.append(hit_rows + start)
        right.append(top[hit_rows, hit_cols])
    if not left:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(left).astype(np.int64), np.concatenate(right).astype(np.int64)


def same_prompt_pairs(
    interactions: pl.DataFrame,
    scores: pl.DataFrame,
    embeddings: pl.DataFrame,
    config: PairConfig | None = None,
) -> pl.DataFrame:
    """Same tenant × skill, near-identical prompts (embedding cosine), clearly different
    `quality_lower`: the better-rated output ≻ the worse one.

    The search runs on ids, quality and vectors only; prompts and outputs are joined to the pairs
    that pass the quality gap (at 1.2M interactions, carrying the texts through the search held
    gigabytes).
    """
    config = config or PairConfig()
    if "memory_kind" in embeddings.columns:
        embeddings = embeddings.filter(
            pl.col("memory_kind").is_null() | (pl.col("memory_kind") == "interaction")
        )
    rated = (
        interactions.select("tenant_id", "event_id", "skill_id")
        .filter(pl.col("skill_id").is_not_null())
        .join(
            scores.filter(pl.col("n_feedback") > 0).select(
                "tenant_id", pl.col("memory_id").alias("event_id"), "quality_lower"
            ),
            on=["tenant_id", "event_id"],
            how="inner",
        )
        .join(
            embeddings.select("tenant_id", pl.col("memory_id").alias("event_id"), "embedding"),
            on=["tenant_id", "event_id"],
            how="inner",
        )
        .sort("tenant_id", "skill_id", "event_id")
    )
    found: list[pl.DataFrame] = []
    for group in rated.partition_by("tenant_id", "skill_id", maintain_order=True):
        if group.height < 2:
            continue
        i, j = near_neighbor_pairs(
            _embedding_matrix(group["embedding"]),
            config.similarity_threshold,
            config.max_neighbors,
            config.block_size,
        )
        quality = group["quality_lower"].to_numpy()
        keep = np.abs(quality[i] - quality[j]) >= config.min_quality_gap
        i, j = i[keep], j[keep]
        if i.size == 0:
            continue
        a_wins = quality[i] >= quality[j]
        ids = group["event_id"]
        found.append(
            pl.DataFrame(
                {
                    "tenant_id": group["tenant_id"][i],
                    "skill_id": group["skill_id"][i],
                    "chosen_id": ids[np.where(a_wins, i, j)],
                    "rejected_id": ids[np.where(a_wins, j, i)],
                    "margin": np.abs(quality[i] - quality[j]),
                }
            )
        )
    if not found:
        return pl.DataFrame(schema={c: PAIR_SCHEMA[c] for c in _MINED})
    texts = _interaction_cols(interactions).select("tenant_id", "event_id", "input", "output")
    return (
        pl.concat(found)
        .join(
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
    prompts = pairs.select(normalized_prompt().alias("_norm")).unique()
    buckets = prompts.with_columns(
        (pl.lit(config.split_salt + "\x1f") + pl.col("_norm"))
        .map_batches(_sha256_hex, return_dtype=pl.String)
        .str.slice(0, 8)
        .str.to_integer(base=16)
        .alias("_bucket")
    ).with_columns(
        pl.when(pl.col("_bucket") / 2**32 < config.eval_fraction)
        .then(pl.lit("eval"))
        .otherwise(pl.lit("train"))
        .alias("split")
    )
    return (
        pairs.with_columns(normalized_prompt().alias("_norm"))
        .join(buckets.select("_norm", "split"), on="_norm", how="left")
        .drop("_norm")
    )


def finalize_pairs(mined: pl.DataFrame, config: PairConfig | None = None) -> pl.DataFrame:
    """Clean, deduplicate, id and split mined pairs into the `preference_pairs` table."""
    config = config or PairConfig()
    strip = [pl.col(c).str.strip_chars() for c in ("prompt", "chosen", "rejected")]
    pairs = (
        mined.select(_MINED)
        .with_columns(strip)
        .filter(
            pl.all_horizontal(
                pl.col(c).is_not_null() & (pl.col(c) != "")
                for c in ("prompt", "chosen", "rejected")
            )
            & (pl.col("chosen") != pl.col("rejected"))
        )
        .with_columns(
            pl.concat_str(["tenant_id", "prompt", "chosen", "rejected"], separator="\x1f")
            .map_batches(_sha256_hex, return_dtype=pl.String)
            .str.slice(0, 16)
            .alias("pair_id"),
            pl.col("source")
            .replace_strict({s.value: p for s, p in SOURCE_PRIORITY.items()}, return_dtype=pl.Int64)
            .alias("_priority"),
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
        .unique(subset=["pair_id"], keep="first", maintain_order=True)
        .drop("_priority")
    )
    return assign_split(pairs, config).select(list(PAIR_SCHEMA)).cast(PAIR_SCHEMA)  # type: ignore[arg-type]


def mine_pairs(
    interactions: pl.DataFrame,
    feedback: pl.DataFrame,
    scores: pl.DataFrame,
    embeddings: pl.DataFrame | None = None,
    config: PairConfig | None = None,
) -> pl.DataFrame:
    """Every source, then `finalize_pairs`."""
    config = config or PairConfig()
    parts = [
        correction_pairs(interactions, feedback, config),
        regenerate_pairs(interactions, scores, config),
        ranked_pairs(interactions, config),
    ]
    if embeddings is not None and embeddings.height:
        parts.append(same_prompt_pairs(interactions, scores, embeddings, config))
    mined = pl.concat([p.select(_MINED).cast({c: PAIR_SCHEMA[c] for c in _MINED}) for p in parts])  # type: ignore[arg-type]
    return finalize_pairs(mined, config)


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
