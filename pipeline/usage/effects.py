"""Per tenant: how often each pack item was used, its effect on the call's outcome, and the pack's
uplift over the holdout (SPEC §4.9), from interactions that carry a receipt.

Outcome. A call's outcome is the §4.1 `quality_score` of its interaction (in [−1, 1], already
smoothed toward 0 by its votes), for calls with at least one feedback signal. It uses every
signal the product trusts (corrections, regenerates, ratings, not only thumbs), which a
positive-feedback indicator would throw away; a call nobody reacted to says nothing about its
outcome and is left out of the effects (it still counts as a use).

Item effect: empirical-Bayes normal-normal shrinkage of a stratified difference in means.
Within each stratum (skill × pack version) the calls that used the item are compared with the
stratum's calls that did not (other pack calls and the holdout, the clean control); the
difference's variance uses the stratum's outcome variance. Strata combine by inverse variance.
Across a skill's items, effects are drawn from N(0, τ²) with τ² estimated by the method of
moments (mean squared difference minus mean sampling variance, floored at `tau2_floor`), so the
posterior mean is the difference × τ²/(τ² + se²) and its 95 % interval shrinks toward 0 when an
item has few uses. Why this rather than a ridge regression on item indicators: items of one
prompt are used together, but a regression needs a solve per skill whose size grows with the
items; the shrunken difference in means is a handful of group-bys, exact for the holdout
comparison, and its prior is learnt from the data rather than tuned. Its limit: two items that
are always used in each other's place (A exactly when not B) take mirrored effects; the interval
says how sure each is, not which of the two caused it.

Uplift: per pack version × skill, mean outcome of pack calls minus holdout calls (Welch's
standard error, a 95 % normal interval), with the calls behind it.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from pipeline import tables

STRATUM = ("skill_id", "pack_version")
# A template version's item (memorypack.receipt.template_item): `<skill>@<integer version>`.
TEMPLATE_ITEM = r"^[^@]+@[0-9]+$"


@dataclass(frozen=True)
class UsageConfig:
    """The constants of SPEC §4.9 in one place."""

    z: float = 1.959964  # 95 % two-sided normal interval
    # The smallest prior variance of item effects: effects of ±0.1 on a [−1, 1] score stay
    # plausible even when a skill's items look alike (τ² = 0 would pin every effect at 0).
    tau2_floor: float = 0.01
    # The outcome variance of a stratum with fewer than two scored calls (a [−1, 1] score's
    # variance is at most 1; 0.25 is that of a coin between ±0.5).
    fallback_variance: float = 0.25
    # The most a memory measured helpful gains in confidence (as a few-shot example gains in
    # score, FewShotConfig.helpful_boost): it moves up among peers, never past a clearly surer one.
    memory_boost: float = 0.1


USAGE_CONFIG = UsageConfig()


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


def _strata(scored: pl.DataFrame, config: UsageConfig) -> pl.DataFrame:
    """Per stratum: scored calls, their outcome sum and variance."""
    y = pl.col("outcome")
    n = pl.len()
    variance = (y.pow(2).sum() - y.sum().pow(2) / n) / (n - 1)
    return scored.group_by(STRATUM).agg(
        n.alias("n_stratum"),
        y.sum().alias("sum_stratum"),
        pl.when(n >= 2).then(variance).otherwise(config.fallback_variance).alias("variance"),
    )


def pack_usage(
    receipts: pl.DataFrame, known: pl.DataFrame, config: UsageConfig = USAGE_CONFIG
) -> pl.DataFrame:
    """Per item × skill: uses, outcomes of the calls that used it, and its shrunken effect.
    `receipts` is `calls(...)`; `known` (item_id, item_kind) names the tenant's items, anything
    else is kind `unknown` (kept and counted, never an error)."""
    used = (
        receipts.filter(~pl.col("holdout"))
        .explode("items")
        .drop_nulls("items")
        .rename({"items": "item_id"})
    )
    scored = receipts.filter(pl.col("outcome").is_not_null())
    strata = _strata(scored, config)
    per_stratum = (
        used.filter(pl.col("outcome").is_not_null())
        .group_by("item_id", *STRATUM)
        .agg(pl.len().alias("n_with"), pl.col("outcome").sum().alias("sum_with"))
        .join(strata, on=list(STRATUM))
        .with_columns((pl.col("n_stratum") - pl.col("n_with")).alias("n_without"))
        .filter(pl.col("n_without") > 0)  # nothing to compare with in this stratum
        .with_columns(
            (
                pl.col("sum_with") / pl.col("n_with")
                - (pl.col("sum_stratum") - pl.col("sum_with")) / pl.col("n_without")
            ).alias("difference"),
            (pl.col("variance") * (1 / pl.col("n_with") + 1 / pl.col("n_without")))
            .clip(lower_bound=1e-12)
            .alias("sampling_variance"),
        )
    )
    weight = 1 / pl.col("sampling_variance")
    raw = per_stratum.group_by("item_id", "skill_id").agg(
        ((weight * pl.col("difference")).sum() / weight.sum()).alias("raw_effect"),
        (1 / weight.sum()).alias("raw_variance"),
        pl.col("n_without").sum().alias("n_compared"),
    )
    tau2 = (
        (pl.col("raw_effect").pow(2).mean() - pl.col("raw_variance").mean())
        .over("skill_id")
        .clip(lower_bound=config.tau2_floor)
    )
    shrink = pl.col("tau2") / (pl.col("tau2") + pl.col("raw_variance"))
    effects = raw.with_columns(tau2.alias("tau2")).with_columns(
        (shrink * pl.col("raw_effect")).alias("effect"),
        (shrink * pl.col("raw_variance")).sqrt().alias("effect_sd"),
    )
    half = config.z * pl.col("effect_sd")
    totals = used.group_by("item_id", "skill_id").agg(
        pl.first("tenant_id"),
        pl.len().alias("uses"),
        pl.col("outcome").count().alias("n_outcomes"),
        pl.col("outcome").mean().alias("mean_outcome"),
        (pl.col("outcome") > 0).sum().alias("positive_calls"),
        pl.col("pack_version").n_unique().alias("pack_versions"),
    )
    out = (
        totals.join(effects, on=["item_id", "skill_id"], how="left")
        .join(known.unique("item_id"), on="item_id", how="left")
        .with_columns(
            pl.when(pl.col("item_kind").is_not_null())
            .then("item_kind")
            .when(pl.col("item_id").str.contains(TEMPLATE_ITEM))
            .then(pl.lit("template"))
            .otherwise(pl.lit("unknown")),
            (pl.col("effect") - half).alias("effect_lower"),
            (pl.col("effect") + half).alias("effect_upper"),
            pl.col("n_compared").fill_null(0),
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
