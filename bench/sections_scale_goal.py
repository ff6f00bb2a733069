"""Scale at the issue's size, measured (issue 14): 10 tenants sharing 1,000,000 interactions (3
feedback events each), a full night with `--workers 2` on a fresh home, then an incremental night
(+30,000 interactions over the tenants) on the same home. Each tenant's run time and its worker's
peak RSS, the largest process of the night, and the steps that take the time. With
`--scale-goal-tenants 1` it is the issue's other size, one tenant with 1,000,000 interactions
(judged on its peak RSS); `--scale-goal-new-interactions 0` skips the incremental night.

It takes one to two hours on a 2-core machine, so it runs only when asked (`--only scale_goal`);
the `scale` section compares 1 and 2 workers at a smaller size. The nights are the `scale`
section's (`bench/sections_scale.py`: each in a child process running `run_nightly`).

    python -m bench.run --only scale_goal --reps 1
    python -m bench.run --only scale_goal --reps 1 --scale-goal-tenants 1 --scale-goal-new-interactions 0
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections import defaultdict
from datetime import timedelta
from typing import Any

from bench import data, floor
from bench.common import CACHE, GIB, MIB, Figure, Sizes, ratio, rounded, scaled_goal
from bench.sections_scale import (
    FULL_GOAL_SECONDS,
    GOAL_INTERACTIONS,
    INCREMENTAL_GOAL,
    PEAK_GOAL_BYTES,
    _embedding_export,
    _fresh_home,
    _interactions_by_tenant,
    _night,
    _pack_redaction,
    _tenant_times,
    night_path,
)

WORKERS = 2
ONE_TENANT_PEAK_GOAL_BYTES = 4 * GIB  # one tenant with 1,000,000 interactions


def run(sizes: Sizes) -> list[Figure]:
    return _figures(sizes, *nights(sizes))


Nights = tuple[
    dict[str, Any], dict[str, Any], dict[str, Any] | None, dict[str, int], dict[str, int]
]


def nights(sizes: Sizes, receipts: float | None = None) -> Nights:
    """The full night on a fresh home, then the incremental night (unless its size is 0): the
    generator's summary, both nights, interactions per tenant (all, and of the new day).
    `receipts` not None: that share of the calls carries a receipt (from the second day on; the
    new day is a generation's second day, see `data.add_day`)."""
    import jobs.runner  # noqa: F401  (fail early with ImportError if the job has not landed)

    tenants, days = sizes.scale_goal_tenants, max(1, sizes.scale_goal_days)
    n, feedback = sizes.scale_goal_interactions, sizes.nightly_feedback_per_interaction
    steps = sizes.scale_dpo_max_steps
    source, summary = data.landing(
        n, days=days, seed=sizes.seed, feedback=feedback, tenants=tenants, receipts=receipts or 0.0
    )
    work = CACHE / f"scale-goal-work-{uuid.uuid4().hex[:8]}"
    landing, logs = work / "landing", work / "logs"
    for folder in (landing, logs):
        folder.mkdir(parents=True)
    dates = data.dates(data.START, days)
    try:
        for day in dates:
            data.link_day(source / day, landing / day)
        export, _ = _embedding_export(logs)
        home = _fresh_home(work / "home", export)
        full = _night(home, landing, dates[0], dates[-1], WORKERS, steps, logs, "full")
        after_full = floor.count(full, home, None)
        counts = _interactions_by_tenant(home)
        incr, new, dated = None, {}, [(full, dates)]
        if sizes.scale_goal_new_interactions > 0:
            new_day = data.START + timedelta(days=days)
            data.add_day(landing, new_day, sizes.scale_goal_new_interactions,
                         seed=sizes.seed + 1000, feedback=feedback, tenants=tenants,
                         receipts=receipts)  # fmt: skip
            incr = _night(home, landing, new_day.isoformat(), new_day.isoformat(), WORKERS,
                          steps, logs, "incremental")  # fmt: skip
            floor.count(incr, home, after_full)
            new = _interactions_by_tenant(home, [new_day.isoformat()])
            dated.append((incr, [new_day.isoformat()]))
        floor.time_floors(home, landing, export, dated)
    finally:
        if os.environ.get("BENCH_KEEP_WORK"):  # to look into the home after the run
            print(f"scale_goal: kept {work}", flush=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return summary, full, incr, counts, new


def _largest(night: dict[str, Any]) -> int:
    """The night's largest process: the one running it (ingest) or a worker (a tenant, analytics)."""
    return max(night["peak_rss_self"], night["peak_rss_children"])


def _step_totals(night: dict[str, Any]) -> dict[str, float]:
    """Seconds per asset summed over the tenants (ingest's steps as they are), largest first."""
    totals: dict[str, float] = defaultdict(float)
    for key, seconds in night["step_seconds"].items():
        totals[key.split("/", 1)[-1]] += seconds
    return dict(sorted(((k, round(v, 1)) for k, v in totals.items()), key=lambda kv: -kv[1]))


def _night_details(night: dict[str, Any], counts: dict[str, int]) -> dict[str, Any]:
    per = _tenant_times(night)
    for tenant, p in per.items():
        p["interactions"] = counts.get(tenant, 0)
        p["steps"] = {k: v for k, v in p["steps"].items() if v >= 0.5}
    runs = night["runs"]
    return {
        "seconds": night["seconds"],
        "path": night_path(night),
        "load_avg_1min": night["load_avg_1min"],
        "ingest_s": round(runs["ingest"]["end"] - runs["ingest"]["start"], 1),
        "analytics_s": round(runs["analytics"]["end"] - runs["analytics"]["start"], 1),
        "peak_rss_mib_main": round(night["peak_rss_self"] / MIB, 1),
        "peak_rss_mib_largest_worker": round(night["peak_rss_children"] / MIB, 1),
        "step_totals_s": _step_totals(night),
        # memory_pack's PII redaction, summed over the tenants (what issue 17's NER costs a night)
        "pack_redaction_s": _pack_redaction(night)["redaction_s"],
        "per_tenant": per,
    }


def _figures(
    sizes: Sizes,
    summary: dict[str, Any],
    full: dict[str, Any],
    incr: dict[str, Any] | None,
    counts: dict[str, int],
    new: dict[str, int],
) -> list[Figure]:
    n, tenants = sum(counts.values()), len(counts)
    details = {
        "generator": summary,
        "interactions_by_tenant": counts,
        "dpo": f"max_steps {sizes.scale_dpo_max_steps}, no SFT (smoke run)"
        if sizes.scale_dpo_max_steps > 0
        else "default policy",
        "full": _night_details(full, counts),
    }
    nights = {"full": full} if incr is None else {"full": full, "incremental": incr}
    peak = max(_largest(night) for night in nights.values())
    peak_goal = ONE_TENANT_PEAK_GOAL_BYTES if tenants == 1 else PEAK_GOAL_BYTES
    size = f"{tenants} tenant{'s' if tenants > 1 else ''}, {n:,} interactions"
    figures = [
        Figure(
            name=f"full night, {size}, --workers {WORKERS}",
            value=round(full["seconds"], 1),
            unit="s",
            goal=f"≤ {FULL_GOAL_SECONDS // 60} min on 2 cores" if tenants > 1 else None,
            goal_met=full["seconds"] <= FULL_GOAL_SECONDS if tenants > 1 else None,
            details=details,
        ),
        Figure(
            name=f"peak RSS of the largest process (a tenant's worker, ingest or the analytics "
            f"build), {size}",
            value=round(peak / MIB),
            unit="MiB",
            goal=f"≤ {peak_goal / GIB:g} GiB in any one process",
            goal_met=peak <= peak_goal,
            details={
                f"{label}_{what}_mib": round(night[key] / MIB, 1)
                for label, night in nights.items()
                for what, key in (
                    ("main", "peak_rss_self"),
                    ("largest_worker", "peak_rss_children"),
                )
            },
        ),
    ]
    if incr is not None:
        share = ratio(incr["seconds"], full["seconds"])
        figures.append(
            Figure(
                name=f"incremental night (+{sum(new.values()):,} interactions over {len(new)} "
                f"tenants), --workers {WORKERS}",
                value=round(incr["seconds"], 1),
                unit="s",
                baseline_name="the full night",
                baseline_value=round(full["seconds"], 1),
                ratio=rounded(share),
                goal=f"≤ {INCREMENTAL_GOAL:.0%} of the full night",
                goal_met=share is not None and share <= INCREMENTAL_GOAL,
                details={"new_interactions_by_tenant": new, "night": _night_details(incr, counts)},
            )
        )
    figures += floor.night_floor_figures(nights)
    # Judged only at the size (a quick run is a smoke test of the section).
    return [scaled_goal(f, n, GOAL_INTERACTIONS, "interactions") for f in figures]
