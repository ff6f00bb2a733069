"""The reward each tenant's templates are scored by: its latest trained DPO policy, on the held-out
pairs that policy was evaluated on."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.preference.dpo import STATUS_TRAINED, DPOPolicyConfig, PolicyScorer, held_out_pairs
from pipeline.preference.templates.scores import RewardFn


def latest_trained(history: pl.DataFrame, models_dir: str | os.PathLike[str]) -> pl.DataFrame:
    """The rows of `dpo_runs` naming each tenant's current, saved, trained policy, with
    `model_dir` where this host keeps it (`<models_dir>/<policy_id>`, whichever host trained it)."""
    return history.filter(
        pl.col("is_latest")
        & (pl.col("status") == STATUS_TRAINED)
        & pl.col("model_dir").is_not_null()
    ).with_columns(model_dir=pl.lit(f"{Path(models_dir)}{os.sep}") + pl.col("policy_id"))


def held_out_samples(
    runs: pl.DataFrame, evals: pl.DataFrame, config: DPOPolicyConfig
) -> pl.DataFrame:
    """Each tenant's candidates are scored on its policy's own held-out sample (the pairs its
    eval accuracy was measured on), which also keeps the stage bounded whatever the volume
    (`config`: the run's policy knobs, for a policy saved without its sample)."""
    held_out = [
        held_out_pairs(model_dir, tenant, evals.filter(pl.col("tenant_id") == tenant), config)
        for tenant, model_dir in runs.select("tenant_id", "model_dir").iter_rows()
    ]
    return pl.concat(held_out) if held_out else evals.clear()


def policy_rewards(runs: pl.DataFrame) -> dict[str, tuple[str, RewardFn]]:
    """tenant → (policy_id, reward fn); a policy is loaded on its first use only, so a night whose
    scores all come from the memo loads none."""
    loaded: dict[str, PolicyScorer] = {}

    def reward_fn(model_dir: str) -> RewardFn:
        def reward(
            prompts: list[str], chosen: list[str], rejected: list[str]
        ) -> tuple[np.ndarray, np.ndarray]:
            if model_dir not in loaded:
                loaded[model_dir] = PolicyScorer.load(model_dir)
            return loaded[model_dir](prompts, chosen, rejected)

        return reward

    return {
        tenant: (policy_id, reward_fn(model_dir))
        for tenant, policy_id, model_dir in runs.select(
            "tenant_id", "policy_id", "model_dir"
        ).iter_rows()
    }
