"""The template history (`template_history`): every version of a tenant's skill template, one current."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
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
    tenants: Iterable[str],
    created_at: datetime,
) -> pl.DataFrame:
    """Every tenant × registry skill has a current template: the registry one when the tenant has
    none yet, or when the registry's version moved past the one its history derives from."""
    history = history.select(list(TEMPLATE_HISTORY_SCHEMA)).cast(TEMPLATE_HISTORY_SCHEMA)  # type: ignore[arg-type]
    known = {
        (t, s): (int(v), int(b) if b is not None else 0)
        for t, s, v, b in history.group_by("tenant_id", "skill_id")
        .agg(pl.col("version").max(), pl.col("base_version").max())
        .iter_rows()
    }
    new_rows = []
    stale: list[tuple[str, str]] = []
    for tenant in sorted(set(tenants)):
        for skill in registry.values():
            max_version, base_version = known.get((tenant, skill.skill_id), (0, 0))
            if (tenant, skill.skill_id) in known and base_version >= skill.version:
                continue
            if (tenant, skill.skill_id) in known:
                stale.append((tenant, skill.skill_id))
            new_rows.append(
                history_row(
                    tenant_id=tenant,
                    skill_id=skill.skill_id,
                    version=max(max_version + 1, skill.version),
                    template=skill.template,
                    is_current=True,
                    evidence=json.dumps(
                        {"source": SOURCE_REGISTRY, "registry_version": skill.version}
                    ),
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


def clear_current(history: pl.DataFrame, keys: list[tuple[str, str]]) -> pl.DataFrame:
    flagged = pl.DataFrame(
        keys, schema=tables.schema("template_history", ["tenant_id", "skill_id"]), orient="row"
    )
    return (
        history.join(
            flagged.with_columns(pl.lit(True).alias("_hit")),
            on=["tenant_id", "skill_id"],
            how="left",
        )
        .with_columns(
            pl.when(pl.col("_hit")).then(False).otherwise(pl.col("is_current")).alias("is_current")
        )
        .drop("_hit")
    )


def current_templates(history: pl.DataFrame) -> pl.DataFrame:
    return history.filter(pl.col("is_current"))


def rollback(history: pl.DataFrame, tenant_id: str, skill_id: str, version: int) -> pl.DataFrame:
    """Make an earlier version current again (nothing is deleted)."""
    key = (pl.col("tenant_id") == tenant_id) & (pl.col("skill_id") == skill_id)
    if history.filter(key & (pl.col("version") == version)).is_empty():
        raise ValueError(f"no template version {version} for {tenant_id}/{skill_id}")
    return history.with_columns(
        pl.when(key)
        .then(pl.col("version") == version)
        .otherwise(pl.col("is_current"))
        .alias("is_current")
    )


def missing_current(
    history: pl.DataFrame, registry: Mapping[str, SkillTemplate], tenants: Iterable[str]
) -> list[str]:
    """`tenant/skill` keys without exactly one current template (the asset check)."""
    counts = {
        (t, s): int(n)
        for t, s, n in history.filter(pl.col("is_current"))
        .group_by("tenant_id", "skill_id")
        .len()
        .iter_rows()
    }
    return [
        f"{t}/{s}" for t in sorted(set(tenants)) for s in registry if counts.get((t, s), 0) != 1
    ]
