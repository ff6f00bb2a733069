"""The warehouse (DuckDB, rebuildable from the lake): it converges on the lake by reloading only
the files whose version changed, found again by their folders' hive values."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa

from memorypack.fs import Location
from pipeline import tables
from pipeline.config import Paths
from pipeline.errors import UserError
from pipeline.storage.lake import Lake, file_identity
from pipeline.stores import store_of, store_of_all
from pipeline.stores.base import hive_values
from pipeline.stores.local import sql_quote

LOADED_FILES = "_lake_files"
_LOADED_COLUMNS = "(table_name VARCHAR, part VARCHAR, identity VARCHAR)"
# How long opening the warehouse waits for another process's connection to close (another step's
# short refresh) before the step fails in one line.
LOCK_WAIT_SECONDS = 5.0


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


# DuckDB's own memory (its buffer pool: 80 % of the machine by default) in the pipeline's DuckDB
# work, the warehouse and the analytics build; beyond it DuckDB spills to the home's work folder.
DUCKDB_MEMORY = "1GiB"
# duckdb 2.0 writes storage version 69 by default, which DuckDB 1.x clients (e.g. the 1.5 CLI)
# cannot open; analysts use any client (SPEC §6), so the files memorypack makes are written in a
# 1.x storage format (the analytics snapshot is a copy of one of them). A file keeps the format
# it was made in.
STORAGE_VERSION = "v1.4.0"


def duckdb_config(
    paths: Paths, memory: str = DUCKDB_MEMORY
) -> dict[str, str | bool | int | float | list[str]]:
    return {
        "memory_limit": memory,
        "temp_directory": str(paths.local / ".duckdb-tmp"),
        "storage_compatibility_version": STORAGE_VERSION,
    }


# Rows a loading warehouse with a row filter reads from the lake at a time (the filter's memory).
ROWS_AT_A_TIME = 250_000
# The column where a warehouse with a row filter keeps the digest (`_digest`) of each row as the
# lake had it: its rows are the filter's, so a rewritten partition's rows are matched by it.
DIGEST = "_row_digest"


class Warehouse:
    """The pipeline's own DuckDB file (single writer, SPEC §6): tables mirror lake tables.

    With `path` and `rows`, another file whose tables mirror the lake's rows as `rows` rewrites
    them (the analytics build's redacted base): loaded ROWS_AT_A_TIME rows at a time, and like the
    warehouse only where the lake changed, so a night filters only its new rows. Its tables have
    one more column, DIGEST. `where` (table → SQL over its columns) keeps only the lake rows where
    it holds (a tenant's rows of a table shared by every tenant)."""

    def __init__(
        self,
        paths: Paths,
        path: Path | None = None,
        rows: Callable[[pa.Table], pa.Table] | None = None,
        memory: str = DUCKDB_MEMORY,
        where: Mapping[str, str] | None = None,
    ) -> None:
        self.paths = paths
        self.path = path or paths.warehouse
        self.rows = rows
        self.memory = memory
        self.where = dict(where or {})

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection; raises a one-line `UserError` when another process holds the file."""
        self.paths.local.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                con = duckdb.connect(
                    str(self.path),
                    read_only=read_only,
                    config=duckdb_config(self.paths, self.memory),
                )
                break
            except duckdb.IOException as error:
                if "Could not set lock" not in str(error):
                    raise
                if time.monotonic() >= deadline:
                    raise UserError(_busy(self.path, error)) from None
                time.sleep(0.1)
        try:
            yield con
        finally:
            con.close()

    def refresh(self, name: str, lake: Lake, comment: str | None = None) -> int:
        """Make one warehouse table equal its lake table; returns its row count.

        The warehouse records which version of each lake file every table holds (`LOADED_FILES`:
        inode, size, mtime). A refresh reloads only what differs from the lake, whichever run
        wrote it: partitions added are loaded, rewritten ones (a tenant's file, an unpartitioned
        table's) merged, partitions the lake no longer has deleted, a table the lake no longer
        has dropped. So what a killed or blocked run wrote to the lake but not here is caught up
        by the next refresh, and a night does not re-read unchanged load dates. A table without a
        record or whose columns changed is rebuilt whole. Rows and record change in one
        transaction. Without `comment` the table keeps the one it has.
        """
        with self.connect() as con:
            con.execute(f"CREATE TABLE IF NOT EXISTS {LOADED_FILES} {_LOADED_COLUMNS}")
            return self._refresh(con, name, lake, comment)

    def converge(self, lake: Lake, comments: Mapping[str, str] | None = None) -> dict[str, int]:
        """Refresh every table of `comments` (name → comment) and every table the warehouse holds
        lake files of, then checkpoint (the file alone then holds everything, nothing waits in
        the WAL); returns table → rows."""
        comments = comments or {}
        with self.connect() as con:
            con.execute(f"CREATE TABLE IF NOT EXISTS {LOADED_FILES} {_LOADED_COLUMNS}")
            recorded = con.execute(f"SELECT DISTINCT table_name FROM {LOADED_FILES}").fetchall()
            names = sorted({row[0] for row in recorded} | set(comments))
            counts = {name: self._refresh(con, name, lake, comments.get(name)) for name in names}
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
        files: dict[str, Location],
        current: dict[str, str],
        loaded: dict[str, str],
        comment: str | None,
    ) -> None:
        partitioned = bool(current) and "" not in current
        # Rows of a partition are found again by its folder's hive values (an earlier layout's
        # record, without them, rebuilds the table); a table of one file is one partition.
        if loaded and (
            all(hive_values(key) for key in loaded)
            if partitioned
            else set(loaded) == set(current) == {""}
        ):
            changed = {key for key, identity in current.items() if loaded.get(key) != identity}
            gone = sorted(set(loaded) - set(current))
            added = sorted(changed - set(loaded))
            try:
                with self._writing(con):
                    if gone or added:  # an added partition's: rows a killed load left
                        where = " OR ".join(_matches(key) for key in gone + added)
                        con.execute(f'DELETE FROM "{name}" WHERE {where}')
                    for key in sorted(changed & set(loaded)):  # rewritten
                        self._merge(con, name, key, files[key], hive=partitioned)
                    if added:
                        self._insert(con, name, [files[k] for k in added], hive=True)
                    _record(con, name, current)
                    _comment(con, name, comment)
                return
            except (duckdb.Error, _Rebuild):  # the columns changed: rebuild the whole table
                pass
        if self.rows is not None:  # no transaction below: a crash leaves the table not loaded
            _record(con, name, {})
        with self._writing(con):
            if files:
                self._insert(con, name, list(files.values()), hive=partitioned, create=True)
                _comment(con, name, comment)
            else:
                con.execute(f'DROP TABLE IF EXISTS "{name}"')
            _record(con, name, current)

    def _merge(
        self, con: duckdb.DuckDBPyConnection, name: str, key: str, file: Location, hive: bool
    ) -> None:
        """Make a rewritten partition's rows its file's: the rows the file no longer holds are
        deleted, the rows it adds inserted, and a row it kept is left alone, not filtered again
        (a night rewrites each of a tenant's tables, and keeps most of their rows). Rows are
        told apart by their digest; a file with two rows of one digest replaces the partition."""
        where = _matches(key)
        columns = [c for c in _columns(con, name) if c != DIGEST]
        held = DIGEST if self.rows is not None else _digest(columns)
        with store_of(file).sql_source(con, [file], hive) as source:
            if set(_columns(con, f"SELECT * FROM {source}")) != set(columns):
                raise _Rebuild
            digest = _digest(columns)
            kept_rows = self.where.get(name, "TRUE")
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE _incoming AS SELECT {digest} AS d FROM {source}"
                f" WHERE {kept_rows}"
            )
            try:
                repeated = con.execute(
                    "SELECT count(*) > count(DISTINCT d) FROM _incoming"
                ).fetchall()
                if repeated[0][0]:
                    con.execute(f'DELETE FROM "{name}" WHERE {where}')
                    self._insert(con, name, [file], hive)
                    return
                con.execute(
                    f'DELETE FROM "{name}" WHERE {where} AND {held} NOT IN (SELECT d FROM _incoming)'
                )
                kept = f'SELECT {held} FROM "{name}" WHERE {where}'
                self._insert(con, name, [file], hive, only=f"{digest} NOT IN ({kept})")
            finally:
                con.execute("DROP TABLE IF EXISTS _incoming")

    @contextmanager
    def _writing(self, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
        """Rows and record change in one transaction; with a row filter, slice by slice instead
        (a transaction holds its new rows in memory: 5.5 GiB for the analytics build at 1M
        interactions), the record written last, so the next converge loads or merges again the
        partitions a crash left half done."""
        if self.rows is None:
            with _transaction(con):
                yield
        else:
            yield

    def _insert(
        self,
        con: duckdb.DuckDBPyConnection,
        name: str,
        files: list[Location],
        hive: bool,
        create: bool = False,
        only: str = "TRUE",
    ) -> None:
        """Add these lake files' rows (`only` those where this SQL holds) to table `name`
        (`create`: as a new table of their columns), through the row filter if there is one:
        streamed from a second connection, one slice at a time, each row's digest beside it."""
        only = f"({only}) AND ({self.where.get(name, 'TRUE')})"
        if self.rows is None:
            with store_of_all(files).sql_source(con, files, hive) as source:
                rows = f"SELECT * FROM {source} WHERE {only}"
                if create:
                    con.execute(f'CREATE OR REPLACE TABLE "{name}" AS {rows}')
                else:
                    con.execute(f'INSERT INTO "{name}" BY NAME {rows}')
            return
        with con.cursor() as reader, store_of_all(files).sql_source(reader, files, hive) as source:
            digest = _digest(_columns(reader, f"SELECT * FROM {source}"))
            query = f"SELECT *, {digest} AS {DIGEST} FROM {source} WHERE {only}"
            batches = reader.sql(query).to_arrow_reader(ROWS_AT_A_TIME)
            if create:
                con.register("_rows", pa.Table.from_batches([], batches.schema))
                con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _rows')
                con.unregister("_rows")
            for batch in batches:
                rows = pa.Table.from_batches([batch])
                digests = rows[DIGEST]
                rows = self.rows(rows.drop_columns([DIGEST])).append_column(DIGEST, digests)
                con.register("_rows", rows)
                con.execute(f'INSERT INTO "{name}" BY NAME SELECT * FROM _rows')
                con.unregister("_rows")


class _Rebuild(Exception):
    """A partition's file no longer has its table's columns: the table is loaded whole."""


def _columns(con: duckdb.DuckDBPyConnection, relation: str) -> list[str]:
    """The columns of a table (by name) or of a query's result, in order."""
    query = relation if relation.startswith("SELECT") else f'SELECT * FROM "{relation}"'
    return [row[0] for row in con.execute(f"DESCRIBE {query}").fetchall()]


def _digest(columns: Sequence[str]) -> str:
    """SQL for a row's digest: DuckDB's 64-bit hash of its values in column-name order. A new row
    that shares it with an old one leaves the old one in its place: with 10 tenants whose five
    largest tables hold 400,000 rows and gain 20,000 a night, about once in 50 million nights
    (a row of the analyst snapshot, never of a pack). MD5 of the rows' JSON, 128 bits, made
    the analytics build at 250,000 interactions twice as slow (13.6 s against 6.9 s)."""
    fields = ", ".join(f'"{c}" := "{c}"' for c in sorted(columns))
    return f"hash(struct_pack({fields}))"


def _matches(key: str) -> str:
    """SQL that is true for the rows of the partition in folder `key` ("": every row)."""
    if not key:
        return "TRUE"
    return (
        "("
        + " AND ".join(
            f'CAST("{column}" AS VARCHAR) = {sql_quote(value)}'
            for column, value in hive_values(key).items()
        )
        + ")"
    )


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
    comment_columns(con, name)


def comment_columns(con: duckdb.DuckDBPyConnection, name: str) -> None:
    """The registry's description of each column of lake table `name` that the DuckDB table holds,
    as its column comment."""
    declared = tables.TABLES.get(name)
    if declared is None:
        return
    query = "SELECT column_name FROM duckdb_columns() WHERE table_name = ?"
    present = {row[0] for row in con.execute(query, [name]).fetchall()}
    for column in declared.columns:
        text = declared.description(column)
        if text and column in present:
            con.execute(f'COMMENT ON COLUMN "{name}"."{column}" IS {sql_quote(text)}')
