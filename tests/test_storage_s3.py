"""The lake on an object store (a home `s3://bucket/prefix`), against a real SeaweedFS on
127.0.0.1: tables and partitions are written whole, read back with their hive columns as from a
local lake, listed, marked, dropped; the caches append and compact there; the warehouse loads
from it; nothing of it is written to local disk but the local work folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from memorypack.fs import ObjectPath
from pipeline import tables
from pipeline.config import Paths
from pipeline.errors import UserError
from pipeline.storage.lake import Lake, file_identity, read_file
from pipeline.storage.vectors import MAX_PARTS, EmbeddingCache
from pipeline.storage.warehouse import Warehouse
from tests.tenant_runs import declared


@pytest.fixture
def homes(seaweedfs: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Paths, Paths]:
    """An S3 home (its local work folder under tmp_path) and a local home, side by side."""
    for name, value in seaweedfs.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("MEMORYPACK_LOCAL_DIR", str(tmp_path / "local"))
    return Paths.from_env(f"{seaweedfs.new_prefix()}/home"), Paths.from_env(tmp_path / "home")


def _frame(tenant: str, n: int) -> pl.DataFrame:
    ids = [f"{tenant}-{i}" for i in range(n)]
    return pl.DataFrame({"tenant_id": [tenant] * n, "memory_id": ids, "event_id": ids})


def _table(name: str, tenant: str, n: int) -> pl.DataFrame:
    """`n` rows of lake table `name` (the other columns null), without its folders' columns."""
    return declared(name, _frame(tenant, n)).drop(tables.table(name).hive_columns, strict=False)


def test_an_s3_home_keeps_its_lake_on_the_store_and_local_files_in_the_work_folder(
    homes: tuple[Paths, Paths], tmp_path: Path
) -> None:
    s3, _ = homes
    assert isinstance(s3.home, ObjectPath) and isinstance(s3.lake, ObjectPath)
    assert isinstance(s3.for_tenant("acme").table_root("feedback_scores"), ObjectPath)
    assert s3.local == tmp_path / "local"
    assert s3.warehouse == tmp_path / "local" / "warehouse.duckdb"
    assert s3.models == tmp_path / "local" / "models"
    assert str(s3.packs) == f"{s3.home}/packs"


@pytest.mark.parametrize("bad", ["s3://", "s3://bucket-only", "gs://bucket/prefix"])
def test_a_bad_home_url_is_one_line(bad: str) -> None:
    with pytest.raises(UserError) as error:
        Paths.from_env(bad)
    assert "\n" not in str(error.value) and bad.split("://")[0] in str(error.value)


def test_lake_tables_read_the_same_from_s3_as_from_a_folder(homes: tuple[Paths, Paths]) -> None:
    read: dict[str, dict[str, pl.DataFrame]] = {}
    for where, paths in zip(("s3", "local"), homes, strict=True):
        for tenant, n in (("acme", 3), ("globex", 2)):
            lake = Lake(paths.for_tenant(tenant))
            lake.write("feedback_scores", _table("feedback_scores", tenant, n))
            for day in ("2026-11-01", "2026-11-02"):
                lake.write_partition("interactions", day, _table("interactions", tenant, n))
        Lake(paths).write_partition("events", "2026-11-01", _table("events", "acme", 4))
        whole = Lake(paths)
        read[where] = {
            name: whole.read(name).collect().sort(pl.all())
            for name in ("feedback_scores", "interactions", "events")
        }
        read[where]["acme"] = Lake(paths.for_tenant("acme")).read("interactions").collect()
        assert whole.tenants("interactions") == ["acme", "globex"]
        assert whole.partition_keys("interactions") == ["2026-11-01", "2026-11-02"]
        assert Lake(paths.for_tenant("globex")).partition_keys("interactions") == [
            "2026-11-01",
            "2026-11-02",
        ]
    for name, frame in read["local"].items():
        assert read["s3"][name].equals(frame), name
    assert read["s3"]["interactions"].schema["load_date"] == pl.Date
    assert read["s3"]["interactions"].height == 10
    assert sorted(read["s3"]["acme"]["tenant_id"].unique()) == ["acme"]


def test_markers_identities_and_drops_on_s3(homes: tuple[Paths, Paths]) -> None:
    s3, _ = homes
    lake = Lake(s3)
    lake.write_partition("events", "2026-11-01", _table("events", "acme", 2))
    assert lake.stale_partitions("events", "typed") == ["2026-11-01"]
    lake.mark_derived("events", "2026-11-01", "typed")
    assert lake.stale_partitions("events", "typed") == []
    first = file_identity(s3.partition("events", "2026-11-01"))
    lake.write_partition(
        "events", "2026-11-01", _table("events", "acme", 3)
    )  # same second, new bytes
    assert file_identity(s3.partition("events", "2026-11-01")) != first
    assert lake.stale_partitions("events", "typed") == ["2026-11-01"]
    lake.drop("events", ["2026-11-01"])
    assert not lake.exists("events") and lake.partition_keys("events") == []
    assert not s3.partition("events", "2026-11-01").parent.exists()  # the marker went too


def test_the_embedding_cache_appends_and_compacts_on_s3(homes: tuple[Paths, Paths]) -> None:
    s3, _ = homes
    cache = EmbeddingCache(s3.for_tenant("acme").embedding_cache)
    for i in range(MAX_PARTS + 1):
        rows = pl.DataFrame(
            {"text_hash": [f"h{i}"], "embedding": [[float(i), 1.0]]},
            schema={"text_hash": pl.String, "embedding": pl.Array(pl.Float32, 2)},
        )
        cache.append("mini/model", rows)
    folder = cache._folder("mini/model")
    assert isinstance(folder, ObjectPath)
    parts = [p.name for p in folder.glob("part-*.parquet")]
    assert len(parts) == 1 and parts[0].endswith("-compacted.parquet")
    vectors = cache.vectors("mini/model", pl.Series(["h3", "h7"]))
    assert sorted(vectors.index["text_hash"]) == ["h3", "h7"]
    assert vectors.of(pl.Series(["h7"])).tolist() == [[7.0, 1.0]]


def test_the_warehouse_loads_an_s3_lake_into_the_local_work_folder(
    homes: tuple[Paths, Paths], tmp_path: Path
) -> None:
    s3, local = homes
    for paths in homes:
        for tenant, n in (("acme", 3), ("globex", 2)):
            for day in ("2026-11-01", "2026-11-02"):
                frame = _table("interactions", tenant, n)
                Lake(paths.for_tenant(tenant)).write_partition("interactions", day, frame)
        Warehouse(paths).converge(Lake(paths), {"interactions": "test"})
    # A rewritten partition is reloaded alone, found again by its hive values.
    Lake(s3.for_tenant("globex")).write_partition(
        "interactions", "2026-11-02", _table("interactions", "globex", 5)
    )
    counts = Warehouse(s3).converge(Lake(s3))
    assert counts == {"interactions": 3 + 3 + 2 + 5}
    assert s3.warehouse.is_file() and s3.warehouse.parent == tmp_path / "local"
    query = "SELECT tenant_id, CAST(load_date AS VARCHAR), count(*) FROM interactions GROUP BY ALL ORDER BY ALL"
    with duckdb.connect(str(s3.warehouse), read_only=True) as con:
        rows = con.execute(query).fetchall()
    assert rows == [
        ("acme", "2026-11-01", 3),
        ("acme", "2026-11-02", 3),
        ("globex", "2026-11-01", 2),
        ("globex", "2026-11-02", 5),
    ]
    with duckdb.connect(str(local.warehouse), read_only=True) as con:
        types = con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() ORDER BY 1"
        ).fetchall()
    with duckdb.connect(str(s3.warehouse), read_only=True) as con:
        assert (
            con.execute("SELECT column_name, data_type FROM duckdb_columns() ORDER BY 1").fetchall()
            == types
        )


def test_an_s3_write_is_one_whole_object(homes: tuple[Paths, Paths]) -> None:
    """No temp objects, no half objects: the key holds the whole file once the write returns."""
    s3, _ = homes
    frame = _table("feedback_scores", "acme", 1000)
    path = Lake(s3.for_tenant("acme")).write("feedback_scores", frame)
    assert isinstance(path, ObjectPath)
    assert [p.name for p in path.parent.walk_files()] == ["data.parquet"]
    assert read_file(path).equals(frame)
