"""The `preference_pairs` table: where a pair comes from, its schema, the knobs of mining, and the
stable hashes ids and splits are made of."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

import polars as pl

from pipeline import tables


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


PAIR_SCHEMA = tables.schema("preference_pairs")


MINED_COLUMNS = [c for c in PAIR_SCHEMA if c not in ("pair_id", "split")]


# The columns of interactions and feedback_scores pairs are mined from (a step reads no others).
INTERACTION_COLUMNS = (
    "tenant_id",
    "event_id",
    "skill_id",
    "input",
    "output",
    "parent_event_id",
    "metadata",
    "load_date",
)

SCORE_SCHEMA = tables.schema(
    "feedback_scores",
    [
        "tenant_id",
        "memory_id",
        "n_feedback",
        "quality_score",
        "quality_lower",
        "n_positive",
        "n_negative",
    ],
)


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
    # teaches DPO noise, so the threshold is the one whose precision is best established: on the
    # dev half of 480 STS-B pairs scored by people (`python -m bench.run --only paraphrase`, rule
    # in pipeline/semantic/calibration.py), the highest lower 95 % bound of precision on a 0.05 grid of
    # distances, 0.10 (0.84; 0.95 would have a bound of 0.74 on 18 pairs). Held out: precision
    # 0.981 [0.902, 0.997], recall 0.442.
    similarity_threshold: float = 0.90
    min_quality_gap: float = 0.2  # quality_lower gap for near-identical prompts
    max_neighbors: int = 5  # per interaction, bounds the pairs a popular prompt can produce


def sha256_hex(values: pl.Series) -> pl.Series:
    # hashlib (not pl.hash) because ids and splits must be stable across polars versions.
    return pl.Series(
        [hashlib.sha256(v.encode("utf-8")).hexdigest() if v is not None else None for v in values],
        dtype=pl.String,
    )


def normalized_prompt() -> pl.Expr:
    return pl.col("prompt").str.strip_chars().str.to_lowercase().str.replace_all(r"\s+", " ")
