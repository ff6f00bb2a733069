"""Writing packs safely (pipeline side): temporary and trash names, fsync, and the crash test hook."""

from __future__ import annotations

import os
import signal
from pathlib import Path

TEMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
CRASH_ENV = "MEMORYPACK_CRASH_AT"


def fsync_path(path: Path) -> None:
    """Flush a file or a folder entry to disk (folders: so a rename survives a power cut)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def crash_point(step: str) -> None:
    """Test hook: MEMORYPACK_CRASH_AT=<step> kills this process at that step of a publish."""
    if os.environ.get(CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
