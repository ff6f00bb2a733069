"""Assemble one tenant's pack content from the lake tables (pipeline side: polars, numpy)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl

from pipeline import tables
from pipeline.publish.content import (
    FILL_ROWS,
    FLOATS,
    PACK_CONFLICT_SCHEMA,
    PASS_THROUGH,
    POLICY_METRICS,
    STRING,
    VECTOR_SCHEMA,
    EmbeddingMatrix,
    PackContent,
    PackInputs,
)
from pipeline.publish.inputs import INPUT_TABLES, load_inputs
from pipeline.publish.memories import pack_memories
from pipeline.publish.models import encoder_files
from pipeline.publish.redaction import redact_pack, with_subject_side
from pipeline.semantic.embed.texts import normalise_text, text_hashes
from pipeline.storage.vectors import TextVectors

# load_inputs is the build's other half: callers read a tenant's lake folders, then build its pack.
__all__ = ["build_pack", "load_inputs"]


def read_embeddings(
    inputs: PackInputs, memories: pl.DataFrame
) -> tuple[EmbeddingMatrix, str | None]:
    """(matrix, model): row i ↔ memories row i, float32, unit length, the vector of the pack's
    own (redacted) text (SPEC §5 round 3: the vector of the original would carry what the text
    hides); a memory without a memory_embeddings row is a zero row. The model is the one most of
    the tenant's memories were embedded with (the vectors' own model, not the cache's, which
    keeps others). Vectors are found by the cache's key of the text (the normalised text's
    sha256). memory_embeddings embedded the redacted text (`pipeline.semantic.embed.redacted`),
    so nearly every one is there; the rest (a name only the pack's other files gave, a text cut
    to MAX_FIELD_CHARS, a memory embedded before vectors were of redacted text) are encoded here
    once and kept in the cache."""
    table = inputs.frame(
        "memory_embeddings", {"memory_id": STRING, "text_hash": STRING, "model": STRING}
    )
    models = table["model"].drop_nulls()
    model = str(models.mode().sort().first()) if models.len() else None
    empty = EmbeddingMatrix.of(np.zeros((memories.height, 0), dtype=np.float32))
    if inputs.cache is None or model is None:
        return empty, model
    keys = memories.filter(pl.col("memory_id").is_in(table["memory_id"].implode())).select(
        "memory_id", normalise_text(pl.col("text")).alias("text")
    )
    keys = keys.with_columns(text_hashes(keys["text"]))
    hashes = memories.select("memory_id").join(
        keys.select("memory_id", "text_hash"), on="memory_id", how="left", maintain_order="left"
    )["text_hash"]
    vectors = inputs.cache.vectors(model, keys["text_hash"])
    if _embed_new(inputs, model, keys.filter(~vectors.has(keys["text_hash"]))):
        vectors = inputs.cache.vectors(model, keys["text_hash"])
    if not len(vectors):
        return empty, model
    return EmbeddingMatrix(unit_blocks(vectors, hashes), memories.height, vectors.dim), model


def _embed_new(inputs: PackInputs, model: str, new: pl.DataFrame) -> bool:
    """Encode `new` texts (text, text_hash: none in the cache) with the embedding stage's encoder
    and keep their vectors in the cache under `model`; whether any were. With another encoder
    installed than the one that made `model`'s vectors, none is (those memories get no vector)."""
    from pipeline.semantic.embed import EmbedConfig, available_backend, embed_with_cache, model_name

    config = EmbedConfig(export_dir=inputs.models_dir)
    if inputs.cache is None or new.is_empty():
        return False
    if model_name(None, available_backend(config.backend)) != model:
        return False
    result = embed_with_cache(new.unique("text_hash"), None, name=model, config=config)
    inputs.cache.append(model, result.fresh)
    return result.n_new > 0


def unit_blocks(
    vectors: TextVectors, hashes: pl.Series, block: int = FILL_ROWS
) -> Iterator[np.ndarray]:
    """Row i: the unit vector of hashes[i] (zeros where it has none), `block` rows at a time: the
    matrix is the pack's largest array, and is never made whole (`EmbeddingMatrix`)."""
    present = vectors.has(hashes).fill_null(False).to_numpy()
    for start in range(0, len(hashes), block):
        found = present[start : start + block]
        rows = np.zeros((len(found), vectors.dim), dtype=np.float32)
        if found.any():
            rows[found] = vectors.of(hashes.slice(start, block).filter(pl.Series(found)))
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        np.divide(rows, norms, out=rows, where=norms > 0)
        yield rows


def _vectors(inputs: PackInputs) -> pl.DataFrame:
    users = inputs.frame(
        "user_preferences",
        {
            "tenant_id": STRING,
            "user_id": STRING,
            "preference_vector": FLOATS,
            "n_updates": pl.Int64(),
        },
    ).select(
        "tenant_id",
        pl.lit("user").alias("owner"),
        pl.col("user_id").alias("owner_id"),
        pl.col("preference_vector").cast(FLOATS).alias("vector"),
        pl.col("n_updates").cast(pl.Int64).alias("n"),
    )
    skills = inputs.frame(
        "skill_vectors",
        {"tenant_id": STRING, "skill_id": STRING, "vector": FLOATS, "n_interactions": pl.Int64()},
    ).select(
        "tenant_id",
        pl.lit("skill").alias("owner"),
        pl.col("skill_id").alias("owner_id"),
        pl.col("vector").cast(FLOATS),
        pl.col("n_interactions").cast(pl.Int64).alias("n"),
    )
    return (
        pl.concat([users, skills], how="vertical_relaxed")
        .cast(pl.Schema(VECTOR_SCHEMA))
        .sort("owner", "owner_id")
    )


def _conflicts(inputs: PackInputs, memories: pl.DataFrame) -> pl.DataFrame:
    texts = memories.select("memory_id", "text")
    frame = inputs.frame("memory_conflicts", PACK_CONFLICT_SCHEMA).drop(
        "text_a", "text_b", strict=False
    )
    return (
        frame.join(
            texts.rename({"memory_id": "memory_id_a", "text": "text_a"}),
            on="memory_id_a",
            how="left",
        )
        .join(
            texts.rename({"memory_id": "memory_id_b", "text": "text_b"}),
            on="memory_id_b",
            how="left",
        )
        .sort("memory_id_a", "memory_id_b")
    )


def _models_and_metrics(
    inputs: PackInputs, model: str | None, dim: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    models: dict[str, Any] = {
        "embedding": {"model": model or "unknown", "dim": dim},
        "policy_id": None,
    }
    metrics: dict[str, Any] = {"dpo": None}
    mine = inputs.rows("dpo_runs")
    if mine is not None and mine.height:
        trained = mine.filter(pl.col("status") == "trained") if "status" in mine.columns else mine
        row = (trained if trained.height else mine).row(-1, named=True)
        models["policy_id"] = (
            row.get("policy_id") if row.get("status", "trained") == "trained" else None
        )
        metrics["dpo"] = {k: row[k] for k in POLICY_METRICS if k in row}
    return models, metrics


def build_pack(inputs: PackInputs, progress: Callable[[str], None] | None = None) -> PackContent:
    """Every file of the inputs' tenant's pack, from its own rows, with PII redacted (what the
    redaction is doing goes to `progress`)."""
    memories = pack_memories(inputs)
    frames: dict[str, pl.DataFrame] = {"memories.parquet": memories}
    frames["conflicts.parquet"] = with_subject_side(_conflicts(inputs, memories))
    for file_name, (table, schema, keys) in PASS_THROUGH.items():
        frames[file_name] = inputs.frame(table, schema).sort(keys, nulls_last=True)
    frames["vectors.parquet"] = _vectors(inputs)

    redactions, names = redact_pack(inputs, frames, progress)
    embeddings, embedding_model = read_embeddings(inputs, frames["memories.parquet"])
    models, metrics = _models_and_metrics(inputs, embedding_model, embeddings.dim)
    encoder = (
        encoder_files(embedding_model, embeddings.dim, inputs.models_dir)
        if inputs.models_dir is not None
        else None
    )
    if encoder is not None:
        models["embedding"]["encoder"] = encoder.spec
    table_rows = {
        name: None
        if name in inputs.missing
        else int(inputs.tables[name].select(pl.len()).collect().item())
        for name in INPUT_TABLES
        if name in inputs.missing or "tenant_id" in inputs.columns(name)
    }
    input_info: dict[str, Any] = {
        "run_date": inputs.run_date.isoformat(),
        "load_dates": inputs.load_dates,
        "events": dict(sorted(inputs.event_counts.items())),
        "decay_snapshot": inputs.decay_snapshot,
        "table_rows": table_rows,
        "missing_tables": inputs.missing,
    }
    uplift = inputs.frame("pack_uplift", tables.schema("pack_uplift"))
    if not uplift.is_empty():  # what the receipts measured of earlier versions (SPEC §4.9)
        floats = [c for c, t in uplift.schema.items() if t == pl.Float64]
        input_info["uplift"] = (
            uplift.drop("tenant_id")
            .with_columns(pl.col(floats).round(4))
            .sort("pack_version", "skill_id")
            .to_dicts()
        )
    return PackContent(
        inputs.tenant,
        inputs.as_of,
        frames,
        embeddings,
        models,
        metrics,
        input_info,
        redactions,
        model_files=encoder.sources if encoder is not None else {},
        names=names,
    )
