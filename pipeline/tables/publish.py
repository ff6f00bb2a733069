"""Tables outside the night's stage graph but the pack's: published versions, erasure's
tombstones, and the append-only caches (part files under
`<table>/tenant_id=<id>/<model or detector version>/`)."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import BOOL, FLOAT, INT, STR, TIMESTAMP, Table

# One row per tenant in memory_pack's metadata (not a lake table); `version` is null when the
# tenant kept its previous pack.
PACK_SUMMARY: dict[str, pl.DataType] = {
    "tenant_id": STR,
    "version": STR,
    "published": BOOL,
    "reason": STR,
    "memories": INT,
    "redacted": INT,
    "redaction_s": FLOAT,  # wall time of its PII redaction (the cache serves known texts)
    "texts_analysed": INT,  # distinct texts the cache did not know: analysed this night
    "pii_masked": INT,  # values the publish guard found and masked (the redactor missed them)
}
PACK_SUMMARY_DESCRIPTIONS: dict[str, str] = {
    "version": "the version published or kept live (null: the tenant kept its previous pack)",
    "published": "a new version went live this run",
    "reason": "what happened to the tenant's pack, in words",
    "memories": "memories in the pack",
    "redacted": "PII values redacted in its files",
    "redaction_s": "wall time of its PII redaction (the cache serves known texts)",
    "texts_analysed": "distinct texts the cache did not know: analysed this run",
    "pii_masked": "values the publish guard found and masked (the redactor missed them)",
}

TABLES: tuple[Table, ...] = (
    Table(
        "pack_versions",
        "Every kept memory pack version per tenant; is_latest marks the live one.",
        {
            "tenant_id": STR,
            "version": STR,
            "as_of": TIMESTAMP,
            "created_at": TIMESTAMP,
            "n_memories": INT,
            "bytes": INT,
            "is_latest": BOOL,
            "redacted": INT,
            "dagster_run_id": STR,
        },
        ("tenant_id", "version"),
        asset="pack_versions",
        descriptions={
            "as_of": "the instant the pack's data is of (its newest load date's end)",
            "created_at": "when it was published",
            "n_memories": "memories in memories.parquet",
            "bytes": "the version's files, in bytes",
            "is_latest": "LATEST names it: the version apps load",
            "redacted": "PII values redacted in its files",
            "dagster_run_id": "the Dagster run that published it",
        },
    ),
    Table(
        "tombstones",
        "Erased people and their event ids, as keyed hashes only: ingest keeps them out.",
        {"tenant_id": STR, "kind": STR, "subject_hash": STR, "erased_at": TIMESTAMP, "source": STR},
        ("tenant_id", "kind", "subject_hash"),
        asset=None,
        by_tenant=False,
        role="record",
        descriptions={
            "kind": "contact (the erased identifier) | event (one of their event ids)",
            "subject_hash": "HMAC with the PII key, domain erasure",
            "source": "cli | log (an erasure event)",
            "erased_at": "when the person was erased",
        },
    ),
    Table(
        "embedding_cache",
        "Vectors of distinct texts per model, append-only (written by memory_embeddings).",
        {
            "text_hash": STR,
            # The shape is the model's dimension (384 for all-MiniLM-L6-v2): `cache_schema(dim)`.
            "embedding": pl.Array(pl.Float32(), 384),
            "model": STR,
            "dim": pl.Int32(),
            "embedded_at": TIMESTAMP,
        },
        ("model", "text_hash"),
        asset=None,
        role="cache",
        descriptions={
            "embedding": "the normalised text's unit vector (dim floats)",
            "dim": "the vector's length",
            "embedded_at": "when it was computed",
        },
    ),
    Table(
        "pii_cache",
        "Redactions of distinct texts per detector version, append-only (written by "
        "memory_embeddings, the pack and the analytics snapshot).",
        {"text_hash": STR, "redacted": STR, "kinds": pl.List(STR)},
        ("text_hash",),
        asset=None,
        role="cache",
        descriptions={
            "text_hash": "HMAC-SHA256 of the text with the home key",
            "redacted": "the text with its PII replaced by placeholders ([EMAIL], …)",
            "kinds": "the kinds of PII found in it",
        },
    ),
    Table(
        "pii_names",
        "Each tenant's names that its last pack redacted wherever they were written "
        "(pipeline.pii.names), one file a tenant, replaced with each pack (and before it by "
        "memory_embeddings, with the names its new memories give added); the analyst snapshot "
        "redacts the tenant's rows with them.",
        {"word": STR, "surname": pl.Boolean()},
        ("word",),
        asset=None,
        role="cache",
        descriptions={
            "word": "a name word, as written in the tenant's texts",
            "surname": "whether it is used as a family name (redacted beside a first name)",
        },
    ),
)
