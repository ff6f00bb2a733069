"""Where things live: the home (MEMORYPACK_HOME, a folder or an `s3://bucket/prefix` URL) and
every location under it, plus the local work folder for what must be a local file."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from memorypack.fs import Location, ObjectPath, StorageError, location
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.stores import store_of

DEFAULT_HOME = Settings.home
# The hive column of each partitioned lake table (the key is always a load date), and the lake
# tables of the whole home: ingest's (every tenant's rows by load date) and erasure's records
# (tombstones, withdrawn policies). Every other table (and the embedding and redaction caches) is
# laid out by tenant, `lake/<table>/tenant_id=<id>/…`, so that a tenant's run reads and writes
# only its own folder. Both declared with each table in pipeline.tables.
TENANT_COLUMN = "tenant_id"


def first_partition_date() -> str:
    """The first daily partition (MEMORYPACK_FIRST_DATE): the UI counts every day from it."""
    return Settings.from_env().first_date


def nightly_cron() -> str:
    """When the nightly schedule starts ingest (MEMORYPACK_NIGHTLY_CRON, UTC): 02:00 by default."""
    return Settings.from_env().nightly_cron


def offline_environment() -> None:
    """Models load from installed packages only; nothing is fetched at run time (STACK.md)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@dataclass(frozen=True)
class Paths:
    """Every location under one home (SPEC §1), seen by the whole home (`tenant=None`: every
    tenant's rows) or by one tenant's run (`for_tenant`: only that tenant's folders).

    The home is a local folder or an object-store prefix (`ObjectPath`): the lake (tables,
    caches, tombstones) and the packs live there. What must be a local file lives in `local`: the
    home itself when it is a folder, else a work folder of this host (MEMORYPACK_LOCAL_DIR)."""

    home: Location
    tenant: str | None = None

    @classmethod
    def from_env(cls, home: str | os.PathLike[str] | ObjectPath | None = None) -> Paths:
        return cls(home_location(home or Settings.from_env().home))

    def for_tenant(self, tenant: str | None) -> Paths:
        return Paths(self.home, tenant)

    @property
    def local(self) -> Path:
        """Where this host keeps what must be a local file: the home folder itself, or for an
        object-store home MEMORYPACK_LOCAL_DIR (default: a folder of the user's cache named after
        the home's URL). Everything in it is derived or host-bound: it can be deleted."""
        return store_of(self.home).work_folder(self.home)

    @property
    def landing(self) -> Path:
        """MEMORYPACK_LANDING, else `<home>/landing` (on an object-store home `<local>/landing`:
        landing files are read from a local folder, the host's inbox)."""
        env = Settings.from_env().landing
        return Path(env).resolve() if env else self.local / "landing"

    @property
    def lake(self) -> Location:
        return self.home / "lake"

    @property
    def embedding_cache(self) -> Location:
        return self.table_root("embedding_cache")

    @property
    def pii_cache(self) -> Location:
        return self.table_root("pii_cache")

    @property
    def warehouse(self) -> Path:
        return self.local / "warehouse.duckdb"

    @property
    def analytics(self) -> Path:
        return self.local / "analytics.duckdb"

    @property
    def models(self) -> Path:
        """Model working copies (ONNX exports, DPO policies): torch and onnxruntime read files."""
        return self.local / "models"

    @property
    def packs(self) -> Location:
        """`<home>/packs`, or MEMORYPACK_PACKS: a folder or an `s3://bucket/prefix` URL (S3
        settings from the AWS environment variables, see `memorypack.environment`)."""
        return packs_location(Settings.from_env().packs or self.home / "packs")

    def table_root(self, name: str) -> Location:
        """The folder of table `name` this view writes: the tenant's own, for a tenant's view of
        a table laid out by tenant."""
        from pipeline.tables import SHARED_TABLES  # polars: not loaded by the light CLI paths

        root = self.lake / name
        if self.tenant is None or name in SHARED_TABLES:
            return root
        return root / f"{TENANT_COLUMN}={self.tenant}"

    def table(self, name: str) -> Location:
        """A whole (non-partitioned) lake table: one Parquet file (per tenant)."""
        return self.table_root(name) / "data.parquet"

    def partition(self, name: str, key: str, column: str | None = None) -> Location:
        """One partition of a partitioned lake table (hive layout, one file per partition)."""
        from pipeline.tables import PARTITION_COLUMNS

        column = column or PARTITION_COLUMNS.get(name, "load_date")
        return self.table_root(name) / f"{column}={key}" / "data.parquet"


def packs_location(where: str | os.PathLike[str] | ObjectPath) -> Location:
    """A packs root from a path or URL; a bad URL is a one-line UserError."""
    try:
        found = location(where)
    except StorageError as error:
        raise UserError(str(error)) from None
    return found.resolve()


def scratch_in_local(paths: Paths) -> None:
    """On an object-store home, this process's temporary files (pack staging, training scratch,
    libraries' temp files) go to `<local>/tmp`: nothing of the home lands on local disk outside
    the local work folder. A folder home keeps the system's temp folder."""
    if paths.local == paths.home:  # a folder home is its own work folder
        return
    import tempfile

    folder = paths.local / "tmp"
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["TMPDIR"] = str(folder)
    tempfile.tempdir = str(folder)


def home_location(where: str | os.PathLike[str] | ObjectPath) -> Location:
    """A home from a path or an `s3://bucket/prefix` URL; a bad URL is a one-line UserError."""
    try:
        found = location(where)
    except StorageError as error:
        raise UserError(f"home {error}") from None
    return store_of(found).as_home(found)
