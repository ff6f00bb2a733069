"""A night that dies owes nothing for good (issue 40): killed after ingest, or one tenant's worker
killed, the next run of the same input brings the tenant's pack up to date; and a run that dies
takes its workers with it (the tenants' and the analysis pool's), none left burning a core."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import jobs.runner
from bench.soak import live_as_of
from jobs.runner import RunOutcome, run_nightly, run_tenant
from memorypack import MemoryPack
from pipeline.config import Paths
from pipeline.storage.owed import owed
from tests.conftest import ROOT, SOURCE_PATH, feedback, interaction, memory, write_landing

# Every test kills a night or its workers: the soak tier (`make test` runs it, `make test-fast` not).
pytestmark = pytest.mark.soak

D1 = "2026-11-04"
# No DPO training: too few pairs, and what is asserted is which rows reach the pack.
NO_DPO = {"dpo": {"min_pairs": 10_000}}
WAIT_SECONDS = 300  # bounds on waiting for a process: far above what they take, never reached
# A night killed (SIGKILL) once ingest is done, before any tenant's run starts: what a kill 7 s
# into `memorypack run`, right after "typed tables rebuilt", leaves.
AFTER_INGEST = """
import os, signal, sys
from pathlib import Path
import jobs.runner
def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)
jobs.runner._tenant_runs = killed
jobs.runner.run_nightly(sys.argv[1], Path(sys.argv[2]), sys.argv[3], sys.argv[3])
"""
# Tenant workers that never end, then this night waiting on them (killed by the test).
STUCK_TENANTS = """
import sys
from pathlib import Path
from jobs.runner import _tenant_runs
from tests.test_catch_up_after_kill import stuck
calls = [(sys.argv[1], Path(sys.argv[1]), t, [], "INFO", None, False) for t in ("acme", "globex")]
list(_tenant_runs(calls, workers=2, instance=None, run=stuck))
"""
# An analysis pool whose processes never end, then this process waiting on them.
STUCK_POOL = """
import sys
from pipeline.pii.detect import AnalysisPool
from tests.test_catch_up_after_kill import stuck
pool = AnalysisPool(workers=2)._start()
for tenant in ("acme", "globex"):
    pool.submit(stuck, sys.argv[1], sys.argv[1], tenant)
pool.shutdown()
"""


def _lines(day: str) -> list[dict[str, Any]]:
    tag = day[-2:]
    return [
        interaction(f"i{tag}", ts=f"{day}T10:00:00Z", input=f"Where is order {tag}?"),
        feedback(f"f{tag}", target_id=f"i{tag}", ts=f"{day}T11:00:00Z"),
        memory(f"m{tag}", ts=f"{day}T09:00:00Z", content=f"Prefers parcel locker {tag}"),
    ]


def _subprocess(code: str, log: Path, *args: str) -> subprocess.Popen[bytes]:
    """`code` in a new Python process (its output to `log`: a pipe could fill and block it)."""
    env = {**os.environ, "PYTHONPATH": SOURCE_PATH}
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", code, *args], cwd=ROOT, env=env, stdout=out, stderr=out
        )


def acme_worker_killed(home: str, landing: Path, tenant: str, *rest: Any) -> RunOutcome:
    """A tenant's run whose worker is killed (SIGKILL) when the tenant is acme."""
    if tenant == "acme":
        os.kill(os.getpid(), signal.SIGKILL)
    return run_tenant(home, landing, tenant, *rest)


def test_what_a_killed_night_owes_is_done_by_the_same_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after ingest, then the same input with acme's worker killed, then the same input
    again: ingest finds nothing new after the first, yet the last run brings acme's pack up."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own instance
    landing, paths = tmp_path / "landing", Paths(tmp_path / "home")
    write_landing(landing / D1, _lines(D1))

    log = tmp_path / "killed.log"
    killed = _subprocess(AFTER_INGEST, log, str(paths.home), str(landing), D1)
    assert killed.wait(WAIT_SECONDS) == -signal.SIGKILL, log.read_text()
    # The lake has the load date, no pack does: what acme's pack owes is recorded.
    assert paths.for_tenant("acme").partition("interactions", D1).exists()
    assert live_as_of(paths) == {}
    assert owed(paths)["acme"] == [D1]

    tenant_runs: Callable[..., Any] = jobs.runner._tenant_runs
    with monkeypatch.context() as patch:
        patch.setattr(jobs.runner, "_tenant_runs", partial(tenant_runs, run=acme_worker_killed))
        night = run_nightly(paths.home, landing, D1, D1, settings=NO_DPO, workers=1)
    assert list(night.tenants) == ["acme"]
    assert night.not_published["acme"].startswith("its run's process died")
    assert live_as_of(paths) == {}
    assert owed(paths)["acme"] == [D1]

    again = run_nightly(paths.home, landing, D1, D1, settings=NO_DPO)
    assert again.success, f"{again.failed_step}: {again.error}"
    assert list(again.tenants) == ["acme"] and again.not_published == {}
    assert live_as_of(paths) == {"acme": "2026-11-05T00:00:00Z"}
    pack = MemoryPack.load(paths.packs / "acme")
    assert "m04" in pl.read_parquet(str(pack.path / "memories.parquet"))["memory_id"].to_list()
    assert owed(paths) == {}  # settled: the next night runs no tenant for it


def stuck(home: str, landing: Path, tenant: str, *rest: Any) -> RunOutcome:
    """A tenant's run that never ends (as one stalled in the analysis): says its pid first."""
    pid_file = Path(home) / f"{tenant}.pid"
    pid_file.with_suffix(".tmp").write_text(str(os.getpid()))
    pid_file.with_suffix(".tmp").rename(pid_file)
    while True:
        time.sleep(1)


def _descendants(pid: int) -> set[int]:
    """Every process under `pid` (from /proc)."""
    children: dict[int, set[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # ended meanwhile
        children.setdefault(ppid, set()).add(int(stat.parent.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        new = children.get(todo.pop(), set()) - found
        found |= new
        todo += new
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (an ended process its parent has not reaped yet)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        assert time.monotonic() < deadline, "waited too long"
        time.sleep(0.2)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")
@pytest.mark.parametrize("code", [STUCK_TENANTS, STUCK_POOL], ids=["tenant_workers", "analysis"])
def test_a_killed_night_leaves_no_worker_alive(tmp_path: Path, code: str) -> None:
    log = tmp_path / "night.log"
    night = _subprocess(code, log, str(tmp_path))
    under: set[int] = set()
    try:
        pid_files = [tmp_path / f"{tenant}.pid" for tenant in ("acme", "globex")]
        _wait_for(lambda: all(p.exists() for p in pid_files) or night.poll() is not None)
        assert night.poll() is None, log.read_text()
        workers = {int(p.read_text()) for p in pid_files}
        under = _descendants(night.pid)  # the workers, and the fork server or resource tracker
        assert workers <= under
        night.kill()
        assert night.wait(WAIT_SECONDS) == -signal.SIGKILL
        _wait_for(lambda: not any(_running(pid) for pid in under))
    finally:
        for pid in [night.pid, *under]:  # what a failed test would leave behind
            if _running(pid):
                os.kill(pid, signal.SIGKILL)
        night.wait(WAIT_SECONDS)
