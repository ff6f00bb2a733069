"""The ONNX backends: the model exported once per source and exporter (fp32, then int8 weights),
and the encoder that runs it with the same pooling as the app."""

from __future__ import annotations

import fcntl
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
from functools import lru_cache
from pathlib import Path

import numpy as np

from memorypack.encoder import embed_one, mean_pool, session_options
from memorypack.encoder import tokenizer as encoder_tokenizer
from pipeline.config import offline_environment
from pipeline.semantic.embed.backends import EXPORT_FORMAT, Backend, model_name

log = logging.getLogger(__name__)


def source_key(source: Path) -> str:
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
    folder = export_dir / f"{model_name(source)}-{source_key(source)[:16]}"
    folder.mkdir(parents=True, exist_ok=True)
    fp32 = folder / "model.onnx"
    target = fp32 if backend == "onnx" else folder / "model-int8.onnx"
    if target.exists():
        return target
    # Tenants' runs in parallel processes may need it at once: one exports, the others wait (the
    # quantizer writes fixed-name temporary files beside its output).
    with (folder / ".export.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
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
def load_onnx(source: str, backend: Backend, export_dir: str) -> OnnxEncoder:
    offline_environment()
    started = time.perf_counter()
    onnx_file = export_onnx(Path(source), backend, Path(export_dir))
    encoder = OnnxEncoder(Path(source), onnx_file, backend)
    log.info("loaded embedding model %s in %.1f s", onnx_file, time.perf_counter() - started)
    return encoder
