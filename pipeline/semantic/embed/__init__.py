"""Embeddings (SPEC §4.3): memory texts → unit-length float32 vectors, cached by sha256 of the text.

Read in data order: texts (what is embedded), redacted (its text as the pack holds it), backends
(which model, run how), onnx_backend (the export and its encoder), models (loading), encoding
(texts → vectors, with the cache), exact (the texts near a decision again in fp32, so that
decisions do not move with the CPU)."""

from pipeline.semantic.embed.backends import (
    DEFAULT_MODEL_NAME,
    EXPORT_FORMAT,
    INT8_SCHEME,
    MODEL_ENV,
    ONNX_BACKENDS,
    Backend,
    available_backend,
    default_export_dir,
    model_name,
    resolve_model_path,
)
from pipeline.semantic.embed.encoding import (
    EmbedConfig,
    EmbedResult,
    Progress,
    cache_schema,
    embed_with_cache,
    encode,
    vectors_column,
)
from pipeline.semantic.embed.exact import (
    DECISION_MARGIN,
    ExactVectors,
    decision_vectors,
    fp32_vectors,
    redacted_texts,
)
from pipeline.semantic.embed.models import backend_of, load_model, model_dim
from pipeline.semantic.embed.onnx_backend import OnnxEncoder, export_onnx, load_onnx, source_key
from pipeline.semantic.embed.redacted import MemoryRedaction, memory_redaction
from pipeline.semantic.embed.texts import (
    MEMORY_TEXT_SCHEMA,
    memory_texts,
    normalise_text,
    text_hashes,
)

__all__ = [
    "DECISION_MARGIN",
    "DEFAULT_MODEL_NAME",
    "EXPORT_FORMAT",
    "INT8_SCHEME",
    "MEMORY_TEXT_SCHEMA",
    "MODEL_ENV",
    "ONNX_BACKENDS",
    "Backend",
    "EmbedConfig",
    "EmbedResult",
    "ExactVectors",
    "MemoryRedaction",
    "OnnxEncoder",
    "Progress",
    "available_backend",
    "backend_of",
    "cache_schema",
    "decision_vectors",
    "default_export_dir",
    "embed_with_cache",
    "encode",
    "export_onnx",
    "fp32_vectors",
    "load_model",
    "load_onnx",
    "memory_redaction",
    "memory_texts",
    "model_dim",
    "model_name",
    "normalise_text",
    "redacted_texts",
    "resolve_model_path",
    "source_key",
    "text_hashes",
    "vectors_column",
]
