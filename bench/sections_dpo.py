"""DPO: stage wall time at the default policy config (`dpo`), and whether learning holds on real
human preferences (`dpo_real`); every eval accuracy beside its baselines on the same eval pairs.

`dpo` trains on `bench/dpo_scale.py` synthetic planted pairs (grouped train/eval split), once per
run: at 10,000 pairs it takes minutes, so it is not repeated (recorded as reps=1). `dpo_real`
trains on the OpenAssistant sample's ranked siblings, split by message tree.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from bench.common import Figure, NotAvailable, Sizes, scaled_goal

if TYPE_CHECKING:
    import polars as pl

    from pipeline.dpo import DPOPolicyConfig, PolicyRun

GOAL_PAIRS = 10_000
GOAL_SECONDS = 600.0


def _train(pairs: pl.DataFrame, config: DPOPolicyConfig) -> tuple[PolicyRun, float]:
    """One policy on the pairs' train split (SFT on its chosen replies), scored on the eval split."""
    import polars as pl

    from pipeline.dpo import train_policy

    train = pairs.filter(pl.col("split") == "train")
    evals = pairs.filter(pl.col("split") == "eval")
    sft = train.select("tenant_id", "prompt", pl.col("chosen").alias("completion"))
    # Every pair is trained on (the nightly's per-tenant caps would sample them down).
    config = replace(
        config,
        max_train_pairs=train.height,
        max_eval_pairs=evals.height,
        max_sft_examples=sft.height,
    )
    with tempfile.TemporaryDirectory(prefix="bench-dpo-") as models:
        started = time.perf_counter()
        run = train_policy(pairs["tenant_id"][0], train, evals, sft, config, models)
        return run, time.perf_counter() - started


def _accuracy_figures(run: PolicyRun, what: str) -> list[Figure]:
    """The policy's eval accuracy and its baselines on the same eval pairs, one row each, each
    with its 95 % Wilson interval; the policy's goal is to beat the length rule."""
    from pipeline.dpo import wilson_interval

    def row(name: str, accuracy: float | None, **kw: Any) -> Figure:
        unit = "accuracy"
        if accuracy is not None:
            low, high = wilson_interval(accuracy, run.n_eval)
            unit = f"accuracy (95 % interval {low:.2f}–{high:.2f})"
            accuracy = round(accuracy, 4)
        return Figure(name=f"{what}: {name}", value=accuracy, unit=unit, **kw)

    policy, length = run.eval_accuracy, run.length_rule_accuracy
    known = policy is not None and length is not None
    return [
        row(
            "DPO policy eval preference accuracy",
            policy,
            baseline_name="length rule",
            baseline_value=length,
            ratio=round(policy / length, 3) if known and length else None,  # type: ignore[operator]
            goal="beats the length rule",
            goal_met=policy > length if known else None,  # type: ignore[operator]
            details={"verdict": run.verdict, "eval_margin": run.eval_margin},
        ),
        row("reference model before DPO (Σ log-prob)", run.reference_accuracy, goal="baseline"),
        row("length rule (longer reply wins, ties half)", length, goal="baseline"),
        Figure(name=f"{what}: eval pairs", value=run.n_eval, unit="pairs", goal="reported"),
    ]


def _details(run: PolicyRun, wall: float, config: DPOPolicyConfig) -> dict[str, Any]:
    return {
        "n_train": run.n_train,
        "n_eval": run.n_eval,
        "status": run.status,
        "skipped_reason": run.skipped_reason,
        "steps": run.steps,
        "train_loss": run.train_loss,
        "sft_loss": run.sft_loss,
        "seconds": round(wall, 1),
        "reps": 1,
        "config": asdict(config),
    }


def run(sizes: Sizes) -> list[Figure]:
    from bench import dpo_scale
    from pipeline.dpo import DPOPolicyConfig

    pairs = dpo_scale.synthetic_pairs(sizes.dpo_pairs, seed=sizes.seed)
    config = DPOPolicyConfig()
    policy, wall = _train(pairs, config)
    details = {
        "pairs": pairs.height,
        "pairs_source": "bench/dpo_scale.py synthetic_pairs (consistent planted preference)",
        **_details(policy, wall, config),
    }
    return [
        scaled_goal(
            Figure(
                name="DPO stage wall time (SFT + DPO + eval), default policy",
                value=round(wall, 1),
                unit="s",
                goal=f"≤ {GOAL_SECONDS / 60:g} min at {GOAL_PAIRS:,} pairs",
                goal_met=wall <= GOAL_SECONDS and policy.status == "trained",
                details=details,
            ),
            pairs.height,
            GOAL_PAIRS,
            "pairs",
        ),
        *_accuracy_figures(policy, "planted pairs"),
    ]


def run_real(sizes: Sizes) -> list[Figure]:
    """Learning on real human preferences: the OASST sample, split by message tree."""
    import polars as pl

    from bench import dpo_scale
    from pipeline.dpo import DPOPolicyConfig

    if not dpo_scale.OASST_SAMPLE.exists():
        raise NotAvailable(f"OpenAssistant sample {dpo_scale.OASST_SAMPLE} not found")
    pairs = dpo_scale.oasst_pairs(dpo_scale.OASST_SAMPLE)
    config = DPOPolicyConfig()
    if sizes.dpo_real_max_steps > 0:
        # The quick smoke run: a quarter SFT epoch, a few DPO steps; the reference is scored per
        # step (cheaper than precomputing it for every train pair when few steps run).
        config = replace(
            config, max_steps=sizes.dpo_real_max_steps, sft_epochs=0.25, precompute_ref=False
        )
    policy, wall = _train(pairs, config)
    trees = pairs.group_by("split").agg(pl.col("tree_id").n_unique())
    figures = _accuracy_figures(policy, "OASST tree split")
    figures[0].details |= {
        "pairs": pairs.height,
        "pairs_source": f"{dpo_scale.OASST_SAMPLE} via import_oasst → ranked_pairs",
        "trees": dict(trees.iter_rows()),
        "trees_in_both_splits": pairs.group_by("tree_id")
        .agg(pl.col("split").n_unique())
        .filter(pl.col("split") > 1)
        .height,
        **_details(policy, wall, config),
    }
    return figures
