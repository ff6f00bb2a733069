"""A worker process dies with the process it works for, so a killed night leaves no worker behind
burning a core: the kernel's parent-death signal (Linux), and a watchdog thread for the rest."""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys
import threading
import time
from typing import NoReturn

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_SECONDS = 0.5  # the watchdog's period where the kernel cannot wake it (no pidfd)


def die_with(pid: int, parent_death: bool = True) -> None:
    """Kill this process (SIGKILL) once process `pid` ends; call it first thing in a worker.

    `parent_death`: also when this process's parent ends, by the kernel (Linux), which holds even
    while this process is stuck in native code that never lets the watchdog thread run. The
    kernel follows the *thread* that started this process: pass False unless that thread lives
    as long as its process (the main thread; the fork server's)."""
    if parent_death and sys.platform == "linux":
        parent = os.getppid()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # if refused, the watchdog remains
        if os.getppid() != parent:  # the parent ended before the signal was set
            _die()
    threading.Thread(target=_watch, args=(pid,), name=f"lifeline-{pid}", daemon=True).start()


def _watch(pid: int) -> None:
    """Wait for `pid` to end, then die. A pidfd wakes at once (Linux 5.3+), else a poll."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        _die()
    except (AttributeError, OSError):  # no pidfd on this system
        while _alive(pid):
            time.sleep(POLL_SECONDS)
        _die()
    select.select([handle], [], [])  # readable once the process has ended
    _die()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: the pid was reused, ours ended
        return False
    return True


def _die() -> NoReturn:
    os.kill(os.getpid(), signal.SIGKILL)
    raise SystemExit(1)  # not reached: for the type checker
