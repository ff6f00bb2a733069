"""The template history (`template_history`): every version of a tenant's skill template, one current.

A tenant's run holds only its own history (the lake's `tenant_id=<id>` folder): versions are
keyed by skill."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import polars as pl

from pipeline import tables
from pipeline.preference.templates.registry import SOURCE_REGISTRY, SkillTemplate

TEMPLATE_HISTORY_SCHEMA = tables.schema("template_history")


def empty_history() -> pl.DataFrame:
    return pl.DataFrame(schema=TEMPLATE_HISTORY_SCHEMA)


def history_row(**values: Any) -> dict[str, Any]:
    return {name: values.get(name) for name in TEMPLATE_HISTORY_SCHEMA}


def seed_registry_rows(
    history: pl.DataFrame,
    registry: Mapping[str, SkillTemplate],
    tenant: str,
    created_at: datetime,
) -> pl.DataFrame:
    """Every registry skill of the tenant (`history`: its versions) has a current template: the
    registry one when it has none yet, or when the registry's version moved past the one its
    history derives from."""
    history = history.select(list(TEMPLATE_HISTORY_SCHEMA)).cast(TEMPLATE_HISTORY_SCHEMA)  # type: ignore[arg-type]
    known = {
        s: (int(v), int(b) if b is not None else 0)
        for s, v, b in history.group_by("skill_id")
        .agg(pl.col("version").max(), pl.col("base_version").max())
        .iter_rows()
    }
    new_rows = []
    stale: list[str] = []
    for skill in registry.values():
        max_version, base_version = known.get(skill.skill_id, (0, 0))
        if skill.skill_id in known and base_version >= skill.version:
            continue
        if skill.skill_id in known:
            stale.append(skill.skill_id)
        new_rows.append(
            history_row(
                tenant_id=tenant,
                skill_id=skill.skill_id,
                version=max(max_version + 1, skill.version),
                template=skill.template,
                is_current=True,
                evidence=json.dumps({"source": SOURCE_REGISTRY, "registry_version": skill.version}),
                created_at=created_at,
                source=SOURCE_REGISTRY,
                base_version=skill.version,
            )
        )
    if stale:
        history = clear_current(history, stale)
    if not new_rows:
        return history
    return pl.concat([history, pl.DataFrame(new_rows, schema=TEMPLATE_HISTORY_SCHEMA)])


def clear_current(history: pl.DataFrame, skills: Sequence[str]) -> pl.DataFrame:
    """The tenant's history with none of these skills' versions current."""
    cleared = pl.col("skill_id").is_in(list(skills))
    return history.with_columns(
        pl.when(cleared).then(False).otherwise(pl.col("is_current")).alias("is_current")
    )


def current_templates(history: pl.DataFrame) -> pl.DataFrame:
    return history.filter(pl.col("is_current"))


def rollback(history: pl.DataFrame, skill_id: str, version: int) -> pl.DataFrame:
    """Make an earlier version of the tenant's skill current again (nothing is deleted)."""
    skill = pl.col("skill_id") == skill_id
    if history.filter(skill & (pl.col("version") == version)).is_empty():
        raise ValueError(f"no template version {version} of {skill_id}")
    return history.with_columns(
        pl.when(skill)
        .then(pl.col("version") == version)
        .otherwise(pl.col("is_current"))
        .alias("is_current")
    )


def missing_current(history: pl.DataFrame, registry: Mapping[str, SkillTemplate]) -> list[str]:
    """The registry skills without exactly one current template in the tenant's history (the
    asset check)."""
    counts = dict(history.filter(pl.col("is_current")).group_by("skill_id").len().iter_rows())
    return [skill for skill in registry if counts.get(skill, 0) != 1]
