"""Each pack file's columns and their Arrow types (SPEC §5), declared once: the publisher writes
them (the pipeline derives its frames' schemas from here), the loader checks them."""

from __future__ import annotations

import pyarrow as pa

STR = pa.string()
TIMESTAMP = pa.timestamp("us", tz="UTC")
FLOAT = pa.float64()
INT = pa.int64()
BOOL = pa.bool_()
_STRINGS = pa.list_(pa.string())

# The columns each pack file always has (a file built from a lake table may carry more of its
# columns: the loader ignores those).
FILE_COLUMNS: dict[str, dict[str, pa.DataType]] = {
    "memories.parquet": {
        "tenant_id": STR,
        "memory_id": STR,
        "memory_kind": STR,
        "contact_id": STR,
        "memory_type": STR,
        "kind": STR,
        "system": STR,
        "skill_id": STR,
        "user_id": STR,
        "category": STR,
        "impact_level": STR,
        "text": STR,
        "output": STR,
        "tags": _STRINGS,
        "confidence": FLOAT,
        "status": STR,
        "needs_reconfirmation": BOOL,
        "stale": BOOL,
        "last_confirmed": TIMESTAMP,
        "quality_score": FLOAT,
        "quality_lower": FLOAT,
        "n_feedback": INT,
        "has_correction": BOOL,
        "has_conflict": BOOL,
        "has_embedding": BOOL,
        "ts": TIMESTAMP,
        # The audit's promotion candidate (SPEC §4.2): the type a person may confirm it as, and
        # why. Listed for the app to ask about, never applied.
        "promotion_to": STR,
        "promotion_reason": STR,
    },
    "summaries.parquet": {
        "tenant_id": STR,
        "scope": STR,
        "contact_id": STR,
        "system": STR,
        "kind": STR,
        "cluster_id": STR,
        "summary": STR,
        "representative_id": STR,
        "member_ids": _STRINGS,
        "n_members": INT,
        "confidence": FLOAT,
        "tags": _STRINGS,
        "first_seen": TIMESTAMP,
        "last_seen": TIMESTAMP,
    },
    "conflicts.parquet": {
        "tenant_id": STR,
        "contact_id": STR,
        "memory_id_a": STR,
        "memory_id_b": STR,
        "preferred_id": STR,
        "reason": STR,
        "subject": STR,
        "text_a": STR,
        "text_b": STR,
    },
    "few_shot.parquet": {
        "tenant_id": STR,
        "system": STR,
        "kind": STR,
        "skill_id": STR,
        "rank": INT,
        "memory_id": STR,
        "input": STR,
        "output": STR,
        "is_corrected": BOOL,
        "quality_lower": FLOAT,
        "n_feedback": INT,
        "ts": TIMESTAMP,
        "why": STR,
    },
    "templates.parquet": {
        "tenant_id": STR,
        "skill_id": STR,
        "version": INT,
        "template": STR,
        "is_current": BOOL,
        "eval_accuracy": FLOAT,
        "eval_margin": FLOAT,
        "evidence": STR,
        "policy_id": STR,
        "created_at": TIMESTAMP,
    },
    "skills.parquet": {
        "tenant_id": STR,
        "user_id": STR,
        "skill_id": STR,
        "usage": INT,
        "n_positive": INT,
        "n_negative": INT,
        "positive_share": FLOAT,
        "ema_confidence": FLOAT,
        "mean_reward": FLOAT,
        "last_used_at": TIMESTAMP,
    },
    "vectors.parquet": {
        "tenant_id": STR,
        "owner": STR,  # "user" (preference vector) | "skill" (mean embedding of its interactions)
        "owner_id": STR,
        "vector": pa.list_(pa.float32()),
        "n": INT,
    },
}
# The memories.parquet columns the loader cannot do without; packs published before the others
# lack some of them (read as nulls).
REQUIRED_MEMORY_COLUMNS = (
    *("tenant_id", "memory_id", "contact_id", "kind", "memory_type", "status", "text"),
    *("skill_id", "confidence", "quality_score", "last_confirmed", "ts", "stale"),
    *("needs_reconfirmation", "n_feedback", "tags"),
)
