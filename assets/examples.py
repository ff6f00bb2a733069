"""Examples stage: what works — skill statistics and the few-shot examples apps show the model."""

from collections.abc import Iterator

import dagster as dg
import polars as pl

from assets import groups
from assets.config import StageSettings
from assets.handoffs import reads
from assets.metadata import frame_metadata
from assets.partitions import BLOCKING, TENANTS, asset_spec, declared_columns
from assets.resources import MemorypackHome
from assets.semantic import embed_config, home_redacted_texts
from pipeline import usage
from pipeline.examples import skill_stats as skills
from pipeline.examples.fewshot import few_shot_sets as select_few_shot
from pipeline.examples.fewshot import near_duplicates, negative_examples
from pipeline.semantic.embed import fp32_vectors

NO_NEGATIVE_EXAMPLES = "no_negative_or_duplicate_examples"


# The skills score votes themselves (with the `scoring` settings): feedback_scores is not read.
SKILL_INS = reads("interactions", "feedback", "memory_embeddings")


@dg.multi_asset(
    specs=[
        asset_spec(name, groups.EXAMPLES, list(SKILL_INS))
        for name in ("skill_stats", "user_preferences", "skill_vectors")
    ],
    ins=SKILL_INS,
)
def skill_stats(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    settings: StageSettings,
    interactions: pl.LazyFrame,
    feedback: pl.LazyFrame,
    memory_embeddings: pl.DataFrame,
) -> Iterator[dg.MaterializeResult]:
    lake = home.lake
    embeddings = memory_embeddings.filter(pl.col("memory_kind") == "interaction")
    if embeddings.is_empty():
        context.log.info("no memory_embeddings table: skills get one-hot vectors")
    config, scoring = settings.stage("skills"), settings.stage("scoring")
    stats = skills.skill_stats(interactions, feedback, config, scoring)
    vectors = skills.skill_vectors(
        interactions, embeddings, home.vectors(embeddings) if embeddings.height else None, config
    )
    preferences = skills.user_preferences(interactions, feedback, vectors, config, scoring)
    lake.write("skill_stats", stats)
    lake.write("user_preferences", preferences)
    lake.write("skill_vectors", vectors)
    effectiveness = skills.learning_effectiveness(stats)
    n_votes = int(stats["n_feedback"].sum())
    yield dg.MaterializeResult(
        asset_key="skill_stats",
        metadata=frame_metadata(
            stats,
            {
                "users": preferences.height,
                "skills": vectors.height,
                "vector_source": dict(
                    vectors.group_by("vector_source").len().sort("vector_source").iter_rows()
                ),
                "votes": n_votes,
                "positive_share": round(int(stats["n_positive"].sum()) / n_votes, 4)
                if n_votes
                else 0.0,
                "positive_share_by_skill": effectiveness["positive_share_by_skill"],
                "mean_reward_by_user": dict(
                    list(effectiveness["mean_reward_by_user"].items())[:50]
                ),
            },
            preview_columns=[
                "tenant_id",
                "user_id",
                "skill_id",
                "usage",
                "positive_share",
                "ema_confidence",
            ],
        ),
    )
    yield dg.MaterializeResult(asset_key="user_preferences", metadata=frame_metadata(preferences))
    yield dg.MaterializeResult(asset_key="skill_vectors", metadata=frame_metadata(vectors))


@dg.asset_check(
    partitions_def=TENANTS,
    asset="skill_stats",
    additional_ins=reads("user_preferences"),
    blocking=True,
    description="Confidences and shares in [0, 1]; unit or zero vectors." + BLOCKING,
)
def skill_stats_in_range(
    home: MemorypackHome, user_preferences: pl.LazyFrame
) -> dg.AssetCheckResult:
    stats = home.lake.read("skill_stats").collect()
    bad_stats = stats.filter(
        ~pl.col("ema_confidence").is_between(0, 1)
        | ~pl.col("positive_share").is_between(0, 1).fill_null(True)
        | (pl.col("n_positive") + pl.col("n_negative") > pl.col("n_feedback"))
    ).height
    norms = user_preferences.select(
        norm=pl.col("preference_vector")
        .list.eval(pl.element().cast(pl.Float64).pow(2))
        .list.sum()
        .sqrt()
    ).collect()["norm"]
    bad_vectors = int((~((norms - 1).abs() < 1e-3) & (norms > 1e-9)).sum())
    return dg.AssetCheckResult(
        passed=bad_stats == 0 and bad_vectors == 0,
        metadata={"rows_bad_stats": bad_stats, "vectors_not_unit": bad_vectors},
    )


@dg.asset(
    partitions_def=TENANTS,
    group_name=groups.EXAMPLES,
    ins=reads("feedback_scores", "feedback", "interactions", "memory_embeddings", "pack_usage"),
    metadata=declared_columns("few_shot_sets"),
    check_specs=[
        dg.AssetCheckSpec(
            NO_NEGATIVE_EXAMPLES,
            asset="few_shot_sets",
            blocking=True,
            partitions_def=TENANTS,
            description="No example whose memory has net-negative feedback, and no two examples "
            "of one set near-duplicates (cosine above the duplicate threshold)." + BLOCKING,
        )
    ],
    description="Top-k diverse examples per tenant × system × kind × skill by quality_lower; "
    "corrected outputs as examples, never a net-negative one.",
)
def few_shot_sets(
    home: MemorypackHome,
    settings: StageSettings,
    feedback_scores: pl.DataFrame,
    feedback: pl.LazyFrame,
    interactions: pl.DataFrame,
    memory_embeddings: pl.DataFrame,
    pack_usage: pl.DataFrame,
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    config = settings.stage("few_shot")
    # An example confidently harmful where it was used is never chosen again (SPEC §4.9).
    demoted = usage.demoted(pack_usage)
    interactions = interactions.filter(~pl.col("event_id").is_in(demoted["item_id"].implode()))
    # corrected outputs are all the sets need of the feedback
    corrections = feedback.filter(pl.col("signal") == "correction").collect()
    scores = feedback_scores
    embeddings = memory_embeddings.filter(pl.col("memory_kind") == "interaction")
    vectors = home.vectors(embeddings)
    # One confidently helpful ranks a little higher (FewShotConfig.helpful_boost).
    boosts = usage.boosts(pack_usage, config.helpful_boost)
    # The examples are chosen on fp32 vectors (the same on every CPU), as requests are clustered.
    exact = fp32_vectors(home.embedding_cache, embed_config(home)[0], home_redacted_texts(home))
    sets, chosen_on = select_few_shot(
        interactions, corrections, scores, embeddings, vectors, config, boosts, exact
    )
    home.lake.write("few_shot_sets", sets)
    negatives = negative_examples(sets, scores)
    duplicates = near_duplicates(sets, embeddings, chosen_on, config.duplicate_similarity)
    yield dg.MaterializeResult(
        metadata=frame_metadata(
            sets,
            {
                "sets": sets.select("tenant_id", "system", "kind", "skill_id").n_unique()
                if sets.height
                else 0,
                "corrected_examples": int(sets["is_corrected"].sum()),
                "k": config.k,
                "demoted_examples": demoted.height,
                "boosted_examples": boosts.height,
                "demoted": "; ".join(f"{i}: {r}" for i, r in demoted.head(10).iter_rows())
                or "none",
            },
            preview_columns=["system", "kind", "skill_id", "rank", "memory_id", "why"],
        )
    )
    yield dg.AssetCheckResult(
        check_name=NO_NEGATIVE_EXAMPLES,
        passed=negatives.is_empty() and duplicates == 0,
        metadata={"negative_examples": negatives.height, "near_duplicate_pairs": duplicates},
    )


ASSETS = [skill_stats, few_shot_sets]
CHECKS = [skill_stats_in_range]
