"""The feedback stage's tables: each memory's votes and scores."""

from __future__ import annotations

from pipeline.tables.declaration import _B, _F, _I, _S, _TS, SIGNALS, Table

TABLES: tuple[Table, ...] = (
    Table(
        "feedback_scores",
        "Per memory: votes per signal, smoothed quality_score, Wilson quality_lower (rank by it), "
        "reputation.",
        {
            "tenant_id": _S,
            "memory_id": _S,
            "memory_kind": _S,
            **{f"n_{signal}": _I for signal in SIGNALS},
            "n_feedback": _I,
            "n_positive": _I,
            "n_negative": _I,
            "rating_mean": _F,
            "positive_mass": _F,
            "negative_mass": _F,
            "quality_score": _F,
            "quality_lower": _F,
            "naive_score": _F,
            "has_correction": _B,
            "last_feedback_at": _TS,
            "last_validated_at": _TS,
            "reputation": _F,
        },
        ("tenant_id", "memory_id"),
        asset="feedback_scores",
        descriptions={
            "memory_kind": "interaction | statement",
            "quality_lower": "Wilson lower bound of the positive share: rank by it",
            "reputation": "exactly 1.0 without feedback",
        },
    ),
)
