"""The one resource every asset uses: the memorypack home (lake, warehouse, models, packs)."""

from __future__ import annotations

import dagster as dg

from pipeline.config import DEFAULT_HOME, Paths
from pipeline.storage import Lake, Warehouse


class MemorypackHome(dg.ConfigurableResource):
    """Configured from MEMORYPACK_HOME (default ./data); all DuckDB writes go through `warehouse`."""

    home: str = DEFAULT_HOME
    landing: str = ""  # empty = <home>/landing (or MEMORYPACK_LANDING)

    @property
    def paths(self) -> Paths:
        return Paths.from_env(self.home)

    @property
    def landing_dir(self):  # type: ignore[no-untyped-def]
        from pathlib import Path

        return Path(self.landing).resolve() if self.landing else self.paths.landing

    @property
    def lake(self) -> Lake:
        return Lake(self.paths)

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse(self.paths)


def home_resource() -> MemorypackHome:
    return MemorypackHome(
        home=dg.EnvVar("MEMORYPACK_HOME").get_value(DEFAULT_HOME) or DEFAULT_HOME,
        landing=dg.EnvVar("MEMORYPACK_LANDING").get_value("") or "",
    )
