"""Few-shot example sets (SPEC §4.5): the best, diverse, never-negative examples per system × kind."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline import tables
from pipeline.frames import fmt
from pipeline.ingest.contracts import Signal
from pipeline.semantic.embed.exact import ExactVectors, with_exact
from pipeline.storage.vectors import TextVectors

GROUP_KEYS = ["tenant_id", "system", "kind", "skill_id"]

FEW_SHOT_SCHEMA = tables.schema("few_shot_sets")
SCORES_SCHEMA = tables.schema(
    "feedback_scores",
    [
        "tenant_id",
        "memory_id",
        "n_feedback",
        "quality_score",
        "quality_lower",
        "has_correction",
        "n_positive",
        "n_negative",
    ],
)


# What usage measured helpful lends an example (pipeline.usage.actions.boosts).
BOOST_SCHEMA = {"item_id": pl.String, "boost": pl.Float64}
# The order examples are chosen in: best first, recency breaks ties, then the id, for a deterministic
# order (column → descending).
BEST_FIRST = {"selection_score": True, "ts": True, "memory_id": False}


@dataclass(frozen=True)
class FewShotConfig:
    k: int = 5
    # MMR trade-off: 0.7 keeps quality first and uses diversity to break near-ties.
    mmr_lambda: float = 0.7
    # Two examples above this cosine similarity of their inputs teach the model the same thing
    # (re-worded repeats of one request score 0.94–0.96 with MiniLM, different requests < 0.5).
    duplicate_similarity: float = 0.9
    # A human-written correction is the best evidence there is: it ranks as if its lower bound
    # were this (the top of the quality scale), unless the memory's own bound is higher.
    corrected_quality: float = 1.0
    # Unrated memories have no evidence of quality: only examples someone reacted to (or
    # corrected) are shown to a model as "what good looks like".
    require_feedback: bool = True
    # An example confidently helpful where apps used it (SPEC §4.9) ranks higher by the lower end
    # of its effect's interval, at most this: a nudge among near-equals (quality_lower spans
    # [−1, 1]), never past a clearly better example.
    helpful_boost: float = 0.1


def corrected_outputs(feedback: pl.DataFrame) -> pl.DataFrame:
    """The latest corrected output per target: tenant_id, memory_id, corrected_output, corrected_at."""
    return (
        feedback.filter(
            (pl.col("signal") == Signal.CORRECTION) & pl.col("corrected_output").is_not_null()
        )
        .sort("ts", "event_id")
        .group_by("tenant_id", "target_id")
        .agg(pl.col("corrected_output").last(), pl.col("ts").last().alias("corrected_at"))
        .rename({"target_id": "memory_id"})
    )


def candidates(
    interactions: pl.DataFrame,
    feedback: pl.DataFrame,
    scores: pl.DataFrame,
    embeddings: pl.DataFrame,
    config: FewShotConfig | None = None,
    boosts: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Eligible examples with their selection score: never net-negative unless corrected;
    `boosts` (item_id, boost) raises the score of examples measured helpful in use."""
    config = config or FewShotConfig()
    boosts = boosts if boosts is not None else pl.DataFrame(schema=BOOST_SCHEMA)
    score_cols = [c for c in SCORES_SCHEMA if c not in ("tenant_id", "memory_id", "has_correction")]
    base = (
        interactions.select(
            *GROUP_KEYS[:3],
            "skill_id",
            pl.col("event_id").alias("memory_id"),
            "input",
            "output",
            "ts",
        )
        .join(
            scores.select("tenant_id", "memory_id", *score_cols),
            on=["tenant_id", "memory_id"],
            how="left",
        )
        .join(corrected_outputs(feedback), on=["tenant_id", "memory_id"], how="left")
        .join(
            embeddings.select("tenant_id", "memory_id", "text_hash"),
            on=["tenant_id", "memory_id"],
            how="inner",
        )
        .with_columns(
            pl.col("n_feedback", "n_positive", "n_negative").fill_null(0),
            pl.col("quality_score", "quality_lower").fill_null(0.0),
            pl.col("corrected_output").is_not_null().alias("is_corrected"),
        )
    )
    net_negative = (pl.col("n_negative") > pl.col("n_positive")) | (pl.col("quality_score") < 0)
    eligible = pl.col("is_corrected") | (
        ~net_negative & (pl.col("n_feedback") > 0 if config.require_feedback else pl.lit(True))
    )
    boost = boosts.select(
        pl.col("item_id").alias("memory_id"),
        pl.col("boost").clip(0.0, config.helpful_boost).cast(pl.Float64),
    )
    return (
        base.filter(eligible)
        .join(boost, on="memory_id", how="left")
        .with_columns(
            pl.when(pl.col("is_corrected"))
            .then(pl.col("corrected_output"))
            .otherwise(pl.col("output"))
            .alias("output"),
            pl.when(pl.col("is_corrected"))
            .then(pl.max_horizontal(pl.col("quality_lower"), pl.lit(config.corrected_quality)))
            .otherwise(pl.col("quality_lower"))
            .add(pl.col("boost").fill_null(0.0))
            .alias("selection_score"),
            pl.when(pl.col("is_corrected"))
            .then(pl.max_horizontal("ts", "corrected_at"))
            .otherwise(pl.col("ts"))
            .alias("ts"),
        )
        .sort(*BEST_FIRST, descending=list(BEST_FIRST.values()))
    )


def mmr_select(
    scores: np.ndarray, vectors: np.ndarray, k: int, mmr_lambda: float, duplicate_similarity: float
) -> tuple[np.ndarray, np.ndarray]:
    """Greedy maximal marginal relevance over rows sorted best-first (ties keep the earlier row).

    Returns chosen row indices and their MMR values; a row too similar to a chosen one is never
    chosen, even when nothing else is left.
    """
    n = len(scores)
    chosen: list[int] = []
    values: list[float] = []
    max_sim = np.full(n, -1.0)
    available = np.ones(n, dtype=bool)
    while len(chosen) < k and available.any():
        redundancy = np.where(max_sim < 0, 0.0, max_sim)
        mmr = mmr_lambda * scores - (1 - mmr_lambda) * redundancy
        mmr = np.where(available, mmr, -np.inf)
        best = int(np.argmax(mmr))
        chosen.append(best)
        values.append(float(mmr[best]))
        available[best] = False
        max_sim = np.maximum(max_sim, vectors @ vectors[best])
        available &= max_sim <= duplicate_similarity
    return np.asarray(chosen, dtype=np.int64), np.asarray(values)


def _why(frame: pl.DataFrame) -> pl.Expr:
    votes = fmt(
        "quality_lower {} from {} votes",
        pl.col("quality_lower").round(2),
        pl.col("n_feedback"),
    )
    corrected = (
        pl.when(pl.col("is_corrected")).then(pl.lit("; corrected output")).otherwise(pl.lit(""))
    )
    helpful = (
        pl.when(pl.col("boost") > 0)
        .then(fmt("; helpful in use +{}", pl.col("boost").round(2)))
        .otherwise(pl.lit(""))
    )
    return pl.concat_str([votes, corrected, helpful, fmt("; mmr {}", pl.col("mmr").round(2))])


def example_vectors(
    rows: pl.DataFrame, vectors: TextVectors, exact: ExactVectors | None
) -> TextVectors:
    """`vectors` of the examples `rows` (tenant_id, memory_id, input, text_hash), fp32 where
    `exact` reproduces them (pipeline/semantic/embed/exact.py). MMR and the near-duplicate cut
    weigh small differences of similarity, which the int8 kernels move from CPU to CPU (±0.01):
    on fp32 vectors every CPU chooses the same examples."""
    mine = vectors.only(rows["text_hash"])
    if exact is None or rows.is_empty():
        return mine
    near = rows.select(
        "tenant_id", "memory_id", "text_hash", text="input", memory_kind=pl.lit("interaction")
    ).unique("text_hash", maintain_order=True)
    return with_exact(mine, near, exact)[0]


def few_shot_sets(
    interactions: pl.DataFrame,
    feedback: pl.DataFrame,
    scores: pl.DataFrame,
    embeddings: pl.DataFrame,
    vectors: TextVectors,
    config: FewShotConfig | None = None,
    boosts: pl.DataFrame | None = None,
    exact: ExactVectors | None = None,
) -> tuple[pl.DataFrame, TextVectors]:
    """Top-k diverse examples per tenant × system × kind × skill (FEW_SHOT_SCHEMA), and the
    candidates' vectors they were chosen on (what `near_duplicates` checks them with).
    `embeddings` says which text each memory has, `vectors` holds those texts' vectors (fp32 ones
    from `exact` for the candidates, when given: `example_vectors`)."""
    config = config or FewShotConfig()
    pool = candidates(interactions, feedback, scores, embeddings, config, boosts)
    vectors = example_vectors(pool, vectors, exact)
    parts = []
    for _, group in pool.group_by(GROUP_KEYS, maintain_order=True):
        chosen, values = mmr_select(
            group["selection_score"].to_numpy(),
            vectors.of(group["text_hash"]),
            config.k,
            config.mmr_lambda,
            config.duplicate_similarity,
        )
        parts.append(
            group[chosen].with_columns(
                pl.Series("rank", np.arange(1, len(chosen) + 1), dtype=pl.Int64),
                pl.Series("mmr", values, dtype=pl.Float64),
            )
        )
    if not parts:
        return pl.DataFrame(schema=FEW_SHOT_SCHEMA), vectors
    sets = pl.concat(parts)
    return (
        sets.with_columns(_why(sets).alias("why"))
        .select(list(FEW_SHOT_SCHEMA))
        .cast(pl.Schema(FEW_SHOT_SCHEMA))
        .sort(*GROUP_KEYS, "rank", nulls_last=True)
    ), vectors


def negative_examples(sets: pl.DataFrame, scores: pl.DataFrame) -> pl.DataFrame:
    """Rows that show an output with net-negative feedback (should be empty)."""
    joined = sets.select("tenant_id", "memory_id", "is_corrected").join(
        scores.select("tenant_id", "memory_id", "n_positive", "n_negative", "quality_score"),
        on=["tenant_id", "memory_id"],
        how="left",
    )
    return joined.filter(
        ~pl.col("is_corrected")
        & (
            (pl.col("n_negative").fill_null(0) > pl.col("n_positive").fill_null(0))
            | (pl.col("quality_score").fill_null(0) < 0)
        )
    )


def near_duplicates(
    sets: pl.DataFrame, embeddings: pl.DataFrame, vectors: TextVectors, threshold: float
) -> int:
    """Pairs inside one set whose inputs are more similar than `threshold` (should be 0)."""
    joined = sets.join(
        embeddings.select("tenant_id", "memory_id", "text_hash"), on=["tenant_id", "memory_id"]
    )
    total = 0
    for _, group in joined.group_by(GROUP_KEYS):
        rows = vectors.of(group["text_hash"])
        sims = np.triu(rows @ rows.T, k=1)
        total += int((sims > threshold).sum())
    return total
