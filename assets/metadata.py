"""One way to turn a frame and its key figures into Dagster metadata: row count, column schema,
a table preview and the key figures."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg
import polars as pl

from pipeline import tables

PREVIEW_ROWS = 5
PREVIEW_CHARS = 80


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > PREVIEW_CHARS:
        return value[: PREVIEW_CHARS - 1] + "…"
    return value


def column_schema(frame: pl.DataFrame) -> dg.TableSchema:
    """The frame's columns and polars types (`dagster/column_schema`: the catalog's Columns tab);
    a frame that holds a lake table's rows (its columns, maybe without the folder's hive ones) is
    described by the table's declaration instead, with column descriptions and primary key."""
    declared = tables.table_with_columns(frame.columns)
    return table_schema(declared) if declared else schema_columns(frame.schema)


def table_schema(table: tables.Table) -> dg.TableSchema:
    """A declared lake table as Dagster shows it: columns, types, descriptions, and the primary
    key as a constraint (its columns not nullable)."""
    key = set(table.primary_key)
    columns = [
        dg.TableColumn(
            name,
            str(dtype),
            description=table.description(name),
            constraints=dg.TableColumnConstraints(
                nullable=name not in key, unique=(name,) == table.primary_key
            ),
        )
        for name, dtype in table.columns.items()
    ]
    constraints = (
        dg.TableConstraints(other=[f"primary key ({', '.join(table.primary_key)})"])
        if table.primary_key
        else None
    )
    return dg.TableSchema(columns=columns, constraints=constraints)


# Columns of the frames steps report that are no lake table's: memory_pack's per-tenant summary,
# analytics_snapshot's table counts.
SUMMARY_DESCRIPTIONS: dict[str, str] = tables.PACK_SUMMARY_DESCRIPTIONS | {
    "table": "a table of the analytics snapshot",
    "rows": "its rows",
}


def schema_columns(schema: Mapping[str, pl.DataType]) -> dg.TableSchema:
    """A polars schema as a Dagster table schema, types named as polars names them; a column is
    described as a step's summary says, else as the declared tables describe a column of its
    name."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                name,
                str(dtype),
                description=SUMMARY_DESCRIPTIONS.get(name) or tables.column_description(name),
            )
            for name, dtype in schema.items()
        ]
    )


def _cell(value: Any) -> str | int | float | bool | None:
    if value is None or isinstance(value, bool | int | float):
        return value
    return _short(str(value).replace("\n", " "))


def preview_table(frame: pl.DataFrame, rows: int = PREVIEW_ROWS) -> dg.TableMetadataValue:
    """The first rows as a Dagster table (values cut to PREVIEW_CHARS, nested ones as text)."""
    head = frame.head(rows)
    schema = column_schema(head)
    records = [
        dg.TableRecord({k: _cell(v) for k, v in row.items()}) for row in head.iter_rows(named=True)
    ]
    return dg.MetadataValue.table(records, schema)


def frame_metadata(
    frame: pl.DataFrame,
    figures: dict[str, Any] | None = None,
    preview_columns: list[str] | None = None,
) -> dict[str, Any]:
    """Row count, column schema, a small preview and the key figures of one asset."""
    shown = frame.select(preview_columns) if preview_columns else frame
    meta: dict[str, Any] = {
        "dagster/row_count": dg.MetadataValue.int(frame.height),
        "dagster/column_schema": dg.MetadataValue.table_schema(column_schema(frame)),
        "preview": preview_table(shown),
    }
    for key, value in (figures or {}).items():
        if isinstance(value, bool):
            meta[key] = dg.MetadataValue.bool(value)
        elif isinstance(value, int):
            meta[key] = dg.MetadataValue.int(value)
        elif isinstance(value, float):
            meta[key] = dg.MetadataValue.float(value)
        elif isinstance(value, dict | list):
            meta[key] = dg.MetadataValue.json(value)
        else:
            meta[key] = dg.MetadataValue.text(str(value))
    return meta
