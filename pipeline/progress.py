"""Progress lines for a person watching a long step: where they go, and how often (a heartbeat)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

Progress = Callable[[str], None]

# At most one progress line per this many seconds of work (plus a step's start and end lines).
PROGRESS_EVERY_SECONDS = 10.0


def reporter(progress: Progress | None) -> Progress:
    """Where progress lines go: `progress` (an asset passes `context.log.info`), else the log."""
    return progress or log.info


class Heartbeat:
    """Says when a line is due: `every` seconds after the start or the last line. `clock` is the
    time source (seconds)."""

    def __init__(
        self, every: float = PROGRESS_EVERY_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every, self.clock = every, clock
        self.started = self.last = clock()

    def restart(self) -> None:
        self.started = self.last = self.clock()

    def due(self) -> bool:
        now = self.clock()
        if now - self.last >= self.every:
            self.last = now
            return True
        return False

    def elapsed(self) -> float:
        return self.clock() - self.started
