"""The CLI: one clear line for expected failures, never a traceback."""

from pathlib import Path

import pytest

from jobs.cli import main


def test_missing_landing_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--home", str(tmp_path), "--landing", str(tmp_path / "nowhere")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err == [f"memorypack: landing folder {tmp_path / 'nowhere'} does not exist"]


def test_bad_date_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["run", "--home", str(tmp_path), "--date", "2026-11-31"])
    assert stop.value.code == 2
    assert "2026-11-31 is not a date (expected YYYY-MM-DD)" in capsys.readouterr().err


def test_reversed_range_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "landing").mkdir()
    code = main(["run", "--home", str(tmp_path), "--start", "2026-11-05", "--end", "2026-11-01"])
    assert code == 2
    assert (
        capsys.readouterr().err.strip()
        == "memorypack: --start 2026-11-05 is after --end 2026-11-01"
    )


def test_generate_writes_a_landing_and_its_truth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `memorypack run` then prints over a generated landing is asserted on the two CLI runs
    of tests/test_run_queue.py (a night costs minutes: the suite runs the CLI's once)."""
    landing = tmp_path / "landing"
    assert (
        main(
            [
                "generate",
                "--out",
                str(landing),
                "--days",
                "1",
                "--interactions",
                "30",
                "--tenants",
                "1",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "truth.json" in out and (landing / "2026-11-01").is_dir()
