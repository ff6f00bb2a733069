"""The lake (Parquet, the source of truth) and the warehouse (DuckDB, rebuildable from the lake)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from pipeline.config import Paths


def write_parquet_atomic(frame: pl.DataFrame, path: Path) -> Path:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    frame.write_parquet(tmp, compression="zstd", statistics=True)
    os.replace(tmp, path)
    return path


class Lake:
    """Named Parquet tables under `<home>/lake`."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    def write(self, name: str, frame: pl.DataFrame) -> Path:
        return write_parquet_atomic(frame, self.paths.table(name))

    def write_partition(
        self, name: str, key: str, frame: pl.DataFrame, column: str | None = None
    ) -> Path:
        return write_parquet_atomic(frame, self.paths.partition(name, key, column))

    def exists(self, name: str) -> bool:
        return self.paths.table(name).exists() or any(self.partition_keys(name))

    def read(self, name: str) -> pl.LazyFrame:
        """A whole table, or all partitions of a partitioned one (hive columns restored)."""
        single = self.paths.table(name)
        if single.exists():
            return pl.scan_parquet(single)
        files = sorted((self.paths.lake / name).glob("*=*/data.parquet"))
        if not files:
            raise FileNotFoundError(f"lake table {name!r} has not been materialized yet")
        return pl.scan_parquet(files, hive_partitioning=True)

    def read_or_empty(self, name: str, schema: dict[str, pl.DataType]) -> pl.LazyFrame:
        try:
            return self.read(name)
        except FileNotFoundError:
            return pl.LazyFrame(schema=schema)

    def partition_keys(self, name: str) -> list[str]:
        root = self.paths.lake / name
        if not root.exists():
            return []
        return sorted(p.parent.name.split("=", 1)[1] for p in root.glob("*=*/data.parquet"))


class Warehouse:
    """The pipeline's own DuckDB file (single writer, SPEC §6): tables mirror lake tables."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        self.paths.home.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(self.paths.warehouse), read_only=read_only)
        try:
            yield con
        finally:
            con.close()

    def refresh(self, name: str, lake: Lake, comment: str | None = None) -> int:
        """(Re)load one warehouse table from its lake files; returns the row count."""
        single = self.paths.table(name)
        if single.exists():
            source = f"read_parquet('{single}')"
        else:
            source = (
                f"read_parquet('{self.paths.partitions_glob(name)}', hive_partitioning = true, "
                "union_by_name = true)"
            )
        with self.connect() as con:
            con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM {source}')
            if comment:
                con.execute(
                    f"COMMENT ON TABLE \"{name}\" IS '{comment.replace(chr(39), chr(39) * 2)}'"
                )
            row = con.execute(f'SELECT count(*) FROM "{name}"').fetchone()
        return int(row[0]) if row else 0
