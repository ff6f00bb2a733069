"""Writing safely: temporary and trash names, fsync, and the named steps of a publish that the crash
tests observe (the store backends and the pack writer share them)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

TEMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
# Called with the name of each step of a publish as it is done; empty outside the crash tests
# (tests/crash_hook.py installs the observer that kills the publisher at a chosen step).
STEP_OBSERVERS: list[Callable[[str], None]] = []


def fsync_path(path: Path) -> None:
    """Flush a file or a folder entry to disk (folders: so a rename survives a power cut)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def step_done(step: str) -> None:
    """A named step of a publish is done: tell the observers, if any."""
    for observe in STEP_OBSERVERS:
        observe(step)
