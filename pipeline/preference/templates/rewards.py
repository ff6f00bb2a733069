"""The reward a tenant's templates are scored by: its latest trained DPO policy, on the held-out
pairs that policy was evaluated on."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.preference.dpo import STATUS_TRAINED, DPOPolicyConfig, PolicyScorer, held_out_pairs
from pipeline.preference.templates.scores import ScoringPolicy


def latest_trained(history: pl.DataFrame, models_dir: str | os.PathLike[str]) -> pl.DataFrame:
    """The rows of `dpo_runs` naming the tenant's current, saved, trained policy, with
    `model_dir` where this host keeps it (`<models_dir>/<policy_id>`, whichever host trained it)."""
    return history.filter(
        pl.col("is_latest")
        & (pl.col("status") == STATUS_TRAINED)
        & pl.col("model_dir").is_not_null()
    ).with_columns(model_dir=pl.lit(f"{Path(models_dir)}{os.sep}") + pl.col("policy_id"))


def scoring_policy(
    history: pl.DataFrame,
    models_dir: str | os.PathLike[str],
    tenant: str,
    evals: pl.DataFrame,
    config: DPOPolicyConfig,
) -> ScoringPolicy | None:
    """What the tenant's templates are scored by (None: it has no trained policy): its latest
    trained policy (`history`: its `dpo_runs`), on that policy's own held-out sample of `evals`
    (its eval pairs: the ones its eval accuracy was measured on), which also keeps the stage
    bounded whatever the volume (`config`: the run's policy knobs, for a policy saved without its
    sample). The policy is loaded on its first use only, so a night whose scores all come from
    the memo loads none."""
    trained = latest_trained(history, models_dir).sort("run_at")
    if trained.is_empty():
        return None
    policy_id, model_dir = trained.select("policy_id", "model_dir").row(-1)

    @cache
    def scorer() -> PolicyScorer:
        return PolicyScorer.load(model_dir)

    def reward(
        prompts: list[str], chosen: list[str], rejected: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        return scorer()(prompts, chosen, rejected)

    return ScoringPolicy(policy_id, reward, held_out_pairs(model_dir, tenant, evals, config))
