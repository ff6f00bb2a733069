"""Scale: a night over several tenants with `--workers 1` and `--workers 2` side by side, then an
incremental night, a night where one tenant alone received data, and a projection of the night's
wall time for 1, 2 and N workers from the measured per-tenant times.

Each night is `jobs.runner.run_nightly(..., workers=W)` in its own child process (this module's
`_child`), which records the Dagster run records (ingest, each tenant, the analytics build), when
each tenant's run ended, its own peak RSS (ingest runs there) and, with
`getrusage(RUSAGE_CHILDREN)`, the peak RSS of the largest worker process (a tenant's run or the
analytics build); a thread samples each worker's RSS (psutil, every 0.25 s) to give every tenant
its own peak. The parent samples the
machine's load average while each night runs (the machine is shared).

    python -m bench.sections_scale --home H --landing L --start D1 --end D2 --workers W --result F
runs one night (what the section does in a child).
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import resource
import shutil
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from multiprocessing import forkserver
from pathlib import Path
from typing import Any

from bench import data, floor
from bench.common import (
    CACHE,
    GIB,
    MIB,
    ROOT,
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

# The sizes and goals (issue 14, "How fast, how big"); judged only at those sizes.
GOAL_INTERACTIONS = 1_000_000
GOAL_TENANTS = 10
FULL_GOAL_SECONDS = 30 * 60
PEAK_GOAL_BYTES = int(2.5 * GIB)
INCREMENTAL_GOAL = 0.10
# Issue 17: an incremental night's redaction adds at most this share to its pack stage.
PII_GOAL_SHARE = 0.20
SAMPLE_SECONDS = 0.25


# ---- the parent side -----------------------------------------------------------------------------
@contextmanager
def _load_average(every: float = 5.0) -> Iterator[list[float]]:
    """The 1-minute load average, sampled while the block runs (the machine is shared)."""
    samples: list[float] = [os.getloadavg()[0]]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(every):
            samples.append(os.getloadavg()[0])

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join()
        samples.append(os.getloadavg()[0])


def _night(
    home: Path,
    landing: Path,
    start: str,
    end: str,
    workers: int,
    steps: int,
    logs: Path,
    label: str,
    root: Path = ROOT,
) -> dict[str, Any]:
    """One night in a child process: its outcome, wall time, peak RSS and the load meanwhile.
    `root`: the checkout whose code runs it (another commit's worktree: bench/incremental_ab.py)."""
    result = logs / f"{label}.json"
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env["DAGSTER_HOME"] = str(home / "dagster")
    if root != ROOT:
        env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "lib" / "src")])
    with (logs / f"{label}.log").open("w") as log, _load_average() as load:
        child = run_child(
            python_child(
                "bench.sections_scale",
                *("--home", str(home), "--landing", str(landing), "--start", start, "--end", end),
                *(
                    "--workers",
                    str(workers),
                    "--dpo-max-steps",
                    str(steps),
                    "--result",
                    str(result),
                ),
            ),
            env=env,
            stdout=log,
            stderr=log,
            cwd=root,
        )
    outcome = json.loads(result.read_text()) if result.exists() else {"success": False}
    if not outcome.get("success"):
        tail = (logs / f"{label}.log").read_text(errors="replace")[-1500:]
        raise RuntimeError(f"{label} night failed: {outcome.get('error')} {tail}")
    return {
        **outcome,
        "label": label,
        "workers": workers,
        "seconds": round(child.seconds, 2),
        # wait4: the child's own peak or its largest reaped descendant's, whichever is larger.
        "peak_rss_bytes": child.peak_rss_bytes,
        "load_avg_1min": {
            "mean": round(statistics.fmean(load), 2),
            "min": round(min(load), 2),
            "max": round(max(load), 2),
        },
        "start": start,
        "end": end,
    }


def _embedding_export(logs: Path) -> tuple[Path, float | None]:
    """The pipeline's ONNX int8 export of the embedding model, made once and kept in the cache:
    every home of this section starts with it, so the nights measure steady-state nights, not the
    one-off export a fresh home makes in its first tenant's run. Seconds if it was made now."""
    target = CACHE / "scale-models" / "embeddings"
    if any(target.glob("*/model-int8.onnx")):
        return target, None
    code = (
        "import sys; from pipeline.semantic.embed.models import load_model; "
        "load_model(None, 'onnx-int8', sys.argv[1])"
    )
    with (logs / "export.log").open("w") as log:
        child = run_child([sys.executable, "-c", code, str(target)], stdout=log, stderr=log)
    if child.returncode != 0 or not any(target.glob("*/model-int8.onnx")):
        raise RuntimeError(f"embedding export failed: see {logs / 'export.log'}")
    return target, round(child.seconds, 1)


def _fresh_home(home: Path, export: Path) -> Path:
    shutil.copytree(export, home / "models" / "embeddings")
    return home


def _interactions_by_tenant(home: Path, load_dates: list[str] | None = None) -> dict[str, int]:
    """Interactions in the lake per tenant (of `load_dates` only, if given)."""
    import polars as pl

    from pipeline.config import Paths
    from pipeline.storage.lake import Lake

    frame = Lake(Paths.from_env(home)).read("interactions")
    if load_dates is not None:
        frame = frame.filter(pl.col("load_date").cast(pl.String).is_in(load_dates))
    counts = frame.group_by("tenant_id").agg(pl.len()).collect()
    return {row["tenant_id"]: int(row["len"]) for row in counts.iter_rows(named=True)}


def night_path(night: dict[str, Any]) -> dict[str, float | None]:
    """When, from ingest's start, every tenant's pack was done and the analytics build ended
    (the path a user waits on), and when the trainings that follow a publish ended (off it)."""
    runs = night["runs"]
    start, trainings = runs["ingest"]["start"], runs.get("trainings", {})
    return {
        "packs_done_s": round(max(r["end"] for r in runs["tenants"].values()) - start, 1)
        if runs["tenants"]
        else None,
        "packs_and_build_s": round(runs["analytics"]["end"] - start, 1),
        "trainings": len(trainings),
        "trainings_summed_s": round(sum(r["end"] - r["start"] for r in trainings.values()), 1),
        "trainings_done_s": round(max(r["end"] for r in trainings.values()) - start, 1)
        if trainings
        else None,
    }


def _tenant_times(night: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per tenant: its Dagster run's wall time, its step time, its worker's peak RSS and, with one
    worker (runs back to back), its wall time including the worker process (fork, imports)."""
    runs = night["runs"]
    out: dict[str, dict[str, Any]] = {}
    for tenant, run in runs["tenants"].items():
        steps = {
            k.split("/", 1)[1]: v
            for k, v in night["step_seconds"].items()
            if k.startswith(f"{tenant}/")
        }
        out[tenant] = {
            "run_seconds": round(run["end"] - run["start"], 2),
            "step_seconds": round(sum(steps.values()), 2),
            "steps": steps,
            "peak_rss_mib": round(night["tenant_peak_rss"].get(tenant, 0) / MIB, 1),
        }
    if night["workers"] == 1:  # back to back: the gap between two endings is one tenant's process
        previous = runs["ingest"]["end"]
        order = sorted(night["tenant_ended"].items(), key=lambda kv: kv[1])
        for tenant, ended in order:
            out[tenant]["process_seconds"] = round(ended - previous, 2)
            previous = ended
        # The first gap also waits for the fork server to start (its imports, once a night, begun
        # with ingest): that tenant's process is its run plus the others' median start-up, and
        # the rest counts in the night's serial part.
        if len(order) > 1:
            first = out[order[0][0]]
            startup = statistics.median(
                out[t]["process_seconds"] - out[t]["run_seconds"] for t, _ in order[1:]
            )
            first["process_seconds"] = round(first["run_seconds"] + startup, 2)
    return out


def _makespan(times: list[float], workers: int) -> float:
    """Wall time of running `times` on `workers` slots, longest first onto the first free slot
    (what a pool of `workers` does with tenants sorted by size; the order there is by name)."""
    slots = [0.0] * max(1, workers)
    for t in sorted(times, reverse=True):
        heapq.heapreplace(slots, slots[0] + t)
    return max(slots)


def _fit(xs: list[float], ys: list[float]) -> dict[str, float]:
    """Least squares y = a + b·x and its R² (is a tenant's time linear in its interactions?)."""
    n = len(xs)
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    a = my - b * mx
    ss = sum((y - my) ** 2 for y in ys)
    residual = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return {"a": a, "b": b, "r2": 1 - residual / ss if ss else 1.0, "n": n}


def _projection(
    w1: dict[str, Any], w2: dict[str, Any], per1: dict[str, Any], per2: dict[str, Any], total: int
) -> dict[str, Any]:
    """The night for W workers = ingest + the tenants' makespan on W slots + the analytics build
    (+ the night process's start-up), from the one-worker night's per-tenant process times (each
    run alone on both cores: workers with cores of their own, e.g. one node each) and from the
    two-worker night's (two runs sharing these 2 cores)."""
    ingest = w1["runs"]["ingest"]["end"] - w1["runs"]["ingest"]["start"]
    analytics = w1["runs"]["analytics"]["end"] - w1["runs"]["analytics"]["start"]
    alone = [p["process_seconds"] for p in per1.values()]
    shared = [p["run_seconds"] for p in per2.values()]
    tenants = len(alone)
    serial = w1["seconds"] - sum(alone)  # start-up, ingest, analytics: not shared by tenants
    rows = []
    for workers in sorted(w for w in {1, 2, 4, tenants} if w <= tenants):
        rows.append(
            {
                "workers": workers,
                "own_cores_s": round(serial + _makespan(alone, workers), 1),
                "measured_s": {1: w1["seconds"], 2: w2["seconds"]}.get(workers),
            }
        )
    # With 2 workers on these 2 cores each run is slowed by the other (1 torch thread each).
    rows[1]["these_2_cores_s"] = round(serial + _makespan(shared, 2), 1)
    fit = _fit([float(p["interactions"]) for p in per1.values()], alone)
    # The night: 10 tenants sharing 1M interactions as the generator shares them
    # (tenant i gets a weight 1 / (1 + 0.4 i): pipeline/generate/core.py `_plan`).
    weights = [1 / (1 + 0.4 * i) for i in range(GOAL_TENANTS)]
    big = [fit["a"] + fit["b"] * GOAL_INTERACTIONS * w / sum(weights) for w in weights]
    # Ingest and the analytics build: this run cannot split their fixed part from the part that
    # grows with the data (both full nights read the same data), so give both ends: as measured
    # (all fixed) and in proportion to the interactions (all variable).
    startup = serial - ingest - analytics
    low, high = serial, startup + (ingest + analytics) * GOAL_INTERACTIONS / total
    return {
        "ingest_s": round(ingest, 1),
        "analytics_s": round(analytics, 1),
        "serial_s": round(serial, 1),
        "serial_share_w1": round(serial / w1["seconds"], 3),
        "largest_tenant_s": round(max(alone), 1),
        "rows": rows,
        "fit_process_s": {k: round(v, 6) for k, v in fit.items()},
        "extrapolated_1m": {
            "what": "LINEAR EXTRAPOLATION, not measured: per-tenant process time a + b·n from the "
            f"fit over the {tenants} tenants measured, at 1,000,000 interactions shared by "
            f"{GOAL_TENANTS} tenants as the generator shares them; ingest + analytics + start-up "
            "between as measured (fixed) and in proportion to the interactions",
            "serial_s": [round(low), round(high)],
            "tenants_1m_total": {
                str(w): [round(low + _makespan(big, w)), round(high + _makespan(big, w))]
                for w in (1, 2, GOAL_TENANTS)
            },
            "one_tenant_1m_s": round(fit["a"] + fit["b"] * GOAL_INTERACTIONS),
            "one_tenant_1m_night_s": [
                round(low + fit["a"] + fit["b"] * GOAL_INTERACTIONS),
                round(high + fit["a"] + fit["b"] * GOAL_INTERACTIONS),
            ],
        },
    }


def _table(
    per1: dict[str, Any], per2: dict[str, Any], proj: dict[str, Any], nights: dict[str, Any]
) -> str:
    """The section's own Markdown: per tenant, the projection, the nights' load average."""
    lines = [
        "### scale: per tenant (one worker: runs back to back; two workers: two at once)",
        "",
        "| tenant | interactions | 1 worker: process s | run s | steps s | peak RSS MiB "
        "| 2 workers: run s | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for tenant in sorted(per1, key=lambda t: -per1[t]["interactions"]):
        a, b = per1[tenant], per2.get(tenant, {})
        lines.append(
            f"| {tenant} | {a['interactions']:,} | {a['process_seconds']:.1f} | "
            f"{a['run_seconds']:.1f} | {a['step_seconds']:.1f} | {a['peak_rss_mib']:,.0f} | "
            f"{b.get('run_seconds', float('nan')):.1f} | {b.get('peak_rss_mib', 0):,.0f} |"
        )
    fit = proj["fit_process_s"]
    lines += [
        "",
        f"Fit over the tenants (1 worker, process time): {fit['a']:.1f} s + "
        f"{fit['b'] * 1000:.2f} s per 1,000 interactions, R² {fit['r2']:.3f}.",
        "",
        "### scale: the night's wall time for W workers (projected from the per-tenant times)",
        "",
        f"Ingest {proj['ingest_s']} s and the analytics build {proj['analytics_s']} s run once, "
        f"before and after the tenants; with start-up that is {proj['serial_s']} s the workers "
        f"cannot share ({proj['serial_share_w1']:.0%} of the one-worker night). The largest tenant "
        f"takes {proj['largest_tenant_s']} s alone.",
        "",
        "| workers | projected, each worker with 2 cores of its own (s) | projected, on these 2 "
        "cores (s) | measured here (s) |",
        "|---|---|---|---|",
    ]
    for row in proj["rows"]:
        measured = row.get("measured_s")
        here = row.get("these_2_cores_s")
        lines.append(
            f"| {row['workers']} | {row['own_cores_s']} | "
            f"{here if here is not None else ('—' if row['workers'] > 2 else row['own_cores_s'])} | "
            f"{measured if measured is not None else '—'} |"
        )
    ext = proj["extrapolated_1m"]
    lines += [
        "",
        f"**Not measured at 1,000,000 interactions.** {ext['what']} "
        f"({ext['serial_s'][0]:,}–{ext['serial_s'][1]:,} s): {GOAL_TENANTS} tenants × 1M in total → "
        + ", ".join(
            f"{w} worker(s) with their own cores ≈ {lo:,}–{hi:,} s"
            for w, (lo, hi) in ext["tenants_1m_total"].items()
        )
        + f"; one tenant with 1M: its run ≈ {ext['one_tenant_1m_s']:,} s, the night ≈ "
        f"{ext['one_tenant_1m_night_s'][0]:,}–{ext['one_tenant_1m_night_s'][1]:,} s.",
        "",
        "Load average (1 min) while each night ran: "
        + "; ".join(
            f"{label} {n['load_avg_1min']['mean']} (min {n['load_avg_1min']['min']}, max "
            f"{n['load_avg_1min']['max']})"
            for label, n in nights.items()
        )
        + ".",
        "",
    ]
    return "\n".join(lines)


def run(sizes: Sizes) -> list[Figure]:
    import jobs.runner  # noqa: F401  (fail early with ImportError if the job has not landed)

    tenants, days, n = sizes.scale_tenants, max(1, sizes.scale_days), sizes.scale_interactions
    if tenants < 2:
        raise ValueError("the scale section compares 1 and 2 workers: --scale-tenants must be >= 2")
    feedback, steps = sizes.nightly_feedback_per_interaction, sizes.scale_dpo_max_steps
    source, summary = data.landing(
        n, days=days, seed=sizes.seed, feedback=feedback, tenants=tenants
    )
    work = CACHE / f"scale-work-{uuid.uuid4().hex[:8]}"
    landing, logs = work / "landing", work / "logs"
    for folder in (landing, logs):
        folder.mkdir(parents=True)
    dates = data.dates(data.START, days)
    first, last = dates[0], dates[-1]
    try:
        for day in dates:
            data.link_day(source / day, landing / day)
        export, export_seconds = _embedding_export(logs)
        # Each full night on a fresh home: one worker, then two (the same data).
        home1, home2 = _fresh_home(work / "home1", export), _fresh_home(work / "home2", export)
        w1 = _night(home1, landing, first, last, 1, steps, logs, "full-w1")
        w2 = _night(home2, landing, first, last, 2, steps, logs, "full-w2")
        after_full = floor.count(w2, home2, None)
        counts = _interactions_by_tenant(work / "home2")
        # The incremental night: a few % more interactions over every tenant (on home2).
        new_day = data.START + timedelta(days=days)
        data.add_day(landing, new_day, sizes.scale_new_interactions, seed=sizes.seed + 1000,
                     feedback=feedback, tenants=tenants)  # fmt: skip
        incr = _night(work / "home2", landing, new_day.isoformat(), new_day.isoformat(), 2, steps,
                      logs, "incremental-w2")  # fmt: skip
        floor.count(incr, home2, after_full)
        incr_counts = _interactions_by_tenant(work / "home2", [new_day.isoformat()])
        floor.time_floors(home2, landing, export, [(w2, dates), (incr, [new_day.isoformat()])])
        # A night where one tenant alone received data: the second largest.
        lone = sorted(counts, key=lambda t: -counts[t])[min(1, len(counts) - 1)]
        lone_day = new_day + timedelta(days=1)
        data.add_day(landing, lone_day, sizes.scale_new_interactions, seed=sizes.seed + 2000,
                     feedback=feedback, tenants=tenants, only_tenant=lone)  # fmt: skip
        one = _night(work / "home2", landing, lone_day.isoformat(), lone_day.isoformat(), 2,
                     steps, logs, "one-tenant-w2")  # fmt: skip
        one_counts = _interactions_by_tenant(work / "home2", [lone_day.isoformat()])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {**summary, "embedding_export_s": export_seconds}
    return _figures(sizes, summary, w1, w2, incr, one, counts, incr_counts, one_counts, lone)


def _figures(
    sizes: Sizes,
    summary: dict[str, Any],
    w1: dict[str, Any],
    w2: dict[str, Any],
    incr: dict[str, Any],
    one: dict[str, Any],
    counts: dict[str, int],
    incr_counts: dict[str, int],
    one_counts: dict[str, int],
    lone: str,
) -> list[Figure]:
    n, tenants = sizes.scale_interactions, sizes.scale_tenants
    per1, per2 = _tenant_times(w1), _tenant_times(w2)
    for per in (per1, per2):
        for tenant, p in per.items():
            p["interactions"] = counts.get(tenant, 0)
    proj = _projection(w1, w2, per1, per2, sum(counts.values()))
    nights = {"full, 1 worker": w1, "full, 2 workers": w2, "incremental": incr, "one tenant": one}
    table = _table(per1, per2, proj, nights)
    speedup = ratio(w1["seconds"], w2["seconds"])
    peak1 = max(w1["peak_rss_self"], w1["peak_rss_children"])
    peak2 = max(w2["peak_rss_self"], w2["peak_rss_children"])
    share = ratio(incr["seconds"], w2["seconds"])
    ran = sorted(one["runs"]["tenants"])
    lone_run = one["runs"]["tenants"].get(lone, {})
    common = {
        "tenants": tenants,
        "interactions_by_tenant": counts,
        "generator": summary,
        "dpo": f"max_steps {sizes.scale_dpo_max_steps}, no SFT (smoke run)"
        if sizes.scale_dpo_max_steps > 0
        else "default policy",
    }

    def night_details(night: dict[str, Any]) -> dict[str, Any]:
        keep = ("seconds", "workers", "start", "end", "load_avg_1min", "runs", "tenant_ended")
        return {
            **{k: night[k] for k in keep},
            "path": night_path(night),
            "peak_rss_mib_main": round(night["peak_rss_self"] / MIB, 1),
            "peak_rss_mib_largest_worker": round(night["peak_rss_children"] / MIB, 1),
            "step_seconds": night["step_seconds"],
        }

    figures = [
        scaled_goal(
            Figure(
                name=f"full night, {tenants} tenants, {n:,} interactions: --workers 2",
                value=round(w2["seconds"], 1),
                unit="s",
                baseline_name="--workers 1 (same data, same bench run)",
                baseline_value=round(w1["seconds"], 1),
                ratio=rounded(speedup),
                goal=f"≤ {FULL_GOAL_SECONDS // 60} min on 2 cores at {GOAL_INTERACTIONS:,} "
                f"interactions over {GOAL_TENANTS} tenants (ratio = speed-up of 2 workers)",
                goal_met=w2["seconds"] <= FULL_GOAL_SECONDS,
                details={
                    **common,
                    "w1": night_details(w1),
                    "w2": night_details(w2),
                    "per_tenant_w1": per1,
                    "per_tenant_w2": per2,
                    "projection": proj,
                    "table_md": table,
                },
            ),
            n,
            GOAL_INTERACTIONS,
            "interactions",
        ),
        scaled_goal(
            Figure(
                name="peak RSS of the largest process, --workers 2",
                value=round(peak2 / MIB),
                unit="MiB",
                baseline_name="--workers 1",
                baseline_value=round(peak1 / MIB),
                ratio=rounded(ratio(peak2, peak1)),
                goal=f"≤ {PEAK_GOAL_BYTES / GIB:g} GiB in any one process at "
                f"{GOAL_INTERACTIONS:,} interactions",
                goal_met=max(peak1, peak2) <= PEAK_GOAL_BYTES,
                details={
                    "w1_main_mib": round(w1["peak_rss_self"] / MIB, 1),
                    "w1_largest_worker_mib": round(w1["peak_rss_children"] / MIB, 1),
                    "w2_main_mib": round(w2["peak_rss_self"] / MIB, 1),
                    "w2_largest_worker_mib": round(w2["peak_rss_children"] / MIB, 1),
                    "how": "getrusage RUSAGE_SELF (ingest) and RUSAGE_CHILDREN (the largest "
                    "worker: a tenant's run or the analytics build) in the process that runs "
                    "run_nightly",
                },
            ),
            n,
            GOAL_INTERACTIONS,
            "interactions",
        ),
        scaled_goal(
            Figure(
                name=f"incremental night (+{sum(incr_counts.values()):,} interactions over "
                f"{len(incr_counts)} tenants), --workers 2",
                value=round(incr["seconds"], 1),
                unit="s",
                baseline_name="full night, --workers 2",
                baseline_value=round(w2["seconds"], 1),
                ratio=rounded(share),
                goal=f"≤ {INCREMENTAL_GOAL:.0%} of the full night (+30,000 at 1,000,000)",
                goal_met=share is not None and share <= INCREMENTAL_GOAL,
                details={
                    "night": night_details(incr),
                    "new_interactions_by_tenant": incr_counts,
                    "tenants_ran": sorted(incr["runs"]["tenants"]),
                },
            ),
            n,
            GOAL_INTERACTIONS,
            "interactions",
        ),
        _pack_redaction_figure(incr, w2, n),
        *(
            scaled_goal(f, n, GOAL_INTERACTIONS, "interactions")
            for f in floor.night_floor_figures({"full (--workers 2)": w2, "incremental": incr})
        ),
        Figure(
            name=f"night where only {lone} received data (+{sum(one_counts.values()):,}): "
            f"tenants run: {', '.join(ran)}",
            value=round(one["seconds"], 1),
            unit="s",
            baseline_name="full night, --workers 2",
            baseline_value=round(w2["seconds"], 1),
            ratio=rounded(ratio(one["seconds"], w2["seconds"])),
            goal="runs only that tenant",
            goal_met=ran == [lone],
            details={
                "night": night_details(one),
                "tenant_run_seconds": round(lone_run.get("end", 0) - lone_run.get("start", 0), 2),
                "new_interactions_by_tenant": one_counts,
            },
        ),
    ]
    fit = proj["fit_process_s"]
    figures.append(
        Figure(
            name="per-tenant run (1 worker, process wall) = a + b·interactions: b per 1,000",
            value=round(fit["b"] * 1000, 3),
            unit="s",
            baseline_name="a, the fixed cost of one tenant's run (s)",
            baseline_value=round(fit["a"], 1),
            goal="linear in its interactions (R² in details)",
            details={"fit": fit, "per_tenant": per1},
        )
    )
    for row in proj["rows"]:
        figures.append(
            Figure(
                name=f"projected night, {row['workers']} worker(s) with their own cores",
                value=row["own_cores_s"],
                unit="s",
                baseline_name="measured here" if row.get("measured_s") else None,
                baseline_value=row.get("measured_s"),
                ratio=rounded(ratio(row["own_cores_s"], row.get("measured_s"))),
                details={
                    "ingest_s": proj["ingest_s"],
                    "analytics_s": proj["analytics_s"],
                    "serial_s": proj["serial_s"],
                    "on_these_2_cores_s": row.get("these_2_cores_s"),
                },
            )
        )
    ext = proj["extrapolated_1m"]
    for workers, (low, high) in ext["tenants_1m_total"].items():
        figures.append(
            Figure(
                name=f"NOT MEASURED — linear extrapolation: {GOAL_TENANTS} tenants × 1,000,000 "
                f"interactions in total, {workers} worker(s) with their own cores (low end)",
                value=low,
                unit="s",
                baseline_name="high end (ingest + analytics ∝ interactions)",
                baseline_value=high,
                goal=f"≤ {FULL_GOAL_SECONDS // 60} min (a projection, not judged)",
                details={"what": ext["what"]},
            )
        )
    low, high = ext["one_tenant_1m_night_s"]
    figures.append(
        Figure(
            name="NOT MEASURED — linear extrapolation: a night of one tenant with 1,000,000 "
            "interactions (low end)",
            value=low,
            unit="s",
            baseline_name="high end (ingest + analytics ∝ interactions)",
            baseline_value=high,
            details={"what": ext["what"], "tenant_run_s": ext["one_tenant_1m_s"]},
        )
    )
    return figures


def _pack_redaction(night: dict[str, Any]) -> dict[str, Any]:
    """The pack step's wall time (memory_pack) and its PII redaction's, over the night's tenants."""
    tenants = night["runs"]["tenants"]
    per = {
        tenant: {
            "pack_step_s": night["step_seconds"].get(f"{tenant}/memory_pack", 0.0),
            "redaction_s": run.get("redaction_s", 0.0),
        }
        for tenant, run in sorted(tenants.items())
    }
    return {
        "pack_step_s": round(sum(p["pack_step_s"] for p in per.values()), 2),
        "redaction_s": round(sum(p["redaction_s"] for p in per.values()), 2),
        "per_tenant": per,
    }


def _pack_redaction_figure(incr: dict[str, Any], full: dict[str, Any], n: int) -> Figure:
    """Issue 17's cost goal on a real night: the incremental night's pack steps with their PII
    redaction, against the same steps with the redaction's own measured time taken out."""
    night, first = _pack_redaction(incr), _pack_redaction(full)
    pack, without = night["pack_step_s"], night["pack_step_s"] - night["redaction_s"]
    share = ratio(pack, without)
    return scaled_goal(
        Figure(
            name="incremental night: pack steps (memory_pack, all tenants) with PII redaction",
            value=pack,
            unit="s",
            baseline_name="the same steps less their redaction time (measured inside the step)",
            baseline_value=round(without, 2),
            ratio=rounded(share),
            goal=f"ratio ≤ {1 + PII_GOAL_SHARE:g} (redaction adds ≤ {PII_GOAL_SHARE:.0%})",
            goal_met=share is not None and share <= 1 + PII_GOAL_SHARE,
            details={"incremental": night, "full_night_w2": first},
        ),
        n,
        GOAL_INTERACTIONS,
        "interactions",
    )


# ---- the child side ------------------------------------------------------------------------------
def _sample_rss(samples: dict[int, int], stop: threading.Event) -> None:
    """Each descendant's peak RSS, sampled (the tenant workers: one tenant per process)."""
    import psutil

    me = psutil.Process()
    while not stop.wait(SAMPLE_SECONDS):
        for child in me.children(recursive=True):
            try:
                rss = child.memory_info().rss
            except psutil.Error:
                continue
            samples[child.pid] = max(samples.get(child.pid, 0), rss)


def _runs(home: Path, since: datetime) -> dict[str, Any]:
    """The Dagster runs this night made: ingest, each tenant's (with the pid that ran it), the
    analytics build; their start and end times."""
    import dagster as dg

    from jobs.instance import dagster_home
    from jobs.nightly import ANALYTICS_JOB, INGEST_JOB, TENANT_JOB, TRAINING_JOB

    out: dict[str, Any] = {"tenants": {}, "trainings": {}}
    with dg.DagsterInstance.from_config(str(dagster_home(home))) as instance:
        for record in instance.get_run_records(dg.RunsFilter(created_after=since)):
            run = record.dagster_run
            times: dict[str, Any] = {
                "start": record.start_time,
                "end": record.end_time,
                "run_id": run.run_id,
            }
            if run.job_name == TENANT_JOB:
                events = [e.dagster_event for e in instance.all_logs(run.run_id)]
                times["pids"] = sorted({e.pid for e in events if e is not None and e.pid})
                packed = [
                    e.event_specific_data.materialization.metadata  # type: ignore[union-attr]
                    for e in events
                    if e is not None
                    and e.is_step_materialization
                    and e.asset_key == dg.AssetKey("memory_pack")
                ]
                if packed and "redaction_seconds" in packed[0]:
                    times["redaction_s"] = packed[0]["redaction_seconds"].value
                out["tenants"][run.tags["dagster/partition"]] = times
            elif run.job_name == TRAINING_JOB:
                out["trainings"][run.tags["dagster/partition"]] = times
            elif run.job_name in (INGEST_JOB, ANALYTICS_JOB):
                out["ingest" if run.job_name == INGEST_JOB else "analytics"] = times
    return out


def _child(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--landing", type=Path, required=True)
    parser.add_argument("--start", required=True)
    parser.add_argument("--end", required=True)
    parser.add_argument("--workers", type=int, required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--dpo-max-steps", type=int, default=0)
    args = parser.parse_args(argv)
    from jobs.runner import run_nightly

    date.fromisoformat(args.start)
    dpo = dpo_smoke(args.dpo_max_steps)
    ended: dict[str, float] = {}
    samples: dict[int, int] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_rss, args=(samples, stop), daemon=True)
    since = datetime.now(UTC) - timedelta(seconds=1)
    sampler.start()
    outcome = run_nightly(
        args.home,
        args.landing,
        args.start,
        args.end,
        log_level="WARNING",
        settings=dpo,
        workers=args.workers,
        on_tenant=lambda tenant, _outcome: ended.__setitem__(tenant, time.time()),
    )
    stop.set()
    sampler.join()
    # Tenant workers are the fork server's children: their peak RSS reaches RUSAGE_CHILDREN here
    # once the server that reaped them is itself reaped (a private method CPython's tests use).
    forkserver._forkserver._stop()  # type: ignore[attr-defined]
    runs = _runs(args.home, since)
    tenant_peak = {
        tenant: max((samples.get(pid, 0) for pid in run.get("pids", [])), default=0)
        for tenant, run in runs["tenants"].items()
    }
    write_json(
        args.result,
        {
            "success": outcome.success,
            "error": outcome.error,
            "failed_step": outcome.failed_step,
            "not_published": outcome.not_published,
            "step_seconds": outcome.step_seconds,
            "tenant_ended": ended,
            "runs": runs,
            "tenant_peak_rss": tenant_peak,
            "peak_rss_self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            "peak_rss_children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024,
        },
    )
    return 0 if outcome.success else 1


if __name__ == "__main__":
    raise SystemExit(_child(sys.argv[1:]))
