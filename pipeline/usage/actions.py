"""Acting on item effects (SPEC §4.9): an item confidently harmful is never again a few-shot
example and, as a memory, has its confidence cut as if a person had corrected it; one confidently
helpful ranks a little higher."""

from __future__ import annotations

import polars as pl


def _because() -> pl.Expr:
    """How sure, for a row of pack_usage: `harmful: effect -0.21, 95 % interval [-0.35, -0.07]
    over 40 uses in 2 skills` (the effect is the item's over every skill it served)."""
    skills = pl.len().over("tenant_id", "item_id")
    return pl.format(
        "{}: effect {}, 95 % interval [{}, {}] over {} uses in {} skill{}",
        pl.col("verdict"),
        pl.col("effect").round(2),
        pl.col("effect_lower").round(2),
        pl.col("effect_upper").round(2),
        pl.col("uses").sum().over("tenant_id", "item_id"),
        skills,
        pl.when(skills == 1).then(pl.lit("")).otherwise(pl.lit("s")),
    )


def demoted(usage: pl.DataFrame) -> pl.DataFrame:
    """The items whose effect's 95 % interval lies below 0 (item_id, reason; with the round-3 rule's
    per-skill effects, in some skill, the reason from the surest). Empty without receipts, so
    nothing changes then."""
    return (
        usage.with_columns(_because().alias("reason"))
        .filter(pl.col("verdict") == "harmful")
        .sort("effect_upper", "skill_id")
        .group_by("item_id", maintain_order=True)
        .agg(pl.col("reason").first())
        .sort("item_id")
    )


def boosts(usage: pl.DataFrame, cap: float) -> pl.DataFrame:
    """The items confidently helpful in some skill and harmful in none (item_id, boost, reason):
    the boost is the lower end of its best effect's interval, at most `cap`, so a helpful item
    moves up among peers of similar quality but never past a clearly better one. Empty without
    receipts."""
    harmful = usage.filter(pl.col("verdict") == "harmful").select("item_id")
    return (
        usage.with_columns(_because().alias("reason"))
        .filter(pl.col("verdict") == "helpful")
        .join(harmful, on="item_id", how="anti")
        .sort("effect_lower", "skill_id", descending=[True, False])
        .group_by("item_id", maintain_order=True)
        .agg(
            pl.col("effect_lower").first().clip(upper_bound=cap).alias("boost"),
            pl.col("reason").first(),
        )
        .sort("item_id")
    )
