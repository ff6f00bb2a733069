"""Hybrid retrieval: recall@10 of the vector channel, the keyword channel and their fusion on a
labelled set with known answers (`bench/retrieval_set.py`), embedded by the pipeline's model.

The vector channel gets the pipeline's own query vectors (`query_vector=`), so this section
measures retrieval alone; the loader's encoder and its latency are the `text_query` section's.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import CACHE, Figure, Sizes, rounded

MODES = ("vector", "keyword", "hybrid")
K = 10


def embedder() -> tuple[object, str]:
    """The pipeline's default encoder (ONNX int8 export kept under bench/.cache) and its name."""
    from pipeline.embed import available_backend, load_model, model_name

    backend = available_backend("onnx-int8")
    return load_model(None, backend, CACHE / "models"), model_name(None, backend)


def embed_texts(model: object, texts: list[str]) -> np.ndarray:
    """As the pipeline embeds a memory: its cache-key text (normalised), then the model."""
    import polars as pl

    from pipeline.embed import encode, normalise_text

    normalised = pl.DataFrame({"text": texts}).select(normalise_text(pl.col("text")))["text"]
    return encode(normalised, model=model)


def run(sizes: Sizes) -> list[Figure]:
    from bench.retrieval_set import labelled_set, recall_at, write_pack
    from memorypack import MemoryPack

    n_identifiers, n_filler = (200, 1_000) if sizes.quick else (2_000, 20_000)
    texts, queries = labelled_set(n_identifiers, n_filler, seed=sizes.seed)
    model, name = embedder()
    started = time.perf_counter()
    vectors = embed_texts(model, texts)
    query_vectors = embed_texts(model, [q.text for q in queries])
    embed_s = time.perf_counter() - started
    root = Path(tempfile.mkdtemp(prefix="bench-retrieval-"))
    try:
        pack = MemoryPack.load(write_pack(root, texts, vectors))
        started = time.perf_counter()
        pack.warm(encoder=False)
        index_s = time.perf_counter() - started
        ids = pack.memories.column("memory_id").to_pylist()
        recall = {}
        for mode in MODES:
            found = [
                [m.memory_id for m in pack.search(q.text, k=K, retrieval=mode, query_vector=v)]
                for q, v in zip(queries, query_vectors, strict=True)
            ]
            recall[mode] = recall_at(found, queries, ids, K)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    # Headline: the mean of the two kinds' recall (2,000 identifier queries would drown 24
    # paraphrases in a plain share); both kinds and the plain share are in details.
    best_single = max(recall["vector"]["macro"], recall["keyword"]["macro"])
    details = {
        "memories": len(texts),
        "queries": {
            kind: sum(q.kind == kind for q in queries) for kind in ("paraphrase", "identifier")
        },
        "recall_at_10": recall,
        "model": name,
        "embed_s": round(embed_s, 1),
        "keyword_index_build_s": round(index_s, 3),
        "seed": sizes.seed,
    }
    figures = [
        Figure(
            name=f"recall@{K}: {mode} (mean of paraphrase and identifier queries)",
            value=recall[mode]["macro"],
            unit="share of queries",
            baseline_name="best single channel" if mode == "hybrid" else None,
            baseline_value=best_single if mode == "hybrid" else None,
            ratio=rounded(recall[mode]["macro"] / best_single) if mode == "hybrid" else None,
            goal="≥ the best single channel" if mode == "hybrid" else "",
            goal_met=recall[mode]["macro"] >= best_single if mode == "hybrid" else None,
            details={**details, "by_kind": recall[mode]},
        )
        for mode in MODES
    ]
    return figures
