"""The object-store backend (`s3://bucket/prefix`, any S3-compatible store): a write is one PUT,
which a reader sees whole or not at all; there is no rename and no folder, so what the local
backend does by renaming it does by order.

A folder goes live object by object with a marker object last (a pack version: data, manifest,
seal), is read back and checked, and counts as whole only once its marker is there; a delete
removes the marker first. A small file swapped in place (LATEST) is a compare-and-swap where the
store supports conditional writes (S3, SeaweedFS, MinIO, R2, GCS): PUT with `If-Match` the ETag
read (`If-None-Match: *` when there was none); a 412 means another writer came first. pyarrow's
S3 client sends no conditional headers, so this one request goes through boto3. A store that
answers 501 to the condition gets a plain PUT; one writer per tenant is then kept by the lock on
this host and, across hosts, by the run queue (at most one run per tenant at a time)."""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import io
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from memorypack.environment import s3_settings
from memorypack.fs import Location, ObjectPath
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.stores.base import Check, Hook, Store, hive_values, nothing
from pipeline.stores.disk import step_done

if TYPE_CHECKING:
    import duckdb
    import polars as pl

LOCKS_FOLDER = "memorypack-publish-locks"


@lru_cache(maxsize=8)
def _s3_client(endpoint: str | None, region: str) -> Any:
    """A boto3 client for the one request pyarrow cannot send (credentials: the AWS environment)."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name=region)


def _bucket_key(path: Location) -> tuple[str, str]:
    bucket, _, key = cast(ObjectPath, path).key.partition("/")
    return bucket, key


def _hive_value(column: str, text: str) -> pl.Expr:
    """A folder's value as its column's declared type (`HIVE_TYPES`), as polars reads a local
    lake's folders, so a table reads the same from a local lake and from an object store."""
    import polars as pl

    from pipeline.tables import HIVE_TYPES

    kind = HIVE_TYPES.get(column, pl.String())
    if kind == pl.Date():
        return pl.lit(date.fromisoformat(text), dtype=pl.Date)
    return pl.lit(text, dtype=pl.String).cast(kind)


def _with_hive(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    values = hive_values(key.rsplit("/", 1)[0])
    missing = [_hive_value(c, v).alias(c) for c, v in values.items() if c not in frame.columns]
    return frame.with_columns(missing) if missing else frame


class ObjectStore(Store):
    """Locations are `memorypack.fs.ObjectPath`s (a key in a bucket, over `pyarrow.fs`)."""

    def as_home(self, where: Location) -> Location:
        if "/" not in cast(ObjectPath, where).key:
            raise UserError(f"home {where} names a bucket only: use s3://bucket/prefix")
        return where

    def work_folder(self, home: Location) -> Path:
        """MEMORYPACK_LOCAL_DIR, else `<user cache>/memorypack/<bucket>-<hash of the home URL>`."""
        settings = Settings.from_env()
        if settings.local_dir:
            return Path(settings.local_dir).resolve()
        cache = Path(settings.cache_home or Path.home() / ".cache")
        digest = hashlib.sha256(str(home).encode()).hexdigest()[:12]
        return (cache / "memorypack" / f"{cast(ObjectPath, home).bucket}-{digest}").resolve()

    def write_bytes(self, path: Location, data: bytes) -> None:
        path.write_bytes(data)

    def write_parquet(self, frame: pl.DataFrame | pl.LazyFrame, path: Location) -> None:
        import polars as pl

        buffer = io.BytesIO()
        frame = frame.collect() if isinstance(frame, pl.LazyFrame) else frame
        frame.write_parquet(buffer, compression="zstd", statistics=True)
        path.write_bytes(buffer.getvalue())

    def write_once(self, path: Location, data: bytes) -> None:
        path.mkdir(parents=True, exist_ok=True)  # the bucket, where the store allows it
        self.write_if(path, data, None)  # False: another writer made it first

    def copy_in(self, source: Path, path: Location) -> None:
        cast(ObjectPath, path).upload(source)

    def read_parquet(
        self, path: Location, hive: bool = False, columns: Sequence[str] | None = None
    ) -> pl.DataFrame:
        import polars as pl
        import pyarrow.parquet as pq

        obj = cast(ObjectPath, path)
        with obj.filesystem.open_input_file(obj.key) as source:
            table = pq.read_table(source, columns=list(columns) if columns else None)
        frame = pl.DataFrame(pl.from_arrow(table))
        return _with_hive(frame, obj.key) if hive else frame

    def scan_parquet(self, path: Location, hive: bool = False) -> pl.LazyFrame:
        return self.read_parquet(path, hive).lazy()  # object stores have no mmap: read whole

    def scan_parquet_files(
        self, paths: Sequence[Location], columns: Sequence[str] | None = None
    ) -> pl.LazyFrame:
        import polars as pl

        frames = [self.read_parquet(p, columns=columns) for p in paths]
        return pl.concat(frames, how="diagonal_relaxed").lazy()

    @contextmanager
    def sql_source(
        self, con: duckdb.DuckDBPyConnection, files: Sequence[Location], hive: bool
    ) -> Iterator[str]:
        # Read through pyarrow (DuckDB's own S3 reader is an extension it would download) and
        # handed to DuckDB as an Arrow table for the statement's lifetime.
        import polars as pl

        frames = [self.read_parquet(f, hive=hive) for f in files]
        table = pl.concat(frames, how="diagonal_relaxed").to_arrow()
        view = f"_lake_objects_{uuid.uuid4().hex[:8]}"
        con.register(view, table)
        try:
            yield view
        finally:
            con.unregister(view)

    def identity(self, path: Location) -> str:
        return cast(ObjectPath, path).etag()  # the content hash: changes whenever the bytes do

    def remove(self, path: Location) -> None:
        if path.is_file():
            path.unlink(missing_ok=True)
        else:
            cast(ObjectPath, path).remove_tree()

    def files(self, root: Location, name: str = "*") -> list[Location]:
        found = [
            p for p in cast(ObjectPath, root).walk_files() if fnmatch.fnmatchcase(p.name, name)
        ]
        return sorted(found, key=str)

    def folders(self, root: Location) -> list[str]:
        import pyarrow.fs as pafs

        # One listing (its entries' kinds included): a prefix exists only while it holds objects.
        obj = cast(ObjectPath, root)
        listing = pafs.FileSelector(obj.key, recursive=False, allow_not_found=True)
        infos = obj.filesystem.get_file_info(listing)
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)

    @contextmanager
    def local_copy(self, folder: Location) -> Iterator[Path]:
        with tempfile.TemporaryDirectory(prefix="memorypack-copy-") as tmp:
            local = Path(tmp) / folder.parent.name / folder.name
            local.mkdir(parents=True)
            for child in folder.iterdir():
                if child.is_file():
                    (local / child.name).write_bytes(child.read_bytes())
            yield local

    def lock_file(self, folder: Location) -> Path:
        """One lock file per URL on this host, in the temporary folder."""
        locks = Path(tempfile.gettempdir()) / LOCKS_FOLDER
        locks.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(str(folder).encode()).hexdigest()[:24]
        return locks / f"{folder.name}-{digest}.lock"

    def staging(self, folder: Location, scratch: Callable[[], Path]) -> Path:
        local = scratch() / folder.name
        local.mkdir(exist_ok=True)
        return local

    def put_folder(self, staged: Path, final: Location, last: Sequence[str], check: Check) -> None:
        names = sorted(p.name for p in staged.iterdir() if p.name not in last)
        try:
            for name in [*names, *last]:
                cast(ObjectPath, final / name).upload(staged / name)
                step_done("first_object_uploaded")
            check(final)  # read back: what the store holds, not what was sent
        except BaseException:
            # Objects a failed delete leaves behind are not whole: the next clean-up takes them.
            with contextlib.suppress(OSError):
                self.remove_folder(final, last[-1:])
            raise
        shutil.rmtree(staged)

    def is_whole(self, folder: Location, last: str) -> bool:
        return (folder / last).is_file()

    def remove_folder(self, folder: Location, first: Sequence[str]) -> None:
        for name in first:
            (folder / name).unlink(missing_ok=True)
        step_done("pruning")
        cast(ObjectPath, folder).remove_tree()

    def read_tagged(self, path: Location, limit: int) -> tuple[str | None, str | None]:
        client, (bucket, key) = _s3_client(*s3_settings()), _bucket_key(path)
        try:
            answer = client.get_object(Bucket=bucket, Key=key)
        except client.exceptions.NoSuchKey:
            return None, None
        data = answer["Body"].read(limit + 1)
        text = data.decode("utf-8", "replace").strip() if len(data) <= limit else None
        return text, answer["ETag"]

    def write_if(self, path: Location, data: bytes, tag: str | None, ready: Hook = nothing) -> bool:
        client, (bucket, key) = _s3_client(*s3_settings()), _bucket_key(path)
        condition = {"IfMatch": tag} if tag is not None else {"IfNoneMatch": "*"}
        ready()
        try:
            client.put_object(Bucket=bucket, Key=key, Body=data, **condition)
        except client.exceptions.ClientError as error:
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status in (409, 412):  # 409: a write in flight
                return False
            if status != 501:  # 501: the store has no conditional writes; a plain PUT
                raise
            path.write_bytes(data)
        return True
