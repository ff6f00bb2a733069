"""Assemble one tenant's pack content from the lake tables (pipeline side: polars, numpy)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl

from memorypack.format import MAX_FIELD_CHARS, TRUNCATION_MARK
from pipeline import tables
from pipeline.pii.names import TenantNames, tenant_names
from pipeline.publish.content import (
    ENUM_COLUMNS,
    FILL_ROWS,
    FLOATS,
    ID_COLUMNS,
    PACK_CONFLICT_SCHEMA,
    PASS_THROUGH,
    POLICY_METRICS,
    STRING,
    STRINGS,
    VECTOR_SCHEMA,
    EmbeddingMatrix,
    PackContent,
    PackInputs,
)
from pipeline.publish.inputs import INPUT_TABLES, load_inputs, tenant_rows
from pipeline.publish.memories import pack_memories
from pipeline.publish.models import encoder_files
from pipeline.semantic.embed.texts import normalise_text, text_hashes
from pipeline.semantic.wording import speaker
from pipeline.storage.vectors import TextVectors

# load_inputs is the build's other half: callers read the lake, then build each tenant.
__all__ = ["build_pack", "cut_long_texts", "load_inputs"]


def read_embeddings(
    inputs: PackInputs, tenant: str, memories: pl.DataFrame, originals: pl.Series
) -> tuple[EmbeddingMatrix, str | None]:
    """(matrix, model): row i ↔ memories row i, float32, unit length, the vector of the pack's
    own (redacted) text (SPEC §5 round 3: the vector of the original would carry what the text
    hides; `originals`: the texts before redaction, row for row); a memory without an embedding
    is a zero row. The model is the one most of the tenant's memories were embedded with (the
    vectors' own model, not the cache's, which keeps others). A redacted text is a new text to
    the cache (keyed like memory_embeddings, by the normalised text's sha256): only texts never
    seen are encoded, and kept in the cache; an unchanged one keeps its memory_embeddings key."""
    table = tenant_rows(
        inputs,
        "memory_embeddings",
        tenant,
        {"memory_id": STRING, "text_hash": STRING, "model": STRING},
    )
    models = table["model"].drop_nulls()
    model = str(models.mode().sort().first()) if models.len() else None
    empty = EmbeddingMatrix.of(np.zeros((memories.height, 0), dtype=np.float32))
    if inputs.cache is None or model is None:
        return empty, model
    keys = (
        memories.select("memory_id", "text", originals.alias("original"))
        .join(table.unique("memory_id").select("memory_id", "text_hash"), on="memory_id")
        .filter(pl.col("text") != pl.col("original"))
        .select("memory_id", normalise_text(pl.col("text")).alias("text"))
    )
    keys = keys.with_columns(text_hashes(keys["text"]))
    aligned = (
        memories.select("memory_id")
        .join(
            table.unique("memory_id").select("memory_id", "text_hash"),
            on="memory_id",
            how="left",
            maintain_order="left",
        )
        .update(keys.select("memory_id", "text_hash"), on="memory_id", how="left")
    )
    hashes = aligned["text_hash"].drop_nulls()
    vectors = inputs.cache.vectors(model, hashes)
    if _embed_new(inputs, model, keys.filter(~vectors.has(keys["text_hash"]))):
        vectors = inputs.cache.vectors(model, hashes)
    if not len(vectors):
        return empty, model
    blocks = unit_blocks(vectors, aligned["text_hash"])
    return EmbeddingMatrix(blocks, memories.height, vectors.dim), model


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


def _vectors(inputs: PackInputs, tenant: str) -> pl.DataFrame:
    users = tenant_rows(
        inputs,
        "user_preferences",
        tenant,
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
    skills = tenant_rows(
        inputs,
        "skill_vectors",
        tenant,
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


def _conflicts(inputs: PackInputs, tenant: str, memories: pl.DataFrame) -> pl.DataFrame:
    texts = memories.select("memory_id", "text")
    frame = tenant_rows(inputs, "memory_conflicts", tenant, PACK_CONFLICT_SCHEMA).drop(
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


def _tenant_names(findings: list[pl.DataFrame], speakers: list[str]) -> TenantNames:
    """The tenant's names, from the free texts' redactions of every file and the speakers its
    conversation logs declare."""
    if not findings:
        return TenantNames(frozenset())
    table = pl.concat(findings).unique("text", maintain_order=True)
    return tenant_names(table, table["text"], speakers)


def declared_speakers(inputs: PackInputs, tenant: str) -> list[str]:
    """Who said each statement of a conversation log (`metadata.speaker`, SPEC §2): people."""
    rows = inputs.rows("memory_statements", tenant)
    if rows is None or "metadata" not in rows.columns:
        return []
    said = rows.select(speaker(pl.col("metadata"))).to_series().drop_nulls().unique().sort()
    return said.to_list()


def _spread_names(frame: pl.DataFrame, names: TenantNames) -> tuple[pl.DataFrame, int]:
    """`frame`'s free-text columns (not ids, not enumerations) with the tenant's names redacted."""
    total, columns = 0, []
    for column, dtype in frame.schema.items():
        if column in ID_COLUMNS or column in ENUM_COLUMNS or dtype not in (STRING, STRINGS):
            continue
        series, n = names.redact(frame[column])
        if n:
            columns.append(series)
            total += n
    return (frame.with_columns(columns) if columns else frame), total


def _models_and_metrics(
    inputs: PackInputs, tenant: str, model: str | None, dim: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    models: dict[str, Any] = {
        "embedding": {"model": model or "unknown", "dim": dim},
        "policy_id": None,
    }
    metrics: dict[str, Any] = {"dpo": None}
    mine = inputs.rows("dpo_runs", tenant)
    if mine is not None and "tenant_id" in mine.columns and mine.height:
        trained = mine.filter(pl.col("status") == "trained") if "status" in mine.columns else mine
        row = (trained if trained.height else mine).row(-1, named=True)
        models["policy_id"] = (
            row.get("policy_id") if row.get("status", "trained") == "trained" else None
        )
        metrics["dpo"] = {k: row[k] for k in POLICY_METRICS if k in row}
    return models, metrics


def _cut(text: pl.Expr) -> pl.Expr:
    keep = MAX_FIELD_CHARS - len(TRUNCATION_MARK)
    return (
        pl.when(text.str.len_chars() > MAX_FIELD_CHARS)
        .then(text.str.slice(0, keep) + TRUNCATION_MARK)
        .otherwise(text)
    )


def cut_long_texts(frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """Every text (identifiers and list items too) cut to MAX_FIELD_CHARS, ending with the marker,
    so one huge field cannot bloat a pack or an app's memory (loaders refuse longer ones); how
    many were cut, per column. Run after redaction, which may lengthen a text."""
    counts: dict[str, int] = {}
    cuts = []
    for column, dtype in frame.schema.items():
        if dtype not in (pl.String, STRINGS):
            continue
        texts = pl.col(column).explode() if dtype == STRINGS else pl.col(column)
        n = int(frame.select((texts.str.len_chars() > MAX_FIELD_CHARS).sum()).item())
        if n:
            counts[column] = n
            cuts.append(
                pl.col(column).list.eval(_cut(pl.element()))
                if dtype == STRINGS
                else _cut(pl.col(column))
            )
    return (frame.with_columns(cuts) if cuts else frame), counts


def _redact(
    inputs: PackInputs,
    tenant: str,
    frames: dict[str, pl.DataFrame],
    report: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Redact every file of the pack in place (`frames`) and say what was redacted; a line to
    `report` before the files and after each (a tenant's memories may take minutes)."""
    report = report or (lambda _line: None)
    rows = sum(frame.height for frame in frames.values())
    report(f"{tenant}: redacting {len(frames)} files ({rows} rows)")
    by_kind: Counter[str] = Counter()
    by_file: dict[str, dict[str, int]] = {}
    truncated: dict[str, int] = {}
    if inputs.redactor is None:
        raise ValueError("PackInputs.redactor is not set: build packs from load_inputs")
    findings: list[pl.DataFrame] = []
    for file_name in sorted(frames):
        began = time.perf_counter()
        frames[file_name], found = inputs.redactor.frame(
            frames[file_name], identifiers=ID_COLUMNS, keep=ENUM_COLUMNS, findings=findings
        )
        seconds, n = time.perf_counter() - began, frames[file_name].height
        report(
            f"{tenant}: {file_name} redacted ({n} rows, {seconds:.1f} s, {sum(found.values())} found)"
        )
        by_kind.update(found)
        if found:
            by_file[file_name] = dict(sorted(found.items()))
    inputs.redactor.flush()
    # A name found in any text of the tenant is redacted in every text of it (SPEC §5 round 3).
    names = _tenant_names(findings, declared_speakers(inputs, tenant))
    for file_name in sorted(frames):
        frames[file_name], spread = _spread_names(frames[file_name], names)
        if spread:
            by_kind["person"] += spread
            counts = by_file.setdefault(file_name, {})
            counts["person"] = counts.get("person", 0) + spread
        frames[file_name], cut = cut_long_texts(frames[file_name])
        truncated.update({f"{file_name}:{column}": n for column, n in cut.items()})
    return {
        "total": sum(by_kind.values()),
        "by_kind": dict(sorted(by_kind.items())),
        "by_file": by_file,
        "truncated": truncated,  # texts over MAX_FIELD_CHARS characters, per file:column
        # what the publish guard found and masked, per file:column and kind (pipeline.publish.masking)
        "pii_masked": {},
    }


def build_pack(
    inputs: PackInputs, tenant: str, progress: Callable[[str], None] | None = None
) -> PackContent:
    """Every file of one tenant's pack, only that tenant's rows, with PII redacted (what the
    redaction is doing goes to `progress`)."""
    memories = pack_memories(inputs, tenant)
    frames: dict[str, pl.DataFrame] = {"memories.parquet": memories}
    frames["conflicts.parquet"] = _conflicts(inputs, tenant, memories)
    for file_name, (table, schema, keys) in PASS_THROUGH.items():
        frames[file_name] = tenant_rows(inputs, table, tenant, schema).sort(keys, nulls_last=True)
    frames["vectors.parquet"] = _vectors(inputs, tenant)

    redactions = _redact(inputs, tenant, frames, progress)
    embeddings, embedding_model = read_embeddings(
        inputs, tenant, frames["memories.parquet"], memories["text"]
    )
    models, metrics = _models_and_metrics(inputs, tenant, embedding_model, embeddings.dim)
    encoder = (
        encoder_files(embedding_model, embeddings.dim, inputs.models_dir)
        if inputs.models_dir is not None
        else None
    )
    if encoder is not None:
        models["embedding"]["encoder"] = encoder.spec
    table_rows = {
        name: (
            None
            if name in inputs.missing
            else int(
                inputs.tables[name]
                .filter(pl.col("tenant_id") == tenant)
                .select(pl.len())
                .collect()
                .item()
            )
        )
        for name in INPUT_TABLES
        if name in inputs.missing or "tenant_id" in inputs.columns(name)
    }
    input_info: dict[str, Any] = {
        "run_date": inputs.run_date.isoformat(),
        "load_dates": inputs.load_dates,
        "ingest_totals_all_tenants": inputs.ingest_totals,
        "events": dict(sorted(inputs.event_counts.get(tenant, {}).items())),
        "decay_snapshot": inputs.decay_snapshot,
        "table_rows": table_rows,
        "missing_tables": inputs.missing,
    }
    uplift = tenant_rows(inputs, "pack_uplift", tenant, tables.schema("pack_uplift"))
    if not uplift.is_empty():  # what the receipts measured of earlier versions (SPEC §4.9)
        floats = [c for c, t in uplift.schema.items() if t == pl.Float64]
        input_info["uplift"] = (
            uplift.drop("tenant_id")
            .with_columns(pl.col(floats).round(4))
            .sort("pack_version", "skill_id")
            .to_dicts()
        )
    return PackContent(
        tenant,
        inputs.as_of,
        frames,
        embeddings,
        models,
        metrics,
        input_info,
        redactions,
        model_files=encoder.sources if encoder is not None else {},
    )
