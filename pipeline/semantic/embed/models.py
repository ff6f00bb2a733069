"""Loading the embedding model once per process, whichever backend runs it."""

from __future__ import annotations

import logging
import os
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from pipeline.config import offline_environment
from pipeline.semantic.embed.backends import (
    Backend,
    available_backend,
    default_export_dir,
    resolve_model_path,
)
from pipeline.semantic.embed.onnx_backend import OnnxEncoder, load_onnx

log = logging.getLogger(__name__)


def backend_of(model: Any) -> Backend:
    return model.backend if isinstance(model, OnnxEncoder) else "torch"


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
    return load_onnx(str(source), backend, str(Path(export_dir or default_export_dir()).resolve()))


def model_dim(model: Any) -> int:
    getter = (
        getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    )
    return int(getter())
