"""The lake (Parquet, the source of truth) and the warehouse (DuckDB, rebuildable from the lake)."""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb
import polars as pl

from pipeline.config import PARTITION_COLUMNS, Paths
from pipeline.errors import UserError

# Beside a derived partition: which version of its source partition it was built from.
SOURCE_MARKER = "_source"


def write_parquet_atomic(frame: pl.DataFrame, path: Path) -> Path:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    frame.write_parquet(tmp, compression="zstd", statistics=True)
    os.replace(tmp, path)
    return path


def file_identity(path: Path) -> str:
    """Names one version of a lake file: atomic writes give every version a new inode, so
    (inode, size, mtime) changes whenever the file is rewritten."""
    stat = path.stat()
    return f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"


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

    def files(self, name: str) -> dict[str, Path]:
        """The files `read` would read: partition key → file, or "" → the single file."""
        single = self.paths.table(name)
        if single.exists():
            return {"": single}
        return {key: self.paths.partition(name, key) for key in self.partition_keys(name)}

    def _identity(self, source: str, key: str) -> str:
        return f"{source}:{file_identity(self.paths.partition(source, key))}"

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


# Per warehouse table and lake file (partition key, "" for an unpartitioned table): the identity of
# the file version the table holds. Bookkeeping, not a lake table: analysts' snapshots leave it out.
LOADED_FILES = "_lake_files"
_LOADED_COLUMNS = "(table_name VARCHAR, part VARCHAR, identity VARCHAR)"
# How long opening the warehouse waits for another process's connection to close (another step's
# short refresh) before the step fails in one line.
LOCK_WAIT_SECONDS = 5.0


def sql_quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def parquet_source(files: Sequence[Path], hive: bool) -> str:
    """DuckDB's reader of exactly these lake files (a partition's key restored from its folder)."""
    listed = ", ".join(sql_quote(str(f)) for f in files)
    return (
        f"read_parquet([{listed}], hive_partitioning = {str(hive).lower()}, union_by_name = true)"
    )


def _busy(path: Path, error: duckdb.Error) -> str:
    """One line for a warehouse another process holds: who holds it and what to do."""
    holder = re.search(r"held in (.+?) \(PID (\d+)\)", str(error))
    who = f"pid {holder[2]} ({Path(holder[1]).name})" if holder else "another process"
    return (
        f"warehouse {path} is held open by {who}: close that connection and run again"
        " (analysts: query analytics.duckdb, which never blocks a run)"
    )


@contextmanager
def _transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    con.execute("BEGIN")
    try:
        yield
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


class Warehouse:
    """The pipeline's own DuckDB file (single writer, SPEC §6): tables mirror lake tables."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection; raises a one-line `UserError` when another process holds the file."""
        self.paths.home.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                con = duckdb.connect(str(self.paths.warehouse), read_only=read_only)
                break
            except duckdb.IOException as error:
                if "Could not set lock" not in str(error):
                    raise
                if time.monotonic() >= deadline:
                    raise UserError(_busy(self.paths.warehouse, error)) from None
                time.sleep(0.1)
        try:
            yield con
        finally:
            con.close()

    def refresh(self, name: str, lake: Lake, comment: str | None = None) -> int:
        """Make one warehouse table equal its lake table; returns its row count.

        The warehouse records which version of each lake file every table holds (`LOADED_FILES`:
        inode, size, mtime). A refresh reloads only what differs from the lake, whichever run
        wrote it: partitions added or rewritten are replaced, partitions the lake no longer has
        are deleted, an unpartitioned table is rebuilt when its file changed, a table the lake no
        longer has is dropped. So what a killed or blocked run wrote to the lake but not here is
        caught up by the next refresh, and a night does not re-read unchanged load dates. A table
        without a record or whose columns changed is rebuilt whole. Rows and record change in one
        transaction. Without `comment` the table keeps the one it has.
        """
        with self.connect() as con:
            con.execute(f"CREATE TABLE IF NOT EXISTS {LOADED_FILES} {_LOADED_COLUMNS}")
            return self._refresh(con, name, lake, comment)

    def converge(self, lake: Lake) -> dict[str, int]:
        """Refresh every table the warehouse holds lake files of, then checkpoint (the file alone
        then holds everything, nothing waits in the WAL); returns table → rows."""
        with self.connect() as con:
            con.execute(f"CREATE TABLE IF NOT EXISTS {LOADED_FILES} {_LOADED_COLUMNS}")
            names = [
                row[0]
                for row in con.execute(
                    f"SELECT DISTINCT table_name FROM {LOADED_FILES} ORDER BY 1"
                ).fetchall()
            ]
            counts = {name: self._refresh(con, name, lake) for name in names}
            con.execute("CHECKPOINT")
        return counts

    def _refresh(
        self, con: duckdb.DuckDBPyConnection, name: str, lake: Lake, comment: str | None = None
    ) -> int:
        files = lake.files(name)
        current = {key: file_identity(path) for key, path in files.items()}
        table = con.execute(
            "SELECT comment FROM duckdb_tables() WHERE schema_name = 'main' AND table_name = ?",
            [name],
        ).fetchone()
        loaded: dict[str, str] = {}
        if table is not None:
            query = f"SELECT part, identity FROM {LOADED_FILES} WHERE table_name = ?"
            loaded = dict(con.execute(query, [name]).fetchall())
        previous = table[0] if table else None
        comment = comment or previous
        if table is None or not loaded or current != loaded:
            self._load(con, name, files, current, loaded, comment)
        elif comment != previous:
            _comment(con, name, comment)
        if not files:
            return 0
        row = con.execute(f'SELECT count(*) FROM "{name}"').fetchone()
        return int(row[0]) if row else 0

    def _load(
        self,
        con: duckdb.DuckDBPyConnection,
        name: str,
        files: dict[str, Path],
        current: dict[str, str],
        loaded: dict[str, str],
        comment: str | None,
    ) -> None:
        partitioned = bool(current) and "" not in current
        if partitioned and loaded and "" not in loaded:
            changed = sorted(
                key for key, identity in current.items() if loaded.get(key) != identity
            )
            gone = sorted(set(loaded) - set(current))
            column = PARTITION_COLUMNS.get(name, "load_date")
            keys = ", ".join(sql_quote(key) for key in changed + gone)
            try:
                with _transaction(con):
                    con.execute(
                        f'DELETE FROM "{name}" WHERE CAST("{column}" AS VARCHAR) IN ({keys})'
                    )
                    if changed:
                        source = parquet_source([files[key] for key in changed], hive=True)
                        con.execute(f'INSERT INTO "{name}" BY NAME SELECT * FROM {source}')
                    _record(con, name, current)
                    _comment(con, name, comment)
                return
            except duckdb.Error:  # the columns changed: rebuild the whole table instead
                pass
        with _transaction(con):
            if files:
                source = parquet_source(list(files.values()), hive=partitioned)
                con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM {source}')
                _comment(con, name, comment)
            else:
                con.execute(f'DROP TABLE IF EXISTS "{name}"')
            _record(con, name, current)


def _record(con: duckdb.DuckDBPyConnection, name: str, current: dict[str, str]) -> None:
    """Which lake file versions table `name` now holds."""
    con.execute(f"DELETE FROM {LOADED_FILES} WHERE table_name = ?", [name])
    if current:
        con.execute(
            f"INSERT INTO {LOADED_FILES} SELECT ?, unnest(?::VARCHAR[]), unnest(?::VARCHAR[])",
            [name, list(current), list(current.values())],
        )


def _comment(con: duckdb.DuckDBPyConnection, name: str, comment: str | None) -> None:
    if comment:
        con.execute(f'COMMENT ON TABLE "{name}" IS {sql_quote(comment)}')
