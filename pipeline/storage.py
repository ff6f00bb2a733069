"""The lake (Parquet, the source of truth) and the warehouse (DuckDB, rebuildable from the lake)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from pipeline.config import PARTITION_COLUMNS, Paths

# Beside a derived partition: which version of its source partition it was built from.
SOURCE_MARKER = "_source"


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
        self,
        name: str,
        key: str,
        frame: pl.DataFrame,
        column: str | None = None,
        derived_from: str | None = None,
    ) -> Path:
        """Write one partition; `derived_from` names the table whose same partition it was built
        from, so that `stale_partitions` knows when it must be rebuilt."""
        path = write_parquet_atomic(frame, self.paths.partition(name, key, column))
        if derived_from is not None:
            (path.parent / SOURCE_MARKER).write_text(self._identity(derived_from, key))
        return path

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

    def _identity(self, source: str, key: str) -> str:
        # Atomic writes give every version of a file a new inode: (inode, size, mtime) names it.
        stat = self.paths.partition(source, key).stat()
        return f"{source}:{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"

    def stale_partitions(self, source: str, targets: Sequence[str]) -> list[str]:
        """Keys of `source` partitions that a target table lacks, or built from another version of
        that source partition (see `write_partition(derived_from=…)`): what to rebuild."""
        stale = []
        for key in self.partition_keys(source):
            identity = self._identity(source, key)
            for target in targets:
                marker = self.paths.partition(target, key).parent / SOURCE_MARKER
                if not marker.exists() or marker.read_text() != identity:
                    stale.append(key)
                    break
        return stale

    def drop(self, name: str, keys: Sequence[str] = ()) -> None:
        """Remove the given partitions of a table, or (no keys) its single-file form."""
        if not keys:
            self.paths.table(name).unlink(missing_ok=True)
        for key in keys:
            shutil.rmtree(self.paths.partition(name, key).parent, ignore_errors=True)


def _source(paths: Paths, name: str) -> str:
    """DuckDB's reader of one whole lake table (all partitions of a partitioned one)."""
    single = paths.table(name)
    if single.exists():
        return f"read_parquet('{single}')"
    return (
        f"read_parquet('{paths.partitions_glob(name)}', hive_partitioning = true, "
        "union_by_name = true)"
    )


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

    def refresh(
        self, name: str, lake: Lake, comment: str | None = None, keys: list[str] | None = None
    ) -> int:
        """(Re)load one warehouse table from its lake files; returns the row count.

        With `keys` (partitions just rewritten), only those partitions are replaced when the
        table already exists with the same columns: the nightly run stops re-reading every past
        load date. Anything else (first run, a changed schema) rebuilds the whole table.
        """
        with self.connect() as con:
            if not (keys and self._replace_partitions(con, name, keys)):
                con.execute(
                    f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM {_source(self.paths, name)}'
                )
            if comment:
                con.execute(
                    f"COMMENT ON TABLE \"{name}\" IS '{comment.replace(chr(39), chr(39) * 2)}'"
                )
            row = con.execute(f'SELECT count(*) FROM "{name}"').fetchone()
        return int(row[0]) if row else 0

    def _replace_partitions(
        self, con: duckdb.DuckDBPyConnection, name: str, keys: list[str]
    ) -> bool:
        column = PARTITION_COLUMNS.get(name, "load_date")
        files = [self.paths.partition(name, key) for key in keys]
        if not all(f.exists() for f in files):
            return False
        listed = ", ".join(f"'{f}'" for f in files)
        source = f"read_parquet([{listed}], hive_partitioning = true, union_by_name = true)"
        quoted = ", ".join(f"'{key}'" for key in keys)
        try:
            con.execute("BEGIN")
            con.execute(f'DELETE FROM "{name}" WHERE CAST("{column}" AS VARCHAR) IN ({quoted})')
            con.execute(f'INSERT INTO "{name}" BY NAME SELECT * FROM {source}')
            con.execute("COMMIT")
        except duckdb.Error:  # no such table yet, or its columns changed: rebuild instead
            con.execute("ROLLBACK")
            return False
        return True
