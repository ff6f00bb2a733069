"""Pack at scale: synthesize pack inputs for N memories, publish, load, and time the loader's queries.

    .venv/bin/python bench/pack_scale.py --memories 100000

Compares the loader against a bare pyarrow read of the same files (load) and a brute-force numpy
scan over every embedding (query), and prints pack size, load time and p50/p95 latencies.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from memorypack import MemoryPack
from pipeline import tables
from pipeline.config import Paths
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.guards import run_guards
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from pipeline.storage.vectors import EmbeddingCache

TENANT = "bench"
MODEL = "all-MiniLM-L6-v2"
RUN_DATE = date(2026, 11, 20)
AS_OF = datetime(2026, 11, 21, tzinfo=UTC)
TS = pl.Datetime("us", "UTC")


def declared(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    """The generated columns of lake table `name`, the rest null, typed as the table declares."""
    columns = tables.schema(name)
    given = frame.select(pl.col(c).cast(columns[c]) for c in frame.columns if c in columns)
    return pl.concat([tables.empty(name), given], how="diagonal")


SYSTEMS = {
    "support": ["support_reply", "support_escalation"],
    "framescan": ["framescan_report", "framescan_call"],
    "little_lord": ["little_lord_exchange"],
}
SKILLS = [f"skill_{i:02d}" for i in range(12)]
TYPES = [
    "explicit_instruction",
    "correction",
    "confirmed_pattern",
    "inferred_pattern",
    "single_inference",
]
TAGS = [f"topic_{i}" for i in range(40)]
WORDS = [
    "order",
    "delivery",
    "refund",
    "invoice",
    "meeting",
    "call",
    "email",
    "schedule",
    "budget",
    "tone",
    "brief",
    "detail",
]


def _texts(rng: np.random.Generator, n: int, prefix: str) -> list[str]:
    picks = rng.integers(0, len(WORDS), size=(n, 8))
    texts = [f"{prefix} {i}: " + " ".join(WORDS[j] for j in row) for i, row in enumerate(picks)]
    for i in rng.choice(n, size=max(n // 100, 1), replace=False):  # 1 % carry PII to redact
        texts[i] += f" reach me at person{i}@example.com or +1 415 555 {1000 + i % 9000:04d}"
    return texts


def synthesize(
    paths: Paths,
    n_memories: int,
    dim: int,
    seed: int = 0,
    texts: Callable[[np.random.Generator, int, str], list[str]] = _texts,
) -> None:
    """Every lake table a pack reads, for one tenant with `n_memories` memories (`texts` makes the
    n texts of one column: "question", "answer" or "statement")."""
    rng = np.random.default_rng(seed)
    paths = paths.for_tenant(TENANT)  # its folders, as its run writes them
    lake = Lake(paths)
    n_stm = n_memories * 3 // 10
    n_int = n_memories - n_stm
    contacts = np.array([f"c{i:05d}" for i in range(max(n_memories // 50, 1))])
    users = [f"u{i:03d}" for i in range(200)]
    start = datetime(2026, 5, 1, tzinfo=UTC)
    int_ts = [start + timedelta(minutes=int(m)) for m in rng.integers(0, 200 * 24 * 60, n_int)]
    systems = rng.choice(list(SYSTEMS), n_int)
    kinds = [
        SYSTEMS[s][int(k) % len(SYSTEMS[s])]
        for s, k in zip(systems, rng.integers(0, 2, n_int), strict=True)
    ]
    tags = [
        [TAGS[int(t)] for t in rng.choice(len(TAGS), 2, replace=False)] for _ in range(n_memories)
    ]
    interactions = pl.DataFrame(
        {
            "tenant_id": TENANT,
            "event_id": [f"i{i:07d}" for i in range(n_int)],
            "ts": int_ts,
            "load_date": [t.date() for t in int_ts],
            "contact_id": rng.choice(contacts, n_int),
            "system": systems,
            "kind": kinds,
            "skill_id": rng.choice(SKILLS, n_int),
            "user_id": rng.choice(users, n_int),
            "input": texts(rng, n_int, "question"),
            "output": texts(rng, n_int, "answer"),
            "tags": tags[:n_int],
            "importance": rng.uniform(0.2, 1.0, n_int),
        },
        schema_overrides={"ts": TS},
    )
    stm_ts = [start + timedelta(minutes=int(m)) for m in rng.integers(0, 200 * 24 * 60, n_stm)]
    statements = pl.DataFrame(
        {
            "tenant_id": TENANT,
            "event_id": [f"m{i:07d}" for i in range(n_stm)],
            "ts": stm_ts,
            "load_date": [t.date() for t in stm_ts],
            "contact_id": rng.choice(contacts, n_stm),
            "memory_type": rng.choice(TYPES, n_stm),
            "content": texts(rng, n_stm, "statement"),
            "category": "communication",
            "impact_level": rng.choice(["high", "medium", "low"], n_stm),
            "confidence": None,
            "tags": tags[n_int:],
        },
        schema_overrides={"ts": TS, "confidence": pl.Float64},
    )
    ids = interactions["event_id"].to_list() + statements["event_id"].to_list()
    kinds_of = ["interaction"] * n_int + ["statement"] * n_stm
    confidence = rng.uniform(0.05, 1.0, n_memories)
    lake.write("interactions", declared("interactions", interactions))
    lake.write("memory_statements", declared("memory_statements", statements))
    lake.write_partition(
        "decay_snapshots",
        RUN_DATE.isoformat(),
        declared(
            "decay_snapshots",
            pl.DataFrame(
                {
                    "as_of": AS_OF,
                    "tenant_id": TENANT,
                    "memory_id": ids,
                    "memory_kind": kinds_of,
                    "confidence": confidence,
                    "status": np.where(confidence < 0.2, "inactive", "active"),
                    "needs_reconfirmation": confidence < 0.3,
                    "stale": False,
                    "last_confirmed": interactions["ts"].to_list() + statements["ts"].to_list(),
                },
                schema_overrides={"as_of": TS, "last_confirmed": TS},
            ),
        ),
    )
    n_pos = rng.poisson(1.5, n_memories)
    n_neg = rng.poisson(0.5, n_memories)
    lake.write(
        "feedback_scores",
        declared(
            "feedback_scores",
            pl.DataFrame(
                {
                    "tenant_id": TENANT,
                    "memory_id": ids,
                    "memory_kind": kinds_of,
                    "n_feedback": n_pos + n_neg,
                    "n_positive": n_pos,
                    "n_negative": n_neg,
                    "quality_score": (n_pos - n_neg) / (n_pos + n_neg + 2),
                    "quality_lower": (n_pos - n_neg) / (n_pos + n_neg + 4),
                    "has_correction": False,
                }
            ),
        ),
    )
    matrix = rng.normal(size=(n_memories, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    hashes = [f"t{i:08d}" for i in range(n_memories)]  # every memory its own text
    lake.write(
        "memory_embeddings",
        declared(
            "memory_embeddings",
            pl.DataFrame(
                {
                    "tenant_id": TENANT,
                    "memory_id": ids,
                    "memory_kind": kinds_of,
                    "text_hash": hashes,
                    "model": MODEL,
                }
            ),
        ),
    )
    EmbeddingCache(paths.embedding_cache).append(
        MODEL,
        pl.DataFrame(
            {
                "text_hash": hashes,
                "embedding": pl.Series("embedding", matrix),
                "model": MODEL,
                "dim": pl.Series([dim] * n_memories, dtype=pl.Int32),
                "embedded_at": pl.Series([AS_OF] * n_memories, dtype=TS),
            }
        ),
    )
    good = interactions.join(
        pl.read_parquet(paths.table("feedback_scores")).select(
            "memory_id", "n_positive", "n_negative", "quality_lower"
        ),
        left_on="event_id",
        right_on="memory_id",
    ).filter(pl.col("n_positive") >= pl.col("n_negative"))
    few_shot = (
        good.sort("quality_lower", descending=True)
        .group_by("system", "kind", "skill_id", maintain_order=True)
        .head(5)
        .with_columns(
            pl.col("event_id").cum_count().over("system", "kind", "skill_id").alias("rank")
        )
        .select(
            "tenant_id",
            "system",
            "kind",
            "skill_id",
            "rank",
            pl.col("event_id").alias("memory_id"),
            "input",
            "output",
            pl.lit(False).alias("is_corrected"),
            "quality_lower",
            (pl.col("n_positive") + pl.col("n_negative")).alias("n_feedback"),
            "ts",
            pl.lit("top quality").alias("why"),
        )
    )
    lake.write("few_shot_sets", declared("few_shot_sets", few_shot))
    lake.write(
        "skill_stats",
        declared(
            "skill_stats",
            pl.DataFrame(
                {
                    "tenant_id": TENANT,
                    "user_id": [u for u in users for _ in SKILLS],
                    "skill_id": SKILLS * len(users),
                    "usage": rng.integers(1, 50, len(users) * len(SKILLS)),
                    "ema_confidence": rng.uniform(0.2, 0.9, len(users) * len(SKILLS)),
                }
            ),
        ),
    )
    vectors = rng.normal(size=(len(users) + len(SKILLS), dim)).astype(np.float32)
    lake.write(
        "user_preferences",
        declared(
            "user_preferences",
            pl.DataFrame(
                {
                    "tenant_id": TENANT,
                    "user_id": users,
                    "preference_vector": pl.Series(vectors[: len(users)]).cast(pl.List(pl.Float32)),
                    "n_updates": 3,
                }
            ),
        ),
    )
    lake.write(
        "skill_vectors",
        declared(
            "skill_vectors",
            pl.DataFrame(
                {
                    "tenant_id": TENANT,
                    "skill_id": SKILLS,
                    "vector": pl.Series(vectors[len(users) :]).cast(pl.List(pl.Float32)),
                    "n_interactions": 100,
                }
            ),
        ),
    )
    lake.write(
        "template_history",
        declared(
            "template_history",
            pl.DataFrame(
                {
                    "tenant_id": TENANT,
                    "skill_id": [s for s in SKILLS for _ in range(3)],
                    "version": [1, 2, 3] * len(SKILLS),
                    "template": [
                        f"Template v{v} for {s}: answer briefly." for s in SKILLS for v in (1, 2, 3)
                    ],
                    "is_current": [False, False, True] * len(SKILLS),
                }
            ),
        ),
    )


def _percentiles(samples: list[float]) -> str:
    ms = sorted(s * 1000 for s in samples)
    p50 = statistics.median(ms)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    return f"p50 {p50:7.3f} ms   p95 {p95:7.3f} ms"


def _time(fn: Callable[[], object], repeat: int) -> list[float]:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - began)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument(
        "--home", default=None, help="work folder (default: a temp folder, removed after)"
    )
    args = parser.parse_args(argv)
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="memorypack-bench-"))
    paths = Paths.from_env(home)
    rng = np.random.default_rng(1)
    try:
        began = time.perf_counter()
        synthesize(paths, args.memories, args.dim)
        print(
            f"synthesized lake for {args.memories:,} memories (dim {args.dim}) in {time.perf_counter() - began:.1f}s"
        )

        began = time.perf_counter()
        inputs = load_inputs(Lake(paths), TENANT, AS_OF)
        content = build_pack(inputs)
        built = time.perf_counter() - began
        began = time.perf_counter()
        guards = run_guards(content, inputs)
        guarded = time.perf_counter() - began
        assert all(g.passed for g in guards), [g.detail for g in guards if not g.passed]
        began = time.perf_counter()
        result = publish(paths.packs, content, run_id="bench")
        published = time.perf_counter() - began
        print(
            f"build {built:.2f}s, guards {guarded:.2f}s, publish (write+fsync+verify+swap) {published:.2f}s"
        )
        print(f"redacted {content.redactions['by_kind']}")

        files = result.manifest["files"]
        total = sum(f["bytes"] for f in files.values())
        print(f"\npack {result.version}: {total / 2**20:.1f} MiB")
        for name, entry in files.items():
            print(f"  {name:<18} {entry['rows']:>8} rows  {entry['bytes'] / 2**20:8.2f} MiB")

        tenant_dir = paths.packs / TENANT
        load_verified = _time(lambda: MemoryPack.load(tenant_dir), 3)
        load_unverified = _time(lambda: MemoryPack.load(tenant_dir, verify=False), 3)

        def bare() -> None:
            for name in files:
                if name.endswith(".parquet"):
                    pq.read_table(result.path / name)
            np.load(result.path / "embeddings.npy")

        bare_read = _time(bare, 3)
        print("\nload (median of 3)")
        print(f"  MemoryPack.load, sha256 verified   {statistics.median(load_verified):6.3f}s")
        print(f"  MemoryPack.load, verify=False      {statistics.median(load_unverified):6.3f}s")
        print(f"  bare pyarrow read + np.load        {statistics.median(bare_read):6.3f}s")

        pack = MemoryPack.load(tenant_dir)
        contacts = list(pack._indexes.contact_code)
        queries = rng.normal(size=(args.queries, args.dim)).astype(np.float32)
        system_kinds = [(s, k) for s, ks in SYSTEMS.items() for k in ks]
        n = args.queries

        def each(fn: Callable[[int], object]) -> list[float]:
            samples = []
            for i in range(n):
                began = time.perf_counter()
                fn(i)
                samples.append(time.perf_counter() - began)
            return samples

        timings = {
            "few_shot(system, kind, k=3)": each(
                lambda i: pack.few_shot(*system_kinds[i % len(system_kinds)], k=3)
            ),
            "few_shot(system, k=3, query_vector)": each(
                lambda i: pack.few_shot(system_kinds[i % 5][0], k=3, query_vector=queries[i])
            ),
            "memories_for(contact, k=10)": each(
                lambda i: pack.memories_for(contacts[i % len(contacts)], k=10)
            ),
            "memories_for(contact, k=10, tags, query_vector)": each(
                lambda i: pack.memories_for(
                    contacts[i % len(contacts)],
                    k=10,
                    tags=TAGS[i % 40 : i % 40 + 2],
                    query_vector=queries[i],
                )
            ),
            "memories_for(None, k=10, query_vector) [all memories]": each(
                lambda i: pack.memories_for(None, k=10, query_vector=queries[i])
            ),
            "select_skill(user)": each(lambda i: pack.select_skill(f"u{i % 200:03d}")),
        }
        dense = np.load(result.path / "embeddings.npy")

        def brute(i: int) -> None:
            scores = dense @ queries[i]
            top = np.argpartition(-scores, 10)[:10]
            top[np.argsort(-scores[top])]

        timings["brute-force numpy scan of all embeddings (top 10)"] = each(brute)
        print(f"\nlatency over {n} queries ({len(pack):,} memories, {len(contacts):,} contacts)")
        for label, samples in timings.items():
            print(f"  {label:<55} {_percentiles(samples)}")
    finally:
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
