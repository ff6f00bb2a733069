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
from assets.resources import MemorypackHome
from pipeline.preference.dpo import (
    STATUS_FAILED,
    STATUS_SKIPPED,
    PolicyRun,
    runs_frame,
    sft_examples_from,
)
from pipeline.preference.dpo.report import PER_TENANT_FIGURES, run_figures
from pipeline.preference.dpo.runs import extend_history
from pipeline.preference.dpo.shared import train_shared
from pipeline.preference.dpo.shipped import ship_policy, training_due

TRAINING_RAN = "training_ran"
TRAINING_DUE = "training_due"  # dpo_policy's metadata: a training run follows the publish
# the preview shows the tenant's figures (pipeline/preference/dpo/report.py)
POLICY_PREVIEW = list(PER_TENANT_FIGURES)


POLICY_INS = reads("preference_pairs", "interactions", "feedback_scores")
# policy_training is no lake table: the policies it finishes are files in the models folder.
POLICY_DEPS = [*POLICY_INS, "policy_training"]


def _ran(asset: str, run: PolicyRun | None) -> dg.AssetCheckResult:
    failed = run is not None and run.status == STATUS_FAILED
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=TRAINING_RAN,
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{run.tenant_id}: {run.skipped_reason} (previous policy kept)"
        if run is not None and failed
        else "the tenant's policy trained, or skipped with a reason",
    )


def _ran_spec(asset: str) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        TRAINING_RAN,
        asset=asset,
        description="The tenant's training did not raise (one that raised keeps its previous "
        "policy; other tenants train in their own runs).",
        partitions_def=TENANTS,
    )


def _warn_unless_trained(
    context: dg.AssetExecutionContext, step: str, run: PolicyRun | None
) -> None:
    if run is not None and run.status in (STATUS_SKIPPED, STATUS_FAILED):
        context.log.warning(f"{step} {run.status} for {run.tenant_id}: {run.skipped_reason}")


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
    policy_config, tenant = settings.stage("dpo"), context.partition_key

    @cache
    def pairs() -> pl.DataFrame:  # read whole only when a first policy trains
        return preference_pairs.collect()

    def sft() -> pl.DataFrame:
        return _sft_examples(interactions, feedback_scores, pairs())

    run, due = None, None  # a tenant without interactions has no policy to ship or train
    if interactions.select("tenant_id").head(1).collect().height:
        run = ship_policy(home.paths, pairs, sft, policy_config, tenant, context.log.info)
        train = preference_pairs.filter(pl.col("split") == "train").select("pair_id")
        due = training_due(train.collect(), policy_config, home.paths, tenant)
    current = runs_frame([run] if run is not None else [])
    history, recorded = extend_history(home.table("dpo_runs"), current, datetime.now(UTC))
    if recorded or not home.lake.exists("dpo_runs"):
        home.lake.write("dpo_runs", history)
    _warn_unless_trained(context, "dpo_policy", run)
    if due is not None:
        context.log.info(
            f"dpo_policy {tenant}: the configured policy trains after the publish: {due}"
        )
    figures, short = run_figures(run, policy_config.loss_type, recorded)
    if not short.is_empty():  # its trained policy is short of a baseline
        context.log.warning(f"dpo_policy {tenant}: {short['verdict'][0]}")
    yield dg.MaterializeResult(
        asset_key="dpo_policy",
        check_results=[_ran("dpo_policy", run)],
        metadata=frame_metadata(
            current,
            figures | {TRAINING_DUE: due is not None, "training_due_why": due or ""},
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
    sft = _sft_examples(interactions, feedback_scores, pairs)
    # Step, epoch and loss every few seconds of training, into the run's event log.
    run = train_shared(
        home.paths, pairs, sft, policy_config, context.partition_key, context.log.info
    )
    _warn_unless_trained(context, "policy_training", run)
    figures, _ = run_figures(run, policy_config.loss_type)
    return dg.MaterializeResult(
        check_results=[_ran("policy_training", run)],
        metadata=frame_metadata(runs_frame([run]), figures, preview_columns=POLICY_PREVIEW),
    )
