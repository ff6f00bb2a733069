"""Lake and warehouse: a refresh makes a warehouse table equal its lake table, reading only what differs."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from pipeline.config import Paths
from pipeline.errors import UserError
from pipeline.storage import LOADED_FILES, Lake, Warehouse

HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("holding", flush=True)
sys.stdin.readline()
con.close()
"""


def _day(key: str, ids: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"event_id": ids, "load_date": [date.fromisoformat(key)] * len(ids)},
        schema={"event_id": pl.String, "load_date": pl.Date},
    )


def _rows(warehouse: Warehouse, table: str = "events") -> list[tuple[str, str]]:
    with warehouse.connect(read_only=True) as con:
        return con.execute(
            f"SELECT CAST(load_date AS VARCHAR), event_id FROM {table} ORDER BY ALL"
        ).fetchall()


def _home(tmp_path: Path) -> tuple[Lake, Warehouse]:
    paths = Paths.from_env(tmp_path)
    return Lake(paths), Warehouse(paths)


def test_refresh_catches_up_every_partition_that_differs(tmp_path: Path) -> None:
    lake, warehouse = _home(tmp_path)
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a", "b"]))
    assert warehouse.refresh("events", lake) == 2
    # A run killed after writing 11-02 to the lake, before its warehouse refresh:
    lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["c"]))
    # the next night (11-03) loads 11-02 too.
    lake.write_partition("events", "2026-11-03", _day("2026-11-03", ["d"]))
    assert warehouse.refresh("events", lake) == 4
    assert _rows(warehouse) == [
        ("2026-11-01", "a"),
        ("2026-11-01", "b"),
        ("2026-11-02", "c"),
        ("2026-11-03", "d"),
    ]
    # A rewritten partition is replaced, one the lake dropped is deleted.
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a"]))
    lake.drop("events", ["2026-11-02"])
    assert warehouse.refresh("events", lake) == 2
    assert _rows(warehouse) == [("2026-11-01", "a"), ("2026-11-03", "d")]


def test_unchanged_partitions_are_not_read_again(tmp_path: Path) -> None:
    lake, warehouse = _home(tmp_path)
    old = lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a", "b"]))
    warehouse.refresh("events", lake)
    # Same inode, size and mtime, unreadable bytes: a refresh that read this file would fail.
    stat = old.stat()
    old.write_bytes(b"x" * stat.st_size)
    os.utime(old, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["c"]))
    assert warehouse.refresh("events", lake) == 3
    assert _rows(warehouse) == [("2026-11-01", "a"), ("2026-11-01", "b"), ("2026-11-02", "c")]
    with warehouse.connect(read_only=True) as con:
        recorded = con.execute(f"SELECT part FROM {LOADED_FILES} ORDER BY 1").fetchall()
    assert recorded == [("load_date=2026-11-01",), ("load_date=2026-11-02",)]


def test_changed_columns_rebuild_the_table(tmp_path: Path) -> None:
    lake, warehouse = _home(tmp_path)
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a"]))
    warehouse.refresh("events", lake)
    wider = _day("2026-11-02", ["b"]).with_columns(pl.lit("x").alias("note"))
    lake.write_partition("events", "2026-11-02", wider)
    assert warehouse.refresh("events", lake) == 2
    with warehouse.connect(read_only=True) as con:
        notes = con.execute("SELECT event_id, note FROM events ORDER BY 1").fetchall()
    assert notes == [("a", None), ("b", "x")]


def test_converge_refreshes_every_table_and_drops_what_the_lake_lost(tmp_path: Path) -> None:
    lake, warehouse = _home(tmp_path)
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a"]))
    lake.write("scores", pl.DataFrame({"memory_id": ["a"], "score": [0.5]}))
    lake.write("pairs", pl.DataFrame({"pair_id": ["p"]}))
    for name in ("events", "scores", "pairs"):
        warehouse.refresh(name, lake, comment=f"{name} explained")
    lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["b", "c"]))
    lake.write("scores", pl.DataFrame({"memory_id": ["a", "b"], "score": [0.5, 0.1]}))
    lake.drop("pairs")
    assert warehouse.converge(lake) == {"events": 3, "pairs": 0, "scores": 2}
    with warehouse.connect(read_only=True) as con:
        tables = con.execute(
            "SELECT table_name, comment FROM duckdb_tables() ORDER BY 1"
        ).fetchall()
    assert tables == [
        (LOADED_FILES, None),
        ("events", "events explained"),
        ("scores", "scores explained"),
    ]


def test_a_held_warehouse_fails_in_one_line_and_the_next_refresh_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pipeline.storage.LOCK_WAIT_SECONDS", 0.3)
    lake, warehouse = _home(tmp_path)
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a"]))
    warehouse.refresh("events", lake)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(warehouse.paths.warehouse)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["b"]))
        with pytest.raises(UserError) as caught:
            warehouse.refresh("events", lake)
    finally:
        holder.communicate("\n", timeout=30)
    assert str(caught.value) == (
        f"warehouse {warehouse.paths.warehouse} is held open by pid {holder.pid}"
        f" ({Path(sys.executable).resolve().name}): close that connection and run again"
        " (analysts: query analytics.duckdb, which never blocks a run)"
    )
    assert warehouse.refresh("events", lake) == 2


def test_stale_partitions_follow_the_source_writes(tmp_path: Path) -> None:
    lake = Lake(Paths.from_env(tmp_path))
    for key in ("2026-11-01", "2026-11-02"):
        lake.write_partition("events", key, _day(key, ["a"]))
    assert lake.stale_partitions("events", "typed") == ["2026-11-01", "2026-11-02"]
    for key in ("2026-11-01", "2026-11-02"):
        lake.mark_derived("events", key, "typed")
    assert lake.stale_partitions("events", "typed") == []
    lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["a", "b"]))  # re-ingested
    assert lake.stale_partitions("events", "typed") == ["2026-11-02"]
    assert lake.stale_partitions("events", "other") == ["2026-11-01", "2026-11-02"]


def test_a_tenant_sees_only_its_folder_and_the_home_sees_every_tenant(tmp_path: Path) -> None:
    home = Paths.from_env(tmp_path)
    for tenant, ids in (("acme", ["a"]), ("globex", ["b", "c"])):
        frame = _day("2026-11-01", ids).with_columns(pl.lit(tenant).alias("tenant_id"))
        Lake(home.for_tenant(tenant)).write_partition("typed", "2026-11-01", frame)
        Lake(home.for_tenant(tenant)).write("scores", frame.drop("load_date"))
    acme = Lake(home.for_tenant("acme"))
    assert acme.read("typed").collect()["tenant_id"].to_list() == ["acme"]
    assert acme.read("scores").collect()["event_id"].to_list() == ["a"]
    assert sorted(Lake(home).read("scores").collect()["event_id"]) == ["a", "b", "c"]
    assert Lake(home).partition_keys("typed") == ["2026-11-01"]
    assert Lake(home).tenants("typed") == ["acme", "globex"]
    assert set(Lake(home).files("typed")) == {
        "tenant_id=acme/load_date=2026-11-01",
        "tenant_id=globex/load_date=2026-11-01",
    }
    assert not Lake(home.for_tenant("initech")).exists("typed")
    lake, warehouse = Lake(home), Warehouse(home)
    assert warehouse.refresh("typed", lake) == 3
    Lake(home.for_tenant("acme")).drop("typed", ["2026-11-01"])
    assert warehouse.refresh("typed", lake) == 2  # only acme's rows went
