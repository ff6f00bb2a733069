"""The memory-state tables: decay, reinforcement, promotion and what is known of each person."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import BOOL, FLOAT, INT, STR, TIMESTAMP, Table

TABLES: tuple[Table, ...] = (
    Table(
        "decay_snapshots",
        "Point-in-time confidence, status and flags of every memory, one partition per day "
        "(as_of = next 00:00 UTC): each day whose data changed and each day a run asked for; a "
        "day without data is snapshotted only when asked (then it is the day before aged).",
        {
            "as_of": TIMESTAMP,
            "tenant_id": STR,
            "memory_id": STR,
            "memory_kind": STR,
            "memory_type": STR,
            "contact_id": STR,
            "impact_level": STR,
            "category": STR,
            "created_at": TIMESTAMP,
            "base_confidence": FLOAT,
            "reinforcement_count": INT,
            "reinforced_confidence": FLOAT,
            "last_reinforced_at": TIMESTAMP,
            "last_validated_at": TIMESTAMP,
            "last_confirmed": TIMESTAMP,
            "age_days": FLOAT,
            "decay_factor": FLOAT,
            "reputation": FLOAT,
            "quality_score": FLOAT,
            "n_feedback": INT,
            "confidence": FLOAT,
            "status": STR,
            "needs_reconfirmation": BOOL,
            "stale": BOOL,
            "snapshot_date": pl.Date(),
        },
        ("tenant_id", "snapshot_date", "memory_id"),
        asset="decay_snapshots",
        partition="snapshot_date",
        descriptions={"status": "active | inactive | archived"},
    ),
    Table(
        "memory_audit",
        "Monthly review findings of the latest snapshot: re-check, stale patterns, archive "
        "summary, conflicts, promotions.",
        {
            "as_of": TIMESTAMP,
            "tenant_id": STR,
            "contact_id": STR,
            "check": STR,
            "memory_id": STR,
            "memory_type": STR,
            "confidence": FLOAT,
            "status": STR,
            "age_days": FLOAT,
            "n_memories": INT,
            "detail": STR,
        },
        # Findings, not entities: a summary finding has no memory, a memory may have several.
        (),
        asset="memory_audit",
    ),
    Table(
        "promotion_candidates",
        "Inferred patterns that could become confirmed ones: listed for a person to confirm, "
        "never applied.",
        {
            "as_of": TIMESTAMP,
            "tenant_id": STR,
            "contact_id": STR,
            "memory_id": STR,
            "memory_type": STR,
            "proposed_type": STR,
            "evidence_confidence": FLOAT,
            "confidence": FLOAT,
            "repeats": INT,
            "last_confirmed": TIMESTAMP,
            "content": STR,
            "reason": STR,
        },
        ("tenant_id", "memory_id"),
        asset="promotion_candidates",
    ),
)
