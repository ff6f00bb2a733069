"""One run per home at a time: the instance's run queue, and the home lock inside every run.

`memorypack run` and `make ui` share an instance whose dagster.yaml queues runs and lets at most
one run per `memorypack/home` tag start; the schedule and the sensor tag their runs. Every run
(daemon-launched or CLI) also holds the home lock through its `home` resource, so a daemon run and
a CLI run on one home wait for each other instead of overlapping.
"""

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.run_coordinator import QueuedRunCoordinator

from assets.partitions import TENANTS
from assets.resources import MemorypackHome
from bench.soak import ingest_problems, leftovers, unreadable_lake_files, warehouse_differences
from jobs.definitions import defs
from jobs.instance import (
    ANALYTICS_TAG,
    HOME_TAG,
    TENANT_TAG,
    TRAINING_TAG,
    dagster_home,
    rendered_config,
    workers,
)
from jobs.nightly import landing_sensor, nightly_schedule
from jobs.runner import _instance
from pipeline.config import Paths
from pipeline.generate import generate
from pipeline.storage.lake import Lake
from tests.conftest import SOURCE_PATH
from tests.test_homelock import held_elsewhere

ROOT = Path(__file__).resolve().parents[1]
START = date(2026, 11, 1)
DATES = ["2026-11-01", "2026-11-02"]
CLI = [sys.executable, "-m", "jobs.cli"]
ONE_PER_VALUE = [
    {"key": tag, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}
    for tag in (HOME_TAG, TENANT_TAG, TRAINING_TAG, ANALYTICS_TAG)
]


def test_memorypack_run_uses_the_queued_instance_with_one_run_per_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with _instance(Paths(tmp_path)) as instance:
        assert instance.root_directory == str(tmp_path / "dagster")
        assert isinstance(instance.run_coordinator, QueuedRunCoordinator)
        queue = instance.get_concurrency_config().run_queue_config
        assert queue is not None and list(queue.tag_concurrency_limits) == ONE_PER_VALUE
        assert queue.max_concurrent_runs == workers()
        assert instance.get_settings("telemetry") == {"enabled": False}


def test_the_packaged_config_replaces_a_stale_one_but_not_an_explicit_dagster_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    ours = tmp_path / "home" / "dagster" / "dagster.yaml"
    ours.parent.mkdir(parents=True)
    ours.write_text("telemetry:\n  enabled: false\n")  # what older versions wrote
    assert dagster_home(tmp_path / "home") == ours.parent
    assert ours.read_text() == rendered_config()
    theirs = tmp_path / "theirs"
    monkeypatch.setenv("DAGSTER_HOME", str(theirs))
    assert dagster_home(tmp_path / "home") == theirs
    assert (theirs / "dagster.yaml").read_text() == rendered_config()  # none yet: ours
    (theirs / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    dagster_home(tmp_path / "home")
    assert (theirs / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"


def test_make_ui_prepares_the_same_instance_folder(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env |= {"PYTHONPATH": SOURCE_PATH, "MEMORYPACK_HOME": str(tmp_path)}
    printed = subprocess.run(
        [sys.executable, "-m", "jobs.instance"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert printed == str(tmp_path / "dagster")
    assert (tmp_path / "dagster" / "dagster.yaml").read_text() == rendered_config()
    # make ui runs jobs.ui, which starts Dagster on the instance folder jobs.instance prepares.
    assert "$(PY) -m jobs.ui" in (ROOT / "Makefile").read_text()
    assert "from jobs.instance import dagster_home" in (ROOT / "jobs" / "ui.py").read_text()


def test_schedule_and_sensor_runs_carry_the_home_tag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYPACK_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MEMORYPACK_LANDING", str(tmp_path / "landing"))
    monkeypatch.setenv("MEMORYPACK_SENSORS_CATCH_UP", "1")  # its first tick acts on the folders
    for day in DATES:
        (tmp_path / "landing" / day).mkdir(parents=True)
        (tmp_path / "landing" / day / "a.jsonl").write_text("{}\n")
    tick = datetime(2026, 11, 3, 2, 0, tzinfo=UTC)
    with (
        dg.instance_for_test() as instance,
        dg.build_schedule_context(instance=instance, scheduled_execution_time=tick) as context,
    ):
        scheduled = nightly_schedule(context)
    assert isinstance(scheduled, dg.RunRequest)
    sensed = landing_sensor(dg.build_sensor_context()).run_requests
    assert [r.partition_key for r in sensed] == DATES
    for request in [scheduled, *sensed]:
        assert request.tags[HOME_TAG] == str(tmp_path / "home")


def test_every_run_executes_in_one_process() -> None:
    """The `home` resource (and so its lock) spans the run only with the in-process executor."""
    for job in ("ingest", "tenant_nightly", "analytics"):
        assert defs.resolve_job_def(job).executor_def is dg.in_process_executor


@dg.asset(partitions_def=TENANTS)
def lock_holder(home: MemorypackHome) -> str:
    """What a tenant run's steps see: their own run holds the tenant's lock, and `paths` shows
    only the tenant's folders."""
    lock = (home.paths.home / "locks" / "acme.lock").read_text()
    return f"{lock} | {home.paths.table('feedback')}"


def test_a_tenant_run_waits_for_its_tenant_then_holds_it_and_cleans_leftovers(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "lake" / "feedback" / "tenant_id=acme" / "load_date=2026-11-02"
    leftover = folder / ".data.parquet.0a1b.tmp"
    leftover.parent.mkdir(parents=True)
    leftover.write_bytes(b"half")
    results: list[dg.ExecuteInProcessResult] = []
    resources = {"home": MemorypackHome(home=str(tmp_path))}
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", ["acme"])
        run = threading.Thread(  # a run with no `memorypack run` around it, as the daemon starts
            target=lambda: results.append(
                dg.materialize(
                    [lock_holder], instance=instance, resources=resources, partition_key="acme"
                )
            )
        )
        with held_elsewhere(tmp_path, "acme") as holder:
            run.start()
            waiting = busy_messages(instance, deadline=time.monotonic() + 120)
            assert results == [] and leftover.exists()  # queued behind the holder, nothing done
        run.join(120)
    assert len(waiting) == 1 and f"busy: run by pid {holder.pid} " in waiting[0]
    assert "(memorypack run --date 2026-11-01)" in waiting[0]
    [result] = results
    assert result.success
    seen = result.output_for_node("lock_holder")
    assert f"(dagster run {result.run_id} acme)" in seen
    assert seen.endswith(str(tmp_path / "lake" / "feedback" / "tenant_id=acme" / "data.parquet"))
    assert not leftover.exists()
    assert (tmp_path / "locks" / "acme.lock").read_text() == ""


def busy_messages(instance: dg.DagsterInstance, deadline: float) -> list[str]:
    """The run's "home is busy" log lines, once it has logged one (or the deadline passed)."""
    while time.monotonic() < deadline:
        found = [
            entry.user_message
            for run in instance.get_runs()
            for entry in instance.all_logs(run.run_id)
            if "is busy: " in entry.user_message
        ]
        if found:
            return found
        time.sleep(0.2)
    return []


@pytest.fixture(scope="module")
def tiny_landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    landing = tmp_path_factory.mktemp("queue") / "landing"
    generate(landing, days=len(DATES), interactions=60, tenants=2, seed=3, start=START)
    return landing


def consistency_problems(home: Path) -> list[str]:
    """Each date's ingest partition once, counts conserved, warehouse = lake, no leftovers."""
    paths = Paths(home)
    stats = Lake(paths).read("ingest_stats").select("load_date").collect()
    dates = sorted(str(d) for d in stats["load_date"].unique())
    problems = [] if dates == DATES else [f"ingest_stats load dates {dates}"]
    problems += unreadable_lake_files(paths) + warehouse_differences(paths)
    problems += ingest_problems(paths) + [f"leftover {name}" for name in leftovers(paths)]
    return problems


def run_spans(records: list[dg.RunRecord]) -> list[tuple[str, float, float]]:
    """(partition, start, end) of each run, in start order; every run succeeded."""
    assert [r.dagster_run.status for r in records] == [dg.DagsterRunStatus.SUCCESS] * len(records)
    spans = [
        (r.dagster_run.tags["dagster/partition"], r.start_time or 0.0, r.end_time or 0.0)
        for r in records
    ]
    return sorted(spans, key=lambda span: span[1])


@pytest.mark.slow
def test_two_cli_runs_started_together_run_one_after_the_other(
    tmp_path: Path, tiny_landing: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env |= {"PYTHONPATH": SOURCE_PATH, "HF_HUB_OFFLINE": "1"}
    home, landing = tmp_path / "home", str(tiny_landing)
    runs = [
        subprocess.Popen(
            [*CLI, "run", "--wait", "--date", day, "--home", str(home), "--landing", landing],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for day in DATES
    ]
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], outputs
    # What `memorypack run` tells a person (tests/test_cli.py's night): the outcome and the slowest
    # three steps, on standard output (the log lines go to standard error).
    for out, _ in outputs:
        lines = out.splitlines()
        assert any(" succeeded in " in line for line in lines), lines
        slowest = [line for line in lines if line.startswith("memorypack: slowest steps: ")]
        assert len(slowest) == 1 and slowest[0].count("s,") == 2, lines
    assert (home / "packs").is_dir()
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        records = instance.get_run_records()
    nights = [r for r in records if r.dagster_run.job_name == "ingest"]
    (first, first_start, _), (second, second_start, _) = run_spans(nights)
    assert sorted([first, second]) == DATES
    # The second CLI run waited for the whole first night (its tenants and analytics build).
    first_night = [r for r in records if first_start <= (r.start_time or 0) < second_start]
    assert {r.dagster_run.job_name for r in first_night} == {
        "ingest",
        "tenant_nightly",
        "analytics",
    }
    assert max(r.end_time or 0 for r in first_night) <= second_start
    assert consistency_problems(home) == []


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("MEMORYPACK_DAEMON_TEST"),
    reason="a real dagster-daemon takes minutes (206-388 s on 2 busy cores): MEMORYPACK_DAEMON_TEST=1",
)
def test_the_daemon_runs_ingest_then_each_tenant_in_its_own_run_then_analytics(
    tmp_path: Path, tiny_landing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real `dagster-daemon` and its run queue: the landing sensor asks for both landing
    folders in one tick and the queue runs them one after the other; the tenant sensor launches a
    run per changed tenant (separate processes, never two of one tenant at once); the analytics
    sensor builds the snapshot once they are done."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    home = tmp_path / "home"
    env = {
        **os.environ,
        "PYTHONPATH": SOURCE_PATH,
        "HF_HUB_OFFLINE": "1",
        "MEMORYPACK_HOME": str(home),
        "MEMORYPACK_LANDING": str(tiny_landing),
        "DAGSTER_HOME": str(dagster_home(home)),
    }
    bin_dir = Path(sys.executable).parent
    workspace = ["-w", str(ROOT / "workspace.yaml")]
    for switch in (["sensor", "start", "landing_sensor"], ["schedule", "stop", "nightly_schedule"]):
        # the sensor is off by default; the schedule (on) must not add a run should 02:00 pass
        subprocess.run(
            [bin_dir / "dagster", *switch, *workspace],
            cwd=tmp_path,
            env=env,
            check=True,
            capture_output=True,
        )
    with (tmp_path / "daemon.log").open("w") as log:
        daemon = subprocess.Popen(  # its code server talks over a unix socket: no port opened
            [bin_dir / "dagster-daemon", "run", *workspace],
            cwd=tmp_path,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        records = finished_night(home, deadline=time.monotonic() + 1500)
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(60)
    by_job = {job: [r for r in records if r.dagster_run.job_name == job] for job in JOBS}
    assert len(by_job["ingest"]) == 2, (tmp_path / "daemon.log").read_text()[-3000:]
    assert {r.dagster_run.tags[HOME_TAG] for r in by_job["ingest"]} == {str(home)}
    (first, _, first_end), (second, second_start, _) = run_spans(by_job["ingest"])
    assert sorted([first, second]) == DATES
    assert first_end <= second_start  # the second stayed queued while the first ran
    tenants = run_spans(by_job["tenant_nightly"])
    assert {tenant for tenant, _, _ in tenants} == {"acme", "globex"}
    for tenant in ("acme", "globex"):
        mine = [(s, e) for t, s, e in tenants if t == tenant]
        assert all(end <= start for (_, end), (start, _) in itertools.pairwise(mine))
    last_analytics = max(r.end_time or 0 for r in by_job["analytics"])
    assert last_analytics >= max(end for _, _, end in tenants)
    assert consistency_problems(home) == []


JOBS = ("ingest", "tenant_nightly", "analytics")


def finished_night(home: Path, deadline: float) -> list[dg.RunRecord]:
    """Every run once both ingest runs, their tenant runs and an analytics build after the last
    tenant run have finished (or whatever there is at the deadline)."""
    done = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        while True:
            records = instance.get_run_records()
            ended = all(r.dagster_run.status in done for r in records)
            jobs = [r.dagster_run.job_name for r in records]
            tenant_ends = [r.end_time or 0 for r in records if r.dagster_run.job_name == JOBS[1]]
            analytics_ends = [r.end_time or 0 for r in records if r.dagster_run.job_name == JOBS[2]]
            finished = (
                ended
                and jobs.count("ingest") == 2
                and tenant_ends
                and analytics_ends
                and max(analytics_ends) >= max(tenant_ends)
            )
            if finished or time.monotonic() > deadline:
                return records
            time.sleep(2)
