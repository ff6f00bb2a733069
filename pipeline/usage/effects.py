"""Per tenant: how often each pack item was used, its effect on the call's outcome, and the pack's
uplift over the holdout (SPEC §4.9), from interactions that carry a receipt.

Outcome. A call's outcome is the §4.1 `quality_score` of its interaction (in [−1, 1], already
smoothed toward 0 by its votes), for calls with at least one feedback signal. It uses every
signal the product trusts (corrections, regenerates, ratings, not only thumbs), which a
positive-feedback indicator would throw away; a call nobody reacted to says nothing about its
outcome and is left out of the effects (it still counts as a use).

Item effect: one model of the outcome over every item of a tenant's receipts (`joint.py`: a ridge
regression on item indicators with skill × pack-version levels, its penalty learnt from the data),
so an item is not charged for what its presence pushed out of the prompt. `raw_effect` beside it is the
with-versus-without difference in means (`marginal.py`), kept for the analyst: where the two
disagree, the item's neighbours in the prompt explain the difference.

Uplift: per pack version × skill, mean outcome of pack calls minus holdout calls (Welch's
standard error, a 95 % normal interval), with the calls behind it.
"""

from __future__ import annotations

import polars as pl

from pipeline import tables
from pipeline.usage.config import STRATUM, USAGE_CONFIG, UsageConfig
from pipeline.usage.joint import joint_effects
from pipeline.usage.marginal import marginal_effects, prior_variance, used_items

# A template version's item (memorypack.receipt.template_item): `<skill>@<integer version>`.
TEMPLATE_ITEM = r"^[^@]+@[0-9]+$"


def calls(
    interactions: pl.DataFrame | pl.LazyFrame, scores: pl.DataFrame | pl.LazyFrame
) -> pl.DataFrame:
    """The calls with a receipt: event_id, skill_id ("" when none), pack_version, items (unique,
    none for a holdout call), holdout, outcome (null without feedback). A lazy scan of a local lake
    reads these columns only, never the texts (an object-store home reads its files whole)."""
    outcome = (
        scores.lazy()
        .filter(pl.col("n_feedback") > 0)
        .select(pl.col("memory_id").alias("event_id"), pl.col("quality_score").alias("outcome"))
    )
    return (
        interactions.lazy()
        .filter(pl.col("context_pack_version").is_not_null())
        .select(
            "tenant_id",
            "event_id",
            pl.col("skill_id").fill_null(""),
            pl.col("context_pack_version").alias("pack_version"),
            pl.when(pl.col("context_holdout"))
            .then(pl.lit([], dtype=pl.List(pl.String)))
            .otherwise(pl.col("context_items").list.unique(maintain_order=True))
            .alias("items"),
            pl.col("context_holdout").alias("holdout"),
        )
        .join(outcome, on="event_id", how="left")
        .collect()
    )


def known_items(interactions: pl.LazyFrame, statements: pl.LazyFrame) -> pl.DataFrame:
    """The tenant's item ids and their kind: an interaction (a few-shot example or an interaction
    memory) or a statement (a memory about a person). Templates are told by their id's form."""
    return pl.concat(
        [
            interactions.select(
                pl.col("event_id").alias("item_id"), item_kind=pl.lit("interaction")
            ),
            statements.select(pl.col("event_id").alias("item_id"), item_kind=pl.lit("statement")),
        ]
    ).collect()


def pack_usage(
    receipts: pl.DataFrame, known: pl.DataFrame, config: UsageConfig = USAGE_CONFIG
) -> pl.DataFrame:
    """Per item × skill: uses, outcomes of the calls that used it, and the item's effect, estimated
    with every other item of the tenant's receipts in one model (the same on each of the item's
    skill rows). `receipts` is `calls(...)`; `known` (item_id, item_kind) names the tenant's
    items, anything else is kind `unknown` (kept and counted, never an error). A row without a
    comparable call (the item was in every scored call of the skill's pack versions) has none."""
    used = used_items(receipts)
    marginal = marginal_effects(receipts, config)
    keys = ["tenant_id", "item_id", "skill_id"]
    if config.joint:  # one model per tenant: an item's effect over every skill it served
        prior = marginal.group_by("tenant_id").agg(prior_variance(config).alias("tau2"))
        effects = joint_effects(receipts, prior, config).join(prior, on="tenant_id")
    else:
        effects = marginal.select(*keys, "effect", "effect_sd", "tau2")
    marginal = marginal.select(*keys, "raw_effect", "n_compared")
    half = config.z * pl.col("effect_sd")
    totals = used.group_by("tenant_id", "item_id", "skill_id").agg(
        pl.len().alias("uses"),
        pl.col("outcome").count().alias("n_outcomes"),
        pl.col("outcome").mean().alias("mean_outcome"),
        (pl.col("outcome") > 0).sum().alias("positive_calls"),
        pl.col("pack_version").n_unique().alias("pack_versions"),
    )
    out = (
        totals.join(marginal, on=keys, how="left")
        .join(effects, on=[k for k in keys if k in effects.columns], how="left")
        .join(known.unique("item_id"), on="item_id", how="left")
        .with_columns(
            # No comparable call: the data say nothing of this item, whatever the prior says.
            pl.when(pl.col("n_compared").is_not_null()).then(pl.col("effect", "effect_sd")),
            pl.when(pl.col("item_kind").is_not_null())
            .then("item_kind")
            .when(pl.col("item_id").str.contains(TEMPLATE_ITEM))
            .then(pl.lit("template"))
            .otherwise(pl.lit("unknown")),
            pl.col("n_compared").fill_null(0),
        )
        .with_columns(
            (pl.col("effect") - half).alias("effect_lower"),
            (pl.col("effect") + half).alias("effect_upper"),
        )
        .with_columns(
            pl.when(pl.col("effect_upper") < 0)
            .then(pl.lit("harmful"))
            .when(pl.col("effect_lower") > 0)
            .then(pl.lit("helpful"))
            .otherwise(pl.lit("unclear"))
            .alias("verdict")
        )
    )
    return _declared("pack_usage", out).sort("skill_id", "item_id")


def _declared(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` as lake table `name` declares it (columns, order, types)."""
    return frame.select(pl.col(c).cast(t) for c, t in tables.schema(name).items())


def pack_uplift(receipts: pl.DataFrame, config: UsageConfig = USAGE_CONFIG) -> pl.DataFrame:
    """Per pack version × skill: mean outcome of pack calls minus holdout calls, its 95 %
    interval (null without scored calls on both sides), and the calls behind it."""
    y = pl.col("outcome")
    sides = (
        receipts.filter(y.is_not_null())
        .group_by("tenant_id", *STRATUM, "holdout")
        .agg(pl.len().alias("n"), y.mean().alias("mean"), y.var().alias("var"))
    )
    pack = sides.filter(~pl.col("holdout")).drop("holdout")
    held = sides.filter(pl.col("holdout")).drop("holdout")
    calls_behind = receipts.group_by("tenant_id", *STRATUM).agg(
        (~pl.col("holdout")).sum().alias("n_pack_calls"),
        pl.col("holdout").sum().alias("n_holdout_calls"),
    )
    variance = pl.col("var").fill_null(config.fallback_variance)
    variance_h = pl.col("var_holdout").fill_null(config.fallback_variance)
    se = (variance / pl.col("n") + variance_h / pl.col("n_holdout")).sqrt()
    uplift = (
        calls_behind.join(pack, on=["tenant_id", *STRATUM], how="left")
        .join(held, on=["tenant_id", *STRATUM], how="left", suffix="_holdout")
        .with_columns((pl.col("mean") - pl.col("mean_holdout")).alias("uplift"), se.alias("se"))
        .select(
            "tenant_id",
            "pack_version",
            "skill_id",
            "n_pack_calls",
            "n_holdout_calls",
            pl.col("n").fill_null(0).alias("n_pack_scored"),
            pl.col("n_holdout").fill_null(0).alias("n_holdout_scored"),
            pl.col("mean").alias("pack_mean"),
            pl.col("mean_holdout").alias("holdout_mean"),
            "uplift",
            (pl.col("uplift") - config.z * pl.col("se")).alias("uplift_lower"),
            (pl.col("uplift") + config.z * pl.col("se")).alias("uplift_upper"),
        )
        .sort("pack_version", "skill_id")
    )
    return _declared("pack_uplift", uplift)
