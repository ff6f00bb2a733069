"""Decay snapshots over a long sparse range: one full snapshot per date (before) against
`pipeline.memory.decay_days.snapshots_over` (after: full where something became known, aged elsewhere).

Synthetic lake in a temporary folder: `--days` calendar days of which `--data-days` (drawn with a
fixed seed) hold events, one Parquet file per table and data day, scanned lazily as the asset's
inputs are. Both sides snapshot every date of the range and must give equal frames for every date;
the time is the snapshots' (and their memory counts'), not the lake writes both do alike.

    python -m bench.decay_sparse --days 120 --data-days 40 --per-day 400 --rounds 3
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import polars as pl

from pipeline.ingest.contracts import FEEDBACK_SCHEMA, INTERACTION_SCHEMA, MEMORY_SCHEMA
from pipeline.memory.decay import as_of_for, known_memory_count, snapshot
from pipeline.memory.decay_days import snapshots_over

TYPES = ("correction", "confirmed_pattern", "inferred_pattern", "single_inference", "temporary")


def write_lake(folder: Path, days: int, data_days: int, per_day: int, seed: int) -> list[str]:
    """The tables of a sparse range; returns every load date of the range."""
    rng = random.Random(seed)
    start = date(2026, 1, 1)
    keys = [(start + timedelta(days=n)).isoformat() for n in range(days)]
    with_data = sorted(rng.sample(range(days), data_days))
    seen: list[str] = []
    for n in with_data:
        load = start + timedelta(days=n)
        midnight = datetime.combine(load, datetime.min.time(), UTC)
        ts = [midnight + timedelta(seconds=rng.randrange(86_400)) for _ in range(per_day)]
        ids = [f"i{n}-{k}" for k in range(per_day)]
        common = {"tenant_id": "acme", "load_date": load}
        tables = {
            "interactions": pl.DataFrame(
                {
                    "event_id": ids,
                    "ts": ts,
                    "contact_id": [f"c{k % 50}" for k in range(per_day)],
                    "importance": [rng.random() for _ in ids],
                }
                | common,
                schema_overrides=INTERACTION_SCHEMA,
            ),
            "memory_statements": pl.DataFrame(
                {
                    "event_id": [f"s{n}-{k}" for k in range(per_day // 4)],
                    "ts": ts[: per_day // 4],
                    "memory_type": [TYPES[k % len(TYPES)] for k in range(per_day // 4)],
                    "impact_level": ["high"] * (per_day // 4),
                }
                | common,
                schema_overrides=MEMORY_SCHEMA,
            ),
        }
        seen += ids
        targets = rng.sample(seen, per_day // 2)
        tables["feedback"] = pl.DataFrame(
            {
                "event_id": [f"f{n}-{k}" for k in range(len(targets))],
                "ts": ts[: len(targets)],
                "target_id": targets,
                "signal": [rng.choice(["thumbs_up", "thumbs_down"]) for _ in targets],
                "user_id": [f"u{k % 7}" for k in range(len(targets))],
            }
            | common,
            schema_overrides=FEEDBACK_SCHEMA,
        )
        for name, frame in tables.items():
            full = {
                "interactions": INTERACTION_SCHEMA,
                "memory_statements": MEMORY_SCHEMA,
                "feedback": FEEDBACK_SCHEMA,
            }[name]
            out = folder / name / f"{load}.parquet"
            out.parent.mkdir(parents=True, exist_ok=True)
            frame.select(
                pl.col(c).cast(t) if c in frame.columns else pl.lit(None, t).alias(c)
                for c, t in full.items()
            ).write_parquet(out)
    return keys


def inputs(folder: Path) -> tuple[pl.LazyFrame, pl.LazyFrame, pl.LazyFrame, None]:
    scan = [
        pl.scan_parquet(sorted((folder / t).glob("*.parquet")))
        for t in ("interactions", "memory_statements", "feedback")
    ]
    return scan[0], scan[1], scan[2], None


def per_date(keys: list[str], folder: Path) -> dict[str, pl.DataFrame]:
    """Before: a full snapshot (and its memory count) for every date."""
    data = inputs(folder)
    out = {}
    for key in keys:
        out[key] = snapshot(*data, as_of_for(key))
        known_memory_count(data[0], data[1], as_of_for(key))
    return out


def planned(keys: list[str], folder: Path) -> tuple[dict[str, pl.DataFrame], int]:
    """After: full where something became known, aged elsewhere; and how many were full."""
    days = list(snapshots_over(keys, *inputs(folder)))
    return {d.key: d.snapshot for d in days}, sum(d.aged_from is None for d in days)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--days", type=int, default=120)
    parser.add_argument("--data-days", type=int, default=40)
    parser.add_argument("--per-day", type=int, default=400, help="interactions a data day")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-decay-sparse-") as tmp:
        folder = Path(tmp)
        keys = write_lake(folder, args.days, args.data_days, args.per_day, args.seed)
        before_s, after_s = [], []
        for _ in range(args.rounds):  # interleaved: a noisy neighbour slows both alike
            began = time.perf_counter()
            before = per_date(keys, folder)
            before_s.append(time.perf_counter() - began)
            began = time.perf_counter()
            after, full = planned(keys, folder)
            after_s.append(time.perf_counter() - began)
        unequal = [k for k in keys if not before[k].equals(after[k])]
    rows = before[keys[-1]].height
    print(
        f"{args.days} dates, {args.data_days} with data, {rows} memories at the end; "
        f"after: {full} full snapshots, {args.days - full} aged"
    )
    print(
        f"before (a full snapshot per date): median {statistics.median(before_s):.2f} s "
        f"{[round(s, 2) for s in before_s]}"
    )
    print(
        f"after (snapshots_over):            median {statistics.median(after_s):.2f} s "
        f"{[round(s, 2) for s in after_s]}"
    )
    print(f"dates whose snapshots differ: {len(unequal)} {unequal[:5]}")
    if unequal:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
