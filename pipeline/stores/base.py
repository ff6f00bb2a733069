"""The one store interface: what the pipeline does to a location beyond naming it (`/`, `name`,
`parent`, `exists`, `iterdir`, `open`, … which `pathlib.Path` and `memorypack.fs.ObjectPath`
share), declared once; `pipeline.stores.local` and `pipeline.stores.objects` are its backends."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from memorypack.fs import Location

if TYPE_CHECKING:
    import duckdb
    import polars as pl


# A check of a folder just placed (it raises when the folder fails it), and a step's hook.
Check = Callable[[Location], object]
Hook = Callable[[], None]


def nothing() -> None:
    """The hook that does nothing."""


def hive_values(key: str) -> dict[str, str]:
    """`tenant_id=acme/load_date=2026-11-01` → {"tenant_id": "acme", "load_date": "2026-11-01"}."""
    return dict(part.split("=", 1) for part in key.split("/") if "=" in part)


def below(path: Location, base: Location) -> str:
    """`path` below `base` as a `/`-separated key ("" for `base` itself): a folder's path and a
    store's URL both separate levels by "/"."""
    inner, outer = str(path).rstrip("/"), str(base).rstrip("/")
    if inner == outer:
        return ""
    if not inner.startswith(outer + "/"):
        raise ValueError(f"{path} is not below {base}")
    return inner[len(outer) + 1 :]


class Store(ABC):
    """A backend: every method takes the locations it acts on (`store_of` picks the backend)."""

    # ---- the home ----------------------------------------------------------------------------
    @abstractmethod
    def as_home(self, where: Location) -> Location:
        """`where` checked as a home (UserError in one line when it cannot be one)."""

    @abstractmethod
    def work_folder(self, home: Location) -> Path:
        """Where this host keeps what must be a local file for `home` (the home itself, for a
        folder home)."""

    # ---- files -------------------------------------------------------------------------------
    @abstractmethod
    def write_bytes(self, path: Location, data: bytes) -> None:
        """Write a whole file: a reader sees the old bytes or the new, never part of them."""

    @abstractmethod
    def write_parquet(self, frame: pl.DataFrame | pl.LazyFrame, path: Location) -> None:
        """`write_bytes` for a Parquet file (zstd, statistics); a LazyFrame is streamed locally."""

    @abstractmethod
    def write_once(self, path: Location, data: bytes) -> None:
        """Create a file unless it exists (locally: readable by its owner only): of two first
        writers one wins, and both then read its bytes."""

    @abstractmethod
    def copy_in(self, source: Path, path: Location) -> None:
        """Place a local file at `path` whole and durably (a crash leaves no part of it there)."""

    @abstractmethod
    def read_parquet(
        self, path: Location, hive: bool = False, columns: Sequence[str] | None = None
    ) -> pl.DataFrame:
        """One Parquet file (`hive`: its folders' `name=value` columns it lacks added, as their
        declared types; `columns`: only these)."""

    @abstractmethod
    def scan_parquet(self, path: Location, hive: bool = False) -> pl.LazyFrame:
        """`read_parquet`, lazily where the backend can."""

    @abstractmethod
    def scan_parquet_files(
        self, paths: Sequence[Location], columns: Sequence[str] | None = None
    ) -> pl.LazyFrame:
        """Several files with the same columns as one scan (no hive columns)."""

    @abstractmethod
    def sql_source(
        self, con: duckdb.DuckDBPyConnection, files: Sequence[Location], hive: bool
    ) -> AbstractContextManager[str]:
        """SQL naming exactly these Parquet files' rows, valid while the context lasts."""

    @abstractmethod
    def identity(self, path: Location) -> str:
        """Names one version of a file: it changes whenever the file is rewritten."""

    @abstractmethod
    def remove(self, path: Location) -> None:
        """A file or a whole folder; nothing when it is not there."""

    @abstractmethod
    def files(self, root: Location, name: str = "*") -> list[Location]:
        """The files named `name` (a glob) at any depth below `root`, sorted."""

    @abstractmethod
    def folders(self, root: Location) -> list[str]:
        """The names of the folders directly below `root` (none when it is not there)."""

    @abstractmethod
    def local_copy(self, folder: Location) -> AbstractContextManager[Path]:
        """The files of `folder` as a local folder `<…>/<parent name>/<name>` while the context
        lasts (the folder itself when it is local)."""

    # ---- folders placed whole (pack versions) ------------------------------------------------
    @abstractmethod
    def lock_file(self, folder: Location) -> Path:
        """The local file whose lock stands for `folder` on this host."""

    @abstractmethod
    def staging(self, folder: Location, scratch: Callable[[], Path]) -> Path:
        """The local folder where something bound for `folder` is written out of sight (beside
        it, or in `scratch()` under `folder`'s name, which checks of a pack read)."""

    @abstractmethod
    def put_folder(self, staged: Path, final: Location, last: Sequence[str], check: Check) -> None:
        """Move the local folder `staged` to `final`, its files `last` last; `final` is then
        whole (`is_whole`) and passed `check`, or removed and the error raised."""

    @abstractmethod
    def is_whole(self, folder: Location, last: str) -> bool:
        """Whether a folder placed by `put_folder` is all there (its file `last` is)."""

    @abstractmethod
    def remove_folder(self, folder: Location, first: Sequence[str]) -> None:
        """Delete a folder so that a crash midway leaves it not whole (`first` go first)."""

    # ---- one small file swapped in place (LATEST) --------------------------------------------
    @abstractmethod
    def read_tagged(self, path: Location, limit: int) -> tuple[str | None, str | None]:
        """The file's text, stripped (None when missing or not ≤ `limit` bytes of text), and the
        tag `write_if` compares (None where the backend has none, or no file)."""

    @abstractmethod
    def write_if(self, path: Location, data: bytes, tag: str | None, ready: Hook = nothing) -> bool:
        """Replace the file with `data` whole, if it still has `tag` where the backend can tell
        (False: another writer came first); `ready` is called just before the swap."""
