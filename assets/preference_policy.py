"""The policy assets of the preference group: the DPO policy a tenant's pack ships (in its run)
and the training of its next one (in a run of its own, after the publish; SPEC §4.7)."""

from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cache

import dagster as dg
import polars as pl

from assets import groups
from assets.config import StageSettings
from assets.handoffs import reads
from assets.metadata import frame_metadata
from assets.partitions import TENANTS, asset_spec
from assets.preference_checks import interaction_tenants
from assets.resources import MemorypackHome
from pipeline.preference.dpo import STATUS_FAILED, STATUS_SKIPPED, runs_frame, sft_examples_from
from pipeline.preference.dpo.report import PER_TENANT_FIGURES, failed_tenants, run_figures
from pipeline.preference.dpo.runs import extend_history
from pipeline.preference.dpo.shared import train_shared
from pipeline.preference.dpo.shipped import ship_policies, training_due

TRAINING_RAN = "training_ran"
TRAINING_DUE = "training_due"  # dpo_policy's metadata: a training run follows the publish
# the preview shows each tenant's figures (pipeline/preference/dpo/report.py)
POLICY_PREVIEW = list(PER_TENANT_FIGURES)


POLICY_INS = reads("preference_pairs", "interactions", "feedback_scores")
# policy_training is no lake table: the policies it finishes are files in the models folder.
POLICY_DEPS = [*POLICY_INS, "policy_training"]


def _ran(asset: str, failed: dict[str, str]) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=TRAINING_RAN,
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f"{t}: {why} (previous policy kept)" for t, why in failed.items())
        or "every tenant trained or skipped with a reason",
        metadata={"failed_tenants": sorted(failed)},
    )


def _ran_spec(asset: str) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        TRAINING_RAN,
        asset=asset,
        description="No tenant's training raised (a tenant whose training failed keeps its "
        "previous policy; the others train).",
        partitions_def=TENANTS,
    )


def _sft_examples(
    interactions: pl.LazyFrame, feedback_scores: pl.LazyFrame, pairs: pl.DataFrame
) -> pl.DataFrame:
    """The SFT examples, from only the columns they are made of, not the whole tables."""
    texts = interactions.select("tenant_id", "event_id", "input", "output").collect()
    scores = feedback_scores.select("tenant_id", "memory_id", "quality_score").collect()
    return sft_examples_from(texts, scores, pairs)


@dg.multi_asset(
    specs=[
        asset_spec(
            "dpo_policy",
            groups.PREFERENCE,
            POLICY_DEPS,
            description="The DPO policy each tenant's pack ships: the newest one policy_training "
            "finished, so a pack never waits for training; on a tenant's first night a small one "
            "(first_max_steps DPO steps, no SFT) trained here, so its first pack has templates. "
            "Says whether the configured policy is due to train after the publish.",
        ),
        asset_spec("dpo_runs", groups.PREFERENCE, POLICY_DEPS),
    ],
    ins=POLICY_INS,
    check_specs=[_ran_spec("dpo_policy")],
)
def dpo_policy(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    settings: StageSettings,
    preference_pairs: pl.LazyFrame,
    interactions: pl.LazyFrame,
    feedback_scores: pl.LazyFrame,
) -> Iterator[dg.MaterializeResult]:
    policy_config = settings.stage("dpo")
    tenants = interaction_tenants(interactions.select("tenant_id").unique().collect())

    @cache
    def pairs() -> pl.DataFrame:  # read whole only when a first policy trains
        return preference_pairs.collect()

    runs = ship_policies(
        home.paths,
        pairs,
        lambda: _sft_examples(interactions, feedback_scores, pairs()),
        policy_config,
        tenants,
        context.log.info,
    )
    train = preference_pairs.filter(pl.col("split") == "train").select("tenant_id", "pair_id")
    due = training_due(train.collect(), policy_config, home.paths, tenants)
    current = runs_frame(runs)
    history, recorded = extend_history(home.table("dpo_runs"), current, datetime.now(UTC))
    if recorded or not home.lake.exists("dpo_runs"):
        home.lake.write("dpo_runs", history)
    for run in runs:
        if run.status in (STATUS_SKIPPED, STATUS_FAILED):
            context.log.warning(
                f"dpo_policy {run.status} for {run.tenant_id}: {run.skipped_reason}"
            )
    for tenant, why in due.items():
        context.log.info(
            f"dpo_policy {tenant}: the configured policy trains after the publish: {why}"
        )
    figures, short = run_figures(runs, current, policy_config.loss_type, recorded)
    for tenant, verdict in short.select("tenant_id", "verdict").iter_rows():
        context.log.warning(f"dpo_policy {tenant}: {verdict}")
    yield dg.MaterializeResult(
        asset_key="dpo_policy",
        check_results=[_ran("dpo_policy", failed_tenants(runs))],
        metadata=frame_metadata(
            current,
            figures | {TRAINING_DUE: bool(due), "training_due_why": due},
            preview_columns=POLICY_PREVIEW,
        ),
    )
    # Materialized every run (a reused policy records no row) so the steps after never skip.
    yield dg.MaterializeResult(
        asset_key="dpo_runs", metadata=frame_metadata(history, {"runs_recorded": recorded})
    )


@dg.multi_asset(
    specs=[
        asset_spec(
            "policy_training",
            groups.PREFERENCE,
            list(POLICY_INS),
            description="The tenant's next DPO policy (SFT on well-rated outputs, then DPO on its "
            "train pairs, at the configured size), trained in a run of its own after its pack "
            "published, when dpo_policy found it due; the next nights' packs ship it. Skips with "
            "a reason under min_pairs.",
        )
    ],
    ins=POLICY_INS,
    check_specs=[_ran_spec("policy_training")],
)
def policy_training(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    settings: StageSettings,
    preference_pairs: pl.LazyFrame,
    interactions: pl.LazyFrame,
    feedback_scores: pl.LazyFrame,
) -> dg.MaterializeResult:
    policy_config = settings.stage("dpo")
    pairs = preference_pairs.collect()
    tenants = interaction_tenants(interactions.select("tenant_id").unique().collect())
    sft = _sft_examples(interactions, feedback_scores, pairs)
    # Step, epoch and loss every few seconds of training, into the run's event log.
    runs = train_shared(home.paths, pairs, sft, policy_config, tenants, context.log.info)
    for run in runs:
        if run.status in (STATUS_SKIPPED, STATUS_FAILED):
            context.log.warning(
                f"policy_training {run.status} for {run.tenant_id}: {run.skipped_reason}"
            )
    current = runs_frame(runs)
    figures, _ = run_figures(runs, current, policy_config.loss_type)
    return dg.MaterializeResult(
        check_results=[_ran("policy_training", failed_tenants(runs))],
        metadata=frame_metadata(current, figures, preview_columns=POLICY_PREVIEW),
    )
