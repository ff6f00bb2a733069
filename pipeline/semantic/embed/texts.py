"""Which text each memory is embedded by, and its cache key: the sha256 of the normalised text."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import polars as pl

from pipeline import tables

# A memory embedding's keys, with the text it is embedded by (no table holds the text).
MEMORY_TEXT_SCHEMA: dict[str, pl.DataType] = {
    **tables.schema("memory_embeddings", ("tenant_id", "memory_id", "memory_kind")),
    "text": pl.String(),
    **tables.schema("memory_embeddings", ("text_hash",)),
}


def normalise_text(expr: pl.Expr) -> pl.Expr:
    """The cache key's text: NFKC, lower case, single spaces, trimmed.

    Lower-casing is safe because all-MiniLM-L6-v2 uses an uncased tokenizer (it lower-cases
    anyway), so two texts with the same key get the same vector.
    """
    return (
        expr.fill_null("")
        .str.normalize("NFKC")
        .str.to_lowercase()
        .str.replace_all(r"\s+", " ")
        .str.strip_chars()
    )


def text_hashes(texts: pl.Series) -> pl.Series:
    """sha256 hex of already normalised texts (hashed once per distinct text)."""
    distinct = texts.unique()
    # hashlib is one C call per distinct text; polars has no sha256 expression.
    digests = pl.Series(
        "text_hash",
        [hashlib.sha256(t.encode()).hexdigest() for t in distinct.to_list()],
        dtype=pl.String,  # also when there is no text at all
    )
    lookup = pl.DataFrame({"text": distinct, "text_hash": digests})
    return pl.DataFrame({"text": texts}).join(lookup, on="text", how="left")["text_hash"]


def memory_texts(
    interactions: pl.DataFrame | pl.LazyFrame,
    statements: pl.DataFrame | pl.LazyFrame,
    known: pl.DataFrame | None = None,
    redact: Callable[[pl.DataFrame], pl.DataFrame] | None = None,
) -> pl.DataFrame:
    """One row per memory: statements embed `content`, interactions embed `input` (the request),
    passed through `redact` (rows tenant_id, raw → the same, raw redacted: `memory_redaction`,
    the text the pack holds) before they are normalised.

    `known` (tenant_id, memory_id, memory_kind, text_hash: the last memory_embeddings, limited
    by the caller to texts whose vector is cached) saves the work for memories seen before: an
    event's text never changes, so only the others are normalised and hashed. Known rows carry
    no `text` (`embed_with_cache` refuses to encode them); a memory that is gone drops out.
    """
    memories = pl.concat(
        [
            interactions.lazy().select(
                "tenant_id",
                pl.col("event_id").alias("memory_id"),
                pl.lit("interaction").alias("memory_kind"),
                pl.col("input").alias("raw"),
            ),
            statements.lazy().select(
                "tenant_id",
                pl.col("event_id").alias("memory_id"),
                pl.lit("statement").alias("memory_kind"),
                pl.col("content").alias("raw"),
            ),
        ]
    )
    keys = ["tenant_id", "memory_id", "memory_kind"]
    old = pl.DataFrame(schema=MEMORY_TEXT_SCHEMA)
    if known is not None and known.height:
        old = (
            memories.select(keys)
            .join(known.lazy().select(*keys, "text_hash"), on=keys)
            .with_columns(text=pl.lit(None, pl.String))
            .select(list(MEMORY_TEXT_SCHEMA))
            .collect()
        )
        memories = memories.join(old.lazy().select(keys), on=keys, how="anti")
    raw = memories.collect()
    if redact is not None and raw.height:
        raw = redact(raw)
    new = raw.select(*keys, normalise_text(pl.col("raw")).alias("text"))
    new = new.with_columns(text_hashes(new["text"]))
    return pl.concat([old, new.select(list(MEMORY_TEXT_SCHEMA))]).sort(
        "tenant_id", "memory_kind", "memory_id"
    )
