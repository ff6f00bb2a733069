"""The registry: every declared table by name, in the order data flows, and the lookups the
lake, the warehouse and the asset definitions make of it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import polars as pl

from pipeline.tables import (
    examples,
    feedback,
    ingest,
    memory,
    preference,
    publish,
    semantic,
    usage,
)
from pipeline.tables.declaration import Table

_TABLES: tuple[Table, ...] = (
    *ingest.TABLES,
    *feedback.TABLES,
    *usage.TABLES,
    *semantic.TABLES,
    *memory.TABLES,
    *examples.TABLES,
    *preference.TABLES,
    *publish.TABLES,
)

TABLES: dict[str, Table] = {t.name: t for t in _TABLES}


def table(name: str) -> Table:
    """The declaration of lake table `name`."""
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a lake table declared in pipeline.tables") from None


def schema(name: str, columns: Sequence[str] | None = None) -> dict[str, pl.DataType]:
    """The declared columns of `name` (or just `columns`, in that order) and their types."""
    declared = table(name).columns
    return dict(declared) if columns is None else {c: declared[c] for c in columns}


def columns(name: str, without: Iterable[str] = ()) -> tuple[str, ...]:
    """The declared column names of `name`, in order, but for `without` (e.g. a hive column a
    stage leaves to the folder name)."""
    left_out = set(without)
    return tuple(c for c in table(name).columns if c not in left_out)


def empty(name: str) -> pl.DataFrame:
    """No rows, the declared columns: what a table is before its stage has run."""
    return pl.DataFrame(schema=schema(name))


# The comment of every table, and the tables of each role, as the warehouse and analytics use them.
COMMENTS: dict[str, str] = {t.name: t.comment for t in _TABLES}
BOOKKEEPING: tuple[str, ...] = tuple(t.name for t in _TABLES if t.role == "bookkeeping")
PARTITION_COLUMNS: dict[str, str] = {t.name: t.partition for t in _TABLES if t.partition}
SHARED_TABLES: frozenset[str] = frozenset(t.name for t in _TABLES if not t.by_tenant)
# The type of each column a folder name carries (`tenant_id=<id>`, `load_date=<day>`): readers
# take a folder's value as this type, never as what it looks like (tenant `007` is no integer).
HIVE_TYPES: dict[str, pl.DataType] = {c: t.columns[c] for t in _TABLES for c in t.hive_columns}
# The one lake table whose asset has another name: ingest's events are the asset raw_events.
ASSET_OF_TABLE: dict[str, str] = {t.name: t.asset for t in _TABLES if t.asset and t.asset != t.name}


def asset_name(table: str) -> str:
    """The asset whose materialization writes lake table `table`."""
    return ASSET_OF_TABLE.get(table, table)


def table_name(asset: str) -> str:
    """The lake table asset `asset` writes (its own name but for raw_events)."""
    return {a: t for t, a in ASSET_OF_TABLE.items()}.get(asset, asset)


def table_of_asset(asset: str) -> Table | None:
    """The lake table an asset is (None for an asset without one, e.g. dpo_policy)."""
    found = TABLES.get(table_name(asset))
    return found if found is not None and found.asset == asset else None


def column_description(column: str) -> str | None:
    """What a column of this name holds in the first declared table that has it (data order): how
    a frame that is no lake table (a step's summary) describes the columns it shares with one."""
    for declared in _TABLES:
        if column in declared.columns:
            return declared.description(column)
    return None


def table_with_columns(columns: Iterable[str]) -> Table | None:
    """The table whose rows a frame with these columns holds (all its declared columns, the hive
    ones of its folders optional), if any: tables with the same columns have the same
    declaration (conflict_groups, consolidation_groups)."""
    names = set(columns)
    for declared in _TABLES:
        full = set(declared.columns)
        if names <= full and full - names <= set(declared.hive_columns):
            return declared
    return None
