"""An empty night is normal: a landing folder with no files runs the whole nightly on a new home."""

from pathlib import Path

import polars as pl
import pytest

from pipeline.frames import group_bounds


def test_an_empty_frame_has_no_groups() -> None:
    empty = pl.DataFrame(schema={"tenant_id": pl.String, "cluster": pl.Int64})
    assert group_bounds(empty, ["tenant_id"]) == []
    one = pl.DataFrame({"tenant_id": ["a", "a", "b"]})
    assert group_bounds(one, ["tenant_id"]) == [(0, 2), (2, 3)]


def test_nightly_on_an_empty_landing_folder_succeeds_on_a_new_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jobs.runner import run_nightly

    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))  # restored after the test
    landing = tmp_path / "landing"
    (landing / "2026-11-05").mkdir(parents=True)
    outcome = run_nightly(tmp_path / "home", landing, "2026-11-05", "2026-11-05")
    assert outcome.success, f"{outcome.failed_step}: {outcome.error}"
    # Ingest and the analytics build ran; no tenant changed, so no tenant run, and no pack.
    assert {"raw_events", "typed_event_tables", "analytics_snapshot"} <= set(outcome.step_seconds)
    assert outcome.tenants == {}
    assert not any((tmp_path / "home" / "packs").glob("*/LATEST"))
    assert (tmp_path / "home" / "analytics.duckdb").exists()
