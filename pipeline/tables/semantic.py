"""The semantic stage's tables: embeddings, neighbours, conflicts, consolidation and the
fingerprints that let an incremental night skip unchanged contacts."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import (
    INT,
    STR,
    TIMESTAMP,
    TYPE_COUNT_FIELDS,
    Table,
    pack_file_columns,
)

_FINGERPRINT: dict[str, pl.DataType] = {
    "tenant_id": STR,
    "contact_id": STR,
    "n": INT,
    "digest": pl.UInt64(),
    "salt": STR,
}

TABLES: tuple[Table, ...] = (
    Table(
        "memory_embeddings",
        "Which vector each memory has: its text_hash in the embedding cache, and the model.",
        {"tenant_id": STR, "memory_id": STR, "memory_kind": STR, "text_hash": STR, "model": STR},
        ("tenant_id", "memory_id"),
        asset="memory_embeddings",
        descriptions={
            "text_hash": "key of the vector in embedding_cache: the sha256 of the memory's "
            "normalised redacted text (the pack's)",
            "memory_kind": "interaction (its input is embedded) | statement (its content)",
        },
    ),
    Table(
        "memory_conflicts",
        "Pairs of memories that cannot both be true; both stay, preferred_id by the source "
        "hierarchy.",
        {
            "tenant_id": STR,
            "contact_id": STR,
            "memory_id_a": STR,
            "memory_id_b": STR,
            "preferred_id": STR,
            "reason": STR,
            "subject": STR,
            "memory_type_a": STR,
            "memory_type_b": STR,
            "subject_similarity": pl.Float32(),
        },
        ("tenant_id", "memory_id_a", "memory_id_b"),
        asset="memory_conflicts",
        descriptions={
            "preferred_id": "the side the source hierarchy prefers (explicit > correction > "
            "confirmed > inferred > single); null when neither ranks above the other",
            "reason": "supersedes (a link) | correction (against an older pattern) | "
            "opposite_polarity (always vs never about one subject)",
            "subject": "what both statements are about, as the detector read it",
            "memory_type_a": "memory_id_a's type",
            "memory_type_b": "memory_id_b's type",
            "subject_similarity": "cosine of the two subjects' embeddings, −1 to 1 (a conflict "
            "needs 0.85, a correction 0.75; null for a supersedes link)",
        },
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
            **pack_file_columns("summaries.parquet"),
            "n_by_type": pl.Struct({name: INT for name in TYPE_COUNT_FIELDS}),
        },
        ("tenant_id", "cluster_id"),
        asset="consolidated_summaries",
        descriptions={
            "scope": "statement | interaction",
            "system": "the interactions' app system (interaction clusters; null for statements)",
            "kind": "the interactions' kind within the system (null for statements)",
            "summary": "the representative member's text",
            "representative_id": "the member that stands for the cluster: the most trusted type, "
            "then the most central, then the newest",
            "member_ids": "every member's memory id, sorted",
            "n_members": "memories in the cluster",
            "confidence": "the members' highest confidence plus 0.1 per further member, capped by "
            "the representative's type (statements); the highest (interactions); 0 to 1",
            "tags": "every member's tags, sorted",
            "first_seen": "the oldest member's ts",
            "last_seen": "the newest member's ts",
            "n_by_type": "members per memory type",
        },
    ),
    Table(
        "memory_reinforcement",
        "Per statement: other non-conflicting members of its cluster (repeats) and the latest.",
        {
            "tenant_id": STR,
            "memory_id": STR,
            "cluster_id": STR,
            "reinforcement_count": INT,
            "last_reinforced_at": TIMESTAMP,
            "reinforced_at": pl.List(TIMESTAMP),
        },
        ("tenant_id", "memory_id"),
        asset="memory_reinforcement",
        descriptions={
            "reinforcement_count": "other non-conflicting members of its cluster: repeats",
            "last_reinforced_at": "when the latest repeat was said",
            "reinforced_at": "every repeat dated: decay as of an earlier day counts only the "
            "repeats known by then",
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
