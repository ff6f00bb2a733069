"""Text queries offline: the pipeline's own embedding model, run by ONNX Runtime (`memorypack[embed]`).

The pack's manifest names the exact model files the pipeline embedded the pack's texts with
(`models.embedding.encoder`: the ONNX export and tokenizer.json, each by sha256 and size). They
live content-addressed beside the tenant's versions, `<tenant>/models/<sha256>.<ext>`, written
once and shared by every version that uses them (a 20-90 MB model is not copied into each of the
seven kept versions, and a format-1 pack folder holds only the files format 1 lists). Loading
checks both files against the sealed manifest's sha256 before anything runs.

The encoding is `pipeline.semantic.embed.OnnxEncoder`'s, through the same functions (`tokenizer`,
`session_options`, `embed_one`): the cache key's text normalisation (NFKC, lower case, single
spaces), tokenize with truncation at the model's `max_seq_length`, the transformer on one text per
run, the mean over the tokens, L2 normalisation. One text per run is what makes a query vector
equal to the pack's vector of the same text (cosine 1.0): the int8 export quantizes activations
with one scale per run's tensor (ONNX Runtime dynamic quantization), so a text run among 127
others came out slightly different (mean cosine 0.994 with the same text alone).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

import numpy as np

from memorypack.format import PackError, read_regular, sha256_file
from memorypack.fs import Location

MODELS_DIR = "models"
# What the manifest's encoder entry must say for this code to reproduce the pipeline's vectors.
POOLING, NORMALIZE, TEXT = "mean", "l2", "nfkc_lower_single_spaces"
ROLES = {"onnx": ".onnx", "tokenizer": ".json"}
_FILE = re.compile(r"^[0-9a-f]{64}\.(onnx|json)$")
EXTRA_HINT = "pip install 'memorypack[embed]'"
WARM_UP_RUNS = 3


class EncoderUnavailable(PackError):
    """Text queries need an encoder this pack or this install does not have (one line why)."""


def normalise(text: str) -> str:
    """The pipeline's cache-key text (pipeline.semantic.embed.normalise_text): NFKC, lower, single spaces."""
    return " ".join(unicodedata.normalize("NFKC", text or "").lower().split())


def check_text(text: str, what: str = "query") -> str:
    """`text`, or a one-line ValueError (a malformed argument) when it is not valid Unicode: a
    lone surrogate ("refund \\ud800") cannot be encoded, and the tokenizer would raise a bare
    TypeError deep inside."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"{what} is not valid Unicode text (a lone surrogate at character {error.start})"
        ) from None
    return text


def encoder_spec(manifest: dict[str, Any]) -> dict[str, Any] | None:
    embedding = (manifest.get("models") or {}).get("embedding") or {}
    spec = embedding.get("encoder") if isinstance(embedding, dict) else None
    return spec if isinstance(spec, dict) else None


def _model_file(entry: Any, role: str) -> str:
    """The file name a manifest's encoder entry names for `role` (<sha256>.<ext>), or PackError."""
    if not (
        isinstance(entry, dict)
        and isinstance(entry.get("file"), str)
        and _FILE.match(entry["file"])
        and entry["file"].endswith(ROLES[role])
        and type(entry.get("bytes")) is int
    ):
        raise PackError(f"the manifest's encoder entry for {role} is malformed")
    return str(entry["file"])


def _verified_bytes(folder: Location, entry: Any, role: str) -> bytes:
    """The model file's bytes, read only once it is known to be a regular file of the size the
    sealed manifest names (an 8 GB file or a link to /dev/zero is refused unread), then hashed."""
    path = folder / _model_file(entry, role)
    try:
        data = read_regular(path, entry["bytes"], f"encoder {role}", exact=True)
    except OSError as error:
        raise EncoderUnavailable(
            f"encoder {role} {path} is unreadable: {error.strerror or error}"
        ) from None
    if hashlib.sha256(data).hexdigest() != entry["file"][:64]:
        raise PackError(f"encoder {role} {path} does not match its sha256 (tampered?)")
    return data


def check_model_files(tenant_dir: Location, manifest: dict[str, Any]) -> int:
    """PackError (one line) unless every model file `manifest` names is in `<tenant>/models/`
    with the named size and sha256; returns how many it checked (0: the pack ships no model).

    What `pack verify` runs: the loader checks the same files only when an app first embeds a
    text, so a damaged shared model would otherwise be found by the first app, not the operator.
    """
    spec = encoder_spec(manifest)
    if spec is None:
        return 0
    files = spec.get("files")
    if not isinstance(files, dict):
        raise PackError("the manifest's encoder entry names no files")
    folder = tenant_dir / MODELS_DIR
    for role in ROLES:
        entry: dict[str, Any] = files.get(role) or {}
        path = folder / _model_file(entry, role)
        try:
            if not path.is_file():
                raise PackError(f"model file {path} ({role}) is missing")
            size = path.stat().st_size
            if size != entry["bytes"]:
                raise PackError(
                    f"model file {path} ({role}) has {size} bytes, the manifest says "
                    f"{entry['bytes']}"
                )
            digest = sha256_file(path, entry["bytes"])
        except OSError as error:
            raise PackError(
                f"model file {path} ({role}) is unreadable: {error.strerror or error}"
            ) from None
        if digest != entry["file"][:64]:
            raise PackError(f"model file {path} ({role}) does not match its sha256 (tampered?)")
    return len(ROLES)


def mean_pool(tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Token vectors → one unit-length float32 vector per text: the mean over the attention mask,
    then L2-normalised (the pooling the pipeline's encoder uses too, so both make one vector)."""
    weights = mask[:, :, None].astype(np.float32)
    pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)


def tokenizer(tokenizer_json: str, max_seq_length: int) -> Any:
    """tokenizer.json as the pipeline tokenizes: it pads every text to 128 tokens, so pad to the
    longest text of a call instead (a single text: not at all), and truncate where
    SentenceTransformer does (`max_seq_length`)."""
    from tokenizers import Tokenizer

    loaded = Tokenizer.from_str(tokenizer_json)
    padding = loaded.padding or {}
    loaded.enable_padding(
        pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]")
    )
    loaded.enable_truncation(max_length=max_seq_length)
    return loaded


def session_options(threads: int = 1) -> Any:
    """ONNX Runtime options for both the pipeline and the loader: one thread per run unless a
    caller runs big batches, and no spinning.

    A query is ~11 tokens: measured on 2 shared cores (int8 export, one query per run, p50/p95 ms),
    quiet: 1 thread 4.0/4.8, 2 threads 4.6/5.7, 2 spinning threads 2.5/3.4; load average 3.3:
    1 thread 3.7/8.0, 2 threads 3.4-3.7/4.5-5.4, 2 spinning 3.3-6.6/12-19; load average 5.8,
    interleaved: 1 thread 2.8/15.4, 2 threads 3.3/20.4, 2 spinning 3.0/23.7. Spinning (pool
    threads busy-wait for the next operator) wins only on an idle machine, and burns the app's
    cores between queries; without it a second thread's hand-offs cost about what it saves. One
    thread is also how the pipeline runs each text (`_cores()` texts at a time), so both run the
    very same kernels.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return options


def embed_one(session: Any, tokenizer: Any, text: str) -> np.ndarray:
    """One already normalised text → its unit-length float32 vector, in a run of its own (no
    padding, and int8 activation scales that depend on this text alone: batch independent)."""
    encoding = tokenizer.encode(text)
    ids = np.array([encoding.ids], dtype=np.int64)
    mask = np.array([encoding.attention_mask], dtype=np.int64)
    (tokens,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
    return mean_pool(tokens, mask)[0]


class TextEncoder:
    """Query texts → unit-length float32 vectors, as the pipeline made the pack's vectors."""

    def __init__(self, tenant_dir: Location, spec: dict[str, Any], dim: int) -> None:
        try:
            import onnxruntime as ort
            import tokenizers  # noqa: F401
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
        self.tokenizer = tokenizer(
            tokenizer_json.decode("utf-8"), int(spec.get("max_seq_length") or 256)
        )
        self.session = ort.InferenceSession(
            model, session_options(), providers=["CPUExecutionProvider"]
        )
        self.dim = dim
        # The first runs allocate ONNX Runtime's buffers: pay them here, not on the app's first
        # query (see WARM_UP_RUNS).
        for _ in range(WARM_UP_RUNS):
            probe = embed_one(self.session, self.tokenizer, "memorypack warm-up query")
        if probe.shape[0] != dim:
            raise PackError(f"the pack's encoder makes {probe.shape[0]}-d vectors, the pack {dim}")

    def encode(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 vectors, row i ↔ texts[i], each text in a run of its own as the
        pipeline embedded the pack's texts (see the module docstring)."""
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            text = normalise(check_text(text, "text to embed"))
            vectors[row] = embed_one(self.session, self.tokenizer, text)
        return vectors
