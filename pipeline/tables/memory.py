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
        descriptions={
            "status": "active | inactive | archived",
            "created_at": "the memory's ts",
            "category": "a statement's category (communication | scheduling | money | "
            "relationships | preferences | other), or the call's",
            "base_confidence": "stated confidence, else the type's base (SPEC §4.2), 0 to 1",
            "reinforced_confidence": "base_confidence + 0.1 per repeat, capped by the type",
            "decay_factor": "the type's decay over age_days, 0 to 1 (1: none)",
            "quality_score": "the memory's feedback_scores.quality_score, −1 to 1 (0: no votes)",
            "needs_reconfirmation": "high impact and confidence below 0.6: ask before acting",
            "stale": "older than 180 days: mention the age before acting",
        },
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
        descriptions={
            "check": "high_confidence_review | stale_pattern | needs_reconfirmation | conflict | "
            "archived_inference | archived_inferences_summary | promotion_candidate",
            "memory_id": "the memory found (null for a summary finding)",
            "confidence": "the memory's confidence in the latest snapshot, 0 to 1",
            "status": "the memory's status in the latest snapshot",
            "n_memories": "memories the finding stands for (1, or a summary's count)",
            "detail": "the finding in words",
        },
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
        descriptions={
            "memory_type": "the candidate's type now (inferred_pattern)",
            "proposed_type": "the type it would become once a person confirms it",
            "evidence_confidence": "base + repeats × reputation, capped, without decay: 0 to 1, "
            "at least 0.7 for a candidate",
            "confidence": "its confidence in the latest snapshot (with decay), 0 to 1",
            "repeats": "other non-conflicting statements of it (at least 2)",
            "content": "the statement's text",
            "reason": "why it is a candidate, in words",
        },
    ),
)
