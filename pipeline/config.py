"""Where things live: the home folder (MEMORYPACK_HOME) and every path under it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from memorypack.fs import Location, StorageError, location
from pipeline.errors import UserError
from pipeline.tables import PARTITION_COLUMNS as PARTITION_COLUMNS
from pipeline.tables import SHARED_TABLES as SHARED_TABLES

DEFAULT_HOME = "./data"
# Where packs are published, when not under the home: a folder or an s3://bucket/prefix URL.
PACKS_ENV = "MEMORYPACK_PACKS"
# The hive column of each partitioned lake table (the key is always a load date), and the lake
# tables of the whole home: ingest's (every tenant's rows by load date) and erasure's records
# (tombstones, withdrawn policies). Every other table (and the embedding and redaction caches) is
# laid out by tenant, `lake/<table>/tenant_id=<id>/…`, so that a tenant's run reads and writes
# only its own folder. Both declared with each table in pipeline.tables.
TENANT_COLUMN = "tenant_id"


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
    """Every location under one home folder (SPEC §1), seen by the whole home (`tenant=None`:
    every tenant's rows) or by one tenant's run (`for_tenant`: only that tenant's folders)."""

    home: Path
    tenant: str | None = None

    @classmethod
    def from_env(cls, home: str | os.PathLike[str] | None = None) -> Paths:
        return cls(Path(home or os.environ.get("MEMORYPACK_HOME", DEFAULT_HOME)).resolve())

    def for_tenant(self, tenant: str | None) -> Paths:
        return Paths(self.home, tenant)

    @property
    def landing(self) -> Path:
        env = os.environ.get("MEMORYPACK_LANDING")
        return Path(env).resolve() if env else self.home / "landing"

    @property
    def lake(self) -> Path:
        return self.home / "lake"

    @property
    def embedding_cache(self) -> Path:
        return self.table_root("embedding_cache")

    @property
    def pii_cache(self) -> Path:
        return self.table_root("pii_cache")

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

    def table_root(self, name: str) -> Path:
        """The folder of table `name` this view writes: the tenant's own, for a tenant's view of
        a table laid out by tenant."""
        root = self.lake / name
        if self.tenant is None or name in SHARED_TABLES:
            return root
        return root / f"{TENANT_COLUMN}={self.tenant}"

    def table(self, name: str) -> Path:
        """A whole (non-partitioned) lake table: one Parquet file (per tenant)."""
        return self.table_root(name) / "data.parquet"

    def partition(self, name: str, key: str, column: str | None = None) -> Path:
        """One partition of a partitioned lake table (hive layout, one file per partition)."""
        column = column or PARTITION_COLUMNS.get(name, "load_date")
        return self.table_root(name) / f"{column}={key}" / "data.parquet"


def packs_location(where: str | os.PathLike[str]) -> Location:
    """A packs root from a path or URL; a bad URL is a one-line UserError."""
    try:
        found = location(where)
    except StorageError as error:
        raise UserError(str(error)) from None
    return found.resolve() if isinstance(found, Path) else found
