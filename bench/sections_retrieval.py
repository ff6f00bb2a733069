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


GOAL_MEMORIES = 100_000
TEXT_QUERY_P95_MS = 10.0
AGREEMENT_GOAL = 0.999


def run_text_query(sizes: Sizes) -> list[Figure]:
    """Text query → top 10 with the loader's own encoder (the pipeline's ONNX int8 export shipped
    with the pack), on `pack_memories` memories; and the loader's query vectors against the
    pipeline's vectors of the same texts."""
    from bench.common import percentile, ratio, scaled_goal
    from bench.retrieval_set import PARAPHRASES, labelled_set, write_pack
    from memorypack import MemoryPack
    from pipeline.pack.models import encoder_files

    n = sizes.pack_memories
    model, name = embedder()
    files = encoder_files(name, 384, CACHE / "models")
    if files is None:
        from bench.common import NotAvailable

        raise NotAvailable(f"no ONNX export of {name} under {CACHE / 'models'}")
    identifiers = min(2_000, n // 10)
    texts, queries = labelled_set(
        identifiers, max(0, n - len(PARAPHRASES) - identifiers), sizes.seed
    )
    # Latency does not depend on the vectors' values: unit random rows stand for the memories.
    rng = np.random.default_rng(sizes.seed)
    vectors = rng.normal(size=(len(texts), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    contacts = max(1, n // 100)  # 100 memories per person
    root = Path(tempfile.mkdtemp(prefix="bench-text-query-"))
    try:
        tenant_dir = write_pack(
            root,
            texts,
            vectors,
            models={"embedding": {"model": name, "dim": 384, "encoder": files.spec}},
            model_files=files.sources,
            contacts=contacts,
        )
        pack = MemoryPack.load(tenant_dir)
        started = time.perf_counter()
        pack.warm(encoder=False)
        index_s = time.perf_counter() - started
        started = time.perf_counter()
        pack.encoder()
        encoder_load_s = time.perf_counter() - started
        asked = [q.text for q in queries][: sizes.queries] or ["where is my order"]
        asked = (asked * (sizes.queries // len(asked) + 1))[: sizes.queries]
        dense = np.asarray(pack.embeddings)
        fixed = pack.embed(asked[:1])[0]

        def timed(fn: object) -> list[float]:
            out = []
            for i in range(min(20, len(asked))):  # warm-up
                fn(i)  # type: ignore[operator]
            for _ in range(max(1, sizes.reps)):
                for i in range(len(asked)):
                    t0 = time.perf_counter()
                    fn(i)  # type: ignore[operator]
                    out.append((time.perf_counter() - t0) * 1000)
            return out

        def brute(_: int) -> object:
            scores = dense @ fixed
            top = np.argpartition(-scores, 10)[:10]
            return top[np.argsort(-scores[top])]

        cases = {
            "embed one query (loader encoder)": lambda i: pack.embed([asked[i]]),
            "memories_for(contact, k=10, query=text), hybrid": lambda i: pack.memories_for(
                f"c{i % contacts}", k=10, query=asked[i]
            ),
            "search(query=text, k=10) over every memory, hybrid": lambda i: pack.search(
                asked[i], k=10
            ),
        }
        base = timed(brute)
        figures = []
        for label, fn in cases.items():
            values = timed(fn)
            p95 = percentile(values, 95)
            goal = "memories_for" in label
            figure = Figure(
                name=f"text query: {label} p95",
                value=rounded(p95),
                unit="ms",
                baseline_name="brute-force numpy scan of every embedding (vector given), top 10",
                baseline_value=rounded(percentile(base, 95)),
                ratio=rounded(ratio(p95, percentile(base, 95))),
                goal=f"p95 ≤ {TEXT_QUERY_P95_MS:g} ms incl. embedding" if goal else "",
                goal_met=p95 <= TEXT_QUERY_P95_MS if goal else None,
                details={
                    "p50_ms": rounded(percentile(values, 50)),
                    "calls": len(values),
                    "memories": len(texts),
                    "contacts": contacts,
                    "keyword_index_build_s": round(index_s, 3),
                    "encoder_load_s": round(encoder_load_s, 3),
                    "cores": len(__import__("os").sched_getaffinity(0)),
                },
            )
            figures.append(
                scaled_goal(figure, len(texts), GOAL_MEMORIES, "memories") if goal else figure
            )

        # Agreement on the same texts: the pipeline embeds in length-sorted batches of 128, an app
        # embeds one query at a time.
        sample = texts[: min(1_000, len(texts))]
        pipeline_vectors = embed_texts(model, sample)
        alone = np.vstack([pack.embed([t]) for t in sample])
        batched = pack.embed(sample[:128])
        cosine_alone = np.sum(alone * pipeline_vectors, axis=1)
        same_batch = np.sum(batched * embed_texts_batch(model, sample[:128]), axis=1)
        figures.append(
            Figure(
                name="cosine agreement: loader query vectors vs pipeline vectors (mean)",
                value=round(float(cosine_alone.mean()), 5),
                unit="cosine",
                baseline_name="the same 128 texts as one batch in both",
                baseline_value=round(float(same_batch.mean()), 6),
                goal=f"≥ {AGREEMENT_GOAL}",
                goal_met=bool(cosine_alone.mean() >= AGREEMENT_GOAL),
                details={
                    "texts": len(sample),
                    "min": round(float(cosine_alone.min()), 5),
                    "p01": round(float(np.percentile(cosine_alone, 1)), 5),
                    "same_batch_min": round(float(same_batch.min()), 6),
                    "model": name,
                    "why": "int8 activations are quantized per batch tensor (ONNX Runtime dynamic "
                    "quantization): a text's vector depends a little on its batch",
                },
            )
        )
        return figures
    finally:
        shutil.rmtree(root, ignore_errors=True)


def embed_texts_batch(model: object, texts: list[str]) -> np.ndarray:
    """The pipeline's encoder on `texts` as one batch, in their order (no length sort)."""
    from memorypack.encoder import normalise

    return model.encode([normalise(t) for t in texts], len(texts))  # type: ignore[attr-defined]
