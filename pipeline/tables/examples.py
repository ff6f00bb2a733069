"""The examples stage's tables: skills, prompt index and the few-shot sets."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import FLOAT, INT, STR, TIMESTAMP, Table, pack_file_columns

TABLES: tuple[Table, ...] = (
    Table(
        "skill_stats",
        "Per tenant × user × skill: usage, votes, positive share, EMA confidence (rate 0.1), "
        "mean reward.",
        {
            "tenant_id": STR,
            "user_id": STR,
            "skill_id": STR,
            "usage": INT,
            "n_feedback": INT,
            "n_positive": INT,
            "n_negative": INT,
            "positive_share": FLOAT,
            "ema_confidence": FLOAT,
            "mean_reward": FLOAT,
            "last_used_at": TIMESTAMP,
            "last_feedback_at": TIMESTAMP,
        },
        ("tenant_id", "user_id", "skill_id"),
        asset="skill_stats",
        descriptions={
            "usage": "the user's calls with the skill",
            "n_feedback": "votes on those calls",
            "n_positive": "votes whose value is above 0",
            "n_negative": "votes whose value is below 0",
            "positive_share": "n_positive / (n_positive + n_negative), 0 to 1 (null: no votes)",
            "ema_confidence": "exponential moving average (rate 0.1) of (1 + vote value) / 2 "
            "from 0.5, 0 to 1: what skill selection weighs 0.7",
            "mean_reward": "mean vote value, −1 to 1",
            "last_used_at": "the user's latest call with the skill",
            "last_feedback_at": "the latest vote on those calls",
        },
    ),
    Table(
        "user_preferences",
        "Per tenant × user: preference vector in the skill-vector space, moved by votes "
        "(rate 0.1), unit length.",
        {
            "tenant_id": STR,
            "user_id": STR,
            "preference_vector": pl.List(pl.Float32()),
            "n_updates": INT,
        },
        ("tenant_id", "user_id"),
        asset="user_preferences",
        descriptions={
            "preference_vector": "unit vector (zeros when the votes cancel) in the skill vectors' "
            "space: its dot product with a skill's vector is the alignment skill selection "
            "weighs 0.3",
            "n_updates": "votes that moved it",
        },
    ),
    Table(
        "skill_vectors",
        "Per tenant × skill: mean embedding of its interactions (one-hot when no embeddings), "
        "unit length.",
        {
            "tenant_id": STR,
            "skill_id": STR,
            "vector": pl.List(pl.Float32()),
            "n_interactions": INT,
            "n_embedded": INT,
            "vector_source": STR,
        },
        ("tenant_id", "skill_id"),
        asset="skill_vectors",
        descriptions={
            "vector": "unit vector: the mean embedding of the skill's interactions (one-hot)",
            "n_interactions": "the skill's interactions",
            "n_embedded": "of those, with an embedding (0 for one-hot)",
            "vector_source": "embedding | one_hot (no interaction of the tenant had one)",
        },
    ),
    Table(
        "few_shot_sets",
        "Few-shot examples per tenant × system × kind × skill, ranked, with why.",
        {
            **pack_file_columns("few_shot.parquet"),
            "quality_score": FLOAT,
            "n_positive": INT,
            "n_negative": INT,
            "selection_score": FLOAT,
            "mmr": FLOAT,
        },
        ("tenant_id", "system", "kind", "skill_id", "rank"),
        asset="few_shot_sets",
        descriptions={
            "input": "the example's input (what the AI was asked)",
            "output": "the output shown: the corrected one when a person corrected it",
            "is_corrected": "the output is a person's correction",
            "quality_lower": "feedback_scores.quality_lower, −1 to 1 (rank by it; no probability)",
            "n_feedback": "votes about the example's interaction",
            "ts": "the interaction's ts (the correction's, when later)",
            "why": "why it was chosen, in words: votes, correction, usage, MMR value",
            "n_positive": "positive votes about the interaction",
            "n_negative": "negative votes about the interaction",
            "selection_score": "quality_lower (1.0 for a corrected output) plus up to 0.1 for "
            "an item the calls' receipts found helpful: −1 to 1.1",
            "mmr": "the maximal-marginal-relevance value it was picked at, about −1 to 0.8: 0.7 "
            "× selection_score − 0.3 × its highest cosine to an example picked before",
        },
    ),
)
