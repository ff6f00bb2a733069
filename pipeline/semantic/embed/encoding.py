"""Texts into unit-length float32 vectors, and the nightly embed that computes only the texts the
cache does not hold."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline import tables
from pipeline.semantic.embed.backends import Backend, available_backend, model_name
from pipeline.semantic.embed.models import backend_of, load_model, model_dim
from pipeline.semantic.embed.onnx_backend import OnnxEncoder

log = logging.getLogger(__name__)


TIMESTAMP = pl.Datetime("us", "UTC")


Progress = Callable[[str], None]


@dataclass(frozen=True)
class EmbedConfig:
    # Measured on 2 CPU cores: 128 texts per batch is the throughput peak (32 → ~110 texts/s,
    # 128 → ~280 texts/s, 256 → ~225 texts/s: bigger batches pad more and thrash the cache).
    # ONNX fp32 is flat from 32 to 256 (within ±5 %, 1,000 bench texts), so 128 too. The int8
    # export ignores it: one text per run (see OnnxEncoder), so a query alone is the same vector.
    batch_size: int = 128
    # Log a progress line every this many texts (a nightly run may embed 100k of them).
    progress_every: int = 5_000
    # Threads for torch on the pipeline host; None leaves torch's default (= cores).
    torch_threads: int | None = None
    # The fastest backend whose vectors agree with torch fp32 at mean cosine ≥ 0.99. Measured on
    # the bench's texts, 2 cores, side by side (machine shared, load average 5-7): onnx-int8
    # 109 texts/s, onnx 70, torch 63 (200 texts); onnx-int8 124-134 vs onnx 75-81 (1,000 texts,
    # batch 32-256). onnx-int8 agreement: mean cosine 0.9917, min 0.9856 (200 texts).
    backend: Backend = "onnx-int8"
    # Where ONNX exports are kept (made once, reused); None = <MEMORYPACK_HOME>/models/embeddings.
    export_dir: Path | None = None


def cache_schema(dim: int) -> dict[str, pl.DataType]:
    """The embedding cache's columns (pipeline.tables), its vectors `dim` long."""
    return {**tables.schema("embedding_cache"), "embedding": pl.Array(pl.Float32, dim)}


def encode(
    texts: list[str] | pl.Series,
    model: Any = None,
    batch_size: int = EmbedConfig.batch_size,
    progress: Progress | None = None,
    config: EmbedConfig | None = None,
) -> np.ndarray:
    """Unit-length float32 vectors, row i ↔ texts[i]; identical texts are encoded once.

    Distinct texts are sorted by length and cut into batches so that a batch pads to similar
    lengths; progress goes to `progress` (or the log) every `progress_every` texts.
    """
    config = config or EmbedConfig(batch_size=batch_size)
    model = model if model is not None else load_model(None, config.backend, config.export_dir)
    dim = model_dim(model)
    series = texts if isinstance(texts, pl.Series) else pl.Series("text", texts, dtype=pl.String)
    if series.len() == 0:
        return np.zeros((0, dim), dtype=np.float32)
    if config.torch_threads:
        import torch

        torch.set_num_threads(config.torch_threads)
    distinct = (
        pl.DataFrame({"text": series.fill_null("")})
        .unique("text")
        .with_columns(pl.col("text").str.len_chars().alias("n_chars"))
        .sort("n_chars", "text")
    )
    ordered = distinct["text"].to_list()
    report = progress or log.info
    vectors = np.empty((len(ordered), dim), dtype=np.float32)
    started = time.perf_counter()
    step = max(config.batch_size, config.progress_every // config.batch_size * config.batch_size)
    for begin in range(0, len(ordered), step):
        chunk = ordered[begin : begin + step]
        vectors[begin : begin + len(chunk)] = (
            model.encode(chunk, config.batch_size)
            if isinstance(model, OnnxEncoder)
            else model.encode(
                chunk,
                batch_size=config.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        )
        done = begin + len(chunk)
        elapsed = time.perf_counter() - started
        report(
            f"embedded {done}/{len(ordered)} distinct texts "
            f"({done / max(elapsed, 1e-9):.0f} texts/s)"
        )
    index = pl.DataFrame({"text": series.fill_null("")}).join(
        distinct.with_row_index("row").select("text", "row"),
        on="text",
        how="left",
        maintain_order="left",
    )
    return vectors[index["row"].to_numpy()]


@dataclass(frozen=True)
class EmbedResult:
    embeddings: pl.DataFrame  # one row per text row: its keys, text_hash and model (no vector)
    fresh: pl.DataFrame  # the vectors this call computed (cache_schema): append them to the cache
    n_new: int  # distinct texts embedded in this run
    n_cached: int  # distinct texts served from the cache
    model: str
    dim: int
    seconds: float

    @property
    def texts_per_second(self) -> float:
        return self.n_new / self.seconds if self.seconds > 0 else 0.0


def vectors_column(vectors: np.ndarray, name: str = "embedding") -> pl.Series:
    return pl.Series(name, vectors.astype(np.float32), dtype=pl.Array(pl.Float32, vectors.shape[1]))


def embed_with_cache(
    texts: pl.DataFrame,
    cache: pl.DataFrame | pl.LazyFrame | None,
    model: Any = None,
    name: str | None = None,
    now: datetime | None = None,
    config: EmbedConfig | None = None,
    progress: Progress | None = None,
    model_path: str | os.PathLike[str] | None = None,
) -> EmbedResult:
    """Encode the texts of `texts` (text, text_hash, …) that `cache` has no vector for.

    Without `model`, the model at `model_path` (see `resolve_model_path`) is loaded for
    `config.backend` only when there is something to encode: a run with nothing new never loads
    it. The cache's model name says which backend made a vector (see `model_name`); rows of
    other models are never served. Only the cache's hashes are read, never its vectors.
    """
    config = config or EmbedConfig()
    backend = backend_of(model) if model is not None else available_backend(config.backend)
    name = name or model_name(model_path, backend)
    now = now or datetime.now(UTC)
    mine = (
        cache.lazy().filter(pl.col("model") == name).select("text_hash", "dim").collect()
        if cache is not None
        else pl.DataFrame(schema={"text_hash": pl.String, "dim": pl.Int32})
    )
    cached_dims = mine["dim"].unique().to_list()
    wanted = texts.select("text_hash", "text").unique("text_hash", maintain_order=True)
    if model is None and len(cached_dims) != 1:  # dimension unknown without the model
        model = load_model(model_path, backend, config.export_dir)
    dim = model_dim(model) if model is not None else int(cached_dims[0])
    missing = wanted.join(mine.select("text_hash"), on="text_hash", how="anti")
    if missing["text"].null_count():
        raise ValueError(
            f"{missing['text'].null_count()} texts to embed have no text (a `known` row of "
            "memory_texts whose vector is not in this cache)"
        )
    started = time.perf_counter()
    fresh = pl.DataFrame(schema=cache_schema(dim))
    if missing.height:
        model = model if model is not None else load_model(model_path, backend, config.export_dir)
        vectors = encode(missing["text"], model=model, config=config, progress=progress)
        fresh = missing.select(
            "text_hash",
            vectors_column(vectors),
            model=pl.lit(name, pl.String),
            dim=pl.lit(dim, pl.Int32),
            embedded_at=pl.lit(now, TIMESTAMP),
        )
    keys = [c for c in ("tenant_id", "memory_id", "memory_kind") if c in texts.columns]
    return EmbedResult(
        embeddings=texts.select(*keys, "text_hash").with_columns(model=pl.lit(name, pl.String)),
        fresh=fresh,
        n_new=missing.height,
        n_cached=wanted.height - missing.height,
        model=name,
        dim=dim,
        seconds=time.perf_counter() - started,
    )
