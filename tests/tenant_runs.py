"""The assets after ingest run as the night runs them: one run per tenant (a partition of
`tenants`, registered in the instance as ingest registers it), each seeing only its own folders
of the lake, then the analytics build, which alone brings the warehouse up to date."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from assets.config import StageSettings, settings_config
from assets.handoffs import resources
from assets.partitions import TENANTS
from assets.publish import analytics_snapshot
from assets.resources import MemorypackHome
from jobs.nightly import tenant_run_config
from pipeline import tables
from pipeline.config import TENANT_COLUMN, Paths
from pipeline.storage.lake import Lake

TENANT = "acme"
PARTITIONS = str(TENANTS.name)  # the dynamic partitions ingest adds tenants to
# Every stage's knobs, set per run as the definitions set them (assets/config.py).
SETTINGS = {"settings": StageSettings.configure_at_launch()}


def tenant_lake(home: Path, tenant: str = TENANT) -> Lake:
    """The lake as `tenant`'s run sees it: reads and writes only that tenant's folders."""
    return Lake(Paths.from_env(home).for_tenant(tenant))


def declared(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    """A test's few columns of lake table `name` as the lake accepts them: every other declared
    column null, the given ones cast to their declared types (the lake refuses anything else)."""
    columns = tables.schema(name)
    given = frame.select(pl.col(c).cast(columns[c]) for c in frame.columns if c in columns)
    return pl.concat([tables.empty(name), given], how="diagonal")


def write_by_tenant(home: Path, name: str, frame: pl.DataFrame) -> list[str]:
    """Write a table with several tenants' rows as the tenant layout holds it: each tenant's rows
    in its own folder (the columns the test leaves out null). Returns the tenants written."""
    tenants = sorted(frame[TENANT_COLUMN].unique())
    for tenant in tenants:
        rows = frame.filter(pl.col(TENANT_COLUMN) == tenant)
        tenant_lake(home, tenant).write(name, declared(name, rows))
    return tenants


def register(instance: dg.DagsterInstance, *tenants: str) -> None:
    """Make `tenants` partitions of `tenants` (what the ingest asset does for a new tenant)."""
    known = set(instance.get_dynamic_partitions(PARTITIONS))
    new = [t for t in tenants if t not in known]
    if new:
        instance.add_dynamic_partitions(PARTITIONS, new)


def _sources(assets: Sequence[Any]) -> list[dg.AssetSpec]:
    """The other assets of the night as external specs: a step's inputs (assets/handoffs.py) are
    loaded from the lake, whichever run wrote them (here: the test)."""
    from jobs.definitions import defs

    given = {k for a in assets if isinstance(a, dg.AssetsDefinition) for k in a.keys}
    every = defs.resolve_asset_graph().get_all_asset_keys()
    return [dg.AssetSpec(key) for key in sorted(every - given, key=str)]


def materialize_tenant(
    assets: Sequence[Any],
    home: Path,
    instance: dg.DagsterInstance,
    tenant: str = TENANT,
    load_dates: Sequence[str] = (),
    settings: dict[str, dict[str, Any]] | None = None,
    **kwargs: Any,
) -> dg.ExecuteInProcessResult:
    """One tenant's run of `assets` (its partition); `load_dates`: what decay_snapshots snapshots
    (as the night passes the dates ingest changed; none: the tenant's newest); `settings`: stage
    knobs over the defaults, e.g. {"dpo": {"min_pairs": 10}}."""
    register(instance, tenant)
    config = settings_config(settings)
    if load_dates:
        config |= tenant_run_config(list(load_dates))
    return dg.materialize(
        [*assets, *_sources(assets)],
        partition_key=tenant,
        instance=instance,
        resources={**resources(MemorypackHome(home=str(home))), **SETTINGS},
        run_config=config,
        **kwargs,
    )


def build_analytics(home: Path, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    """The analytics build after the tenants' runs: warehouse caught up with the lake, then
    analytics.duckdb."""
    result = dg.materialize(
        [analytics_snapshot],
        instance=instance,
        resources={**resources(MemorypackHome(home=str(home))), **SETTINGS},
    )
    assert result.success
    return result
