"""One writer per home: an exclusive lock held for a whole run, naming its holder (SPEC §3)."""

from __future__ import annotations

import fcntl
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pipeline.errors import UserError

LOCK_NAME = ".memorypack.lock"


@contextmanager
def home_lock(home: Path, command: str, wait: bool = False) -> Iterator[None]:
    """Hold `<home>/.memorypack.lock` (flock: released by the kernel if the holder dies).

    A second run refuses at once with one line naming the holder, or with `wait` queues behind it.
    """
    home.mkdir(parents=True, exist_ok=True)
    with (home / LOCK_NAME).open("a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise UserError(
                f"home {home} is busy: {holder}; use --wait to queue behind it"
            ) from None
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
        handle.seek(0)
        handle.truncate()
        handle.write(
            f"run by pid {os.getpid()} on {socket.gethostname()} ({command}) since {started} UTC"
        )
        handle.flush()
        try:
            yield
        finally:
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
