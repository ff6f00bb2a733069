"""A run stops the same way on SIGTERM and SIGINT, whatever it is doing: ingest in this process,
the tenants' runs, the analytics build or the trainings in worker processes. The workers are
ended (SIGTERM, which their Dagster run records as a failure, then SIGKILL after
STOP_GRACE_SECONDS), the run's locks are released as the stack unwinds, and nothing owed is
lost: ingest records what each tenant's pack owes before it writes, and only a published pack
settles it (pipeline/storage/owed.py), so the next run does what this one did not.

Dagster replaces the signal handlers while it runs a job in this process (ingest) and turns a
signal into a failed step; the signal is still written to a wakeup file descriptor, which
`SignalStop.check` reads after each job to stop there too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeVar

from jobs.instance import PROCESS_TAG, dagster_home
from pipeline.config import Paths
from pipeline.storage.owed import owed

T = TypeVar("T")

STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# For a worker to end on SIGTERM before it is killed: its Dagster run records the failure itself
# when its main thread hears the signal; otherwise the parent records it (jobs/runner.py).
STOP_GRACE_SECONDS = 5.0
_POLL_SECONDS = 0.1
# The main thread never blocks longer than this: a signal the kernel hands to another thread
# only sets a flag, and the main thread runs the handler when it next wakes (a wait without a
# timeout would sleep through it: how a SIGTERM once went unheard for a whole tenant phase).
WAKE_SECONDS = 0.25


def result(future: Future[T], pool: ProcessPoolExecutor | None = None) -> T:
    """`future.result()`, waking every WAKE_SECONDS so that a signal is heard; a `pool` whose
    process started after the run was stopped (`stop_workers` missed it) is ended here."""
    while True:
        try:
            return future.result(timeout=WAKE_SECONDS)
        except FutureTimeout:
            if pool is not None and _stopped.is_set():
                for pid in pids(pool):
                    _signal(pid, signal.SIGKILL)


def as_completed(futures: Iterable[Future[T]]) -> Iterator[Future[T]]:
    """`concurrent.futures.as_completed`, waking every WAKE_SECONDS so that a signal is heard."""
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=WAKE_SECONDS, return_when=FIRST_COMPLETED)
        yield from done


class RunStopped(BaseException):
    """The run was stopped by a signal (a BaseException: no `except Exception` swallows it)."""

    def __init__(self, signum: int, phase: str) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name} during {phase}")
        self.signum = signum
        self.phase = phase

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # as a shell reports a process a signal ended


_pools: set[ProcessPoolExecutor] = set()
_pools_guard = threading.Lock()
_stopped = threading.Event()  # set once the run is stopped: no worker may run from then on


@contextmanager
def tracked(pool: ProcessPoolExecutor) -> Iterator[ProcessPoolExecutor]:
    """A worker pool `stop_workers` ends when the run stops."""
    with _pools_guard:
        _pools.add(pool)
    try:
        yield pool
    finally:
        with _pools_guard:
            _pools.discard(pool)


def pids(pool: ProcessPoolExecutor) -> list[int]:
    """The processes of a pool (its own table of them: the only handle it gives on them)."""
    return list(dict(getattr(pool, "_processes", None) or {}))


def _worker_pids() -> list[int]:
    with _pools_guard:
        pools = list(_pools)
    return [pid for pool in pools for pid in pids(pool)]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_workers(grace: float = STOP_GRACE_SECONDS) -> list[int]:
    """End every tracked worker process: SIGTERM (its Dagster run ends as failed), then SIGKILL
    once `grace` seconds have passed; a worker that is still being started is ended as soon as it
    is (`result`). Returns the pids it signalled."""
    _stopped.set()
    signalled = _worker_pids()
    for pid in signalled:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(_alive(pid) for pid in signalled) and time.monotonic() < deadline:
        time.sleep(_POLL_SECONDS)
    for pid in signalled:
        _signal(pid, signal.SIGKILL)
    return signalled


def stopped(futures: Iterable[Future[Any]]) -> None:
    """The run stops: `futures` not started never start, and the workers end (once a run)."""
    for future in futures:
        future.cancel()
    if not _stopped.is_set():
        stop_workers()


def fail_runs_left_by(home: str, pids: list[int], why: str) -> None:
    """Runs the worker processes `pids` left unfinished (killed, or stopped before their run
    could say so), recorded as failed with `why`: the UI and the sensors never wait on them."""
    import dagster as dg

    unfinished = [
        dg.DagsterRunStatus.NOT_STARTED,
        dg.DagsterRunStatus.STARTING,
        dg.DagsterRunStatus.STARTED,
        dg.DagsterRunStatus.CANCELING,
    ]
    local = Paths.from_env(home).local
    with dg.DagsterInstance.from_config(str(dagster_home(local))) as instance:
        for pid in pids:
            tagged = dg.RunsFilter(tags={PROCESS_TAG: str(pid)}, statuses=unfinished)
            for record in instance.get_runs(tagged):
                instance.report_run_failed(record, message=why)


def end_fork_server() -> None:
    """End the fork server the workers are made from: once this process is gone it would still
    finish importing its preloads (half a minute) before it noticed."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if pid:
        _signal(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # ended already
        os.kill(pid, signum)


class SignalStop:
    """While entered (in the main thread): SIGTERM and SIGINT stop the run (`RunStopped`, with
    the phase `phase()` last named); a second signal while it stops is ignored."""

    current: SignalStop | None = None

    def __init__(self) -> None:
        self.signum: int | None = None
        self.phase_name = "the start"
        self._previous: dict[int, Any] = {}
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self._write, False)
        self._previous_fd = -1

    def __enter__(self) -> SignalStop:
        begin()
        for signum in STOPPING_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        self._previous_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        SignalStop.current = self
        return self

    def __exit__(self, *exc: object) -> None:
        if self.signum is not None:
            end_fork_server()
        SignalStop.current = None
        signal.set_wakeup_fd(self._previous_fd)
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        os.close(self._read)
        os.close(self._write)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is None:
            self.signum = signum
            raise RunStopped(signum, self.phase_name)

    def check(self) -> None:
        """RunStopped when a stopping signal arrived, also one a Dagster handler took."""
        try:
            arrived = os.read(self._read, 1024)
        except BlockingIOError:
            arrived = b""
        for signum in arrived:
            if signum in STOPPING_SIGNALS and self.signum is None:
                self.signum = signum
        if self.signum is not None:
            raise RunStopped(self.signum, self.phase_name)


def begin() -> None:
    """A new run: workers may start again (after a stopped run in the same process)."""
    _stopped.clear()


def phase(name: str) -> None:
    """Name what the run does now, for the line a stop prints; stop first if a signal came."""
    stop = SignalStop.current
    if stop is not None:
        stop.check()
        stop.phase_name = name


def check() -> None:
    """Stop now if a signal came (after a job Dagster ran in this process)."""
    if SignalStop.current is not None:
        SignalStop.current.check()


def reported(paths: Paths, stop: RunStopped) -> int:
    """One line for a run a signal stopped and what the next run will do for it; the exit code."""
    debts = owed(paths)
    owes = "; ".join(f"{t} {', '.join(d)}" for t, d in sorted(debts.items())) or "nothing"
    print(
        f"memorypack: {stop} (workers ended, lock released); packs still owe: {owes}"
        " — the next run does them",
        file=sys.stderr,
    )
    return stop.exit_code
