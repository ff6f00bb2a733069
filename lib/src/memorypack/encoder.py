"""Text queries offline: the pipeline's own embedding model, run by ONNX Runtime (`memorypack[embed]`).

The pack's manifest names the exact model files the pipeline embedded the pack's texts with
(`models.embedding.encoder`: the ONNX export and tokenizer.json, each by sha256 and size). They
live content-addressed beside the tenant's versions, `<tenant>/models/<sha256>.<ext>`, written
once and shared by every version that uses them (a 20-90 MB model is not copied into each of the
seven kept versions, and a format-1 pack folder holds only the files format 1 lists). Loading
checks both files against the sealed manifest's sha256 before anything runs.

The encoding is `pipeline.embed.OnnxEncoder`'s: the cache key's text normalisation (NFKC, lower
case, single spaces), tokenize with padding to the longest text and truncation at the model's
`max_seq_length`, the transformer, the mean over real tokens, L2 normalisation.
"""

from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from typing import Any

import numpy as np

from memorypack.format import PackError
from memorypack.fs import Location

MODELS_DIR = "models"
# What the manifest's encoder entry must say for this code to reproduce the pipeline's vectors.
POOLING, NORMALIZE, TEXT = "mean", "l2", "nfkc_lower_single_spaces"
ROLES = {"onnx": ".onnx", "tokenizer": ".json"}
_FILE = re.compile(r"^[0-9a-f]{64}\.(onnx|json)$")
EXTRA_HINT = "pip install 'memorypack[embed]'"


class EncoderUnavailable(PackError):
    """Text queries need an encoder this pack or this install does not have (one line why)."""


def normalise(text: str) -> str:
    """The pipeline's cache-key text (pipeline.embed.normalise_text): NFKC, lower, single spaces."""
    return " ".join(unicodedata.normalize("NFKC", text or "").lower().split())


def encoder_spec(manifest: dict[str, Any]) -> dict[str, Any] | None:
    embedding = (manifest.get("models") or {}).get("embedding") or {}
    spec = embedding.get("encoder") if isinstance(embedding, dict) else None
    return spec if isinstance(spec, dict) else None


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _verified_bytes(folder: Location, entry: Any, role: str) -> bytes:
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("file"), str)
        and _FILE.match(entry["file"])
        and entry["file"].endswith(ROLES[role])
        and type(entry.get("bytes")) is int
    ):
        raise PackError(f"the manifest's encoder entry for {role} is malformed")
    path = folder / entry["file"]
    try:
        data = path.read_bytes()
    except OSError as error:
        raise EncoderUnavailable(
            f"encoder {role} {path} is unreadable: {error.strerror or error}"
        ) from None
    if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["file"][:64]:
        raise PackError(f"encoder {role} {path} does not match its sha256 (tampered?)")
    return data


def mean_pool(tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Token vectors → one unit-length float32 vector per text: the mean over the attention mask,
    then L2-normalised (the pooling the pipeline's encoder uses too, so both make one vector)."""
    weights = mask[:, :, None].astype(np.float32)
    pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)


class TextEncoder:
    """Query texts → unit-length float32 vectors, as the pipeline made the pack's vectors."""

    def __init__(self, tenant_dir: Location, spec: dict[str, Any], dim: int) -> None:
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as error:
            raise EncoderUnavailable(
                f"text queries need ONNX Runtime and tokenizers ({error.name} is missing): "
                f"{EXTRA_HINT}"
            ) from None
        if (spec.get("pooling"), spec.get("normalize"), spec.get("text")) != (
            POOLING,
            NORMALIZE,
            TEXT,
        ):
            raise EncoderUnavailable(
                "the pack's encoder uses a pooling or text normalisation this memorypack does not "
                "know: upgrade memorypack"
            )
        files = spec.get("files") or {}
        folder = tenant_dir / MODELS_DIR
        model = _verified_bytes(folder, files.get("onnx"), "onnx")
        tokenizer_json = _verified_bytes(folder, files.get("tokenizer"), "tokenizer")
        self.model = str(spec.get("model") or "")
        self.tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
        padding = self.tokenizer.padding or {}
        self.tokenizer.enable_padding(
            pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]")
        )
        self.tokenizer.enable_truncation(max_length=int(spec.get("max_seq_length") or 256))
        options = ort.SessionOptions()
        options.intra_op_num_threads = _cores()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self.dim = dim
        probe = self.encode(["memorypack"])
        if probe.shape[1] != dim:
            raise PackError(f"the pack's encoder makes {probe.shape[1]}-d vectors, the pack {dim}")

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, row i ↔ texts[i] (one batch: queries are few)."""
        encodings = self.tokenizer.encode_batch([normalise(t) for t in texts])
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        (tokens,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask})
        return mean_pool(tokens, mask)
