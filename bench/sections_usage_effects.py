"""Item effects when the pack's own top k makes items substitutes (issue 52 items 2 and 5): the
round-3 rule (each item's difference in means, shrunk) beside the joint model, on the same calls,
and what the joint model adds to the usage stages' time.

Effects: `usage_effects_seeds` seeds of `pipeline/generate/substitutes.py` (`usage_effects_calls`
calls each, half per skill, 10 % holdout; per skill 5 examples of which `prompt_context` puts the
3 most relevant into each prompt, 2 harmful, 2 helpful, 1 neutral, and the template, neutral).
Both rules judge the same receipts; counted over the seeds: neutral items demoted (a false
demotion), neutral items called helpful, harmful examples not demoted, helpful ones not found.

Cost: the `usage` section's calls (`usage_calls` in 10 tenants, ~3,000 items each) through the
usage stages (`calls`, `pack_usage`, `pack_uplift`, lazy reads as the assets read) with each
rule, interleaved after one untimed warm-up: the stages' time before and after, on the same run.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import Figure, Sizes, ratio, rounded
from bench.sections_usage import TENANTS, stages, write_calls

COUNTS = ("neutral_demoted", "neutral_helpful", "harmful_missed", "helpful_missed")


def _judge(usage: pl.DataFrame, truth: Any) -> dict[str, int]:
    """The four counts of one rule's verdicts against the planted truth."""
    verdict = dict(usage.select("item_id", "verdict").iter_rows())
    demoted = {i for i, v in verdict.items() if v == "harmful"}
    helpful = {i for i, v in verdict.items() if v == "helpful"}
    return {
        "neutral_demoted": len(demoted & truth.items(0)),
        "neutral_helpful": len(helpful & truth.items(0)),
        "harmful_missed": len(truth.items(-1) - demoted),
        "helpful_missed": len(truth.items(1) - helpful),
    }


def _margins(usage: pl.DataFrame, truth: Any) -> dict[str, float]:
    """How far the joint verdicts are from flipping: the largest upper end of a harmful item's
    interval, and the interval end of a neutral item nearest to crossing 0."""
    rows = usage.with_columns(
        pl.col("item_id").is_in(list(truth.items(-1))).alias("harmful"),
        pl.col("item_id").is_in(list(truth.items(0))).alias("neutral"),
    )
    neutral = rows.filter("neutral")
    return {
        "harmful_upper_max": float(rows.filter("harmful")["effect_upper"].max()),  # type: ignore[arg-type]
        "neutral_distance_min": float(
            min(neutral["effect_upper"].min(), -neutral["effect_lower"].max())  # type: ignore[operator]
        ),
    }


def _effects(sizes: Sizes) -> dict[str, Any]:
    from pipeline import usage
    from pipeline.generate.substitutes import loop

    rules = {"joint": usage.USAGE_CONFIG, "difference": usage.UsageConfig(joint=False)}
    totals = {rule: dict.fromkeys(COUNTS, 0) for rule in rules}
    seeds: list[dict[str, Any]] = []
    for seed in range(sizes.usage_effects_seeds):
        with tempfile.TemporaryDirectory(prefix="bench-substitutes-") as tmp:
            truth = loop(Path(tmp), sizes.seed + seed, calls=sizes.usage_effects_calls)
        receipts = usage.calls(truth.interactions, truth.scores)
        known = pl.DataFrame({"item_id": list(truth.shifts), "item_kind": "interaction"})
        judged = {rule: usage.pack_usage(receipts, known, c) for rule, c in rules.items()}
        one = {rule: _judge(frame, truth) for rule, frame in judged.items()}
        for rule, counts in one.items():
            for name, n in counts.items():
                totals[rule][name] += n
        seeds.append({"seed": sizes.seed + seed, **one, **_margins(judged["joint"], truth)})
    planted = {sign: len(truth.items(sign)) for sign in (-1, 0, 1)}
    return {"totals": totals, "seeds": seeds, "per_seed": planted}


def _cost(sizes: Sizes) -> dict[str, Any]:
    from pipeline.usage import USAGE_CONFIG, UsageConfig

    rules = {"joint": USAGE_CONFIG, "difference": UsageConfig(joint=False)}
    times: dict[str, list[float]] = {rule: [] for rule in rules}
    rows: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-usage-effects-") as tmp:
        files = write_calls(Path(tmp) / "calls", sizes.usage_calls, sizes.seed, True)
        stages(files)  # warm-up: imports, the first scans
        for _ in range(max(1, sizes.reps)):
            for rule, config in rules.items():  # interleaved: drift hits both alike
                started = time.perf_counter()
                rows[rule] = stages(files, config=config)
                times[rule].append(round(time.perf_counter() - started, 4))
    return {"times_s": times, "rows": rows}


def run(sizes: Sizes) -> list[Figure]:
    effects = _effects(sizes)
    cost = _cost(sizes)
    joint, difference = effects["totals"]["joint"], effects["totals"]["difference"]
    n_seeds = sizes.usage_effects_seeds
    per_seed = effects["per_seed"]
    setting = (
        f"{n_seeds} seeds × {sizes.usage_effects_calls:,} calls, top 3 of 5 examples by "
        "prompt_context"
    )
    details = {"effects": effects, "setting": setting}
    figures = [
        Figure(
            name=f"neutral items demoted (of {n_seeds * per_seed[0]}), joint model; {setting}",
            value=joint["neutral_demoted"],
            unit="items",
            baseline_name="the difference in means (round 3), same calls",
            baseline_value=difference["neutral_demoted"],
            goal="0 (issue 52)",
            goal_met=joint["neutral_demoted"] == 0,
            details=details,
        ),
        Figure(
            name=f"harmful examples missed (of {n_seeds * per_seed[-1]}), joint model",
            value=joint["harmful_missed"],
            unit="items",
            baseline_name="the difference in means (round 3), same calls",
            baseline_value=difference["harmful_missed"],
            goal="0 (issue 52: every harmful one goes)",
            goal_met=joint["harmful_missed"] == 0,
            details={"totals": effects["totals"]},
        ),
    ]
    after, before = (statistics.median(cost["times_s"][rule]) for rule in ("joint", "difference"))
    figures.append(
        Figure(
            name=f"usage stages over {sizes.usage_calls:,} calls in {TENANTS} tenants with the "
            "joint model, in-process",
            value=round(after, 2),
            unit="s",
            baseline_name="the same stages with the difference in means (round 3)",
            baseline_value=round(before, 2),
            ratio=rounded(ratio(after, before)),
            goal="reported (the seconds a night adds)",
            details={**cost, "added_s": round(after - before, 2)},
        )
    )
    return figures
