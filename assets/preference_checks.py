"""Checks of the preference assets: pairs well-formed and unleaked, DPO outcomes recorded and
beating the baselines, one current template per skill."""

import dagster as dg
import polars as pl

from assets.handoffs import reads
from assets.partitions import BLOCKING, TENANTS
from assets.resources import MemorypackHome
from pipeline.preference.dpo import STATUS_TRAINED, short_of_baselines
from pipeline.preference.dpo.report import PER_TENANT_FIGURES, unrecorded_outcomes
from pipeline.preference.pairs import format_problems, split_leakage
from pipeline.preference.templates import load_registry, missing_current


@dg.asset_check(
    partitions_def=TENANTS,
    asset="preference_pairs",
    blocking=True,
    description="Every pair is well-formed: three texts, chosen ≠ rejected, a known source "
    "and split, margin ≥ 0, one row per pair_id." + BLOCKING,
)
def pair_format_valid(home: MemorypackHome) -> dg.AssetCheckResult:
    problems = format_problems(home.table("preference_pairs"))
    return dg.AssetCheckResult(passed=not any(problems.values()), metadata={"problems": problems})


@dg.asset_check(
    partitions_def=TENANTS,
    asset="preference_pairs",
    blocking=True,
    description="No prompt (normalised) in both train and eval." + BLOCKING,
)
def no_split_leakage(home: MemorypackHome) -> dg.AssetCheckResult:
    leaked = split_leakage(home.table("preference_pairs"))
    return dg.AssetCheckResult(
        passed=not leaked, metadata={"leaked_prompts": len(leaked), "examples": leaked[:5]}
    )


@dg.asset_check(
    partitions_def=TENANTS,
    asset="dpo_policy",
    additional_ins=reads("dpo_runs"),
    description="Trained policies record eval accuracy; skips record why.",
)
def eval_accuracy_recorded(dpo_runs: pl.DataFrame) -> dg.AssetCheckResult:
    latest = dpo_runs.filter(pl.col("is_latest"))
    trained, bad_trained, bad_skipped = unrecorded_outcomes(latest)
    return dg.AssetCheckResult(
        passed=bad_trained == 0 and bad_skipped == 0,
        metadata={
            "trained": trained.height,
            "without_accuracy": bad_trained,
            "skipped_without_reason": bad_skipped,
            "eval_accuracy": [
                {"tenant_id": t, "eval_accuracy": a}
                for t, a in trained.select("tenant_id", "eval_accuracy").iter_rows()
            ],
        },
    )


@dg.asset_check(
    partitions_def=TENANTS,
    asset="dpo_policy",
    additional_ins=reads("dpo_runs"),
    description="Learning holds against simple baselines: warns (never blocks) when a policy's eval "
    "accuracy is below chance (its 95 % interval under 0.5) or does not beat the length rule's.",
)
def learning_beats_baselines(dpo_runs: pl.DataFrame) -> dg.AssetCheckResult:
    latest = dpo_runs.filter(pl.col("is_latest") & (pl.col("status") == STATUS_TRAINED))
    short = latest.filter(short_of_baselines())
    return dg.AssetCheckResult(
        passed=short.is_empty(),
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(
            f"{t}: {v}" for t, v in short.select("tenant_id", "verdict").iter_rows()
        )
        or "every trained policy beats the length rule and none is below chance",
        metadata={
            "trained": latest.height,
            "short_of_baselines": short.height,
            "runs": [
                {k: v for k, v in row.items() if k in PER_TENANT_FIGURES}
                for row in latest.iter_rows(named=True)
            ],
        },
    )


@dg.asset_check(
    partitions_def=TENANTS,
    asset="refined_templates",
    additional_ins=reads("template_history", "interactions"),
    blocking=True,
    description="The tenant (when it has interactions) has one current template per skill of "
    "the registry." + BLOCKING,
)
def current_template_per_skill(
    template_history: pl.DataFrame, interactions: pl.LazyFrame
) -> dg.AssetCheckResult:
    has_interactions = interactions.select("event_id").head(1).collect().height > 0
    missing = missing_current(template_history, load_registry()) if has_interactions else []
    return dg.AssetCheckResult(
        passed=not missing, metadata={"missing": len(missing), "examples": missing[:10]}
    )


CHECKS = [
    pair_format_valid,
    no_split_leakage,
    eval_accuracy_recorded,
    learning_beats_baselines,
    current_template_per_skill,
]
