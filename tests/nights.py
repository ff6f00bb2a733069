"""Nights shared by test modules, each run once a session (tests/conftest.py's fixtures) and only
read: a test that changes a home works on a copy (a home is a folder: its copy is a home), and
the session's end fails if any file of a shared home or landing changed."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pytest

from jobs.runner import RunOutcome, run_nightly
from pipeline.generate import generate

START, END = "2026-11-01", "2026-11-02"
# No DPO training (too few pairs on purpose): what is compared is what the data decides, not the
# float noise of training with another number of threads.
NO_DPO = {"dpo": {"min_pairs": 10_000}}
# The pseudonym key of the shared night; a test making a home to compare with it sets the same
# one (each home makes its own otherwise); tenant workers inherit it.
KEY = "shared-night-test-key"


def _files(*folders: Path) -> dict[str, tuple[int, int]]:
    """Each file under the folders, by path, with its size and modification time."""
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns)
        for folder in folders
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@dataclass(frozen=True)
class Night:
    """A shared night: its landing, its home, what the run returned, and the files it left."""

    landing: Path
    home: Path
    outcome: RunOutcome
    files: dict[str, tuple[int, int]]

    def copy(self, to: Path) -> Path:
        """A copy of the home at `to`, for a test that changes it."""
        shutil.copytree(self.home, to)
        return to

    def changed(self) -> list[str]:
        """The files of the home and the landing added, removed or written since the night
        (none: they were only read)."""
        now = _files(self.home, self.landing)
        return sorted(p for p in now.keys() | self.files.keys() if now.get(p) != self.files.get(p))


def two_tenant_night(root: Path) -> Night:
    """Two days of two generated tenants (60 base AI calls, seed 4), the night run with its
    tenants one after the other in this process, DPO off, the home's own Dagster instance."""
    landing, home = root / "landing", root / "home"
    generate(landing, days=2, interactions=60, tenants=2, seed=4, start=date.fromisoformat(START))
    with pytest.MonkeyPatch.context() as env:
        env.delenv("DAGSTER_HOME", raising=False)
        env.setenv("MEMORYPACK_PII_KEY", KEY)
        outcome = run_nightly(home, landing, START, END, settings=NO_DPO)
    return Night(landing, home, outcome, _files(home, landing))
