"""Tenants whose next pack is withheld, kept in the home: an erasure request a night could not
carry out (pipeline.erasure.requests). Publishing that tenant's pack would republish the person
who asked to be forgotten, so its run keeps the previous pack live until the erasure is done (the
next night retries it, `memorypack forget` does it) and says why. One file per request, named by
the request's keyed hash (never the person's id), holding one line for a person."""

from __future__ import annotations

from memorypack.fs import Location
from pipeline.config import Paths
from pipeline.storage.lake import write_text_atomic

FOLDER = "withheld"  # <home>/withheld/<tenant>/<keyed hash of the request>


def withhold(paths: Paths, tenant: str, request: str, why: str) -> None:
    write_text_atomic(paths.home / FOLDER / tenant / request, why)


def withheld(paths: Paths, tenant: str) -> dict[str, str]:
    """The requests that withhold `tenant`'s pack: keyed hash → why."""
    folder = paths.home / FOLDER / tenant
    if not folder.is_dir():
        return {}
    entries: list[Location] = sorted(folder.iterdir(), key=lambda e: e.name)
    return {e.name: e.read_text().strip() for e in entries if not e.name.startswith(".")}


def release(paths: Paths, tenant: str, request: str) -> None:
    """The request is carried out: it withholds the tenant's pack no more."""
    (paths.home / FOLDER / tenant / request).unlink(missing_ok=True)
