"""Each pack file's columns and their Arrow types (SPEC §5), declared once: the publisher writes
them (the pipeline derives its frames' schemas from here), the loader checks them."""

from __future__ import annotations

import pyarrow as pa

_S = pa.string()
_TS = pa.timestamp("us", tz="UTC")
_F = pa.float64()
_I = pa.int64()
_B = pa.bool_()
_STRINGS = pa.list_(pa.string())

# The columns each pack file always has (a file built from a lake table may carry more of its
# columns: the loader ignores those).
FILE_COLUMNS: dict[str, dict[str, pa.DataType]] = {
    "memories.parquet": {
        "tenant_id": _S,
        "memory_id": _S,
        "memory_kind": _S,
        "contact_id": _S,
        "memory_type": _S,
        "kind": _S,
        "system": _S,
        "skill_id": _S,
        "user_id": _S,
        "category": _S,
        "impact_level": _S,
        "text": _S,
        "output": _S,
        "tags": _STRINGS,
        "confidence": _F,
        "status": _S,
        "needs_reconfirmation": _B,
        "stale": _B,
        "last_confirmed": _TS,
        "quality_score": _F,
        "quality_lower": _F,
        "n_feedback": _I,
        "has_correction": _B,
        "has_conflict": _B,
        "has_embedding": _B,
        "ts": _TS,
        # The audit's promotion candidate (SPEC §4.2): the type a person may confirm it as, and
        # why. Listed for the app to ask about, never applied.
        "promotion_to": _S,
        "promotion_reason": _S,
        # What the calls' receipts measured of it (SPEC §4.9), when they judged it: confidently
        # harmful (its confidence cut as if a person had corrected it) or helpful (raised a
        # little). Only in packs built from nights with receipts that judged a memory.
        "usage_reason": _S,
    },
    "summaries.parquet": {
        "tenant_id": _S,
        "scope": _S,
        "contact_id": _S,
        "system": _S,
        "kind": _S,
        "cluster_id": _S,
        "summary": _S,
        "representative_id": _S,
        "member_ids": _STRINGS,
        "n_members": _I,
        "confidence": _F,
        "tags": _STRINGS,
        "first_seen": _TS,
        "last_seen": _TS,
    },
    "conflicts.parquet": {
        "tenant_id": _S,
        "contact_id": _S,
        "memory_id_a": _S,
        "memory_id_b": _S,
        "preferred_id": _S,
        "reason": _S,
        "subject": _S,
        "text_a": _S,
        "text_b": _S,
    },
    "few_shot.parquet": {
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
        "n_feedback": _I,
        "ts": _TS,
        "why": _S,
    },
    "templates.parquet": {
        "tenant_id": _S,
        "skill_id": _S,
        "version": _I,
        "template": _S,
        "is_current": _B,
        "eval_accuracy": _F,
        "eval_margin": _F,
        "evidence": _S,
        "policy_id": _S,
        "created_at": _TS,
    },
    "skills.parquet": {
        "tenant_id": _S,
        "user_id": _S,
        "skill_id": _S,
        "usage": _I,
        "n_positive": _I,
        "n_negative": _I,
        "positive_share": _F,
        "ema_confidence": _F,
        "mean_reward": _F,
        "last_used_at": _TS,
    },
    "vectors.parquet": {
        "tenant_id": _S,
        "owner": _S,  # "user" (preference vector) | "skill" (mean embedding of its interactions)
        "owner_id": _S,
        "vector": pa.list_(pa.float32()),
        "n": _I,
    },
}
# The memories.parquet columns the loader cannot do without; packs published before the others
# lack some of them (read as nulls).
REQUIRED_MEMORY_COLUMNS = (
    *("tenant_id", "memory_id", "contact_id", "kind", "memory_type", "status", "text"),
    *("skill_id", "confidence", "quality_score", "last_confirmed", "ts", "stale"),
    *("needs_reconfirmation", "n_feedback", "tags"),
)
