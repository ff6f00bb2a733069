"""Preference assets: preference pairs → DPO policy (TRL) → DPO-refined prompt templates (SPEC §4.6–4.7)."""

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import dagster as dg
import numpy as np
import polars as pl

from assets import groups
from assets.config import StageSettings
from assets.metadata import frame_metadata
from assets.partitions import TENANTS, asset_spec
from assets.resources import MemorypackHome
from pipeline import contracts, tables
from pipeline.dpo import (
    DPO_RUNS_HISTORY_SCHEMA,
    STATUS_FAILED,
    STATUS_SKIPPED,
    STATUS_TRAINED,
    PolicyScorer,
    held_out_pairs,
    record_runs,
    runs_frame,
    sft_examples_from,
    short_of_baselines,
    train_policies,
)
from pipeline.neighbors import (
    NeighborIndex,
    edge_schema,
    index_schema,
    texts_to_vectorize,
    update_index,
)
from pipeline.pairs import (
    PAIR_SCHEMA,
    PROMPT_KEYS,
    SCORE_SCHEMA,
    PairConfig,
    format_problems,
    mine_pairs,
    prompt_texts,
    split_leakage,
)
from pipeline.templates import (
    TEMPLATE_HISTORY_SCHEMA,
    TEMPLATE_SCORE_SCHEMA,
    RewardFn,
    gather_evidence,
    load_registry,
    missing_current,
    refine_templates,
)

FEW_SHOT_SCHEMA = tables.schema("few_shot_sets", ["tenant_id", "skill_id", "rank", "output"])


def _tenants(home: MemorypackHome) -> list[str]:
    return sorted(
        home.table("interactions", contracts.INTERACTION_SCHEMA)["tenant_id"].unique().to_list()
    )


PAIR_DEPS = ["interactions", "feedback", "feedback_scores", "memory_embeddings"]


@dg.multi_asset(
    specs=[
        asset_spec(
            "preference_pairs",
            groups.PREFERENCE,
            PAIR_DEPS,
            description="(prompt, chosen, rejected) pairs in TRL format: corrections, "
            "regenerations, near-identical prompts, ranked siblings; train/eval split grouped by "
            "prompt.",
        ),
        asset_spec("prompt_index", groups.PREFERENCE, PAIR_DEPS),
        asset_spec("prompt_neighbors", groups.PREFERENCE, PAIR_DEPS),
    ]
)
def preference_pairs(
    context: dg.AssetExecutionContext, home: MemorypackHome, settings: StageSettings
) -> Iterator[dg.MaterializeResult]:
    config = settings.stage("pairs")
    lake = home.lake
    interactions = home.table("interactions", contracts.INTERACTION_SCHEMA)
    scores = home.table("feedback_scores", SCORE_SCHEMA)
    index = _prompt_index(home, interactions, config)
    pairs = mine_pairs(
        interactions,
        # only corrections make pairs: the other feedback never leaves the lake
        lake.read_or_empty("feedback", contracts.FEEDBACK_SCHEMA)
        .filter(pl.col("signal") == "correction")
        .collect(),
        scores,
        home.embeddings("interaction"),
        index.edges,
        config,
    )
    context.log.info(f"prompt index: searched {index.searched} new prompts")
    home.lake.write("preference_pairs", pairs)
    yield dg.MaterializeResult(
        asset_key="preference_pairs",
        metadata=frame_metadata(
            pairs,
            {
                "by_source": dict(pairs.group_by("source").len().sort("source").iter_rows()),
                "by_split": dict(pairs.group_by("split").len().sort("split").iter_rows()),
                "tenants": pairs["tenant_id"].n_unique(),
                "prompts_indexed": index.texts.height,
                "prompts_searched": index.searched,
                "near_identical_prompt_pairs": index.edges.height,
            },
            preview_columns=[
                "tenant_id",
                "source",
                "split",
                "margin",
                "prompt",
                "chosen",
                "rejected",
            ],
        ),
    )
    yield dg.MaterializeResult(asset_key="prompt_index", metadata=frame_metadata(index.texts))
    yield dg.MaterializeResult(asset_key="prompt_neighbors", metadata=frame_metadata(index.edges))


def _prompt_index(
    home: MemorypackHome, interactions: pl.DataFrame, config: PairConfig
) -> NeighborIndex:
    """The near-identical prompt index, updated for the prompts it has not searched yet."""
    lake = home.lake
    keys = list(PROMPT_KEYS)
    embeddings = home.embeddings("interaction")
    models = embeddings["model"].drop_nulls().unique().sort()
    if models.is_empty():
        return NeighborIndex.empty(keys)
    model = str(models[0])
    texts = prompt_texts(interactions, embeddings)
    previous = None
    if lake.exists("prompt_index"):
        previous = NeighborIndex(
            home.table("prompt_index", index_schema(keys)),
            home.table("prompt_neighbors", edge_schema(keys)),
        )
    needed = texts_to_vectorize(texts, previous, keys, model)
    vectors = home.embedding_cache.vectors(model, needed)
    index = update_index(texts, vectors, previous, keys, config.similarity_threshold, model)
    lake.write("prompt_index", index.texts)
    lake.write("prompt_neighbors", index.edges)
    return index


TRAINING_RAN = "training_ran"


POLICY_DEPS = ["preference_pairs", "interactions", "feedback_scores"]


@dg.multi_asset(
    specs=[
        asset_spec(
            "dpo_policy",
            groups.PREFERENCE,
            POLICY_DEPS,
            description="TRL DPO policy per tenant (SFT on well-rated outputs, then DPO on train "
            "pairs); skips with a reason under min_pairs.",
        ),
        asset_spec("dpo_runs", groups.PREFERENCE, POLICY_DEPS),
    ],
    check_specs=[
        dg.AssetCheckSpec(
            TRAINING_RAN,
            asset="dpo_policy",
            description="No tenant's training raised (a tenant whose training failed keeps its "
            "previous policy; the others train).",
            partitions_def=TENANTS,
        )
    ],
)
def dpo_policy(
    context: dg.AssetExecutionContext, home: MemorypackHome, settings: StageSettings
) -> Iterator[dg.MaterializeResult]:
    policy_config = settings.stage("dpo")
    pairs = home.table("preference_pairs", PAIR_SCHEMA)
    sft = sft_examples_from(
        home.table("interactions", contracts.INTERACTION_SCHEMA),
        home.table("feedback_scores", SCORE_SCHEMA),
        pairs,
    )
    runs = train_policies(pairs, sft, policy_config, home.paths.models, tenants=_tenants(home))
    current = runs_frame(runs)
    previous = home.table("dpo_runs", DPO_RUNS_HISTORY_SCHEMA).select(list(DPO_RUNS_HISTORY_SCHEMA))
    history = record_runs(previous, current, datetime.now(UTC))
    recorded = history.height - previous.height
    if recorded or not home.lake.exists("dpo_runs"):
        home.lake.write("dpo_runs", history)
    failed = {run.tenant_id: str(run.skipped_reason) for run in runs if run.status == STATUS_FAILED}
    for run in runs:
        if run.status in (STATUS_SKIPPED, STATUS_FAILED):
            context.log.warning(
                f"dpo_policy {run.status} for {run.tenant_id}: {run.skipped_reason}"
            )
    trained = current.filter(pl.col("status") == STATUS_TRAINED)
    short = trained.filter(short_of_baselines())
    for tenant, verdict in short.select("tenant_id", "verdict").iter_rows():
        context.log.warning(f"dpo_policy {tenant}: {verdict}")
    figures: dict[str, object] = {
        "runs_recorded": recorded,  # 0: every tenant's policy is the one dpo_runs already has
        "loss_type": policy_config.loss_type,
        "tenants_trained": trained.height,
        "tenants_skipped": current.height - trained.height,
        "per_tenant": [{k: v for k, v in r.row().items() if k in PER_TENANT_FIGURES} for r in runs],
    }
    if trained.height:
        figures |= {
            "learning": _learning_summary(trained, short),
            **{
                name: float(mean)  # type: ignore[arg-type]
                for name in (
                    "eval_accuracy",
                    "reference_accuracy",
                    "length_rule_accuracy",
                    "eval_margin",
                    "train_loss",
                )
                if (mean := trained[name].mean()) is not None
            },
            "n_eval": int(trained["n_eval"].sum()),
            "steps": int(trained["steps"].sum()),
            "seconds": float(trained["seconds"].sum()),
        }
    ran = dg.AssetCheckResult(
        asset_key="dpo_policy",
        check_name=TRAINING_RAN,
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f"{t}: {why} (previous policy kept)" for t, why in failed.items())
        or "every tenant trained or skipped with a reason",
        metadata={"failed_tenants": sorted(failed)},
    )
    yield dg.MaterializeResult(
        asset_key="dpo_policy",
        check_results=[ran],
        metadata=frame_metadata(
            current,
            figures,
            preview_columns=[
                "tenant_id",
                "policy_id",
                "status",
                "skipped_reason",
                "eval_accuracy",
                "length_rule_accuracy",
                "reference_accuracy",
                "eval_margin",
                "steps",
            ],
        ),
    )
    # Materialized every run (a reused policy records no row) so the steps after never skip.
    yield dg.MaterializeResult(
        asset_key="dpo_runs", metadata=frame_metadata(history, {"runs_recorded": recorded})
    )


PER_TENANT_FIGURES = (
    "tenant_id",
    "policy_id",
    "status",
    "skipped_reason",
    "n_eval",
    "eval_accuracy",
    "eval_accuracy_low",
    "eval_accuracy_high",
    "reference_accuracy",
    "length_rule_accuracy",
    "verdict",
    "eval_margin",
    "steps",
    "seconds",
)


def _learning_summary(trained: pl.DataFrame, short: pl.DataFrame) -> str:
    """Says plainly, for the whole run, whether learning holds against the baselines."""
    judged = trained.filter(pl.col("verdict").is_not_null()).height
    if not judged:
        return "not measured: no trained policy has eval pairs"
    if short.is_empty():
        return (
            "learning beats the length rule, and is not below chance, "
            f"for every policy ({judged} judged)"
        )
    return (
        f"learning does not beat the length rule or chance for {short.height} of {judged} "
        f"policies: {'; '.join(short['verdict'].to_list())}"
    )


def _scorers(runs: pl.DataFrame) -> dict[str, tuple[str, RewardFn]]:
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


TEMPLATE_DEPS = [
    "dpo_policy",
    "dpo_runs",
    "preference_pairs",
    "few_shot_sets",
    "interactions",
    "feedback",
]


@dg.multi_asset(
    specs=[
        asset_spec(
            "refined_templates",
            groups.PREFERENCE,
            TEMPLATE_DEPS,
            description="Current prompt template per tenant × skill: registry base, replaced only "
            "by a candidate that beats it on held-out pairs under the DPO policy's implicit "
            "reward.",
        ),
        asset_spec("template_history", groups.PREFERENCE, TEMPLATE_DEPS),
        asset_spec("template_scores", groups.PREFERENCE, TEMPLATE_DEPS),
    ]
)
def refined_templates(
    context: dg.AssetExecutionContext, home: MemorypackHome, settings: StageSettings
) -> Iterator[dg.MaterializeResult]:
    registry = load_registry()
    tenants = _tenants(home)
    policy_config, config = settings.stage("dpo"), settings.stage("templates")
    runs = home.table("dpo_runs", DPO_RUNS_HISTORY_SCHEMA).filter(
        pl.col("is_latest")
        & (pl.col("status") == STATUS_TRAINED)
        & pl.col("model_dir").is_not_null()
    )
    evals = home.table("preference_pairs", PAIR_SCHEMA).filter(pl.col("split") == "eval")
    # Each tenant's candidates are scored on its policy's own held-out sample (the pairs its
    # eval accuracy was measured on), which also keeps the stage bounded whatever the volume.
    held_out = [
        held_out_pairs(
            model_dir, tenant, evals.filter(pl.col("tenant_id") == tenant), policy_config
        )
        for tenant, model_dir in runs.select("tenant_id", "model_dir").iter_rows()
    ]
    evidence = gather_evidence(
        home.table("interactions", contracts.INTERACTION_SCHEMA),
        home.table("feedback", contracts.FEEDBACK_SCHEMA),
        home.table("few_shot_sets", FEW_SHOT_SCHEMA),
        config,
    )
    if runs.is_empty():
        context.log.info("no trained DPO policy: current templates stay")
    result = refine_templates(
        home.table("template_history", TEMPLATE_HISTORY_SCHEMA),
        registry,
        tenants,
        evidence,
        pl.concat(held_out) if held_out else evals.clear(),
        _scorers(runs.filter(pl.col("tenant_id").is_in([t for t, _ in evidence]))),
        datetime.now(UTC),
        config,
        home.table("template_scores", TEMPLATE_SCORE_SCHEMA),
    )
    home.lake.write("template_history", result.history)
    home.lake.write("template_scores", result.scores)
    current = result.history.filter(pl.col("is_current"))
    yield dg.MaterializeResult(
        asset_key="refined_templates",
        metadata=frame_metadata(
            current,
            {
                "adopted": result.adopted,
                "templates_scored": result.scored,
                "scores_from_memo": result.memo_hits,
                "skills_with_evidence": len(evidence),
                "versions": result.history.height,
                "decisions": json.loads(result.decisions.write_json()),
            },
            preview_columns=[
                "tenant_id",
                "skill_id",
                "version",
                "source",
                "eval_accuracy",
                "eval_margin",
            ],
        ),
    )
    yield dg.MaterializeResult(
        asset_key="template_history", metadata=frame_metadata(result.history)
    )
    yield dg.MaterializeResult(asset_key="template_scores", metadata=frame_metadata(result.scores))


@dg.asset_check(
    partitions_def=TENANTS,
    asset="preference_pairs",
    blocking=True,
    description="Every pair is well-formed.",
)
def pair_format_valid(home: MemorypackHome) -> dg.AssetCheckResult:
    problems = format_problems(home.table("preference_pairs", PAIR_SCHEMA))
    return dg.AssetCheckResult(passed=not any(problems.values()), metadata={"problems": problems})


@dg.asset_check(
    partitions_def=TENANTS,
    asset="preference_pairs",
    blocking=True,
    description="No prompt in both train and eval.",
)
def no_split_leakage(home: MemorypackHome) -> dg.AssetCheckResult:
    leaked = split_leakage(home.table("preference_pairs", PAIR_SCHEMA))
    return dg.AssetCheckResult(
        passed=not leaked, metadata={"leaked_prompts": len(leaked), "examples": leaked[:5]}
    )


@dg.asset_check(
    partitions_def=TENANTS,
    asset="dpo_policy",
    additional_deps=["dpo_runs"],
    description="Trained policies record eval accuracy; skips record why.",
)
def eval_accuracy_recorded(home: MemorypackHome) -> dg.AssetCheckResult:
    latest = home.table("dpo_runs", DPO_RUNS_HISTORY_SCHEMA).filter(pl.col("is_latest"))
    trained = latest.filter(pl.col("status") == STATUS_TRAINED)
    bad_trained = trained.filter(
        (pl.col("n_eval") > 0) & ~pl.col("eval_accuracy").is_between(0.0, 1.0).fill_null(False)
    ).height
    bad_skipped = latest.filter(
        (pl.col("status") == STATUS_SKIPPED) & pl.col("skipped_reason").is_null()
    ).height
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
    additional_deps=["dpo_runs"],
    description="Learning holds against simple baselines: warns (never blocks) when a policy's eval "
    "accuracy is below chance (its 95 % interval under 0.5) or does not beat the length rule's.",
)
def learning_beats_baselines(home: MemorypackHome) -> dg.AssetCheckResult:
    latest = home.table("dpo_runs", DPO_RUNS_HISTORY_SCHEMA).filter(
        pl.col("is_latest") & (pl.col("status") == STATUS_TRAINED)
    )
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
    additional_deps=["template_history"],
    blocking=True,
    description="Every tenant × skill has one current template.",
)
def current_template_per_skill(home: MemorypackHome) -> dg.AssetCheckResult:
    missing = missing_current(
        home.table("template_history", TEMPLATE_HISTORY_SCHEMA), load_registry(), _tenants(home)
    )
    return dg.AssetCheckResult(
        passed=not missing, metadata={"missing": len(missing), "examples": missing[:10]}
    )


ASSETS = [preference_pairs, dpo_policy, refined_templates]
CHECKS = [
    pair_format_valid,
    no_split_leakage,
    eval_accuracy_recorded,
    learning_beats_baselines,
    current_template_per_skill,
]
