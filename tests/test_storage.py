"""Lake and warehouse: a refresh makes a warehouse table equal its lake table, reading only what differs."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from pipeline import tables
from pipeline.config import Paths
from pipeline.errors import UserError
from pipeline.storage.lake import Lake, write_parquet_atomic
from pipeline.storage.warehouse import LOADED_FILES, Warehouse

HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
print("holding", flush=True)
sys.stdin.readline()
con.close()
"""


def _rows_of(table: str, **columns: list) -> pl.DataFrame:
    """A frame of lake table `table`: these columns' values, the other declared columns null."""
    given = pl.DataFrame(columns, schema={c: tables.schema(table)[c] for c in columns})
    return pl.concat([tables.empty(table), given], how="diagonal")


def _day(key: str, ids: list[str], table: str = "events") -> pl.DataFrame:
    return _rows_of(table, event_id=ids, load_date=[date.fromisoformat(key)] * len(ids))


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
    # A file with a column the table did not have (written as a new declaration would write it).
    wider = _day("2026-11-02", ["b"]).with_columns(pl.lit("x").alias("note"))
    write_parquet_atomic(wider, lake.paths.partition("events", "2026-11-02"))
    assert warehouse.refresh("events", lake) == 2
    with warehouse.connect(read_only=True) as con:
        notes = con.execute("SELECT event_id, note FROM events ORDER BY 1").fetchall()
    assert notes == [("a", None), ("b", "x")]


def test_converge_refreshes_every_table_and_drops_what_the_lake_lost(tmp_path: Path) -> None:
    lake, warehouse = _home(tmp_path)
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a"]))
    lake.write("tombstones", _rows_of("tombstones", tenant_id=["t"], subject_hash=["a"]))
    lake.write("policy_withdrawals", _rows_of("policy_withdrawals", policy_id=["p"]))
    for name in ("events", "tombstones", "policy_withdrawals"):
        warehouse.refresh(name, lake, comment=f"{name} explained")
    lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["b", "c"]))
    lake.write("tombstones", _rows_of("tombstones", tenant_id=["t", "t"], subject_hash=["a", "b"]))
    lake.drop("policy_withdrawals")
    assert warehouse.converge(lake) == {"events": 3, "policy_withdrawals": 0, "tombstones": 2}
    with warehouse.connect(read_only=True) as con:
        tables = con.execute(
            "SELECT table_name, comment FROM duckdb_tables() ORDER BY 1"
        ).fetchall()
    assert tables == [
        (LOADED_FILES, None),
        ("events", "events explained"),
        ("tombstones", "tombstones explained"),
    ]


def test_a_held_warehouse_fails_in_one_line_and_the_next_refresh_converges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("pipeline.storage.warehouse.LOCK_WAIT_SECONDS", 0.3)
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
        holder.communicate("\n", timeout=300)
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
        frame = _day("2026-11-01", ids, "interactions").with_columns(tenant_id=pl.lit(tenant))
        Lake(home.for_tenant(tenant)).write_partition("interactions", "2026-11-01", frame)
        scores = _rows_of("feedback_scores", memory_id=ids, tenant_id=[tenant] * len(ids))
        Lake(home.for_tenant(tenant)).write("feedback_scores", scores)
    acme = Lake(home.for_tenant("acme"))
    assert acme.read("interactions").collect()["tenant_id"].to_list() == ["acme"]
    assert acme.read("feedback_scores").collect()["memory_id"].to_list() == ["a"]
    assert sorted(Lake(home).read("feedback_scores").collect()["memory_id"]) == ["a", "b", "c"]
    assert Lake(home).partition_keys("interactions") == ["2026-11-01"]
    assert Lake(home).tenants("interactions") == ["acme", "globex"]
    assert set(Lake(home).files("interactions")) == {
        "tenant_id=acme/load_date=2026-11-01",
        "tenant_id=globex/load_date=2026-11-01",
    }
    assert not Lake(home.for_tenant("initech")).exists("interactions")
    lake, warehouse = Lake(home), Warehouse(home)
    assert warehouse.refresh("interactions", lake) == 3
    Lake(home.for_tenant("acme")).drop("interactions", ["2026-11-01"])
    assert warehouse.refresh("interactions", lake) == 2  # only acme's rows went


def test_a_frame_of_the_wrong_type_or_without_a_column_is_refused_naming_both(
    tmp_path: Path,
) -> None:
    lake = Lake(Paths.from_env(tmp_path).for_tenant("acme"))
    conflicts = _rows_of("memory_conflicts", tenant_id=["acme"], memory_id_a=["a"])
    wrong = conflicts.with_columns(pl.col("subject_similarity").cast(pl.Float64))
    with pytest.raises(tables.SchemaMismatch) as caught:
        lake.write("memory_conflicts", wrong)
    assert str(caught.value) == (
        "lake table 'memory_conflicts': column 'subject_similarity' is Float64, declared Float32"
    )
    with pytest.raises(tables.SchemaMismatch) as caught:
        lake.write("memory_conflicts", conflicts.drop("subject"))
    assert (
        str(caught.value) == "lake table 'memory_conflicts': column 'subject' is missing (String)"
    )
    with pytest.raises(tables.SchemaMismatch, match="column 'note' \\(String\\) is not declared"):
        lake.write("memory_conflicts", conflicts.with_columns(note=pl.lit("x")))
    assert not lake.exists("memory_conflicts")  # nothing written by a refused frame


def test_a_frame_that_repeats_a_primary_key_is_refused(tmp_path: Path) -> None:
    lake = Lake(Paths.from_env(tmp_path).for_tenant("acme"))
    pair = _rows_of("memory_conflicts", memory_id_a=["a", "a"], memory_id_b=["b", "b"])
    with pytest.raises(tables.KeyViolation) as caught:
        lake.write("memory_conflicts", pair)
    # tenant_id is the folder's (absent here): the key checked is what the frame holds.
    assert str(caught.value) == (
        "lake table 'memory_conflicts': 1 row(s) repeat a key (memory_id_a, memory_id_b)"
    )
    assert not lake.exists("memory_conflicts")
    nulls = pair.with_columns(memory_id_b=pl.lit(None, pl.String))  # nulls compare equal
    with pytest.raises(tables.KeyViolation):
        lake.write("memory_conflicts", nulls)
    lake.write("memory_conflicts", pair.with_columns(memory_id_b=pl.Series(["b", "c"])))
    assert lake.read("memory_conflicts").collect()["memory_id_b"].to_list() == ["b", "c"]


def test_a_write_casts_only_all_null_columns_and_keeps_the_declared_order(tmp_path: Path) -> None:
    lake = Lake(Paths.from_env(tmp_path).for_tenant("acme"))
    frame = pl.DataFrame(
        {"n_updates": [3], "preference_vector": [[]], "user_id": ["u"], "tenant_id": [None]}
    )
    assert frame.schema["tenant_id"] == pl.Null and frame.schema["preference_vector"] != pl.List(
        pl.Float32
    )
    lake.write("user_preferences", frame)
    written = pl.read_parquet(lake.paths.table("user_preferences"))
    assert written.schema == pl.Schema(tables.schema("user_preferences"))
    assert written.row(0) == (None, "u", [], 3)


def test_reads_return_the_declared_columns_also_before_a_table_is_written(tmp_path: Path) -> None:
    lake = Lake(Paths.from_env(tmp_path).for_tenant("acme"))
    assert lake.read_or_empty("dpo_runs").collect_schema() == pl.Schema(tables.schema("dpo_runs"))
    # A file written before a column was declared reads with that column null; an undeclared one
    # is left out.
    old = _rows_of("skill_vectors", tenant_id=["acme"], skill_id=["s"]).drop("vector_source")
    write_parquet_atomic(old.with_columns(extra=pl.lit(1)), lake.paths.table("skill_vectors"))
    read = lake.read("skill_vectors").collect()
    assert read.schema == pl.Schema(tables.schema("skill_vectors"))
    assert read.select("skill_id", "vector_source").row(0) == ("s", None)


@pytest.mark.parametrize("killed_at", [1, 2, 3])
def test_a_filtered_load_killed_midway_is_caught_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, killed_at: int
) -> None:
    """A warehouse with a row filter (the analytics base) commits slice by slice: a load killed
    after some slices, whether it built the table, merged a rewritten partition or loaded a new
    one, is made whole by the next refresh, every row through the filter."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pipeline.storage import warehouse as module

    monkeypatch.setattr(module, "ROWS_AT_A_TIME", 1)
    slices: list[int] = []

    def upper(rows: pa.Table) -> pa.Table:
        slices.append(rows.num_rows)
        if len(slices) == killed_at:
            raise KeyboardInterrupt  # the process killed here
        index = rows.schema.get_field_index("event_id")
        return rows.set_column(index, "event_id", pc.utf8_upper(rows["event_id"]))

    lake, _ = _home(tmp_path)
    base = Warehouse(lake.paths, tmp_path / "base.duckdb", rows=upper)
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a", "b", "f"]))
    with pytest.raises(KeyboardInterrupt):  # the table's first load
        base.refresh("events", lake)
    assert base.refresh("events", lake) == 3
    assert _rows(base) == [("2026-11-01", "A"), ("2026-11-01", "B"), ("2026-11-01", "F")]

    slices.clear()  # next: e merged into 11-01 (b gone), then 11-02's c and d: three slices
    lake.write_partition("events", "2026-11-01", _day("2026-11-01", ["a", "e", "f"]))
    lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["c", "d"]))
    with pytest.raises(KeyboardInterrupt):  # a partition merged, one added
        base.refresh("events", lake)
    assert base.refresh("events", lake) == 5
    assert _rows(base) == [
        ("2026-11-01", "A"),
        ("2026-11-01", "E"),
        ("2026-11-01", "F"),
        ("2026-11-02", "C"),
        ("2026-11-02", "D"),
    ]


@pytest.mark.parametrize("filtered", [False, True])
def test_a_rewritten_partition_changes_only_the_rows_it_gained_or_lost(
    tmp_path: Path, filtered: bool
) -> None:
    """A rewritten file (a tenant's table each night) is merged: the rows it lost are deleted, the
    rows it gained or changed loaded, and a row it kept is not filtered again. A file that
    repeats a row replaces the partition; one with other columns rebuilds the table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    seen: list[str] = []

    def upper(rows: pa.Table) -> pa.Table:
        seen.extend(rows["event_id"].to_pylist())
        index = rows.schema.get_field_index("summary")
        return rows.set_column(index, "summary", pc.utf8_upper(rows["summary"]))

    lake, warehouse = _home(tmp_path)
    if filtered:
        warehouse = Warehouse(lake.paths, tmp_path / "base.duckdb", rows=upper)

    def day(ids: list[str], summaries: list[str]) -> pl.DataFrame:
        return _day("2026-11-01", ids).with_columns(summary=pl.Series(summaries))

    def summaries() -> list[tuple[str, str]]:
        with warehouse.connect(read_only=True) as con:
            return con.execute("SELECT event_id, summary FROM events ORDER BY ALL").fetchall()

    lake.write_partition("events", "2026-11-02", _day("2026-11-02", ["z"]))
    lake.write_partition("events", "2026-11-01", day(["a", "b", "c"], ["x", "y", "z"]))
    assert warehouse.refresh("events", lake) == 4
    seen.clear()
    lake.write_partition("events", "2026-11-01", day(["a", "c", "d"], ["x", "changed", "new"]))
    assert warehouse.refresh("events", lake) == 4
    expected = [("a", "x"), ("c", "changed"), ("d", "new"), ("z", None)]
    if filtered:
        expected = [(i, s.upper() if s else s) for i, s in expected]
        assert sorted(seen) == ["c", "d"]  # a, kept, and z, not rewritten, are not filtered again
    assert summaries() == expected

    twice = day(["a", "a"], ["x", "x"])  # not a lake write: those refuse a repeated key
    write_parquet_atomic(twice, lake.paths.partition("events", "2026-11-01"))
    assert warehouse.refresh("events", lake) == 3
    assert summaries()[:2] == [("a", "X" if filtered else "x")] * 2

    wider = day(["a"], ["x"]).with_columns(pl.lit("n").alias("note"))
    write_parquet_atomic(wider, lake.paths.partition("events", "2026-11-01"))
    assert warehouse.refresh("events", lake) == 2
    with warehouse.connect(read_only=True) as con:
        notes = con.execute("SELECT event_id, note FROM events ORDER BY 1").fetchall()
    assert notes == [("a", "n"), ("z", None)]
