"""What every bench section shares: the figure record, sizes, timing and child-process helpers."""

from __future__ import annotations

import gc
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "bench" / ".cache"
GIB = 1024**3
MIB = 1024**2


class NotAvailable(Exception):
    """A stage this section measures has not landed (or cannot run here): reported, not a crash."""


@dataclass
class Figure:
    """One measured figure, side by side with its baseline from the same run.

    `ratio` is stated in the direction the goal is written (e.g. "ingest is 1.7× slower than the
    bare read": ratio = bare rows/s ÷ ingest rows/s), so `goal` can read "ratio ≤ 2".
    """

    name: str
    value: float | None
    unit: str
    baseline_name: str | None = None
    baseline_value: float | None = None
    ratio: float | None = None
    goal: str = ""
    goal_met: bool | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Figure:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class Sizes:
    """Data sizes of one bench run (quick or full; each can be overridden on the command line)."""

    ingest_lines: int = 1_000_000
    nightly_interactions: int = 1_000_000
    nightly_days: int = 7
    nightly_new_interactions: int = 30_000
    # The ratio: 3,000,000 feedback events for 1,000,000 interactions.
    nightly_feedback_per_interaction: float = 3.0
    # > 0: the nightly runs' DPO policies skip SFT and stop after this many optimizer steps (the
    # quick smoke run; DPO at scale is the dpo section). 0 = the default policy, as a night trains.
    nightly_dpo_max_steps: int = 0
    # scale: a night over several tenants, `--workers 1` vs `--workers 2` (bench/sections_scale.py).
    # The 10 tenants × 1,000,000 interactions take hours on a shared 2-core machine, and a
    # tenant's run has a fixed cost of ~1-2 min there (start-up, models, DPO): the default keeps
    # the section near 25-30 min and extrapolates (labelled as such).
    scale_tenants: int = 6
    scale_interactions: int = 15_000
    scale_days: int = 2
    scale_new_interactions: int = 450  # the incremental night, spread over every tenant (3 %)
    scale_dpo_max_steps: int = 10  # as the nightly smoke run; 0 = the default policy
    # scale_goal: the size, measured (bench/sections_scale_goal.py; runs only when asked).
    scale_goal_tenants: int = 10
    scale_goal_interactions: int = 1_000_000
    scale_goal_days: int = 7
    scale_goal_new_interactions: int = 30_000  # the incremental night (3 %)
    embed_texts: int = 10_000
    dpo_pairs: int = 10_000
    # > 0: the dpo_real section's policy stops after this many DPO steps, after a quarter SFT epoch
    # (the quick smoke run). 0 = the default policy, as a night trains.
    dpo_real_max_steps: int = 0
    # dpo_losses / dpo_losses_planted: DPO steps per variant (every variant the same; 0 = the
    # config's epochs), and the planted pairs compared on.
    dpo_losses_max_steps: int = 40
    dpo_losses_sft_epochs: float = 0.5
    dpo_losses_pairs: int = 400
    # dpo_base: train pairs (the nightly cap; OASST has 551) and DPO steps (0 = one epoch).
    dpo_base_train_pairs: int = 1_000
    dpo_base_max_steps: int = 0
    pack_memories: int = 100_000
    # usage: AI calls (10 tenants) the usage stages read in-process (bench/sections_usage.py)
    usage_calls: int = 1_000_000
    # usage_effects: seeds of the substitutes loop (pipeline/generate/substitutes.py) and its calls
    usage_effects_seeds: int = 20
    usage_effects_calls: int = 4_000
    # conversations: how many of the LoCoMo conversations in shared/data/locomo (sorted by name)
    conversations: int = 5
    queries: int = 1_000
    pii_texts: int = 10_000
    pii_pack_memories: int = 100_000
    reps: int = 3
    seed: int = 0
    quick: bool = False

    @classmethod
    def quick_sizes(cls) -> Sizes:
        return cls(
            ingest_lines=50_000,
            nightly_interactions=5_000,
            nightly_days=3,
            nightly_new_interactions=150,
            nightly_dpo_max_steps=10,
            scale_tenants=3,
            scale_interactions=1_500,
            scale_days=2,
            scale_new_interactions=60,
            scale_goal_tenants=3,
            scale_goal_interactions=1_500,
            scale_goal_days=2,
            scale_goal_new_interactions=60,
            embed_texts=200,
            dpo_pairs=100,
            dpo_real_max_steps=20,
            dpo_losses_max_steps=4,
            dpo_losses_sft_epochs=0.1,
            dpo_losses_pairs=60,
            dpo_base_train_pairs=16,
            dpo_base_max_steps=2,
            pack_memories=10_000,
            usage_calls=20_000,
            usage_effects_seeds=3,
            usage_effects_calls=2_000,
            conversations=1,
            queries=200,
            pii_texts=1_000,
            pii_pack_memories=2_000,
            reps=3,
            quick=True,
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def scaled_goal(figure: Figure, actual: int, required: int, what: str) -> Figure:
    """A goal stated for a size (e.g. 1,000,000 interactions) is only judged at that size: below it,
    goal_met is None and the verdict at this size is kept in details."""
    if actual < required:
        figure.details["goal_met_at_this_size"] = figure.goal_met
        figure.details["goal_size"] = f"{required:,} {what} (this run: {actual:,})"
        figure.goal_met = None
    return figure


def median_time(
    fn: Callable[[], Any], reps: int, setup: Callable[[], Any] | None = None
) -> tuple[float, list[float], Any]:
    """Median wall seconds of `reps` calls (setup, if any, runs untimed before each); last result."""
    times: list[float] = []
    result: Any = None
    for _ in range(max(1, reps)):
        if setup is not None:
            setup()
        gc.collect()
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), [round(t, 4) for t in times], result


def interleaved(
    fns: dict[str, Callable[[], Any]],
    reps: int,
    setup: dict[str, Callable[[], Any]] | None = None,
    warmup: bool = False,
) -> dict[str, tuple[float, list[float], Any]]:
    """Median seconds of each function, their repetitions taken in turn (candidate, baseline,
    candidate, …) so that a noisy neighbour slows both sides alike. Returns name → (median,
    every repetition, last result)."""
    setup = setup or {}
    times: dict[str, list[float]] = {name: [] for name in fns}
    results: dict[str, Any] = {}
    if warmup:
        for name, fn in fns.items():
            if name in setup:
                setup[name]()
            fn()
    for _ in range(max(1, reps)):
        for name, fn in fns.items():
            if name in setup:
                setup[name]()
            gc.collect()
            started = time.perf_counter()
            results[name] = fn()
            times[name].append(time.perf_counter() - started)
    return {
        name: (statistics.median(ts), [round(t, 4) for t in ts], results[name])
        for name, ts in times.items()
    }


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


def rounded(value: float | None, digits: int = 3) -> float | None:
    if value is None:
        return None
    return float(f"{value:.{digits}g}") if abs(value) < 10**digits else round(value)


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


@dataclass
class ChildRun:
    """One child process: exit code, wall seconds, its own peak resident memory."""

    returncode: int
    seconds: float
    peak_rss_bytes: int
    timed_out: bool = False


def run_child(
    argv: Sequence[str],
    timeout: float | None = None,
    env: dict[str, str] | None = None,
    stdout: Any = None,
    stderr: Any = None,
    cwd: Path = ROOT,
) -> ChildRun:
    """Run a process (in `cwd`: the checkout whose code `-m` runs) and measure its peak RSS
    exactly (wait4 gives that child's own rusage)."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        env={**os.environ, **(env or {})},
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        cwd=str(cwd),
    )
    timed_out = False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            break
        if timeout is not None and time.perf_counter() - started > timeout:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped: tell Popen
    seconds = time.perf_counter() - started
    # Linux reports ru_maxrss in KiB.
    return ChildRun(proc.returncode, seconds, int(usage.ru_maxrss) * 1024, timed_out)


def python_child(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def offline_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def dpo_smoke(max_steps: int) -> dict[str, dict[str, Any]] | None:
    """The night's settings for a smoke-sized DPO policy (`max_steps`, no SFT; the shape of
    assets/config.py FAST), or None (the default policy) when `max_steps` is 0."""
    return {"dpo": {"max_steps": max_steps, "sft_num_train_epochs": 0.0}} if max_steps > 0 else None
