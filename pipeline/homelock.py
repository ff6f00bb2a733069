"""One writer per home: an exclusive lock held for a whole run, naming its holder (SPEC §3)."""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pipeline.errors import UserError

LOCK_NAME = ".memorypack.lock"

_held: set[Path] = set()  # lock files this process holds: taking one again is a no-op
_held_guard = threading.Lock()


@contextmanager
def home_lock(
    home: Path,
    command: str,
    wait: bool = False,
    on_busy: Callable[[str], None] | None = None,
) -> Iterator[bool]:
    """Hold `<home>/.memorypack.lock` (flock: released by the kernel if the holder dies).

    A second run refuses at once with one line naming the holder, or with `wait` queues behind it
    (after telling `on_busy` who holds it). Re-entrant within one process: the CLI holds the lock
    when the run's resource takes it again (a second flock there would wait on itself). Yields
    True when this call took the lock, False when this process already held it."""
    home.mkdir(parents=True, exist_ok=True)
    path = (home / LOCK_NAME).resolve()
    with _held_guard:
        nested = path in _held
    if nested:
        yield False
        return
    with path.open("a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            if not wait:
                raise UserError(
                    f"home {home} is busy: {holder}; use --wait to queue behind it"
                ) from None
            if on_busy is not None:
                on_busy(holder)
            fcntl.flock(handle, fcntl.LOCK_EX)
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        handle.seek(0)
        handle.truncate()
        handle.write(
            f"run by pid {os.getpid()} on {socket.gethostname()} ({command}) since {started} UTC"
        )
        handle.flush()
        with _held_guard:
            _held.add(path)
        try:
            yield True
        finally:
            with _held_guard:
                _held.discard(path)
            handle.seek(0)
            handle.truncate()
            handle.flush()
            fcntl.flock(handle, fcntl.LOCK_UN)


def clean_leftovers(home: Path) -> list[Path]:
    """Remove temp files a killed run left (analytics copies, half-written lake Parquet).

    Call only while holding the home lock: then no writer of this home is alive to own them.
    Pack temp folders are cleaned by the publisher under each tenant's publish lock."""
    found = [*home.glob(".analytics.duckdb.*.tmp*"), *(home / "lake").rglob(".*.tmp")]
    for path in found:
        path.unlink(missing_ok=True)
    return sorted(found)
