"""SIGTERM and SIGINT stop `memorypack run` the same way in every phase (issue 51: a SIGTERM
during the tenants' runs was ignored, "night succeeded" 14 s later): the workers ended, every run
recorded as ended, the lock released as the stack unwound, what the packs owe kept for the next
run, one line saying so, and the shell's exit code for the signal.

Each phase is held open by a hook (ingest in this process's step, a tenant's run, the analytics
build or a tenant's training in its worker) that says when it is there; the signal comes then.
STOP_LOOPS=20 runs each case twenty times (issue 51 asks it of every signal test before a
report)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.resources import TRAINING_JOB
from pipeline.config import Paths
from pipeline.generate import generate
from pipeline.storage.homelock import LOCK_NAME
from pipeline.storage.owed import owed
from tests.conftest import ROOT, SOURCE_PATH
from tests.test_catch_up_after_kill import _descendants

pytestmark = [pytest.mark.slow, pytest.mark.soak]

DAY = "2026-11-01"
LOOPS = int(os.environ.get("STOP_LOOPS", "2"))  # each case: SIGTERM, then SIGINT
# Written by the night once it waits on the trainings: a training started during the analytics
# build holds its step from then on, so the signal comes in the trainings phase.
AWAITING_TRAININGS = "awaiting-trainings"
WAIT_SECONDS = 600  # for a phase to be reached or a stop to end: far above what either takes
PHASES = {
    "ingest": "ingest",
    "tenants": "the tenant runs",
    "analytics": "the analytics build",
    "trainings": "the trainings",
}
# The night of `memorypack run`, with the hook of `phase` installed (argv: home landing phase).
NIGHT = """
import sys
from tests.test_stop_signals import install
install(sys.argv[1], sys.argv[3])
from jobs.cli import main
sys.exit(main(["run", "--home", sys.argv[1], "--landing", sys.argv[2], "--fast", "--workers", "1"]))
"""


def _hold(home: str, phase: str) -> None:
    """Say that `phase` is reached (a file), then stay in it."""
    marker = Path(home) / f"held-{phase}"
    marker.with_suffix(".tmp").write_text(str(os.getpid()))
    marker.with_suffix(".tmp").rename(marker)
    while True:
        time.sleep(0.2)


def held_tenant(home: str, landing: Path, tenant: str, *rest: Any) -> Any:
    """A tenant's real run (in its worker) whose first step stays open."""
    import assets.feedback
    from jobs.runner import run_tenant

    assets.feedback.compute_scores = lambda *args, **kwargs: _hold(home, "tenants")  # type: ignore[assignment]
    return run_tenant(home, landing, tenant, *rest)


def held_analytics(home: str, landing: Path, log_level: str) -> Any:
    """The analytics build's real run (in its worker) whose step stays open."""
    import assets.publish
    from jobs.runner import run_analytics

    assets.publish.build_snapshot = lambda *a, **k: _hold(home, "analytics")  # type: ignore[assignment]
    return run_analytics(home, landing, log_level)


def due_tenant(home: str, landing: Path, tenant: str, *rest: Any) -> Any:
    """A tenant's real run (in its worker) whose dpo_policy finds its next policy due."""
    import assets.preference_policy
    from jobs.runner import run_tenant

    assets.preference_policy.training_due = lambda *a: "held by the test"  # type: ignore[assignment]
    return run_tenant(home, landing, tenant, *rest)


def held_training(home: str, landing: Path, tenant: str, *rest: Any) -> Any:
    """A tenant's real training run (in its worker) whose step stays open once the night waits
    on it (a training may start while the analytics build still runs)."""
    import assets.preference_policy
    from jobs.runner import run_training

    def hold(*args: Any) -> Any:
        while not (Path(home) / AWAITING_TRAININGS).exists():
            time.sleep(0.2)
        _hold(home, "trainings")

    assets.preference_policy.train_shared = hold  # type: ignore[assignment]
    return run_training(home, landing, tenant, *rest)


def _awaiting_trainings(home: str) -> Any:
    """The night's wait on each training (in this process), saying first that it waits."""
    from jobs.runner import _trained

    def trained(pending: Any) -> Any:
        (Path(home) / AWAITING_TRAININGS).touch()
        return _trained(pending)

    return trained


def install(home: str, phase: str) -> None:
    """The hook for `phase`, in the process that runs the night."""
    from functools import partial

    import jobs.runner
    import pipeline.ingest.partitions

    if phase == "ingest":
        pipeline.ingest.partitions.ingest_folder = lambda *a, **k: _hold(home, "ingest")  # type: ignore[assignment]
    elif phase == "tenants":
        jobs.runner._tenant_runs = partial(jobs.runner._tenant_runs, run=held_tenant)  # type: ignore[assignment]
    elif phase == "trainings":
        jobs.runner._tenant_runs = partial(jobs.runner._tenant_runs, run=due_tenant)  # type: ignore[assignment]
        jobs.runner.run_training = held_training  # type: ignore[assignment]
        jobs.runner._trained = _awaiting_trainings(home)  # type: ignore[assignment]
    else:  # analytics
        jobs.runner._tenant_runs = lambda *a, **k: iter(())  # type: ignore[assignment]
        jobs.runner.run_analytics = held_analytics  # type: ignore[assignment]


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("stop") / "landing"
    generate(folder, days=1, interactions=40, tenants=2, seed=5, start=date.fromisoformat(DAY))
    return folder


def _stop_once(landing: Path, home: Path, phase: str, signum: int) -> None:
    env = {**os.environ, "PYTHONPATH": SOURCE_PATH}
    env.pop("DAGSTER_HOME", None)  # the home's own instance
    log = home.parent / f"{home.name}.log"
    home.mkdir(parents=True)
    with log.open("wb") as out:
        night = subprocess.Popen(
            [sys.executable, "-c", NIGHT, str(home), str(landing), phase],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=out,
        )
    marker = home / f"held-{phase}"
    deadline = time.monotonic() + WAIT_SECONDS
    while not marker.exists():
        assert night.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"{phase} never reached"
        time.sleep(0.2)
    tree = _descendants(night.pid)
    began = time.monotonic()
    night.send_signal(signum)
    code = night.wait(WAIT_SECONDS)
    seconds = time.monotonic() - began
    text = log.read_text()
    name = signal.Signals(signum).name
    assert code == 128 + signum, text[-3000:]
    assert (
        f"memorypack: stopped by {name} during {PHASES[phase]} (workers ended, lock released)"
        in (text)
    )
    assert "Traceback" not in text.split("stopped by")[-1]
    assert seconds < 60, seconds  # the workers' grace, and the tenant workers' start at most
    print(f"stopped {phase} by {name} in {seconds:.2f}s")  # pytest -s: the figures per phase
    _no_process_left(tree)
    paths = Paths(home)
    assert (paths.local / LOCK_NAME).read_text() == ""  # released by its owner, not by a kill
    if phase in ("tenants", "analytics"):  # ingest recorded what both packs owe; no pack settled it
        assert sorted(owed(paths)) == ["acme", "globex"]
        assert f"packs still owe: acme {DAY}; globex {DAY}" in text
    elif phase == "trainings":  # both packs were published before their trainings
        assert owed(paths) == {}
        assert "packs still owe: nothing" in text
    with dg.DagsterInstance.from_config(str(paths.local / "dagster")) as instance:
        unfinished = [
            r.run_id
            for r in instance.get_runs()
            if r.status not in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)
        ]
        trainings = [r.status for r in instance.get_runs() if r.job_name == TRAINING_JOB]
    assert unfinished == []  # no run left "started" for the UI and the sensors to wait on
    if phase == "trainings":  # the held one ended as failed; the one queued never started
        assert trainings == [dg.DagsterRunStatus.FAILURE]


def _no_process_left(tree: set[int]) -> None:
    deadline = time.monotonic() + 30
    while True:
        alive = [pid for pid in tree if Path(f"/proc/{pid}").exists() and not _zombie(pid)]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert alive == []


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


@pytest.mark.parametrize("phase", list(PHASES))
def test_a_signal_stops_the_night_in_every_phase(landing: Path, tmp_path: Path, phase: str) -> None:
    for n in range(LOOPS):  # SIGTERM and SIGINT in turn
        _stop_once(landing, tmp_path / f"home{n}", phase, (signal.SIGTERM, signal.SIGINT)[n % 2])
