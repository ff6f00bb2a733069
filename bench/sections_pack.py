"""Pack load with verification vs a bare read, and loader query latency vs a brute-force numpy scan.

The pack is synthesized by `bench/pack_scale.py` (lake tables for N memories), then built and
published through the real writer (`pipeline.publish.build`, `pipeline.publish.writer`).
"""

from __future__ import annotations

import gc
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Figure, Sizes, interleaved, percentile, ratio, rounded, scaled_goal

GOAL_MEMORIES = 100_000
LOAD_GOAL = 1.5
FEW_SHOT_P95_MS = 5.0
MEMORIES_FOR_P95_MS = 20.0
DIM = 384


def _latencies(
    candidate: Callable[[int], object], baseline: Callable[[int], object], n: int, reps: int
) -> tuple[list[float], list[float]]:
    """Milliseconds per call, the candidate and the baseline alternating query by query."""
    cand: list[float] = []
    base: list[float] = []
    gc.collect()
    for _ in range(max(1, reps)):
        for i in range(n):
            t0 = time.perf_counter()
            candidate(i)
            t1 = time.perf_counter()
            baseline(i)
            t2 = time.perf_counter()
            cand.append((t1 - t0) * 1000)
            base.append((t2 - t1) * 1000)
    return cand, base


def _latency_figures(
    label: str, cand: list[float], base: list[float], goal_ms: float | None, n_memories: int
) -> list[Figure]:
    out = []
    for q in (50, 95):
        value = percentile(cand, q)
        baseline = percentile(base, q)
        figure = Figure(
            name=f"{label} p{q}",
            value=rounded(value),
            unit="ms",
            baseline_name="brute-force numpy scan (all embeddings @ q, top 10)",
            baseline_value=rounded(baseline),
            ratio=rounded(ratio(value, baseline)),
            goal=f"p95 ≤ {goal_ms:g} ms" if goal_ms is not None and q == 95 else "",
            goal_met=(value <= goal_ms) if goal_ms is not None and q == 95 else None,
            details={"calls": len(cand), "ratio_means": "loader ms ÷ brute-force ms"},
        )
        if figure.goal_met is not None:
            figure = scaled_goal(figure, n_memories, GOAL_MEMORIES, "memories")
        out.append(figure)
    return out


def run(sizes: Sizes) -> list[Figure]:
    import pyarrow.parquet as pq

    from bench import pack_scale
    from memorypack import MemoryPack
    from pipeline.config import Paths
    from pipeline.publish.build import build_pack, load_inputs
    from pipeline.publish.guards import run_guards
    from pipeline.publish.writer import publish
    from pipeline.storage.lake import Lake

    n = sizes.pack_memories
    home = Path(tempfile.mkdtemp(prefix="bench-pack-"))
    try:
        paths = Paths.from_env(home)
        t0 = time.perf_counter()
        pack_scale.synthesize(paths, n, DIM, seed=sizes.seed)
        t1 = time.perf_counter()
        inputs = load_inputs(Lake(paths), pack_scale.TENANT, pack_scale.AS_OF)
        content = build_pack(inputs)
        failed = [g for g in run_guards(content, inputs) if not g.passed]
        t2 = time.perf_counter()
        result = publish(paths.packs, content, run_id="bench")
        t3 = time.perf_counter()
        files = result.manifest["files"]
        folder = result.path
        tenant_dir = paths.packs / pack_scale.TENANT

        def bare() -> int:
            rows = 0
            for name in files:
                if name.endswith(".parquet"):
                    rows += pq.read_table(folder / name).num_rows
            np.load(folder / "embeddings.npy", allow_pickle=False)
            return rows

        timed = interleaved(
            {
                "verified": lambda: MemoryPack.load(tenant_dir),
                "bare": bare,
                "unverified": lambda: MemoryPack.load(tenant_dir, verify=False),
            },
            sizes.reps,
            warmup=True,  # the first read pays the page cache for both sides
        )
        load_s, bare_s = timed["verified"][0], timed["bare"][0]
        load_ratio = ratio(load_s, bare_s)
        figures = [
            scaled_goal(
                Figure(
                    name="pack load with verification (MemoryPack.load)",
                    value=rounded(load_s),
                    unit="s",
                    baseline_name="bare pyarrow read of the same Parquet + np.load, no checks",
                    baseline_value=rounded(bare_s),
                    ratio=rounded(load_ratio),
                    goal=f"≤ {LOAD_GOAL:g}× the bare read",
                    goal_met=load_ratio is not None and load_ratio <= LOAD_GOAL,
                    details={
                        "memories": n,
                        "pack_bytes": sum(f["bytes"] for f in files.values()),
                        "files": {
                            k: {"rows": v["rows"], "bytes": v["bytes"]} for k, v in files.items()
                        },
                        "seconds_reps": {k: v[1] for k, v in timed.items()},
                        "load_without_sha256_s": rounded(timed["unverified"][0]),
                        "synthesize_s": round(t1 - t0, 2),
                        "build_and_guards_s": round(t2 - t1, 2),
                        "publish_s": round(t3 - t2, 2),
                        "guards_failed": [g.name for g in failed] if failed else [],
                        "ratio_means": "load seconds ÷ bare read seconds",
                    },
                ),
                n,
                GOAL_MEMORIES,
                "memories",
            )
        ]

        pack = MemoryPack.load(tenant_dir)
        rng = np.random.default_rng(sizes.seed + 1)
        queries = rng.normal(size=(sizes.queries, DIM)).astype(np.float32)
        contacts = sorted(pack._indexes.contact_code)  # every contact that has memories
        systems = [(s, k) for s, ks in pack_scale.SYSTEMS.items() for k in ks]
        dense = np.load(folder / "embeddings.npy", allow_pickle=False)

        def brute(i: int) -> Any:
            scores = dense @ queries[i]
            top = np.argpartition(-scores, 10)[:10]
            return top[np.argsort(-scores[top])]

        cases: list[tuple[str, Callable[[int], object], float | None]] = [
            (
                "few_shot(system, kind, k=3)",
                lambda i: pack.few_shot(*systems[i % len(systems)], k=3),
                FEW_SHOT_P95_MS,
            ),
            (
                "few_shot(system, k=3, query_vector)",
                lambda i: pack.few_shot(systems[i % len(systems)][0], k=3, query_vector=queries[i]),
                FEW_SHOT_P95_MS,
            ),
            (
                "memories_for(contact, k=10, query_vector)",
                lambda i: pack.memories_for(
                    contacts[i % len(contacts)], k=10, query_vector=queries[i]
                ),
                MEMORIES_FOR_P95_MS,
            ),
            (
                "memories_for(None, k=10, query_vector) — every memory",
                lambda i: pack.memories_for(None, k=10, query_vector=queries[i]),
                MEMORIES_FOR_P95_MS,
            ),
        ]
        for label, fn, goal in cases:
            for i in range(min(20, sizes.queries)):  # warm-up
                fn(i)
            cand, base = _latencies(fn, brute, sizes.queries, sizes.reps)
            figures += _latency_figures(label, cand, base, goal, n)
        for f in figures[1:]:
            f.details.update({"memories": n, "contacts": len(contacts), "queries": sizes.queries})
        return figures
    finally:
        shutil.rmtree(home, ignore_errors=True)
