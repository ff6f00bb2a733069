"""What a with-versus-without comparison sees of each item (SPEC §4.9, round 3): the stratified
difference in mean outcome between the calls that used it and those that did not.

Within each stratum (skill × pack version) the calls that used the item are compared with the
stratum's calls that did not (other pack calls and the holdout); the difference's variance uses
the stratum's outcome variance, and strata combine by inverse variance. This is `raw_effect` in
`pack_usage`, and its spread across a skill's items gives the joint model its prior (`tau2`, the
method of moments: mean squared difference minus mean sampling variance, floored).

It is no longer the verdict: items compete for places in a prompt, so an item's presence is
another's absence, and the difference charges an item for what it pushed out (round 4; the joint
model in `joint.py` decides). `marginal_effects` still returns the round-3 verdict — the
difference shrunk by the prior — which `UsageConfig(joint=False)` makes the verdict again: the
baseline `bench/sections_usage_effects.py` compares with.
"""

from __future__ import annotations

import polars as pl

from pipeline.usage.config import GROUP, STRATUM, USAGE_CONFIG, UsageConfig


def _strata(scored: pl.DataFrame, config: UsageConfig) -> pl.DataFrame:
    """Per stratum: scored calls, their outcome sum and variance."""
    y = pl.col("outcome")
    n = pl.len()
    variance = (y.pow(2).sum() - y.sum().pow(2) / n) / (n - 1)
    return scored.group_by("tenant_id", *STRATUM).agg(
        n.alias("n_stratum"),
        y.sum().alias("sum_stratum"),
        pl.when(n >= 2).then(variance).otherwise(config.fallback_variance).alias("variance"),
    )


def used_items(receipts: pl.DataFrame) -> pl.DataFrame:
    """One row per pack call × item it used (holdout calls use nothing)."""
    return (
        receipts.filter(~pl.col("holdout"))
        .explode("items")
        .drop_nulls("items")
        .rename({"items": "item_id"})
    )


def prior_variance(config: UsageConfig = USAGE_CONFIG) -> pl.Expr:
    """τ², the spread of true item effects, by the method of moments over rows of raw effects:
    their mean square less their mean sampling variance, at least `tau2_floor`."""
    spread = pl.col("raw_effect").pow(2).mean() - pl.col("raw_variance").mean()
    return spread.clip(lower_bound=config.tau2_floor)


def marginal_effects(receipts: pl.DataFrame, config: UsageConfig = USAGE_CONFIG) -> pl.DataFrame:
    """Per tenant × skill × item with a comparison: raw_effect (stratified difference, with minus
    without), raw_variance, n_compared (scored calls of its strata without it), the skill's prior
    tau2 (`prior_variance` over the skill's items), and the round-3 verdict's effect and effect_sd
    (raw_effect shrunk by that prior)."""
    scored = receipts.filter(pl.col("outcome").is_not_null())
    keys = ["tenant_id", *STRATUM]
    per_stratum = (
        used_items(scored)
        .group_by("item_id", *keys)
        .agg(pl.len().alias("n_with"), pl.col("outcome").sum().alias("sum_with"))
        .join(_strata(scored, config), on=keys)
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
    raw = per_stratum.group_by("item_id", *GROUP).agg(
        ((weight * pl.col("difference")).sum() / weight.sum()).alias("raw_effect"),
        (1 / weight.sum()).alias("raw_variance"),
        pl.col("n_without").sum().alias("n_compared"),
    )
    shrink = pl.col("tau2") / (pl.col("tau2") + pl.col("raw_variance"))
    return raw.with_columns(prior_variance(config).over(GROUP).alias("tau2")).with_columns(
        (shrink * pl.col("raw_effect")).alias("effect"),
        (shrink * pl.col("raw_variance")).sqrt().alias("effect_sd"),
    )
