"""DPO stage wall time (SFT + TRL DPO + eval) at the default policy config, with eval accuracy.

Pairs come from `bench/dpo_scale.py` (synthetic planted pairs, grouped train/eval split). One
training per run: at 10,000 pairs it takes minutes, so it is not repeated (recorded as reps=1).
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict

from bench.common import Figure, Sizes, scaled_goal

GOAL_PAIRS = 10_000
GOAL_SECONDS = 600.0


def run(sizes: Sizes) -> list[Figure]:
    import polars as pl

    from bench import dpo_scale
    from pipeline.dpo import DPOPolicyConfig, train_policy

    pairs = dpo_scale.synthetic_pairs(sizes.dpo_pairs, seed=sizes.seed)
    train = pairs.filter(pl.col("split") == "train")
    evals = pairs.filter(pl.col("split") == "eval")
    sft = train.select("tenant_id", "prompt", pl.col("chosen").alias("completion"))
    # The default policy, trained on every pair (the issue times the stage on 10,000 pairs; the
    # nightly's per-tenant caps would sample them down).
    config = DPOPolicyConfig(
        max_train_pairs=train.height, max_eval_pairs=evals.height, max_sft_examples=sft.height
    )
    with tempfile.TemporaryDirectory(prefix="bench-dpo-") as models:
        started = time.perf_counter()
        policy = train_policy(pairs["tenant_id"][0], train, evals, sft, config, models)
        wall = time.perf_counter() - started
    details = {
        "pairs": pairs.height,
        "pairs_source": "bench/dpo_scale.py synthetic_pairs (consistent planted preference)",
        "n_train": policy.n_train,
        "n_eval": policy.n_eval,
        "status": policy.status,
        "skipped_reason": policy.skipped_reason,
        "steps": policy.steps,
        "train_loss": policy.train_loss,
        "sft_loss": policy.sft_loss,
        "eval_margin": policy.eval_margin,
        "reps": 1,
        "config": asdict(config),
    }
    figures = [
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
        Figure(
            name="DPO eval preference accuracy",
            value=None if policy.eval_accuracy is None else round(policy.eval_accuracy, 4),
            unit="accuracy",
            goal="reported (no goal)",
            goal_met=None,
            details={"n_eval": policy.n_eval, "eval_margin": policy.eval_margin},
        ),
    ]
    return figures
