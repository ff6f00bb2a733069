"""Per-user skill statistics and preference vectors (SPEC §4.8): usage, votes, EMA confidence, alignment.

Both learning rules are linear recurrences, so they are computed in closed form instead of replaying
events one by one: with rate α and rewards r₁…rₙ (oldest first),
  EMA      c ← c + α(r − c)            ⇒ cₙ = (1−α)ⁿ·c₀ + Σᵢ α(1−α)ⁿ⁻ⁱ·rᵢ
  vector   p ← p + α(vᵢ·sᵢ − p)        ⇒ pₙ = Σᵢ α(1−α)ⁿ⁻ⁱ·vᵢ·sᵢ      (p₀ = 0)
where vᵢ ∈ [−1, 1] is the vote and sᵢ the skill's vector: a positive vote moves the preference toward
the skill, a negative one away from it. The stored preference vector is L2-normalised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import sparse

from memorypack.indexes import UNKNOWN_SKILL_CONFIDENCE
from pipeline import tables
from pipeline.feedback.scores import DEFAULT_SCORING, ScoringConfig, deduplicate_votes, vote_values
from pipeline.frames import fmt
from pipeline.storage.vectors import TextVectors

TIMESTAMP = pl.Datetime("us", "UTC")


@dataclass(frozen=True)
class SkillConfig:
    """Constants of SPEC §4.8, with the reason for each."""

    # SPEC §4.8: both the confidence and the preference vector learn at 0.1 — about the last 10
    # votes dominate, so a skill can recover from an early bad streak within a couple of weeks.
    learning_rate: float = 0.1
    # Before any vote a skill is a coin flip for this user: neither favoured nor avoided. The app
    # library starts an unvoted skill at the same value.
    initial_confidence: float = UNKNOWN_SKILL_CONFIDENCE
    # Without embeddings each skill gets a one-hot vector of this size (the default embedding
    # dimension, so every vector column has one shape); skills beyond it share slots (rank modulo).
    fallback_dim: int = 384


def skill_feedback(
    interactions: pl.DataFrame | pl.LazyFrame,
    feedback: pl.DataFrame | pl.LazyFrame,
    scoring: ScoringConfig = DEFAULT_SCORING,
) -> pl.LazyFrame:
    """Every quality vote on an interaction that used a skill, credited to the interaction's user.

    The user is the interaction's `user_id` (who was served), else the voter's.
    """
    used = interactions.lazy().filter(pl.col("skill_id").is_not_null())
    votes = vote_values(deduplicate_votes(feedback), scoring).filter(pl.col("vote_weight") > 0)
    return votes.join(
        used.select("tenant_id", "event_id", "skill_id", served_user="user_id"),
        left_on=["tenant_id", "target_id"],
        right_on=["tenant_id", "event_id"],
        how="inner",
    ).select(
        "tenant_id",
        pl.coalesce("served_user", "user_id").alias("user_id"),
        "skill_id",
        "ts",
        "event_id",
        "signal",
        "vote_value",
    )


def _recency_weight(rate: float, group: list[str]) -> pl.Expr:
    """α(1−α)ⁿ⁻ⁱ for the i-th of n events of a group in time order (i = n is the newest)."""
    steps_back = pl.len().over(group) - pl.col("event_id").cum_count().over(group)
    return rate * (1 - rate) ** steps_back.cast(pl.Float64)


def skill_stats(
    interactions: pl.DataFrame | pl.LazyFrame,
    feedback: pl.DataFrame | pl.LazyFrame,
    config: SkillConfig = SkillConfig(),
    scoring: ScoringConfig = DEFAULT_SCORING,
) -> pl.DataFrame:
    """One row per tenant × user × skill that was used or voted on."""
    keys = ["tenant_id", "user_id", "skill_id"]
    usage = (
        interactions.lazy()
        .filter(pl.col("skill_id").is_not_null())
        .group_by(keys)
        .agg(usage=pl.len().cast(pl.Int64), last_used_at=pl.col("ts").max().cast(TIMESTAMP))
    )
    rate = config.learning_rate
    votes = (
        skill_feedback(interactions, feedback, scoring)
        .sort("ts", "event_id")
        .with_columns(
            _weight=_recency_weight(rate, keys),
            _reward=(1 + pl.col("vote_value"))
            / 2,  # the EMA tracks a probability-like confidence in [0, 1]
        )
        .group_by(keys)
        .agg(
            n_feedback=pl.len().cast(pl.Int64),
            # Counted by the vote's direction: a rating of 2 on `copy` is a negative vote.
            n_positive=(pl.col("vote_value") > 0).sum().cast(pl.Int64),
            n_negative=(pl.col("vote_value") < 0).sum().cast(pl.Int64),
            mean_reward=pl.col("vote_value").mean(),
            _ema=(pl.col("_weight") * pl.col("_reward")).sum()
            + (1 - rate) ** pl.len().cast(pl.Float64) * config.initial_confidence,
            last_feedback_at=pl.col("ts").max().cast(TIMESTAMP),
        )
    )
    return (
        usage.join(votes, on=keys, how="full", coalesce=True, nulls_equal=True)
        .with_columns(
            pl.col("usage").fill_null(0),
            pl.col("n_feedback").fill_null(0),
            pl.col("n_positive").fill_null(0),
            pl.col("n_negative").fill_null(0),
            ema_confidence=pl.col("_ema").fill_null(config.initial_confidence).clip(0.0, 1.0),
        )
        .with_columns(
            positive_share=pl.when(pl.col("n_positive") + pl.col("n_negative") > 0).then(
                pl.col("n_positive") / (pl.col("n_positive") + pl.col("n_negative"))
            )
        )
        .select(tables.columns("skill_stats"))
        .sort(keys, nulls_last=True)
        .collect()
    )


def _matrix(column: pl.Series) -> np.ndarray:
    """A column of equal-length vectors (Array or List) as a 2-D float array."""
    if isinstance(column.dtype, pl.Array):
        return np.asarray(column.to_numpy(), dtype=np.float64)
    return np.asarray(column.to_list(), dtype=np.float64)


def _normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def _one_hot(skills: pl.DataFrame, dim: int) -> np.ndarray:
    slot = skills["skill_id"].rank("dense").cast(pl.Int64).to_numpy() - 1
    vectors = np.zeros((skills.height, dim), dtype=np.float32)
    vectors[np.arange(skills.height), slot % dim] = 1.0
    return vectors


def _tenant_skill_vectors(
    used: pl.DataFrame,
    embeddings: pl.DataFrame | None,
    vectors: TextVectors | None,
    config: SkillConfig,
) -> tuple[pl.DataFrame, np.ndarray]:
    skills = used.group_by("skill_id").agg(n_interactions=pl.len().cast(pl.Int64)).sort("skill_id")
    texts = (
        used.join(embeddings, left_on="event_id", right_on="memory_id", how="inner")
        .group_by("skill_id", "text_hash")
        .agg(pl.len().alias("n"))
        # group_by's order varies from run to run and is the order the mean below sums in: fixed,
        # so the same input gives the same float32 bits (the vectors go into the pack).
        .sort("skill_id", "text_hash")
        if embeddings is not None and vectors is not None
        else None
    )
    if texts is None or vectors is None or texts.is_empty():
        return skills.with_columns(
            vector_source=pl.lit("one_hot"), n_embedded=pl.lit(0, pl.Int64)
        ), _one_hot(skills, config.fallback_dim)
    # Mean embedding per skill: a sparse (skills × distinct texts) averaging matrix, each text
    # weighted by how many of the skill's interactions asked it, times the texts' vectors.
    index = {s: i for i, s in enumerate(skills["skill_id"].to_list())}
    rows = texts["skill_id"].replace_strict(index, return_dtype=pl.Int64).to_numpy()
    n = texts["n"].to_numpy().astype(np.float64)
    counts = np.bincount(rows, weights=n, minlength=skills.height)
    averaging = sparse.csr_matrix(
        (n / counts[rows], (rows, np.arange(len(rows)))), shape=(skills.height, len(rows))
    )
    means = np.asarray(averaging @ vectors.of(texts["text_hash"]).astype(np.float64), np.float32)
    return (
        skills.with_columns(
            vector_source=pl.lit("embedding"), n_embedded=pl.Series(counts.astype(np.int64))
        ),
        means,
    )


def skill_vectors(
    interactions: pl.DataFrame | pl.LazyFrame,
    embeddings: pl.DataFrame | pl.LazyFrame | None,
    vectors: TextVectors | None = None,
    config: SkillConfig = SkillConfig(),
) -> pl.DataFrame:
    """tenant_id, skill_id, vector (unit length), n_interactions, n_embedded, vector_source.

    A skill's vector is the mean embedding of its interactions (`embeddings`: memory_embeddings,
    which text each memory has; `vectors`: those texts' vectors); a tenant without embeddings
    gets one-hot vectors, so preferences still work, just without similarity between skills.
    """
    used = (
        interactions.lazy()
        .filter(pl.col("skill_id").is_not_null())
        .select("tenant_id", "event_id", "skill_id")
        .collect()
    )
    emb = (
        embeddings.lazy()
        .filter(pl.col("memory_kind") == "interaction")
        .select("tenant_id", "memory_id", "text_hash")
        .collect()
        if embeddings is not None
        else None
    )
    frames = []
    # One pass per tenant (not per row): tenants never share a vector space.
    for (tenant,), part in used.partition_by(
        "tenant_id", as_dict=True, maintain_order=True
    ).items():
        tenant_emb = (
            emb.filter(pl.col("tenant_id") == tenant).drop("tenant_id") if emb is not None else None
        )
        skills, means = _tenant_skill_vectors(part, tenant_emb, vectors, config)
        frames.append(
            skills.with_columns(
                tenant_id=pl.lit(tenant, dtype=pl.String),
                vector=pl.Series(_normalise(means).tolist(), dtype=pl.List(pl.Float32)),
            )
        )
    columns = list(tables.schema("skill_vectors"))
    if not frames:
        return tables.empty("skill_vectors")
    return pl.concat([f.select(columns) for f in frames]).sort("tenant_id", "skill_id")


def user_preferences(
    interactions: pl.DataFrame | pl.LazyFrame,
    feedback: pl.DataFrame | pl.LazyFrame,
    vectors: pl.DataFrame,
    config: SkillConfig = SkillConfig(),
    scoring: ScoringConfig = DEFAULT_SCORING,
) -> pl.DataFrame:
    """tenant_id, user_id, preference_vector (unit length, or zeros when votes cancel), n_updates."""
    rate = config.learning_rate
    weights = (
        skill_feedback(interactions, feedback, scoring)
        .filter(pl.col("vote_value") != 0)  # a neutral vote (rating 3) does not move the vector
        .sort("ts", "event_id")
        .with_columns(
            _weight=_recency_weight(rate, ["tenant_id", "user_id"]) * pl.col("vote_value"),
            n_updates=pl.len().over("tenant_id", "user_id"),
        )
        .group_by("tenant_id", "user_id", "skill_id")
        .agg(pl.col("_weight").sum(), pl.col("n_updates").first())
        .collect()
    )
    frames = []
    for (tenant,), part in weights.partition_by(
        "tenant_id", as_dict=True, maintain_order=True
    ).items():
        skills = vectors.filter(pl.col("tenant_id") == tenant).with_row_index("_skill")
        joined = part.join(skills.select("skill_id", "_skill"), on="skill_id", how="inner")
        if joined.is_empty():
            continue
        users = (
            joined.select("user_id", "n_updates")
            .unique("user_id", keep="first")
            .sort("user_id", nulls_last=True)
            .with_row_index("_user")
        )
        joined = joined.join(users.select("user_id", "_user"), on="user_id", nulls_equal=True)
        skill_matrix = _matrix(skills["vector"])
        # (users × skills) weights times (skills × dim) vectors: every user's Σ α(1−α)ⁿ⁻ⁱ·vᵢ·sᵢ at once.
        w = sparse.csr_matrix(
            (
                joined["_weight"].to_numpy(),
                (
                    joined["_user"].to_numpy().astype(np.int64),
                    joined["_skill"].to_numpy().astype(np.int64),
                ),
            ),
            shape=(users.height, skills.height),
        )
        prefs = _normalise(np.asarray(w @ skill_matrix))
        frames.append(
            users.select(
                tenant_id=pl.lit(tenant, dtype=pl.String),
                user_id=pl.col("user_id"),
                preference_vector=pl.Series(
                    prefs.astype(np.float32).tolist(), dtype=pl.List(pl.Float32)
                ),
                n_updates=pl.col("n_updates").cast(pl.Int64),
            )
        )
    if not frames:
        return tables.empty("user_preferences")
    return pl.concat(frames).sort("tenant_id", "user_id", nulls_last=True)


def alignment(preferences: pl.DataFrame, vectors: pl.DataFrame) -> pl.DataFrame:
    """Cosine of each user's preference with each of the tenant's skills (what §7 `select_skill` weighs by 0.3)."""
    joined = preferences.join(vectors.select("tenant_id", "skill_id", "vector"), on="tenant_id")
    if joined.is_empty():
        return joined.select("tenant_id", "user_id", "skill_id", alignment=pl.lit(0.0))
    p = _matrix(joined["preference_vector"])
    s = _matrix(joined["vector"])
    return joined.select("tenant_id", "user_id", "skill_id").with_columns(
        alignment=pl.Series(np.einsum("ij,ij->i", _normalise(p), _normalise(s)))
    )


def learning_effectiveness(stats: pl.DataFrame) -> dict[str, dict[str, float]]:
    """The seeds' learning metrics: share of positive feedback per skill, average reward per user."""
    per_skill = (
        stats.group_by("tenant_id", "skill_id")
        .agg(pos=pl.col("n_positive").sum(), neg=pl.col("n_negative").sum())
        .filter(pl.col("pos") + pl.col("neg") > 0)
        .select(
            key=fmt("{}/{}", "tenant_id", "skill_id"),
            value=pl.col("pos") / (pl.col("pos") + pl.col("neg")),
        )
        .sort("key")
    )
    voted = stats.filter(pl.col("n_feedback") > 0)
    per_user = (
        voted.group_by("tenant_id", "user_id")
        .agg(
            value=(pl.col("mean_reward") * pl.col("n_feedback")).sum() / pl.col("n_feedback").sum()
        )
        .select(
            key=fmt("{}/{}", "tenant_id", pl.col("user_id").fill_null("(anonymous)")),
            value="value",
        )
        .sort("key")
    )
    return {
        "positive_share_by_skill": {k: round(float(v), 4) for k, v in per_skill.iter_rows()},
        "mean_reward_by_user": {k: round(float(v), 4) for k, v in per_user.iter_rows()},
    }
