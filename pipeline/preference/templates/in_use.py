"""What the calls' receipts say of an adopted template (SPEC §4.9): the DPO policy chose it offline,
real traffic may disagree. A refined template measured confidently worse than the version it
replaced is rolled back, the reason kept on its row; it is never adopted again."""

from __future__ import annotations

import math
from datetime import datetime

import polars as pl

from pipeline.preference.templates.history import rollback
from pipeline.preference.templates.registry import SOURCE_REFINED
from pipeline.usage import USAGE_CONFIG


def _pooled(usage: pl.DataFrame) -> pl.DataFrame:
    """Per template item (`<skill>@<version>`): its effect, standard error and uses. The effect is
    the item's over every skill its calls named (pipeline/usage/joint.py), so each of its rows (a
    template serves one skill: normally one) carries the same; a row without one is skipped."""
    z = USAGE_CONFIG.z
    return (
        usage.filter(pl.col("item_kind") == "template")
        .with_columns(se=(pl.col("effect_upper") - pl.col("effect_lower")) / (2 * z))
        .group_by("item_id")
        .agg(
            pl.col("effect").drop_nulls().first(),
            pl.col("se").drop_nulls().first(),
            pl.col("uses").sum(),
        )
        .drop_nulls("effect")
    )


def roll_back_worse(
    history: pl.DataFrame, usage: pl.DataFrame, now: datetime
) -> tuple[pl.DataFrame, list[str]]:
    """The tenant's history with every current refined template that use measured confidently
    worse than its predecessor rolled back (the predecessor current again), and one line per
    rollback (`<skill>: <reason>`).

    Worse: the difference of the two versions' effects (each against comparable calls without
    it) has its 95 % interval below 0; a predecessor never measured counts as effect 0 ± 0, so
    then the new version's own interval must lie below 0."""
    effects = {row["item_id"]: row for row in _pooled(usage).to_dicts()}
    adopted = history.filter(pl.col("is_current") & (pl.col("source") == SOURCE_REFINED))
    lines = []
    for row in adopted.to_dicts():
        new = effects.get(f"{row['skill_id']}@{row['version']}")
        before = pl.Series([row["evidence"]]).str.json_path_match("$.replaced.version")[0]
        if new is None or before is None:
            continue
        old = effects.get(f"{row['skill_id']}@{before}", {"effect": 0.0, "se": 0.0, "uses": 0})
        diff = new["effect"] - old["effect"]
        upper = diff + USAGE_CONFIG.z * math.hypot(new["se"], old["se"])
        if upper >= 0:
            continue
        reason = (
            f"rolled back to v{before} on {now.date().isoformat()}: in use, v{row['version']} did "
            f"{diff:+.2f} against v{before} (95 % interval up to {upper:+.2f}; {new['uses']} and "
            f"{old['uses']} uses)"
        )
        skill = pl.col("skill_id") == row["skill_id"]
        history = rollback(history, row["skill_id"], int(before)).with_columns(
            rollback_reason=pl.when(skill & (pl.col("version") == row["version"]))
            .then(pl.lit(reason))
            .otherwise(pl.col("rollback_reason"))
        )
        lines.append(f"{row['skill_id']}: {reason}")
    return history, lines


def rolled_back_templates(history: pl.DataFrame, skill: str) -> set[str]:
    """The texts use rolled back for the tenant's skill: never candidates again."""
    rolled_back = (pl.col("skill_id") == skill) & pl.col("rollback_reason").is_not_null()
    return set(history.filter(rolled_back)["template"])
