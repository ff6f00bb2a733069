"""The lake (Parquet, the source of truth); the warehouse built from it is pipeline/storage/warehouse.py.

The lake is a local folder or an object store prefix (`s3://bucket/prefix/lake`): every file
operation goes through the home's store (`pipeline.stores`). A write is always one whole file: a
rename on a local disk, one PUT on an object store, so a reader sees the old version or the new,
never half of one."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from memorypack.fs import Location
from pipeline import tables
from pipeline.config import TENANT_COLUMN, Paths
from pipeline.stores import store_of, store_of_all
from pipeline.stores.base import below, hive_values
from pipeline.tables import PARTITION_COLUMNS

# Folder values are read as their declared types (HIVE_TYPES): a tenant `007` or `2026-1-1` stays
# that text. (Hive's null, `__HIVE_DEFAULT_PARTITION__`, is no tenant id: ingest.tenant_ids.)

# Beside a source partition: which version of it each consumer (e.g. "typed") was built from.
DERIVED_MARKER = "_derived_by_{consumer}"


def write_parquet_atomic(frame: pl.DataFrame | pl.LazyFrame, path: Location) -> Location:
    """Write a whole Parquet file (a LazyFrame is streamed into it where the store allows):
    readers never see half a file."""
    store_of(path).write_parquet(frame, path)
    return path


def write_text_atomic(path: Location, text: str) -> None:
    """A small text file (a marker), written whole."""
    store_of(path).write_bytes(path, text.encode())


def read_file(
    path: Location, hive: bool = False, columns: Sequence[str] | None = None
) -> pl.DataFrame:
    """One Parquet file of the lake (`hive`: the folders' `name=value` columns it lacks added;
    `columns`: only these are read)."""
    return store_of(path).read_parquet(path, hive, columns)


def scan_file(path: Location, hive: bool = False) -> pl.LazyFrame:
    """A lazy scan of one lake file (an object is read whole: object stores have no mmap)."""
    return store_of(path).scan_parquet(path, hive)


def scan_files(paths: Sequence[Location], columns: Sequence[str] | None = None) -> pl.LazyFrame:
    """Several files of one table as one scan (no hive columns; same columns in each)."""
    return store_of_all(paths).scan_parquet_files(paths, columns)


def remove(path: Location) -> None:
    """A file or a whole folder (a prefix, on an object store); nothing when it is not there."""
    store_of(path).remove(path)


def file_identity(path: Location) -> str:
    """Names one version of a lake file: it changes whenever the file is rewritten (a new inode
    on a local disk, a new ETag on an object store)."""
    return store_of(path).identity(path)


def parquet_files(root: Location, pattern: str = "**/*.parquet") -> list[tuple[str, Location]]:
    """(first folder below `root`, file) of every Parquet file under `root` matching `pattern`, on
    disk or on a store, sorted; hidden (temporary) files are left out. Over a lake: (table, file)."""
    found: list[Location] = list(root.glob(pattern)) if root.exists() else []
    base = str(root).rstrip("/") + "/"  # a store's URL or a folder's path: both use "/"
    files = [
        (str(path)[len(base) :].split("/")[0], path)
        for path in found
        if not path.name.startswith(".") and path.name.endswith(".parquet")
    ]
    return sorted(files, key=lambda item: str(item[1]))


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
        found = store_of(root).files(root, "data.parquet")
        return {below(path.parent, base): path for path in found}

    def partition_keys(self, name: str) -> list[str]:
        """The load dates a partitioned table has (of every tenant, in the home's view)."""
        column = PARTITION_COLUMNS.get(name, "load_date")
        keys = {hive_values(key).get(column) for key in self.files(name)}
        return sorted(k for k in keys if k is not None)

    def tenants(self, name: str) -> list[str]:
        """The tenants with a folder in a table laid out by tenant."""
        root = self.paths.lake / name
        prefix = f"{TENANT_COLUMN}="
        names = store_of(root).folders(root)
        return sorted(n[len(prefix) :] for n in names if n.startswith(prefix))

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
