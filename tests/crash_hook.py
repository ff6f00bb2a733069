"""Test hook: MEMORYPACK_CRASH_AT=<step> kills the publisher (SIGKILL) when that step of a publish
is done. Installed only by the crash tests' publisher processes; production never imports it."""

from __future__ import annotations

import os
import signal

from pipeline.stores.disk import STEP_OBSERVERS

CRASH_ENV = "MEMORYPACK_CRASH_AT"


def install() -> None:
    """Observe the publish steps and kill this process at the one CRASH_ENV names."""
    target = os.environ.get(CRASH_ENV)
    if not target:
        return

    def crash_at(step: str) -> None:
        if step == target:
            os.kill(os.getpid(), signal.SIGKILL)

    STEP_OBSERVERS.append(crash_at)
