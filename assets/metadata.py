"""One way to turn a frame and its key figures into Dagster metadata: row count, column schema,
a table preview and the key figures."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import dagster as dg
import polars as pl

from pipeline import tables

PREVIEW_ROWS = 5
PREVIEW_CHARS = 80
Redaction = Callable[[pl.DataFrame], pl.DataFrame]
# How a preview's rows are redacted (SPEC §5 round 4: Dagster's metadata shows no more than the
# pack): during a run, by the home's redactor (its key, cache and the tenants' names: set by the
# `home` resource, assets/resources.py); outside one, by a redactor with a key of its own. Both
# are stricter than a pack's (`redact_rows(strict=True)`): a preview is made before tonight's
# names are known.
_run_redaction: Redaction | None = None
# Lower-cased text derived from a memory (a conflict's subject): no detector finds a name in it,
# so previews leave it out (the pack makes it again from the redacted text).
DERIVED_LOWER_CASE = frozenset({"subject"})


@contextmanager
def previews_redacted_by(redact: Redaction) -> Iterator[None]:
    """Previews made inside this context are redacted by `redact` (a run's home)."""
    global _run_redaction
    previous, _run_redaction = _run_redaction, redact
    try:
        yield
    finally:
        _run_redaction = previous


def redacted_preview(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of a preview as a pack would hold them."""
    if _run_redaction is not None:
        return _run_redaction(frame)
    from pipeline.pii.redactor import Redactor
    from pipeline.publish.redaction import redact_rows

    return redact_rows(Redactor(key=os.urandom(32)), frame, strict=True)[0]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _replaced(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, dict):
        return {_replaced(k, mapping): _replaced(v, mapping) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replaced(item, mapping) for item in value]
    return value


def redacted_figure(value: Any) -> Any:
    """A figure's strings (keys too: "acme/<skill id>") redacted as preview text."""
    strings = sorted(set(_strings(value)))
    if not strings:
        return value
    texts = redacted_preview(pl.DataFrame({"text": strings}))["text"].to_list()
    return _replaced(value, dict(zip(strings, texts, strict=True)))


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
    """The first rows as a Dagster table, redacted (`redacted_preview`), values cut to
    PREVIEW_CHARS after their redaction, nested ones as text."""
    shown = frame.head(rows).drop(DERIVED_LOWER_CASE & set(frame.columns))
    head = redacted_preview(shown)
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
            meta[key] = dg.MetadataValue.json(redacted_figure(value))
        else:
            meta[key] = dg.MetadataValue.text(str(value))
    return meta
