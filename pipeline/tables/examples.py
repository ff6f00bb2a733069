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
    ),
)
