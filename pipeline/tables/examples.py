"""The examples stage's tables: skills, prompt index and the few-shot sets."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import _B, _F, _I, _S, _TS, Table

TABLES: tuple[Table, ...] = (
    Table(
        "skill_stats",
        "Per tenant × user × skill: usage, votes, positive share, EMA confidence (rate 0.1), "
        "mean reward.",
        {
            "tenant_id": _S,
            "user_id": _S,
            "skill_id": _S,
            "usage": _I,
            "n_feedback": _I,
            "n_positive": _I,
            "n_negative": _I,
            "positive_share": _F,
            "ema_confidence": _F,
            "mean_reward": _F,
            "last_used_at": _TS,
            "last_feedback_at": _TS,
        },
        ("tenant_id", "user_id", "skill_id"),
        asset="skill_stats",
    ),
    Table(
        "user_preferences",
        "Per tenant × user: preference vector in the skill-vector space, moved by votes "
        "(rate 0.1), unit length.",
        {
            "tenant_id": _S,
            "user_id": _S,
            "preference_vector": pl.List(pl.Float32()),
            "n_updates": _I,
        },
        ("tenant_id", "user_id"),
        asset="user_preferences",
    ),
    Table(
        "skill_vectors",
        "Per tenant × skill: mean embedding of its interactions (one-hot when no embeddings), "
        "unit length.",
        {
            "tenant_id": _S,
            "skill_id": _S,
            "vector": pl.List(pl.Float32()),
            "n_interactions": _I,
            "n_embedded": _I,
            "vector_source": _S,
        },
        ("tenant_id", "skill_id"),
        asset="skill_vectors",
    ),
    Table(
        "few_shot_sets",
        "Few-shot examples per tenant × system × kind × skill, ranked, with why.",
        {
            "tenant_id": _S,
            "system": _S,
            "kind": _S,
            "skill_id": _S,
            "rank": _I,
            "memory_id": _S,
            "input": _S,
            "output": _S,
            "is_corrected": _B,
            "quality_lower": _F,
            "quality_score": _F,
            "n_feedback": _I,
            "n_positive": _I,
            "n_negative": _I,
            "selection_score": _F,
            "mmr": _F,
            "ts": _TS,
            "why": _S,
        },
        ("tenant_id", "system", "kind", "skill_id", "rank"),
        asset="few_shot_sets",
    ),
)
