"""Nights on one home, as an operator lives them: a night blocked by a held warehouse, the nights
after it, a re-run of the blocked night, late data for the first. After every run that succeeds the
warehouse equals the lake; the late data reaches the newest snapshot and the live pack in the same
run, and the live pack never moves back in time."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

from bench.soak import live_as_of, warehouse_differences
from memorypack import MemoryPack
from pipeline.config import Paths
from tests.conftest import feedback, interaction, memory, write_landing
from tests.test_storage import HOLDER

NIGHTS = ["2026-11-01", "2026-11-02", "2026-11-03"]
LATE = datetime(2026, 11, 1, 12, tzinfo=UTC)  # when the late line confirms m_old


def _night(day: str) -> list[dict[str, Any]]:
    tag = day[-2:]
    lines = [
        interaction(f"i{tag}a", ts=f"{day}T10:00:00Z", input=f"Where is order {tag}?"),
        interaction(f"i{tag}b", ts=f"{day}T10:30:00Z", input=f"Can I pay by card on {day}?"),
        feedback(f"f{tag}", target_id=f"i{tag}a", ts=f"{day}T11:00:00Z"),
    ]
    if day == NIGHTS[0]:
        lines += [
            memory("m_old", ts="2026-06-01T09:00:00Z", content="Prefers email over calls"),
            memory("m_rule", memory_type="explicit_instruction", content="Never call after 6pm"),
        ]
    return lines


def _snapshot_row(paths: Paths, key: str, memory_id: str = "m_old") -> dict[str, Any]:
    snap = pl.read_parquet(paths.for_tenant("acme").partition("decay_snapshots", key))
    return snap.filter(pl.col("memory_id") == memory_id).row(0, named=True)


def _live_memory(paths: Paths, memory_id: str = "m_old") -> dict[str, Any]:
    memories = pl.read_parquet(MemoryPack.load(paths.packs / "acme").path / "memories.parquet")
    return memories.filter(pl.col("memory_id") == memory_id).row(0, named=True)


def _load_dates(database: Path) -> list[str]:
    with duckdb.connect(str(database), read_only=True) as con:
        rows = con.execute(
            "SELECT DISTINCT CAST(load_date AS VARCHAR) FROM ingest_stats ORDER BY 1"
        ).fetchall()
    return [row[0] for row in rows]


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Runs the nights once; returns what each step left (asserted by the tests below)."""
    from jobs.runner import run_nightly

    root = tmp_path_factory.mktemp("nights")
    landing, paths = root / "landing", Paths(root / "home")
    for day in NIGHTS:
        write_landing(landing / day, _night(day))
    seen: dict[str, Any] = {}
    with pytest.MonkeyPatch.context() as patch:
        (root / "dagster").mkdir()
        (root / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        patch.setenv("DAGSTER_HOME", str(root / "dagster"))
        patch.setattr("pipeline.storage.warehouse.LOCK_WAIT_SECONDS", 0.3)

        def run(day: str) -> None:
            outcome = run_nightly(paths.home, landing, day, day)
            assert outcome.success, f"{day}: {outcome.failed_step}: {outcome.error}"
            seen.setdefault("differences", []).append(warehouse_differences(paths))

        run(NIGHTS[0])
        # 11-02 while another process holds the warehouse: the lake and the pack get the night,
        # the warehouse cannot (what a build killed before loading it leaves too).
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(paths.warehouse)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
            seen["blocked"] = run_nightly(paths.home, landing, NIGHTS[1], NIGHTS[1])
        finally:
            holder.communicate("\n", timeout=300)
        seen["holder"] = holder.pid
        seen["lake_after_blocked"] = sorted(os.listdir(paths.lake / "ingest_stats"))
        seen["warehouse_after_blocked"] = _load_dates(paths.warehouse)
        run(NIGHTS[2])
        seen["warehouse_after_catch_up"] = _load_dates(paths.warehouse)
        seen["analytics_after_catch_up"] = _load_dates(paths.analytics)
        seen["as_of_before_rerun"] = live_as_of(paths)
        run(NIGHTS[1])  # the blocked night, re-run
        seen["as_of_after_rerun"] = live_as_of(paths)
        seen["before_late"] = {key: _snapshot_row(paths, key) for key in NIGHTS}
        seen["pack_before_late"] = _live_memory(paths)
        # A late line for the first night confirms m_old; the first night is run again.
        late = feedback("f_late", target_id="m_old", signal="validate", ts="2026-11-01T12:00:00Z")
        write_landing(landing / NIGHTS[0], [late], name="late.jsonl")
        run(NIGHTS[0])
        seen["after_late"] = {key: _snapshot_row(paths, key) for key in NIGHTS}
        seen["pack_after_late"] = _live_memory(paths)
        seen["as_of_after_late"] = live_as_of(paths)
    return seen


def test_a_held_warehouse_fails_the_night_in_one_line(nights: dict[str, Any]) -> None:
    """Only the analytics build opens the warehouse: the night's ingest and tenant runs finish
    (the pack is published) and the build fails in one line."""
    blocked = nights["blocked"]
    assert not blocked.success and blocked.failed_step == "analytics_snapshot"
    assert [o.success for o in blocked.tenants.values()] == [True]
    assert blocked.error.startswith("warehouse ") and "\n" not in blocked.error
    assert f"warehouse.duckdb is held open by pid {nights['holder']} (" in blocked.error
    assert blocked.error.endswith(
        "close that connection and run again"
        " (analysts: query analytics.duckdb, which never blocks a run)"
    )
    # The lake has the night; the warehouse does not (yet).
    assert nights["lake_after_blocked"] == [f"load_date={d}" for d in NIGHTS[:2]]
    assert nights["warehouse_after_blocked"] == NIGHTS[:1]


def test_the_next_night_catches_the_warehouse_up(nights: dict[str, Any]) -> None:
    assert nights["warehouse_after_catch_up"] == NIGHTS
    assert nights["analytics_after_catch_up"] == NIGHTS


def test_after_every_run_the_warehouse_equals_the_lake(nights: dict[str, Any]) -> None:
    assert nights["differences"] == [[], [], [], []]


def test_late_data_reaches_the_newest_snapshot_and_the_live_pack(nights: dict[str, Any]) -> None:
    before, after = nights["before_late"], nights["after_late"]
    for key in NIGHTS:  # the re-run date and every later snapshot know the confirmation
        assert before[key]["last_confirmed"] == datetime(2026, 6, 1, 9, tzinfo=UTC)
        assert after[key]["last_confirmed"] == LATE
        assert after[key]["confidence"] > before[key]["confidence"]
    newest = after[NIGHTS[-1]]
    assert (before[NIGHTS[-1]]["status"], newest["status"]) == ("inactive", "active")
    live = nights["pack_after_late"]
    assert nights["pack_before_late"]["confidence"] == before[NIGHTS[-1]]["confidence"]
    assert (live["confidence"], live["last_confirmed"]) == (newest["confidence"], LATE)


def test_the_live_pack_never_moves_back(nights: dict[str, Any]) -> None:
    newest = {"acme": "2026-11-04T00:00:00Z"}
    assert nights["as_of_before_rerun"] == newest
    assert nights["as_of_after_rerun"] == newest
    assert nights["as_of_after_late"] == newest
