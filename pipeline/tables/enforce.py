"""What the registry enforces: `Lake` conforms a frame to its table on write (`conform`: declared
columns and types, primary key unique) and reads it back as declared (`as_declared`); `checks`
is a table's pandera schema."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import Table
from pipeline.tables.registry import table


class SchemaMismatch(ValueError):
    """A frame written to a lake table does not have the table's declared columns and types."""


class KeyViolation(ValueError):
    """A frame written to a lake table holds two rows with one primary key."""


def _only_nulls(dtype: pl.DataType) -> bool:
    """A type that holds nothing but nulls (`pl.lit(None)`, `[]` lists): any declared type fits."""
    if dtype == pl.Null():
        return True
    inner = getattr(dtype, "inner", None)
    return isinstance(dtype, pl.List | pl.Array) and inner is not None and _only_nulls(inner)


def conform(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with table `name`'s declared columns in their order, or `SchemaMismatch` naming the
    table and column. The one cast it makes: a column that holds only nulls (typed Null, or a list
    of Null, as `pl.lit(None)` and empty lists make them) takes its declared type. The hive
    columns of the folder (tenant_id of a tenant table, the partition column) may be left out."""
    declared = table(name)
    present = frame.schema
    hive = set(declared.hive_columns)
    missing = [c for c in declared.columns if c not in present and c not in hive]
    extra = [c for c in present if c not in declared.columns]
    if missing or extra:
        what = [f"column {c!r} is missing ({declared.columns[c]})" for c in missing]
        what += [f"column {c!r} ({present[c]}) is not declared" for c in extra]
        raise SchemaMismatch(f"lake table {name!r}: " + "; ".join(what))
    wrong = [
        f"column {c!r} is {present[c]}, declared {dtype}"
        for c, dtype in declared.columns.items()
        if c in present and present[c] != dtype and not _only_nulls(present[c])
    ]
    if wrong:
        raise SchemaMismatch(f"lake table {name!r}: " + "; ".join(wrong))
    _check_key(declared, frame)
    kept = [c for c in declared.columns if c in present]
    return frame.select(
        pl.col(c) if present[c] == declared.columns[c] else pl.col(c).cast(declared.columns[c])
        for c in kept
    )


def _check_key(declared: Table, frame: pl.DataFrame) -> None:
    """`KeyViolation` when two rows share the primary key (nulls compare equal). A hive column of
    the key the frame leaves out, or holds only nulls, is the folder's: one value for every row."""
    hive = set(declared.hive_columns)
    key = [
        c
        for c in declared.primary_key
        if c not in hive or (c in frame.columns and frame[c].null_count() < frame.height)
    ]
    if not key or frame.height < 2:
        return
    repeated = frame.height - frame.select(key).n_unique()
    if repeated:
        raise KeyViolation(
            f"lake table {declared.name!r}: {repeated} row(s) repeat a key ({', '.join(key)})"
        )


def as_declared(name: str, frame: pl.LazyFrame) -> pl.LazyFrame:
    """A read of table `name` with exactly its declared columns and types: a column a file lacks
    (written before it was declared, or all null in every file) comes back null, an undeclared
    one is left out."""
    present = frame.collect_schema()

    def column(c: str, dtype: pl.DataType) -> pl.Expr:
        if c not in present:
            return pl.lit(None, dtype=dtype).alias(c)
        return pl.col(c) if present[c] == dtype else pl.col(c).cast(dtype)

    return frame.select(column(c, dtype) for c, dtype in table(name).columns.items())


# --- Dagster and pandera: generated from the declarations ---


def checks(name: str):  # type: ignore[no-untyped-def]
    """The pandera schema of table `name`: every declared column with its type, the primary key
    not null and unique together. (pandera is imported here: the registry itself needs polars
    only.)"""
    import pandera.polars as pa

    declared = table(name)
    key = set(declared.primary_key)
    return pa.DataFrameSchema(
        {
            column: pa.Column(dtype, nullable=column not in key)
            for column, dtype in declared.columns.items()
        },
        unique=list(declared.primary_key) or None,
        name=name,
        strict=True,
    )
