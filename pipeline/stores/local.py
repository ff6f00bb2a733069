"""The local-folder backend of the store: a write is a temporary file in the same folder renamed
over the final name (fsynced where a crash must not lose it), a folder goes live by one rename."""

from __future__ import annotations

import os
import secrets
import shutil
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, cast

from memorypack.format import PackError, read_regular
from memorypack.fs import Location
from pipeline.errors import UserError
from pipeline.stores.base import Check, Hook, Store, hive_values, nothing
from pipeline.stores.disk import TRASH_PREFIX, fsync_path, step_done

if TYPE_CHECKING:
    import duckdb
    import polars as pl

LOCK_FILE = ".publish.lock"


def sql_quote(text: str) -> str:
    """A SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def parquet_source(files: Sequence[Path], hive: bool) -> str:
    """DuckDB's reader of exactly these lake files (a partition's key restored from its folder,
    as its declared type: DuckDB would read a tenant `007` as the integer 7)."""
    from pipeline.tables import HIVE_TYPES

    listed = ", ".join(sql_quote(str(f)) for f in files)
    folders = hive_values(files[0].parent.as_posix()) if hive and files else {}
    kinds = [f"{sql_quote(c)}: {str(HIVE_TYPES[c]).upper()}" for c in folders if c in HIVE_TYPES]
    typed = f", hive_types = {{{', '.join(kinds)}}}" if kinds else ""
    return f"read_parquet([{listed}], hive_partitioning = {str(hive).lower()}, union_by_name = true{typed})"


def _temp_beside(path: Path) -> Path:
    return path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")


class LocalStore(Store):
    """Locations are `pathlib.Path`s of this host."""

    def as_home(self, where: Location) -> Location:
        try:
            folder = cast(Path, where).resolve()
            if folder.exists() and not folder.is_dir():
                raise UserError(f"home {folder} is not a folder")
        except (OSError, ValueError) as error:  # a name too long, a NUL byte, no permission
            reason = getattr(error, "strerror", None) or str(error)
            raise UserError(f"home {str(where)[:80]!r} cannot be used: {reason}") from None
        return folder

    def work_folder(self, home: Location) -> Path:
        return cast(Path, home)

    def write_bytes(self, path: Location, data: bytes) -> None:
        target = cast(Path, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_beside(target)
        tmp.write_bytes(data)
        os.replace(tmp, target)

    def write_parquet(self, frame: pl.DataFrame | pl.LazyFrame, path: Location) -> None:
        import polars as pl

        target = cast(Path, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_beside(target)
        if isinstance(frame, pl.LazyFrame):
            frame.sink_parquet(tmp, compression="zstd", statistics=True)
        else:
            frame.write_parquet(tmp, compression="zstd", statistics=True)
        os.replace(tmp, target)

    def write_once(self, path: Location, data: bytes) -> None:
        target = cast(Path, path)
        target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Written whole to a private file, then linked into place: `link` fails if the file
        # exists, so two first writers agree on one and neither can read a half-written one.
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(8)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            tmp.unlink()

    def copy_in(self, source: Path, path: Location) -> None:
        target = cast(Path, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temp_beside(target)
        try:
            shutil.copyfile(source, tmp)
            fsync_path(tmp)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_path(target.parent)

    def read_parquet(
        self, path: Location, hive: bool = False, columns: Sequence[str] | None = None
    ) -> pl.DataFrame:
        import polars as pl

        from pipeline.tables import HIVE_TYPES

        return pl.read_parquet(
            cast(Path, path),
            hive_partitioning=hive,
            hive_schema=HIVE_TYPES if hive else None,
            columns=list(columns) if columns else None,
        )

    def scan_parquet(self, path: Location, hive: bool = False) -> pl.LazyFrame:
        import polars as pl

        from pipeline.tables import HIVE_TYPES

        return pl.scan_parquet(
            cast(Path, path), hive_partitioning=hive, hive_schema=HIVE_TYPES if hive else None
        )

    def scan_parquet_files(
        self, paths: Sequence[Location], columns: Sequence[str] | None = None
    ) -> pl.LazyFrame:
        import polars as pl

        scan = pl.scan_parquet([cast(Path, p) for p in paths])
        return scan.select(columns) if columns else scan

    @contextmanager
    def sql_source(
        self, con: duckdb.DuckDBPyConnection, files: Sequence[Location], hive: bool
    ) -> Iterator[str]:
        yield parquet_source([cast(Path, f) for f in files], hive)  # DuckDB reads them itself

    def identity(self, path: Location) -> str:
        # Atomic writes give every version a new inode, so (inode, size, mtime) changes whenever
        # the file is rewritten.
        stat = cast(Path, path).stat()
        return f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"

    def remove(self, path: Location) -> None:
        if path.is_dir():
            shutil.rmtree(cast(Path, path), ignore_errors=True)
        else:
            path.unlink(missing_ok=True)

    def files(self, root: Location, name: str = "*") -> list[Location]:
        found = cast(Path, root).rglob(name) if root.is_dir() else []
        return list(sorted(p for p in found if p.is_file()))

    def folders(self, root: Location) -> list[str]:
        return sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []

    @contextmanager
    def local_copy(self, folder: Location) -> Iterator[Path]:
        yield cast(Path, folder)

    def lock_file(self, folder: Location) -> Path:
        return cast(Path, folder) / LOCK_FILE

    def staging(self, folder: Location, scratch: Callable[[], Path]) -> Path:
        return cast(Path, folder)  # a dot-name beside the versions: nobody points at it

    def put_folder(self, staged: Path, final: Location, last: Sequence[str], check: Check) -> None:
        # One rename: the folder appears whole, holding the very files checked before it.
        os.rename(staged, cast(Path, final))
        fsync_path(cast(Path, final).parent)

    def is_whole(self, folder: Location, last: str) -> bool:
        return True  # only a rename puts a folder in place

    def remove_folder(self, folder: Location, first: Sequence[str]) -> None:
        # Renamed out of sight first: a crash mid-delete never leaves a half folder visible.
        trash = folder.with_name(f"{TRASH_PREFIX}{folder.name}-{uuid.uuid4().hex[:8]}")
        os.rename(cast(Path, folder), cast(Path, trash))
        step_done("pruning")
        shutil.rmtree(cast(Path, trash), ignore_errors=True)

    def read_tagged(self, path: Location, limit: int) -> tuple[str | None, str | None]:
        if not path.exists():
            return None, None
        try:
            return read_regular(path, limit, path.name).decode("utf-8").strip(), None
        except (PackError, UnicodeDecodeError):  # a link to a device, a huge file: replaced
            return None, None

    def write_if(self, path: Location, data: bytes, tag: str | None, ready: Hook = nothing) -> bool:
        # No tags on a local disk: one writer per folder is kept by its publish lock.
        target = cast(Path, path)
        tmp = _temp_beside(target)
        with tmp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        ready()
        os.replace(tmp, target)
        fsync_path(target.parent)
        return True
