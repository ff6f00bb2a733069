"""Declared hand-offs: the lake tables a step reads arrive as its parameters.

`ins=reads("interactions", "feedback")` makes each table a dependency in the graph and a parameter
of the step, loaded by `lake_input` from the run's part of the home (a tenant's run: its own
folder), so declaring a dependency and reading it are one line, and the lineage the UI draws is
what the code reads. The parameter's annotation says how it is loaded:

- `pl.LazyFrame`: a scan with the table's declared columns (empty before its stage has run);
- `pl.DataFrame`: the same, collected;
- `pl.LazyFrame | None`: None when the stage that writes it has not run yet (optional inputs).

A step writes its own tables itself (writes are incremental per group, so they are not an
output's return value), and may read its own previous output; that is not a hand-off.
"""

from __future__ import annotations

import dagster as dg
import polars as pl

from assets.resources import MemorypackHome
from pipeline.tables import table_name

LAKE_INPUT = "lake_input"


def reads(*assets: str) -> dict[str, dg.AssetIn]:
    """The `ins` of a step that reads these upstream assets' lake tables."""
    return {name: dg.AssetIn(key=name, input_manager_key=LAKE_INPUT) for name in assets}


@dg.input_manager(required_resource_keys={"home"})
def lake_input(context: dg.InputContext) -> pl.LazyFrame | pl.DataFrame | None:
    """An upstream asset's lake table for the run's part of the home, as the parameter's
    annotation asks (see the module's doc)."""
    home: MemorypackHome = context.resources.home
    lake, name = home.lake, table_name(context.asset_key.to_user_string())
    wanted = context.dagster_type.typing_type
    if wanted is pl.DataFrame:
        return lake.read_or_empty(name).collect()
    if wanted is pl.LazyFrame:
        return lake.read_or_empty(name)
    return lake.read(name) if lake.exists(name) else None


def resources(home: MemorypackHome) -> dict[str, object]:
    """What every run binds: the home, and the lake's input manager over it."""
    return {"home": home, LAKE_INPUT: lake_input}
