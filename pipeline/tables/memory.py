"""The memory-state tables: decay, reinforcement, promotion and what is known of each person."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import _B, _F, _I, _S, _TS, Table

TABLES: tuple[Table, ...] = (
    Table(
        "decay_snapshots",
        "Point-in-time confidence, status and flags of every memory, one partition per day "
        "(as_of = next 00:00 UTC): each day whose data changed and each day a run asked for; a "
        "day without data is snapshotted only when asked (then it is the day before aged).",
        {
            "as_of": _TS,
            "tenant_id": _S,
            "memory_id": _S,
            "memory_kind": _S,
            "memory_type": _S,
            "contact_id": _S,
            "impact_level": _S,
            "category": _S,
            "created_at": _TS,
            "base_confidence": _F,
            "reinforcement_count": _I,
            "reinforced_confidence": _F,
            "last_reinforced_at": _TS,
            "last_validated_at": _TS,
            "last_confirmed": _TS,
            "age_days": _F,
            "decay_factor": _F,
            "reputation": _F,
            "quality_score": _F,
            "n_feedback": _I,
            "confidence": _F,
            "status": _S,
            "needs_reconfirmation": _B,
            "stale": _B,
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
            "as_of": _TS,
            "tenant_id": _S,
            "contact_id": _S,
            "check": _S,
            "memory_id": _S,
            "memory_type": _S,
            "confidence": _F,
            "status": _S,
            "age_days": _F,
            "n_memories": _I,
            "detail": _S,
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
            "as_of": _TS,
            "tenant_id": _S,
            "contact_id": _S,
            "memory_id": _S,
            "memory_type": _S,
            "proposed_type": _S,
            "evidence_confidence": _F,
            "confidence": _F,
            "repeats": _I,
            "last_confirmed": _TS,
            "content": _S,
            "reason": _S,
        },
        ("tenant_id", "memory_id"),
        asset="promotion_candidates",
    ),
)
