"""Preference assets: preference pairs → DPO policy (TRL) → DPO-refined prompt templates (SPEC §4.6–4.7)."""

import json
from collections.abc import Iterator
from datetime import UTC, datetime

import dagster as dg
import polars as pl

from assets import groups
from assets.config import StageSettings
from assets.handoffs import reads
from assets.metadata import frame_metadata
from assets.partitions import asset_spec
from assets.preference_checks import (  # noqa: F401 (re-exported: the checks of these assets)
    CHECKS,
    current_template_per_skill,
    eval_accuracy_recorded,
    learning_beats_baselines,
    no_split_leakage,
    pair_format_valid,
)
from assets.preference_policy import dpo_policy, policy_training
from assets.resources import MemorypackHome
from pipeline import tables
from pipeline.preference.pairs import (
    INTERACTION_COLUMNS,
    PROMPT_KEYS,
    SCORE_SCHEMA,
    PairConfig,
    mine_pairs,
)
from pipeline.preference.pairs.neighbors import (
    NeighborIndex,
)
from pipeline.preference.pairs.prompt_index import embedding_model, refresh_prompt_index
from pipeline.preference.templates import (
    EVIDENCE_FEEDBACK_COLUMNS,
    RefineResult,
    gather_evidence,
    load_registry,
    refine_templates,
    roll_back_worse,
)
from pipeline.preference.templates.rewards import scoring_policy

FEW_SHOT_SCHEMA = tables.schema("few_shot_sets", ["tenant_id", "skill_id", "rank", "output"])


PAIR_INS = reads("interactions", "feedback", "feedback_scores", "memory_embeddings")


@dg.multi_asset(
    specs=[
        asset_spec(
            "preference_pairs",
            groups.PREFERENCE,
            list(PAIR_INS),
            description="(prompt, chosen, rejected) pairs in TRL format: corrections, "
            "regenerations, near-identical prompts, ranked siblings; train/eval split grouped by "
            "prompt.",
        ),
        asset_spec("prompt_index", groups.PREFERENCE, list(PAIR_INS)),
        asset_spec("prompt_neighbors", groups.PREFERENCE, list(PAIR_INS)),
    ],
    ins=PAIR_INS,
)
def preference_pairs(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    settings: StageSettings,
    interactions: pl.LazyFrame,
    feedback: pl.LazyFrame,
    feedback_scores: pl.LazyFrame,
    memory_embeddings: pl.DataFrame,
) -> Iterator[dg.MaterializeResult]:
    config = settings.stage("pairs")
    # only the columns pairs are made of: a tenant's whole interactions are its largest input
    interaction_rows = interactions.select(INTERACTION_COLUMNS).collect()
    scores = feedback_scores.select(list(SCORE_SCHEMA)).collect()
    embeddings = memory_embeddings.filter(pl.col("memory_kind") == "interaction")
    index = _prompt_index(home, interaction_rows, embeddings, config)
    pairs = mine_pairs(
        interaction_rows,
        # only corrections make pairs: the other feedback never leaves the lake
        feedback.filter(pl.col("signal") == "correction").collect(),
        scores,
        embeddings,
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
                "prompts_indexed": index.texts.height,
                "prompts_searched": index.searched,
                "near_identical_prompt_pairs": index.edges.height,
            },
            preview_columns=[
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
    home: MemorypackHome, interactions: pl.DataFrame, embeddings: pl.DataFrame, config: PairConfig
) -> NeighborIndex:
    """The near-identical prompt index, updated for the prompts it has not searched yet."""
    keys = list(PROMPT_KEYS)
    model = embedding_model(embeddings)
    if model is None:
        return NeighborIndex.empty(keys)
    previous = None
    if home.lake.exists("prompt_index"):
        previous = NeighborIndex(
            home.table("prompt_index"),
            home.table("prompt_neighbors"),
        )
    index = refresh_prompt_index(
        interactions, embeddings, previous, home.embedding_cache.vectors, model, config
    )
    home.lake.write("prompt_index", index.texts)
    home.lake.write("prompt_neighbors", index.edges)
    return index


TEMPLATE_INS = reads(
    "dpo_runs", "preference_pairs", "few_shot_sets", "interactions", "feedback", "pack_usage"
)
# dpo_policy is no lake table: the policies are files in the models folder (dpo_runs names them).
TEMPLATE_DEPS = ["dpo_policy", *TEMPLATE_INS]


@dg.multi_asset(
    specs=[
        asset_spec(
            "refined_templates",
            groups.PREFERENCE,
            TEMPLATE_DEPS,
            description="The tenant's current prompt template per skill: registry base, replaced "
            "only by a candidate that beats it on held-out pairs under the tenant's DPO policy's "
            "implicit reward.",
        ),
        asset_spec("template_history", groups.PREFERENCE, TEMPLATE_DEPS),
        asset_spec("template_scores", groups.PREFERENCE, TEMPLATE_DEPS),
    ],
    ins=TEMPLATE_INS,
)
def refined_templates(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    settings: StageSettings,
    dpo_runs: pl.DataFrame,
    preference_pairs: pl.LazyFrame,
    few_shot_sets: pl.DataFrame,
    interactions: pl.LazyFrame,
    feedback: pl.LazyFrame,
    pack_usage: pl.DataFrame,
) -> Iterator[dg.MaterializeResult]:
    tenant, now = context.partition_key, datetime.now(UTC)
    # Only what the templates are made of: a large tenant's pairs and feedback are gigabytes.
    skills = interactions.select("event_id", "skill_id").collect()
    # What the calls' receipts measured first: a refined template worse in use goes back.
    history, rolled_back = roll_back_worse(home.table("template_history"), pack_usage, now)
    for line in rolled_back:
        context.log.warning(f"{tenant} template {line}")
    config, scores = settings.stage("templates"), home.table("template_scores")
    feedback_rows = feedback.select(EVIDENCE_FEEDBACK_COLUMNS).collect()
    evidence = gather_evidence(skills, feedback_rows, few_shot_sets, config)
    if skills.is_empty():  # no interactions: no templates to keep (as dpo_policy: no policy)
        result = RefineResult.unchanged(history, scores)
    else:
        evals = preference_pairs.filter(pl.col("split") == "eval").collect()
        policy = scoring_policy(dpo_runs, home.paths.models, tenant, evals, settings.stage("dpo"))
        if policy is None:
            context.log.info(f"{tenant}: no trained DPO policy: current templates stay")
        registry = load_registry()
        result = refine_templates(history, registry, tenant, evidence, policy, now, config, scores)
    home.lake.write("template_history", result.history)
    home.lake.write("template_scores", result.scores)
    current = result.history.filter(pl.col("is_current"))
    yield dg.MaterializeResult(
        asset_key="refined_templates",
        metadata=frame_metadata(
            current,
            {
                "adopted": result.adopted,
                "rolled_back": rolled_back,
                "templates_scored": result.scored,
                "scores_from_memo": result.memo_hits,
                "skills_with_evidence": len(evidence),
                "versions": result.history.height,
                "decisions": json.loads(result.decisions.write_json()),
            },
            preview_columns=["skill_id", "version", "source", "eval_accuracy", "eval_margin"],
        ),
    )
    yield dg.MaterializeResult(
        asset_key="template_history", metadata=frame_metadata(result.history)
    )
    yield dg.MaterializeResult(asset_key="template_scores", metadata=frame_metadata(result.scores))


ASSETS = [preference_pairs, policy_training, dpo_policy, refined_templates]
