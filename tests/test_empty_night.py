"""An empty night is normal: a landing folder with no files runs the whole nightly on a new home."""

from pathlib import Path

import polars as pl

from pipeline.frames import group_bounds


def test_an_empty_frame_has_no_groups() -> None:
    empty = pl.DataFrame(schema={"tenant_id": pl.String, "cluster": pl.Int64})
    assert group_bounds(empty, ["tenant_id"]) == []
    one = pl.DataFrame({"tenant_id": ["a", "a", "b"]})
    assert group_bounds(one, ["tenant_id"]) == [(0, 2), (2, 3)]


def test_nightly_on_an_empty_landing_folder_succeeds_on_a_new_home(tmp_path: Path) -> None:
    from jobs.runner import run_nightly

    landing = tmp_path / "landing"
    (landing / "2026-11-05").mkdir(parents=True)
    outcome = run_nightly(tmp_path / "home", landing, "2026-11-05", "2026-11-05")
    assert outcome.success, f"{outcome.failed_step}: {outcome.error}"
