"""Time feedback scoring and one decay snapshot at scale: 1,000,000 memories, 3,000,000 feedback events.

Run: .venv/bin/python bench/learning_scale.py [--memories N] [--feedback M]
"""

import argparse
import time
from datetime import UTC, datetime

import numpy as np
import polars as pl

from pipeline.feedback.scores import compute_scores
from pipeline.ingest.contracts import (
    FEEDBACK_SCHEMA,
    INTERACTION_SCHEMA,
    MEMORY_SCHEMA,
    MemoryType,
    Signal,
)
from pipeline.memory.decay import snapshot

AS_OF = datetime(2026, 11, 3, tzinfo=UTC)
YEAR_US = 365 * 86_400 * 1_000_000


def _timestamps(rng: np.random.Generator, n: int) -> pl.Series:
    end = int(AS_OF.timestamp() * 1_000_000)
    return pl.Series(end - rng.integers(1, YEAR_US, n)).cast(pl.Datetime("us", "UTC"))


def synthesize(
    n_memories: int, n_feedback: int, seed: int = 0
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    n_inter = int(n_memories * 0.7)
    n_stmt = n_memories - n_inter
    tenants = np.array([f"t{k}" for k in range(20)])
    inter = pl.DataFrame(
        {
            "tenant_id": tenants[rng.integers(0, 20, n_inter)],
            "event_id": [f"i{k}" for k in range(n_inter)],
            "ts": _timestamps(rng, n_inter),
            "skill_id": np.array([f"s{k}" for k in range(12)])[rng.integers(0, 12, n_inter)],
            "importance": np.where(rng.random(n_inter) < 0.5, rng.random(n_inter), np.nan),
        }
    ).with_columns(pl.col("importance").fill_nan(None))
    types = np.array([t.value for t in MemoryType])
    stmt = pl.DataFrame(
        {
            "tenant_id": tenants[rng.integers(0, 20, n_stmt)],
            "event_id": [f"m{k}" for k in range(n_stmt)],
            "ts": _timestamps(rng, n_stmt),
            "memory_type": types[rng.integers(0, len(types), n_stmt)],
            "impact_level": np.array(["high", "medium", "low"])[rng.integers(0, 3, n_stmt)],
        }
    )
    memory_tenants = np.concatenate([inter["tenant_id"].to_numpy(), stmt["tenant_id"].to_numpy()])
    memory_ids = np.concatenate([inter["event_id"].to_numpy(), stmt["event_id"].to_numpy()])
    target = rng.integers(0, n_memories, n_feedback)
    signals = np.array([s.value for s in Signal])
    ratings = rng.integers(1, 6, n_feedback).astype(float)
    ratings[rng.random(n_feedback) < 0.8] = np.nan
    fb = pl.DataFrame(
        {
            "tenant_id": memory_tenants[target],
            "event_id": [f"f{k}" for k in range(n_feedback)],
            "ts": _timestamps(rng, n_feedback),
            "target_id": memory_ids[target],
            "signal": signals[rng.integers(0, len(signals), n_feedback)],
            "rating": ratings,
            "user_id": np.array([f"u{k}" for k in range(5000)])[rng.integers(0, 5000, n_feedback)],
        }
    ).with_columns(pl.col("rating").fill_nan(None).cast(pl.Int8))

    def typed(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        return frame.select(
            [
                pl.col(c).cast(t) if c in frame.columns else pl.lit(None, dtype=t).alias(c)
                for c, t in schema.items()
            ]
        )

    return typed(inter, INTERACTION_SCHEMA), typed(stmt, MEMORY_SCHEMA), typed(fb, FEEDBACK_SCHEMA)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--feedback", type=int, default=3_000_000)
    args = parser.parse_args()
    started = time.perf_counter()
    inter, stmt, fb = synthesize(args.memories, args.feedback)
    print(
        f"synthesized {inter.height + stmt.height:,} memories, {fb.height:,} feedback in {time.perf_counter() - started:.1f} s"
    )
    started = time.perf_counter()
    scores = compute_scores(inter, stmt, fb)
    print(f"compute_scores: {time.perf_counter() - started:.2f} s → {scores.height:,} rows")
    started = time.perf_counter()
    snap = snapshot(inter, stmt, fb, None, AS_OF)
    print(f"snapshot:       {time.perf_counter() - started:.2f} s → {snap.height:,} rows")
    print(snap.group_by("status").len().sort("status"))


if __name__ == "__main__":
    main()
