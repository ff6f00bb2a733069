"""Lake and warehouse: a partition refresh replaces only the partitions it is given."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import polars as pl

from pipeline.config import Paths
from pipeline.storage import Lake, Warehouse


def _day(key: str, ids: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"event_id": ids, "load_date": [date.fromisoformat(key)] * len(ids)},
        schema={"event_id": pl.String, "load_date": pl.Date},
    )


def _rows(warehouse: Warehouse) -> list[tuple[str, str]]:
    with warehouse.connect(read_only=True) as con:
        return con.execute(
            "SELECT CAST(load_date AS VARCHAR), event_id FROM events ORDER BY ALL"
        ).fetchall()


def test_refresh_with_keys_replaces_only_those_partitions(tmp_path: Path) -> None:
    paths = Paths.from_env(tmp_path)
    lake, warehouse = Lake(paths), Warehouse(paths)
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a", "b"]))
    assert warehouse.refresh("events", lake, keys=["2026-11-01"]) == 2  # no table yet: a build

    lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["c"]))
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a"]))  # rewritten
    assert warehouse.refresh("events", lake, keys=["2026-11-02"]) == 3
    # 11-01 was not named: the table still holds its old rows (nothing re-read)
    assert _rows(warehouse) == [("2026-11-01", "a"), ("2026-11-01", "b"), ("2026-11-02", "c")]

    assert warehouse.refresh("events", lake, keys=["2026-11-01", "2026-11-02"]) == 2
    assert _rows(warehouse) == [("2026-11-01", "a"), ("2026-11-02", "c")]


def test_refresh_with_keys_rebuilds_when_the_columns_changed(tmp_path: Path) -> None:
    paths = Paths.from_env(tmp_path)
    lake, warehouse = Lake(paths), Warehouse(paths)
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a"]))
    warehouse.refresh("events", lake)
    wider = _day("2026-11-02", ["b"]).with_columns(pl.lit("x").alias("note"))
    lake.write_partition("events", "2026-11-02", wider)
    assert warehouse.refresh("events", lake, keys=["2026-11-02"]) == 2
    with warehouse.connect(read_only=True) as con:
        columns = [row[0] for row in con.execute("DESCRIBE events").fetchall()]
    assert "note" in columns


def test_stale_partitions_follow_the_source_writes(tmp_path: Path) -> None:
    lake = Lake(Paths.from_env(tmp_path))
    for key in ("2026-11-01", "2026-11-02"):
        lake.write_partition("events", key, _day(key, ["a"]))
    assert lake.stale_partitions("events", ["typed"]) == ["2026-11-01", "2026-11-02"]
    for key in ("2026-11-01", "2026-11-02"):
        lake.write_partition("typed", key, _day(key, ["a"]), derived_from="events")
    assert lake.stale_partitions("events", ["typed"]) == []
    lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["a", "b"]))  # re-ingested
    assert lake.stale_partitions("events", ["typed"]) == ["2026-11-02"]
    assert lake.stale_partitions("events", ["typed", "other"]) == ["2026-11-01", "2026-11-02"]
    lake.drop("typed", ["2026-11-01"])
    assert lake.partition_keys("typed") == ["2026-11-02"]
