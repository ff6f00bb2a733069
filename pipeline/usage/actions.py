"""Acting on item effects (SPEC §4.9): an item confidently harmful is never again a few-shot
example and, as a memory, has its confidence cut as if a person had corrected it; one confidently
helpful ranks a little higher."""

from __future__ import annotations

import polars as pl


def _because() -> pl.Expr:
    """Where and how sure, for a row of pack_usage: `harmful in skill concise: effect -0.21,
    95 % interval [-0.35, -0.07] over 40 uses`."""
    return pl.format(
        "{} in skill {}: effect {}, 95 % interval [{}, {}] over {} uses",
        pl.col("verdict"),
        pl.col("skill_id"),
        pl.col("effect").round(2),
        pl.col("effect_lower").round(2),
        pl.col("effect_upper").round(2),
        pl.col("uses"),
    )


def demoted(usage: pl.DataFrame) -> pl.DataFrame:
    """The items whose effect's 95 % interval lies below 0 in some skill (item_id, reason), the
    reason from the skill where it is surest. Empty without receipts, so nothing changes then."""
    return (
        usage.filter(pl.col("verdict") == "harmful")
        .sort("effect_upper", "skill_id")
        .group_by("item_id", maintain_order=True)
        .agg(_because().first().alias("reason"))
        .sort("item_id")
    )


def boosts(usage: pl.DataFrame, cap: float) -> pl.DataFrame:
    """The items confidently helpful in some skill and harmful in none (item_id, boost, reason):
    the boost is the lower end of its best effect's interval, at most `cap`, so a helpful item
    moves up among peers of similar quality but never past a clearly better one. Empty without
    receipts."""
    harmful = usage.filter(pl.col("verdict") == "harmful").select("item_id")
    return (
        usage.filter(pl.col("verdict") == "helpful")
        .join(harmful, on="item_id", how="anti")
        .sort("effect_lower", "skill_id", descending=[True, False])
        .group_by("item_id", maintain_order=True)
        .agg(
            pl.col("effect_lower").first().clip(upper_bound=cap).alias("boost"),
            _because().first().alias("reason"),
        )
        .sort("item_id")
    )
