"""raw_events and the typed tables as Dagster assets: idempotent partitions, single-run backfill."""

import warnings
from pathlib import Path

import dagster as dg
import polars as pl

from assets.ingest import ASSETS
from assets.resources import MemorypackHome
from pipeline.config import Paths
from pipeline.storage.lake import Lake
from tests.conftest import feedback, interaction, memory, write_landing

warnings.filterwarnings("ignore", category=dg.BetaWarning)


def _materialize(home: Path, **kwargs) -> dg.ExecuteInProcessResult:
    with dg.instance_for_test() as instance:
        return dg.materialize(
            ASSETS,
            instance=instance,
            resources={"home": MemorypackHome(home=str(home))},
            **kwargs,
        )


def _landing(home: Path) -> None:
    write_landing(
        home / "landing" / "2026-11-01", [interaction("i1", ts="2026-11-01T09:00:00Z"), "{oops"]
    )
    write_landing(
        home / "landing" / "2026-11-02",
        [interaction("i1", ts="2026-11-01T09:00:00Z"), feedback("f1"), memory("m1"), memory("m1")],
    )


def _counts(home: Path) -> dict[str, int]:
    """Rows per lake table (ingest writes the lake only; the analytics build loads the warehouse)."""
    lake = Lake(Paths(home))
    return {
        t: lake.read(t).select(pl.len()).collect().item()
        for t in ("events", "quarantine", "interactions", "feedback", "memory_statements")
    }


def test_partition_rerun_is_idempotent(tmp_path: Path) -> None:
    _landing(tmp_path)
    first = _materialize(tmp_path, partition_key="2026-11-01")
    assert first.success
    second = _materialize(tmp_path, partition_key="2026-11-02")
    assert second.success
    counts = _counts(tmp_path)
    assert counts == {
        "events": 3,
        "quarantine": 1,
        "interactions": 1,
        "feedback": 1,
        "memory_statements": 1,
    }
    again = _materialize(tmp_path, partition_key="2026-11-02")
    assert again.success
    assert _counts(tmp_path) == counts
    stats = pl.read_parquet(Paths(tmp_path).partition("ingest_stats", "2026-11-02"))
    assert stats.select("lines_read", "accepted", "duplicates", "quarantined").row(0) == (
        4,
        2,
        2,
        0,
    )


def test_typed_tables_rebuild_only_the_load_dates_that_were_ingested(tmp_path: Path) -> None:
    _landing(tmp_path)
    paths = Paths(tmp_path)
    assert _materialize(tmp_path, partition_key="2026-11-01").success
    first_day = paths.for_tenant("acme").partition("interactions", "2026-11-01")
    written = first_day.stat().st_mtime_ns
    second = _materialize(tmp_path, partition_key="2026-11-02")
    assert second.success
    assert first_day.stat().st_mtime_ns == written  # the earlier load date is not rewritten
    meta = second.asset_materializations_for_node("typed_event_tables")
    by_asset = {m.asset_key.path[-1]: m.metadata for m in meta}
    assert by_asset["interactions"]["rebuilt_load_dates"].value == ["2026-11-02"]
    assert by_asset["interactions"]["changed"].value == {"acme": ["2026-11-02"]}
    assert by_asset["interactions"]["dagster/row_count"].value == 1  # the table, not the run
    assert by_asset["memory_statements"]["dagster/row_count"].value == 1
    again = _materialize(tmp_path, partition_key="2026-11-01")  # re-ingested: rebuilt …
    assert again.success
    meta = {
        m.asset_key.path[-1]: m.metadata
        for m in again.asset_materializations_for_node("typed_event_tables")
    }
    assert meta["interactions"]["rebuilt_load_dates"].value == ["2026-11-01"]
    # … to the same rows: the tenant's file stays, and no tenant run is asked for.
    assert meta["interactions"]["changed"].value == {}
    assert first_day.stat().st_mtime_ns == written
    assert _counts(tmp_path)["interactions"] == 1


def test_range_runs_as_one_run_with_checks(tmp_path: Path) -> None:
    _landing(tmp_path)
    result = _materialize(
        tmp_path,
        tags={
            "dagster/asset_partition_range_start": "2026-11-01",
            "dagster/asset_partition_range_end": "2026-11-02",
        },
    )
    assert result.success
    checks = {e.asset_check_key.name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        "lines_read_equals_accepted_plus_duplicates_plus_quarantined": True,
        "matches_contract": True,
    }
    assert _counts(tmp_path)["events"] == 3
    events = [
        m
        for m in result.asset_materializations_for_node("raw_events")
        if m.asset_key.path == ["raw_events"]
    ]
    assert [e.partition for e in events] == ["2026-11-01", "2026-11-02"]


def test_each_partition_of_a_range_run_carries_its_own_figures(tmp_path: Path) -> None:
    _landing(tmp_path)
    with dg.instance_for_test() as instance:
        assert dg.materialize(
            ASSETS,
            instance=instance,
            resources={"home": MemorypackHome(home=str(tmp_path))},
            tags={
                "dagster/asset_partition_range_start": "2026-11-01",
                "dagster/asset_partition_range_end": "2026-11-02",
            },
        ).success
        figures = {}
        for day in ("2026-11-01", "2026-11-02"):
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey("raw_events"), asset_partitions=[day]),
                limit=1,
            ).records
            materialization = records[0].asset_materialization
            assert materialization is not None
            meta = materialization.metadata
            figures[day] = {
                k: meta[k].value
                for k in ("files", "lines_read", "accepted", "duplicates", "quarantined")
            } | {
                "rows": meta["dagster/row_count"].value,
                "reasons": meta["quarantine_by_reason"].value,
            }
    assert figures == {
        "2026-11-01": {
            "files": 1,
            "lines_read": 2,
            "accepted": 1,
            "duplicates": 0,
            "quarantined": 1,
            "rows": 1,
            "reasons": {"invalid_json": 1},
        },
        "2026-11-02": {
            "files": 1,
            "lines_read": 4,
            "accepted": 2,
            "duplicates": 2,
            "quarantined": 0,
            "rows": 2,
            "reasons": {},
        },
    }


def test_a_typed_build_checks_each_partition_and_keeps_only_counts_and_a_preview(
    tmp_path: Path,
) -> None:
    """A backfill never holds its typed rows at once: each tenant × load date partition is checked
    as it is written; counts, the first rows and the findings are what the build keeps."""
    from contextlib import nullcontext

    from pipeline.ingest.layout import KEPT_ROWS, build_typed_tables

    days = ["2026-11-01", "2026-11-02"]
    for d, day in enumerate(days):
        write_landing(
            tmp_path / "landing" / day,
            [interaction(f"i{d}{k}", ts=f"{day}T09:00:0{k}Z") for k in range(4)]
            + [interaction(f"g{d}", tenant_id="globex", ts=f"{day}T09:00:00Z")],
        )
    with dg.instance_for_test() as instance:
        dg.materialize(
            [ASSETS[0]],  # raw_events only: the typed tables are built here, by hand
            instance=instance,
            resources={"home": MemorypackHome(home=str(tmp_path))},
            partition_key=days[0],
        )
        dg.materialize(
            [ASSETS[0]],
            instance=instance,
            resources={"home": MemorypackHome(home=str(tmp_path))},
            partition_key=days[1],
        )
    seen: list[tuple[str, str, int]] = []

    def check(name: str, frame: pl.DataFrame) -> str | None:
        seen.append((name, frame["tenant_id"][0] if frame.height else "", frame.height))
        return (
            "globex is wrong" if name == "interactions" and "globex" in frame["tenant_id"] else None
        )

    built = build_typed_tables(Paths(tmp_path), lock=lambda _: nullcontext(), check=check)
    interactions = [s for s in seen if s[0] == "interactions"]
    assert interactions == [("interactions", "acme", 4), ("interactions", "globex", 1)] * 2
    assert built.rows == {"interactions": 10, "feedback": 0, "memory_statements": 0}
    assert built.problems["interactions"] == ["globex is wrong"] * 2
    assert built.problems["feedback"] == []
    assert built.written["interactions"].height == KEPT_ROWS
    assert built.written["feedback"].height == 0
