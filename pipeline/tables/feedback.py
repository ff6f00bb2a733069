"""The feedback stage's tables: each memory's votes and scores."""

from __future__ import annotations

from pipeline.tables.declaration import BOOL, FLOAT, INT, SIGNALS, STR, TIMESTAMP, Table

TABLES: tuple[Table, ...] = (
    Table(
        "feedback_scores",
        "Per memory: votes per signal, smoothed quality_score, Wilson quality_lower (rank by it), "
        "reputation.",
        {
            "tenant_id": STR,
            "memory_id": STR,
            "memory_kind": STR,
            **{f"n_{signal}": INT for signal in SIGNALS},
            "n_feedback": INT,
            "n_positive": INT,
            "n_negative": INT,
            "rating_mean": FLOAT,
            "positive_mass": FLOAT,
            "negative_mass": FLOAT,
            "quality_score": FLOAT,
            "quality_lower": FLOAT,
            "naive_score": FLOAT,
            "has_correction": BOOL,
            "last_feedback_at": TIMESTAMP,
            "last_validated_at": TIMESTAMP,
            "reputation": FLOAT,
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
