"""One writer per home: a second run refuses in one line naming the holder; a dead holder frees it."""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from jobs.cli import main
from pipeline.errors import UserError
from pipeline.storage.homelock import home_lock
from tests.conftest import SOURCE_PATH

HOLDER = """
import sys, time
from pathlib import Path
from pipeline.storage.homelock import home_lock
scope = sys.argv[2] if len(sys.argv) > 2 else None
with home_lock(Path(sys.argv[1]), "memorypack run --date 2026-11-01", scope=scope):
    print("held", flush=True)
    time.sleep(600)
"""


@contextmanager
def held_elsewhere(home: Path, scope: str | None = None) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the home's lock (or `scope`'s) until the block ends (it is then
    SIGKILLed)."""
    env = {**os.environ, "PYTHONPATH": SOURCE_PATH}
    args = [sys.executable, "-c", HOLDER, str(home), *([scope] if scope else [])]
    holder = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


def test_a_second_run_refuses_in_one_line_naming_the_holder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "landing" / "2026-11-02").mkdir(parents=True)
    home = tmp_path / "home"
    with held_elsewhere(home) as holder:
        code = main(
            [
                "run",
                "--home",
                str(home),
                "--landing",
                str(tmp_path / "landing"),
                "--date",
                "2026-11-02",
            ]
        )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith(f"memorypack: home {home} is busy: run by pid {holder.pid} ")
    assert "(memorypack run --date 2026-11-01)" in err[-1]
    assert err[-1].endswith("use --wait to queue behind it")


def test_a_killed_holder_frees_the_home(tmp_path: Path) -> None:
    with (
        held_elsewhere(tmp_path) as holder,
        pytest.raises(UserError, match=rf"busy: run by pid {holder.pid} "),
        home_lock(tmp_path, "second"),
    ):
        pass
    with home_lock(tmp_path, "after the kill", wait=True):
        assert "after the kill" in (tmp_path / ".memorypack.lock").read_text()
    assert (tmp_path / ".memorypack.lock").read_text() == ""


def test_the_lock_is_reentrant_within_one_process(tmp_path: Path) -> None:
    """`memorypack run` holds the lock when the run's `home` resource takes it again."""
    with home_lock(tmp_path, "outer") as outer, home_lock(tmp_path, "inner") as inner:
        assert (outer, inner) == (True, False)
        assert "(outer)" in (tmp_path / ".memorypack.lock").read_text()
    with home_lock(tmp_path, "again") as again:
        assert again


def test_a_waiting_run_is_told_who_holds_the_home_then_runs(tmp_path: Path) -> None:
    told: list[str] = []
    taken: list[bool] = []

    def wait_for_the_home() -> None:
        with home_lock(tmp_path, "waiter", wait=True, on_busy=told.append) as took:
            taken.append(took)

    waiter = threading.Thread(target=wait_for_the_home)
    with held_elsewhere(tmp_path) as holder:
        waiter.start()
        deadline = time.monotonic() + 30
        while not told and time.monotonic() < deadline:
            time.sleep(0.05)
        assert taken == []  # still queued behind the holder
    waiter.join(30)
    assert len(told) == 1 and told[0].startswith(f"run by pid {holder.pid} ")
    assert taken == [True]


def test_leftovers_of_a_killed_run_are_removed_under_the_lock(tmp_path: Path) -> None:
    """Each lock cleans what it guards: ingest the shared tables, a tenant its own folders (never
    another tenant's, whose run may be writing), the analytics build its copies."""
    from pipeline.storage.homelock import ANALYTICS, clean_leftovers

    partition = tmp_path / "lake" / "events" / "load_date=2026-11-02"
    acme = tmp_path / "lake" / "feedback" / "tenant_id=acme" / "load_date=2026-11-02"
    globex = tmp_path / "lake" / "feedback" / "tenant_id=globex"
    for folder in (partition, acme, globex):
        folder.mkdir(parents=True)
        (folder / "data.parquet").write_bytes(b"kept")
    doomed = {
        None: [partition / ".data.parquet.3c4d.tmp"],
        ANALYTICS: [
            tmp_path / ".analytics.duckdb.0a1b.tmp",
            tmp_path / ".analytics.duckdb.0a1b.v1.tmp.wal",
        ],
        "acme": [acme / ".data.parquet.5e6f.tmp"],
    }
    running = globex / ".data.parquet.7a8b.tmp"  # globex's run is writing it
    for path in [running, *(p for paths in doomed.values() for p in paths)]:
        path.write_bytes(b"half")
    (tmp_path / "analytics.duckdb").write_bytes(b"live")
    for scope, paths in doomed.items():
        with home_lock(tmp_path, "test", scope=scope):
            assert clean_leftovers(tmp_path, scope) == sorted(paths)
        assert not any(p.exists() for p in paths)
    assert running.exists()
    for folder in (partition, acme, globex):
        assert (folder / "data.parquet").read_bytes() == b"kept"
    assert (tmp_path / "analytics.duckdb").read_bytes() == b"live"


def test_a_killed_policy_write_is_cleaned_by_its_tenant_only(tmp_path: Path) -> None:
    """A training killed while saving a tenant's DPO policy leaves `models/.<policy id>.<hex>.tmp`
    (and a model's `.run.json.<hex>.tmp`); the next holder of the tenant's training lock removes
    them (a tenant's run takes it for that when no training holds it; its own lock does not
    cover them: a training may be writing beside it), never another tenant's whose name starts
    alike, never a finished policy."""
    from pipeline.storage.homelock import clean_leftovers, training_scope

    models = tmp_path / "models"
    hex12, hex32 = "be34663cf830", "fe8add8d0d99410ca9e462c95eadbf12"
    finished = models / f"acme-{hex12}"
    (finished / "policy").mkdir(parents=True)
    (finished / "run.json").write_text("{}")
    doomed = [models / f".acme-{hex12}.{hex32}.tmp", finished / f".run.json.{hex32}.tmp"]
    doomed[0].mkdir()
    (doomed[0] / "policy").mkdir()
    doomed[1].write_text("half")
    other = models / f".acme-eu-{hex12}.{hex32}.tmp"  # tenant acme-eu's run is writing it
    other.mkdir()
    with home_lock(tmp_path, "test", scope="acme"):
        assert clean_leftovers(tmp_path, "acme") == []
    with home_lock(tmp_path, "test", scope=training_scope("acme")):
        assert clean_leftovers(tmp_path, training_scope("acme")) == sorted(doomed)
    assert not any(p.exists() for p in doomed)
    assert other.is_dir() and (finished / "run.json").read_text() == "{}"


def test_a_lock_taken_only_if_free_never_waits(tmp_path: Path) -> None:
    """A tenant's pack run trains a first policy only when no training of the tenant holds its
    training lock: it takes the lock without waiting, or goes on without it."""
    from pipeline.storage.homelock import held_if_free, training_scope

    scope = training_scope("acme")
    with held_elsewhere(tmp_path, scope), held_if_free(tmp_path, "acme pack run", scope) as held:
        assert held is False
    with held_if_free(tmp_path, "acme pack run", scope) as held:
        assert held is True
        assert "(acme pack run)" in (tmp_path / "locks" / "acme.training.lock").read_text()


def test_tenant_locks_are_separate(tmp_path: Path) -> None:
    """Two tenants' runs hold their own locks at once, beside the ingest lock."""
    with (
        home_lock(tmp_path, "ingest") as ingest,
        home_lock(tmp_path, "acme run", scope="acme") as acme,
        home_lock(tmp_path, "globex run", scope="globex") as globex,
    ):
        assert (ingest, acme, globex) == (True, True, True)
        assert "(acme run)" in (tmp_path / "locks" / "acme.lock").read_text()
        assert "(globex run)" in (tmp_path / "locks" / "globex.lock").read_text()
