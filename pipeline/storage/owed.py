"""What each tenant's pack still owes, kept in the home so that no kill loses it: the load dates
whose typed tables changed since that tenant's last published (or verified unchanged) pack.

Ingest records a date before it writes the tenant's tables of that date; the tenant's own run
(the memory_pack asset, CLI or daemon alike) settles its entries once it published its pack or
found it unchanged. A run killed after
ingest, or a tenant's run that failed or whose worker died, leaves the entries: the next night
runs that tenant for them, whatever its own landing folder holds (jobs/runner.py)."""

from __future__ import annotations

import uuid

from memorypack.fs import Location
from pipeline.config import Paths
from pipeline.storage.lake import write_text_atomic

FOLDER = "owed"  # <home>/owed/<tenant>/<load date>.<unique id>, one file an entry
# A file's mtime comes from a coarser clock than time.time() (a few ms on Linux, seconds on some
# stores): an entry recorded within this of `since` counts as recorded since.
MTIME_SLACK_SECONDS = 1.0


def record(paths: Paths, tenant: str, day: str) -> None:
    """Record that `tenant`'s pack owes load date `day` (call before writing its tables). Each
    record is a new file: settling the entries a running night read never drops one written
    since (a later ingest of the same date)."""
    write_text_atomic(paths.home / FOLDER / tenant / f"{day}.{uuid.uuid4().hex}", day)


def owed(paths: Paths, since: float = 0.0) -> dict[str, list[str]]:
    """Tenant → the load dates its pack owes, from the entries in the home (in order); with
    `since` (a Unix time), only those recorded since then (a sensor that started then)."""
    root = paths.home / FOLDER
    found: dict[str, list[str]] = {}
    if not root.is_dir():
        return found
    for folder in _listed(root):
        if not folder.is_dir():
            continue
        for entry in _listed(folder):
            if entry.name.startswith("."):  # the temporary file of a write that was killed
                continue
            if since and entry.stat().st_mtime < since - MTIME_SLACK_SECONDS:
                continue
            dates = found.setdefault(folder.name, [])
            day = entry.name.split(".", 1)[0]
            if day not in dates:
                dates.append(day)
    return found


def _listed(folder: Location) -> list[Location]:
    found: list[Location] = list(folder.iterdir())
    return sorted(found, key=lambda path: path.name)


def settle(paths: Paths, tenant: str) -> None:
    """Clear what `tenant`'s pack owed: its live pack now holds every recorded date. Called by
    the tenant's own run (memory_pack) under the tenant's lock, which ingest also holds while it
    records and writes that tenant's tables, so no entry recorded since the run began is lost."""
    folder = paths.home / FOLDER / tenant
    if folder.is_dir():
        for entry in _listed(folder):
            entry.unlink(missing_ok=True)
