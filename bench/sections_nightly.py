"""Nightly job: a full (first) run over D load dates, then an incremental run for one new date.

Each run is `jobs.runner.run_nightly` (one in-process Dagster run) in its own child process, so
its wall time and its own peak RSS are measured exactly. Both runs use the same home.

    python -m bench.sections_nightly --home H --landing L --start D1 --end D2 --result F
runs one nightly run (what the section does in a child).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bench import data
from bench.common import (
    CACHE,
    GIB,
    MIB,
    Figure,
    Sizes,
    dpo_smoke,
    python_child,
    ratio,
    rounded,
    run_child,
    scaled_goal,
    write_json,
)

GOAL_INTERACTIONS = 1_000_000
INCREMENTAL_GOAL = 0.10
FULL_GOAL_SECONDS = 30 * 60
PEAK_GOAL_BYTES = 4 * GIB


def _one_run(
    home: Path, landing: Path, start: str, end: str, log_dir: Path, label: str, dpo_max_steps: int
) -> dict[str, Any]:
    result = log_dir / f"{label}.json"
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env["DAGSTER_HOME"] = str(home / "dagster")
    (home / "dagster").mkdir(parents=True, exist_ok=True)
    (home / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with (log_dir / f"{label}.log").open("w") as log:
        child = run_child(
            python_child(
                "bench.sections_nightly",
                "--home",
                str(home),
                "--landing",
                str(landing),
                "--start",
                start,
                "--end",
                end,
                "--result",
                str(result),
                "--dpo-max-steps",
                str(dpo_max_steps),
            ),
            env=env,
            stdout=log,
            stderr=log,
        )
    outcome = json.loads(result.read_text()) if result.exists() else {"success": False}
    return {
        **outcome,
        "seconds": round(child.seconds, 2),
        "peak_rss_bytes": child.peak_rss_bytes,
        "peak_rss_mib": round(child.peak_rss_bytes / MIB, 1),
        "exit_code": child.returncode,
        "start": start,
        "end": end,
    }


def _counts(home: Path) -> dict[str, int]:
    import polars as pl

    from pipeline.config import Paths
    from pipeline.storage.lake import Lake

    lake = Lake(Paths.from_env(home))
    out: dict[str, int] = {}
    for name in ("events", "interactions", "feedback", "memory_statements", "memory_embeddings"):
        with contextlib.suppress(FileNotFoundError, OSError, pl.exceptions.PolarsError):
            out[name] = int(lake.read(name).select(pl.len()).collect().item())
    return out


def run(sizes: Sizes) -> list[Figure]:
    import jobs.runner  # noqa: F401  (fail early with ImportError if the job has not landed)

    days = max(1, sizes.nightly_days)
    feedback = sizes.nightly_feedback_per_interaction
    source, summary = data.landing(
        sizes.nightly_interactions, days=days, seed=sizes.seed, feedback=feedback
    )
    work = CACHE / f"nightly-work-{uuid.uuid4().hex[:8]}"
    landing, home, logs = work / "landing", work / "home", work / "logs"
    for folder in (landing, home, logs):
        folder.mkdir(parents=True)
    try:
        for day in data.dates(data.START, days):
            data.link_day(source / day, landing / day)
        first, last = data.dates(data.START, days)[0], data.dates(data.START, days)[-1]
        steps = sizes.nightly_dpo_max_steps
        full = _one_run(home, landing, first, last, logs, "full", steps)
        if not full.get("success"):
            raise RuntimeError(f"full nightly run failed: {full}")
        after_full = _counts(home)
        new_day = data.START + timedelta(days=days)
        _, new_summary = data.add_day(
            landing,
            new_day,
            sizes.nightly_new_interactions,
            seed=sizes.seed + 1000,
            feedback=feedback,
        )
        incr = _one_run(
            home, landing, new_day.isoformat(), new_day.isoformat(), logs, "incremental", steps
        )
        if not incr.get("success"):
            raise RuntimeError(f"incremental nightly run failed: {incr}")
        after_incr = _counts(home)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = sizes.nightly_interactions
    share = ratio(incr["seconds"], full["seconds"])
    peak = max(full["peak_rss_bytes"], incr["peak_rss_bytes"])
    what_ran = {
        "full_run": f"run_nightly over load dates {first}..{last} (single-run backfill)",
        "incremental_run": f"run_nightly for {new_day.isoformat()} with "
        f"{sizes.nightly_new_interactions:,} new base interactions",
        "generator_full": summary,
        "generator_new_day": new_summary,
        "lake_rows_after_full": after_full,
        "lake_rows_after_incremental": after_incr,
        "full": full,
        "incremental": incr,
        "reps": 1,
        "feedback_per_interaction": feedback,
        "dpo": f"max_steps {steps}, no SFT (smoke run)" if steps > 0 else "default policy",
    }
    return [
        scaled_goal(
            Figure(
                name="nightly incremental run wall time",
                value=round(incr["seconds"], 1),
                unit="s",
                baseline_name="first (full) run",
                baseline_value=round(full["seconds"], 1),
                ratio=rounded(share),
                goal=f"incremental ≤ {INCREMENTAL_GOAL:.0%} of full (ratio ≤ {INCREMENTAL_GOAL})",
                goal_met=share is not None and share <= INCREMENTAL_GOAL,
                details=what_ran,
            ),
            n,
            GOAL_INTERACTIONS,
            "interactions",
        ),
        scaled_goal(
            Figure(
                name="nightly full run wall time",
                value=round(full["seconds"], 1),
                unit="s",
                goal=f"≤ {FULL_GOAL_SECONDS // 60} min on 2 cores at {GOAL_INTERACTIONS:,} interactions",
                goal_met=full["seconds"] <= FULL_GOAL_SECONDS,
                details={"interactions": n, "days": days},
            ),
            n,
            GOAL_INTERACTIONS,
            "interactions",
        ),
        scaled_goal(
            Figure(
                name="nightly peak memory (RSS of the run's process)",
                value=round(peak / MIB),
                unit="MiB",
                goal=f"≤ {PEAK_GOAL_BYTES // GIB} GiB at {GOAL_INTERACTIONS:,} interactions",
                goal_met=peak <= PEAK_GOAL_BYTES,
                details={
                    "full_peak_mib": full["peak_rss_mib"],
                    "incremental_peak_mib": incr["peak_rss_mib"],
                },
            ),
            n,
            GOAL_INTERACTIONS,
            "interactions",
        ),
    ]


def _child(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--landing", type=Path, required=True)
    parser.add_argument("--start", required=True)
    parser.add_argument("--end", required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--dpo-max-steps", type=int, default=0)
    args = parser.parse_args(argv)
    from jobs.runner import run_nightly

    date.fromisoformat(args.start)
    dpo = dpo_smoke(args.dpo_max_steps)
    outcome = run_nightly(
        args.home, args.landing, args.start, args.end, log_level="WARNING", settings=dpo
    )
    write_json(
        args.result,
        {
            "success": outcome.success,
            "run_id": outcome.run_id,
            "failed_step": outcome.failed_step,
            "error": outcome.error,
            "step_seconds": outcome.step_seconds,
        },
    )
    return 0 if outcome.success else 1


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
