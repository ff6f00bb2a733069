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
            **{f"n_{signal}": f"{signal} signals about the memory" for signal in SIGNALS},
            "rating_mean": "mean 1 to 5 rating of its feedback (null: none rated)",
            "positive_mass": "the votes' positive weight: Σ signal weight × (1 + value) / 2, "
            "0 up (a thumbs_up weighs 1)",
            "negative_mass": "the votes' negative weight: Σ signal weight × (1 − value) / 2, 0 up",
            "naive_score": "the seeds' baseline (n_positive − n_negative) / max(n_feedback, 1), "
            "−1 to 1: what quality_score improves on",
            "has_correction": "a person corrected the output",
        },
    ),
)
