"""One line for every expected CLI failure: arguments, missing dates, missing extras, failed steps."""

import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from jobs.cli import main
from tests.conftest import SOURCE_PATH

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """`python -c code args` from this tree, in a clean environment (plus `env`)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": SOURCE_PATH, **env},
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard only: a cold start on a busy machine takes minutes
        check=False,
    )


def _err(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("flag", ["--days", "--tenants", "--interactions"])
def test_generate_refuses_zero_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    assert main(["generate", "--out", str(tmp_path), flag, "0"]) == 2
    assert _err(capsys) == [f"memorypack: {flag} must be at least 1 (got 0)"]


def test_explicit_date_without_landing_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    landing = tmp_path / "landing"
    (landing / "2026-11-01").mkdir(parents=True)
    code = main(["run", "--home", str(tmp_path), "--landing", str(landing), "--date", "2026-11-05"])
    assert code == 2
    assert _err(capsys) == [f"memorypack: no landing folder for 2026-11-05 in {landing}"]


def test_range_without_any_landing_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    argv = ["run", "--home", str(tmp_path), "--landing", str(landing)]
    assert main([*argv, "--start", "2026-11-01", "--end", "2026-11-02"]) == 2
    assert _err(capsys) == [
        f"memorypack: no landing folder for any date 2026-11-01..2026-11-02 in {landing}"
    ]


@pytest.mark.parametrize("given", [["--start", "2026-11-01"], ["--end", "2026-11-01"]])
def test_half_a_range_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], given: list[str]
) -> None:
    (tmp_path / "landing" / "2026-11-01").mkdir(parents=True)
    assert main(["run", "--home", str(tmp_path), *given]) == 2
    assert _err(capsys) == ["memorypack: give both --start and --end (or --date for one day)"]


def test_pack_help_says_tenant_is_required_where_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    helps = {}
    for command in ["list", "show", "verify", "rollback"]:
        with pytest.raises(SystemExit):
            main(["pack", command, "--help"])
        helps[command] = " ".join(capsys.readouterr().out.split())
    assert all("--tenant TENANT the tenant (required)" in helps[c] for c in ["show", "rollback"])
    assert all("one tenant (default: all)" in helps[c] for c in ["list", "verify"])


LIGHT = (
    "import sys; sys.modules['dagster'] = None; sys.modules['polars'] = None\n"
    "from jobs.cli import main\n"
    "sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.parametrize("command", ["run", "demo"])
def test_missing_pipeline_dependencies_are_named_in_one_line(tmp_path: Path, command: str) -> None:
    (tmp_path / "landing" / "2026-11-01").mkdir(parents=True)
    done = _python(LIGHT, command, "--home", str(tmp_path))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("memorypack: running the pipeline needs its dependencies (")
    assert lines[0].endswith("pip install memorypack-pipeline")


def _error(message: str, cls: str, stack: list[str], cause: object = None) -> SimpleNamespace:
    return SimpleNamespace(message=message, cls_name=cls, stack=stack, cause=cause)


def test_failure_cause_is_the_innermost_exception_with_its_line() -> None:
    from jobs.runner import failure_cause

    inner = _error(
        "ValueError: zero-size array to reduction operation maximum\n",
        "ValueError",
        [
            '  File "/x/pipeline/consolidate.py", line 136, in _label_groups\n    sub.max()\n',
            '  File "/v/site-packages/numpy/_core/_methods.py", line 41, in _amax\n',
        ],
    )
    outer = _error(
        'dagster._core.errors.DagsterExecutionStepExecutionError: Error occurred while executing op "memory_clusters":\n',
        "DagsterExecutionStepExecutionError",
        ['  File "/x/dagster/plan.py", line 1, in f\n'],
        inner,
    )
    data = SimpleNamespace(user_failure_data=None, error=outer)
    assert (
        failure_cause(data)
        == "ValueError: zero-size array to reduction operation maximum (consolidate.py:136)"
    )


def test_failure_description_is_kept_as_is() -> None:
    from jobs.runner import failure_cause

    data = SimpleNamespace(
        user_failure_data=SimpleNamespace(description="3 events lost between landing and lake"),
        error=_error("dagster...Failure: x", "Failure", []),
    )
    assert failure_cause(data) == "3 events lost between landing and lake"


def test_a_user_error_in_a_step_is_its_message_alone() -> None:
    from jobs.runner import failure_cause

    inner = _error(
        "pipeline.errors.UserError: warehouse /h/warehouse.duckdb is held open by pid 7\n",
        "UserError",
        ['  File "/x/pipeline/storage/lake.py", line 170, in connect\n'],
    )
    data = SimpleNamespace(user_failure_data=None, error=_error("x", "StepError", [], inner))
    assert failure_cause(data) == "warehouse /h/warehouse.duckdb is held open by pid 7"


def test_date_before_the_first_partition_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYPACK_FIRST_DATE", "2026-11-02")
    (tmp_path / "landing" / "2026-11-01").mkdir(parents=True)
    assert main(["run", "--home", str(tmp_path), "--date", "2026-11-01"]) == 2
    assert _err(capsys) == [
        "memorypack: 2026-11-01 is before the first partition date 2026-11-02"
        " (set MEMORYPACK_FIRST_DATE)"
    ]


@pytest.mark.parametrize(("env", "first"), [(None, "2026-01-01"), ("2026-10-01", "2026-10-01")])
def test_partitions_start_at_the_configured_first_date(env: str | None, first: str) -> None:
    extra = {"MEMORYPACK_FIRST_DATE": env} if env else {}
    code = "from assets.partitions import DAILY; print(DAILY.start.date())"
    done = _python(code, **extra)
    assert done.stdout.strip() == first, done.stderr


def test_tenants_that_kept_their_pack_are_named_and_the_exit_code_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run where one tenant failed a guard succeeded for the others: exit 3, one line each."""
    import jobs.runner
    from jobs.cli import EXIT_NOT_PUBLISHED

    reason = "not published: failed pack_few_shot_not_negative; previous pack stays"
    outcome = jobs.runner.RunOutcome(True, "r1", not_published={"acme": reason})
    monkeypatch.setattr(jobs.runner, "run_nightly", lambda *args, **kwargs: outcome)
    landing = tmp_path / "landing"
    (landing / "2026-11-02").mkdir(parents=True)
    code = main(["run", "--home", str(tmp_path), "--landing", str(landing)])
    assert code == EXIT_NOT_PUBLISHED == 3
    assert _err(capsys) == [f"memorypack: acme: {reason}"]
