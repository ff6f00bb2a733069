"""The semantic stage's tables: embeddings, neighbours, conflicts, consolidation and the
fingerprints that let an incremental night skip unchanged contacts."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import _F, _I, _S, _TS, TYPE_COUNT_FIELDS, Table

_FINGERPRINT: dict[str, pl.DataType] = {
    "tenant_id": _S,
    "contact_id": _S,
    "n": _I,
    "digest": pl.UInt64(),
    "salt": _S,
}

TABLES: tuple[Table, ...] = (
    Table(
        "memory_embeddings",
        "Which vector each memory has: its text_hash in the embedding cache, and the model.",
        {"tenant_id": _S, "memory_id": _S, "memory_kind": _S, "text_hash": _S, "model": _S},
        ("tenant_id", "memory_id"),
        asset="memory_embeddings",
        descriptions={"text_hash": "key of the vector in embedding_cache"},
    ),
    Table(
        "memory_conflicts",
        "Pairs of memories that cannot both be true; both stay, preferred_id by the source "
        "hierarchy.",
        {
            "tenant_id": _S,
            "contact_id": _S,
            "memory_id_a": _S,
            "memory_id_b": _S,
            "preferred_id": _S,
            "reason": _S,
            "subject": _S,
            "memory_type_a": _S,
            "memory_type_b": _S,
            "subject_similarity": pl.Float32(),
        },
        ("tenant_id", "memory_id_a", "memory_id_b"),
        asset="memory_conflicts",
    ),
    Table(
        "conflict_groups",
        "Fingerprint of each contact's statements when memory_conflicts last looked at them: "
        "unchanged contacts keep their rows.",
        _FINGERPRINT,
        ("tenant_id", "contact_id"),
        asset="conflict_groups",
        role="bookkeeping",
    ),
    Table(
        "consolidated_summaries",
        "One row per cluster of near-duplicate memories: representative text, members, counts.",
        {
            "tenant_id": _S,
            "scope": _S,
            "contact_id": _S,
            "system": _S,
            "kind": _S,
            "cluster_id": _S,
            "summary": _S,
            "representative_id": _S,
            "member_ids": pl.List(_S),
            "n_members": _I,
            "n_by_type": pl.Struct({name: _I for name in TYPE_COUNT_FIELDS}),
            "confidence": _F,
            "tags": pl.List(_S),
            "first_seen": _TS,
            "last_seen": _TS,
        },
        ("tenant_id", "cluster_id"),
        asset="consolidated_summaries",
        descriptions={"scope": "statement | interaction"},
    ),
    Table(
        "memory_reinforcement",
        "Per statement: other non-conflicting members of its cluster (repeats) and the latest.",
        {
            "tenant_id": _S,
            "memory_id": _S,
            "cluster_id": _S,
            "reinforcement_count": _I,
            "last_reinforced_at": _TS,
            "reinforced_at": pl.List(_TS),
        },
        ("tenant_id", "memory_id"),
        asset="memory_reinforcement",
        descriptions={
            "reinforced_at": "every repeat dated: decay as of an earlier day counts only the "
            "repeats known by then"
        },
    ),
    Table(
        "consolidation_groups",
        "Fingerprint of each statement group when it was last clustered: unchanged groups keep "
        "their clusters.",
        _FINGERPRINT,
        ("tenant_id", "contact_id"),
        asset="consolidation_groups",
        role="bookkeeping",
    ),
)
