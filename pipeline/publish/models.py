"""Ship the embedding model a pack's vectors were made with, so apps can embed query texts offline.

The files go beside the tenant's versions, content-addressed: `<packs>/<tenant>/models/<sha256>.onnx`
and `<sha256>.json` (the tokenizer). One copy serves every kept version that uses it (the int8
export is ~33 MB: seven copies per tenant would dwarf the packs), a format-1 version folder keeps
holding only the files format 1 lists (older loaders refuse any other), and the sealed manifest
names both files by sha256, so the loader checks them before it runs anything
(`memorypack.encoder`). Retention removes a model no kept version names.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memorypack.encoder import MODELS_DIR, NORMALIZE, POOLING, TEXT
from memorypack.format import sha256_file
from memorypack.fs import Location
from pipeline.stores import store_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EncoderFiles:
    """Where this host keeps the files that reproduce a pack's vectors, and the manifest entry."""

    spec: dict[str, Any]  # manifest models.embedding.encoder
    sources: dict[str, Path]  # file name in <tenant>/models → the host's file


def _backend_of(model: str) -> str | None:
    """The pipeline backend whose vectors carry this model name (fp32 ONNX stands for torch: its
    vectors differ by ≤ 2e-7 per component, pipeline.semantic.embed.model_name)."""
    from pipeline.semantic.embed import model_name

    for backend in ("onnx-int8", "onnx"):
        if model_name(None, backend) == model:  # type: ignore[arg-type]
            return backend
    return None


def encoder_files(model: str | None, dim: int, export_dir: Path) -> EncoderFiles | None:
    """The pipeline's ONNX export of `model` (made by the embedding stage under `export_dir`)
    and its tokenizer, with the manifest entry naming them; None when `model` is not the
    configured model, its dimension is not `dim`, or the export is not on this host (the pack
    then serves keyword and vector queries, not text embedding)."""
    from pipeline.semantic.embed import model_name, resolve_model_path
    from pipeline.semantic.embed.onnx_backend import source_key

    backend = _backend_of(model) if model else None
    if backend is None or not dim:
        return None
    source = resolve_model_path(None)
    try:
        settings = json.loads((source / "sentence_bert_config.json").read_text())
        hidden = int(json.loads((source / "config.json").read_text())["hidden_size"])
    except (OSError, ValueError, KeyError):
        return None
    folder = export_dir / f"{model_name(source)}-{source_key(source)[:16]}"
    onnx = folder / ("model-int8.onnx" if backend == "onnx-int8" else "model.onnx")
    tokenizer = source / "tokenizer.json"
    if hidden != dim or not onnx.is_file() or not tokenizer.is_file():
        if hidden == dim:
            log.warning("no ONNX export of %s at %s: the pack ships no text encoder", model, onnx)
        return None
    files: dict[str, dict[str, Any]] = {}
    sources: dict[str, Path] = {}
    for role, path, suffix in (("onnx", onnx, ".onnx"), ("tokenizer", tokenizer, ".json")):
        digest = sha256_file(path)
        name = f"{digest}{suffix}"
        files[role] = {"file": name, "sha256": digest, "bytes": path.stat().st_size}
        sources[name] = path
    spec = {
        "model": model,
        "files": files,
        "max_seq_length": int(settings["max_seq_length"]),
        "pooling": POOLING,
        "normalize": NORMALIZE,
        "text": TEXT,
    }
    return EncoderFiles(spec, sources)


def ship(tenant_dir: Location, sources: dict[str, Path]) -> None:
    """Copy each model file into `<tenant>/models/` unless it is there (its name is its sha256),
    placed whole (`Store.copy_in`): a crash never leaves a partial file under a final name."""
    if not sources:
        return
    store = store_of(tenant_dir)
    for name, source in sorted(sources.items()):
        target = tenant_dir / MODELS_DIR / name
        if not (target.is_file() and target.stat().st_size == source.stat().st_size):
            store.copy_in(source, target)


def referenced(manifest: dict[str, Any]) -> set[str]:
    embedding = (manifest.get("models") or {}).get("embedding") or {}
    spec = embedding.get("encoder") if isinstance(embedding, dict) else None
    files = spec.get("files") if isinstance(spec, dict) else None
    if not isinstance(files, dict):
        return set()
    return {
        e["file"] for e in files.values() if isinstance(e, dict) and isinstance(e.get("file"), str)
    }


def prune_models(tenant_dir: Location, manifests: list[dict[str, Any]]) -> list[str]:
    """Remove the model files (and leftover temporaries) no kept version's manifest names."""
    folder = tenant_dir / MODELS_DIR
    if not folder.is_dir():
        return []
    keep = set().union(*(referenced(m) for m in manifests)) if manifests else set()
    removed = []
    children: list[Location] = list(folder.iterdir())
    for child in sorted(children, key=lambda c: c.name):
        if child.name not in keep and child.is_file():
            child.unlink()
            removed.append(child.name)
    return removed
