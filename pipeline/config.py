"""Where things live: the home folder (MEMORYPACK_HOME) and every path under it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from memorypack.fs import Location, StorageError, location
from pipeline.errors import UserError

DEFAULT_HOME = "./data"
# Where packs are published, when not under the home: a folder or an s3://bucket/prefix URL.
PACKS_ENV = "MEMORYPACK_PACKS"
# The hive column of each partitioned lake table (the key is always a load date).
PARTITION_COLUMNS = {"decay_snapshots": "snapshot_date"}


def first_partition_date() -> str:
    """The first daily partition (MEMORYPACK_FIRST_DATE): the UI counts every day from it."""
    return os.environ.get("MEMORYPACK_FIRST_DATE", "2026-01-01")


def offline_environment() -> None:
    """Models load from installed packages only; nothing is fetched at run time (STACK.md)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class Paths:
    """Every location under one home folder (SPEC §1)."""

    home: Path

    @classmethod
    def from_env(cls, home: str | os.PathLike[str] | None = None) -> Paths:
        return cls(Path(home or os.environ.get("MEMORYPACK_HOME", DEFAULT_HOME)).resolve())

    @property
    def landing(self) -> Path:
        env = os.environ.get("MEMORYPACK_LANDING")
        return Path(env).resolve() if env else self.home / "landing"

    @property
    def lake(self) -> Path:
        return self.home / "lake"

    @property
    def embedding_cache(self) -> Path:
        return self.lake / "embedding_cache"

    @property
    def warehouse(self) -> Path:
        return self.home / "warehouse.duckdb"

    @property
    def analytics(self) -> Path:
        return self.home / "analytics.duckdb"

    @property
    def models(self) -> Path:
        return self.home / "models"

    @property
    def packs(self) -> Location:
        """`<home>/packs`, or MEMORYPACK_PACKS: a folder or an `s3://bucket/prefix` URL (S3
        settings from the AWS environment variables, see `memorypack.fs`)."""
        return packs_location(os.environ.get(PACKS_ENV) or self.home / "packs")

    def table(self, name: str) -> Path:
        """A whole (non-partitioned) lake table: one Parquet file."""
        return self.lake / name / "data.parquet"

    def partition(self, name: str, key: str, column: str | None = None) -> Path:
        """One partition of a partitioned lake table (hive layout, one file per partition)."""
        column = column or PARTITION_COLUMNS.get(name, "load_date")
        return self.lake / name / f"{column}={key}" / "data.parquet"

    def partitions_glob(self, name: str) -> str:
        return str(self.lake / name / "*" / "data.parquet")


def packs_location(where: str | os.PathLike[str]) -> Location:
    """A packs root from a path or URL; a bad URL is a one-line UserError."""
    try:
        found = location(where)
    except StorageError as error:
        raise UserError(str(error)) from None
    return found.resolve() if isinstance(found, Path) else found
