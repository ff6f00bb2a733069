"""The lake (Parquet, the source of truth) and the warehouse (DuckDB, rebuildable from the lake).

The lake is a local folder or an object store prefix (`s3://bucket/prefix/lake`): every file
operation goes through the helpers below, which take a `memorypack.fs.Location` (a `Path` or an
`ObjectPath` over `pyarrow.fs`). A write is always one whole file: a rename on a local disk, one
PUT on an object store, so a reader sees the old version or the new, never half of one."""

from __future__ import annotations

import io
import os
import re
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import date
from pathlib import Path

import duckdb
import polars as pl

from memorypack.fs import Location, ObjectPath
from pipeline import tables
from pipeline.config import PARTITION_COLUMNS, TENANT_COLUMN, Paths
from pipeline.errors import UserError

# Beside a source partition: which version of it each consumer (e.g. "typed") was built from.
DERIVED_MARKER = "_derived_by_{consumer}"


def write_parquet_atomic(frame: pl.DataFrame, path: Location) -> Location:
    """Write to a temporary file in the same folder, then rename: readers never see half a file.
    On an object store: the whole file in memory, then one PUT (atomic per object)."""
    if isinstance(path, ObjectPath):
        buffer = io.BytesIO()
        frame.write_parquet(buffer, compression="zstd", statistics=True)
        path.write_bytes(buffer.getvalue())
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    frame.write_parquet(tmp, compression="zstd", statistics=True)
    os.replace(tmp, path)
    return path


def write_text_atomic(path: Location, text: str) -> None:
    """A small text file (a marker), written whole."""
    if isinstance(path, ObjectPath):
        path.write_text(text)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def read_file(
    path: Location, hive: bool = False, columns: Sequence[str] | None = None
) -> pl.DataFrame:
    """One Parquet file of the lake (`hive`: the folders' `name=value` columns it lacks added;
    `columns`: only these are read)."""
    if isinstance(path, ObjectPath):
        import pyarrow.parquet as pq

        with path.filesystem.open_input_file(path.key) as source:
            table = pq.read_table(source, columns=list(columns) if columns else None)
        frame = pl.DataFrame(pl.from_arrow(table))
        return _with_hive(frame, path.key) if hive else frame
    return pl.read_parquet(path, hive_partitioning=hive, columns=list(columns) if columns else None)


def scan_file(path: Location, hive: bool = False) -> pl.LazyFrame:
    """A lazy scan of one lake file (an object is read whole: object stores have no mmap)."""
    if isinstance(path, ObjectPath):
        return read_file(path, hive).lazy()
    return pl.scan_parquet(path, hive_partitioning=hive)


def scan_files(paths: Sequence[Location], columns: Sequence[str] | None = None) -> pl.LazyFrame:
    """Several files of one table as one scan (no hive columns; same columns in each)."""
    local = [p for p in paths if isinstance(p, Path)]
    if len(local) == len(paths):
        scan = pl.scan_parquet(local)
        return scan.select(columns) if columns else scan
    frames = [read_file(p, columns=columns) for p in paths]
    return pl.concat(frames, how="diagonal_relaxed").lazy()


def _hive_value(text: str) -> pl.Expr:
    """A folder's value typed as polars types it when it reads hive folders (Date, Int64, String),
    so a table reads the same from a local lake and from an object store."""
    try:
        return pl.lit(date.fromisoformat(text), dtype=pl.Date)
    except ValueError:
        pass
    if re.fullmatch(r"-?\d+", text):
        return pl.lit(int(text), dtype=pl.Int64)
    return pl.lit(text, dtype=pl.String)


def _with_hive(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    values = hive_values(key.rsplit("/", 1)[0])
    missing = [_hive_value(v).alias(c) for c, v in values.items() if c not in frame.columns]
    return frame.with_columns(missing) if missing else frame


def remove(path: Location) -> None:
    """A file or a whole folder (a prefix, on an object store); nothing when it is not there."""
    if isinstance(path, ObjectPath):
        if path.is_file():
            path.unlink(missing_ok=True)
        else:
            path.remove_tree()
    elif path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def file_identity(path: Location) -> str:
    """Names one version of a lake file: atomic writes give every version a new inode, so
    (inode, size, mtime) changes whenever the file is rewritten; an object's ETag (its content
    hash) changes whenever its bytes do."""
    if isinstance(path, ObjectPath):
        return path.etag()
    stat = path.stat()
    return f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"


def hive_values(key: str) -> dict[str, str]:
    """`tenant_id=acme/load_date=2026-11-01` → {"tenant_id": "acme", "load_date": "2026-11-01"}."""
    return dict(part.split("=", 1) for part in key.split("/") if "=" in part)


class Lake:
    """Named Parquet tables under `<home>/lake`, seen as `paths` sees them: a tenant's view reads
    and writes only that tenant's folder of each table laid out by tenant; the home's view reads
    every tenant's rows (the tenant restored from the folder name when a file lacks it)."""

    def __init__(self, paths: Paths) -> None:
        self.paths = paths

    def write(self, name: str, frame: pl.DataFrame) -> Location:
        """Write a whole table; a frame that does not match its declaration in pipeline.tables
        (a column missing, undeclared or of another type) is refused, naming table and column."""
        return write_parquet_atomic(tables.conform(name, frame), self.paths.table(name))

    def write_partition(
        self, name: str, key: str, frame: pl.DataFrame, column: str | None = None
    ) -> Location:
        """Write one partition, checked like `write`."""
        return write_parquet_atomic(
            tables.conform(name, frame), self.paths.partition(name, key, column)
        )

    def exists(self, name: str) -> bool:
        return bool(self.files(name))

    def read(self, name: str) -> pl.LazyFrame:
        """A whole table, or all partitions of a partitioned one (hive columns restored), with
        exactly its declared columns and types (`tables.as_declared`)."""
        files = self.files(name)
        if not files:
            raise FileNotFoundError(f"lake table {name!r} has not been materialized yet")
        if list(files) == [""]:
            return tables.as_declared(name, scan_file(files[""]))
        # One scan per file, unified by name: each tenant's file was written on its own, so a
        # column that is all null in one has no type there.
        scans = [scan_file(path, hive=True) for path in files.values()]
        frame = scans[0] if len(scans) == 1 else pl.concat(scans, how="diagonal_relaxed")
        return tables.as_declared(name, frame)

    def read_or_empty(
        self, name: str, schema: Mapping[str, pl.DataType] | None = None
    ) -> pl.LazyFrame:
        """`read`, or no rows with the declared columns before the table is written (`schema`,
        once every caller's own copy of the columns, is no longer needed)."""
        try:
            return self.read(name)
        except FileNotFoundError:
            return pl.LazyFrame(schema=tables.schema(name))

    def files(self, name: str) -> dict[str, Location]:
        """The files `read` reads: their folder below the table's (e.g. `load_date=2026-11-01` or
        `tenant_id=acme`, "" for the table's own data.parquet) → file."""
        root, base = self.paths.table_root(name), self.paths.lake / name
        if isinstance(root, ObjectPath) and isinstance(base, ObjectPath):
            objects = [p for p in root.walk_files() if p.name == "data.parquet"]
            return {p.parent.relative_to(base): p for p in sorted(objects, key=lambda p: p.key)}
        assert isinstance(root, Path) and isinstance(base, Path)
        found = sorted(root.rglob("data.parquet")) if root.is_dir() else []
        return {path.parent.relative_to(base).as_posix().strip("."): path for path in found}

    def partition_keys(self, name: str) -> list[str]:
        """The load dates a partitioned table has (of every tenant, in the home's view)."""
        column = PARTITION_COLUMNS.get(name, "load_date")
        keys = {hive_values(key).get(column) for key in self.files(name)}
        return sorted(k for k in keys if k is not None)

    def tenants(self, name: str) -> list[str]:
        """The tenants with a folder in a table laid out by tenant."""
        root = self.paths.lake / name
        prefix = f"{TENANT_COLUMN}="
        if isinstance(root, ObjectPath):  # one listing; prefixes exist only while they hold objects
            names = {p.name for p in root.iterdir()}
            return sorted(n[len(prefix) :] for n in names if n.startswith(prefix))
        found = root.glob(f"{prefix}*") if root.is_dir() else []
        return sorted(p.name[len(prefix) :] for p in found if p.is_dir())

    def _marker(self, source: str, key: str, consumer: str) -> Location:
        return self.paths.partition(source, key).parent / DERIVED_MARKER.format(consumer=consumer)

    def mark_derived(self, source: str, key: str, consumer: str) -> None:
        """Record that `consumer` has built its tables from this version of the partition."""
        write_text_atomic(
            self._marker(source, key, consumer), file_identity(self.paths.partition(source, key))
        )

    def stale_partitions(self, source: str, consumer: str) -> list[str]:
        """Keys of `source` partitions that `consumer` has not built from their current version
        (written or rewritten since `mark_derived`): what to rebuild."""
        stale = []
        for key in self.partition_keys(source):
            marker = self._marker(source, key, consumer)
            current = file_identity(self.paths.partition(source, key))
            if not marker.exists() or marker.read_text() != current:
                stale.append(key)
        return stale

    def drop(self, name: str, keys: Sequence[str] = ()) -> None:
        """Remove the given partitions of a table, or (no keys) its single-file form."""
        if not keys:
            self.paths.table(name).unlink(missing_ok=True)
        for key in keys:
            remove(self.paths.partition(name, key).parent)


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


@contextmanager
def lake_source(
    con: duckdb.DuckDBPyConnection, files: Sequence[Location], hive: bool
) -> Iterator[str]:
    """SQL naming exactly these lake files' rows. Local files: DuckDB reads them itself. Objects:
    read through pyarrow (DuckDB's own S3 reader is an extension it would download) and handed
    to DuckDB as an Arrow table for the statement's lifetime."""
    if not any(isinstance(f, ObjectPath) for f in files):
        yield parquet_source([f for f in files if isinstance(f, Path)], hive)
        return
    frames = [read_file(f, hive=hive) for f in files]
    table = pl.concat(frames, how="diagonal_relaxed").to_arrow()
    view = f"_lake_objects_{uuid.uuid4().hex[:8]}"
    con.register(view, table)
    try:
        yield view
    finally:
        con.unregister(view)


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
        self.paths.local.mkdir(parents=True, exist_ok=True)
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
        # record, without them, rebuilds the table).
        if partitioned and loaded and all(hive_values(key) for key in loaded):
            changed = sorted(
                key for key, identity in current.items() if loaded.get(key) != identity
            )
            gone = sorted(set(loaded) - set(current))
            where = " OR ".join(_matches(key) for key in changed + gone)
            try:
                with _transaction(con):
                    con.execute(f'DELETE FROM "{name}" WHERE {where}')
                    if changed:
                        with lake_source(con, [files[k] for k in changed], hive=True) as source:
                            con.execute(f'INSERT INTO "{name}" BY NAME SELECT * FROM {source}')
                    _record(con, name, current)
                    _comment(con, name, comment)
                return
            except duckdb.Error:  # the columns changed: rebuild the whole table instead
                pass
        with _transaction(con):
            if files:
                with lake_source(con, list(files.values()), hive=partitioned) as source:
                    con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM {source}')
                _comment(con, name, comment)
            else:
                con.execute(f'DROP TABLE IF EXISTS "{name}"')
            _record(con, name, current)


def _matches(key: str) -> str:
    """SQL that is true for the rows of the partition in folder `key`."""
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
