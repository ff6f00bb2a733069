"""One writer per part of a home: exclusive locks held for a whole run, naming their holder (SPEC §3).

A home has one lock for ingest (and the commands that change the whole home), one per tenant (a
tenant's run holds its tenant's; ingest takes it while it writes that tenant's tables), one per
tenant for its DPO policies (a tenant's training run holds it, so training never holds back the
tenant's pack; an erasure takes it too) and one for the analytics build. Tenant runs share a home
but never a tenant. Taken in that order (ingest, tenant, training, analytics), never the other
way, so two holders never wait on each other."""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pipeline.config import TENANT_COLUMN
from pipeline.errors import UserError

LOCK_NAME = ".memorypack.lock"  # ingest and whole-home commands
# The analytics build's scope: a name no tenant id can be (a dot is outside the pattern), so a
# tenant called `analytics` has its own lock and its own view of the home.
ANALYTICS = ".analytics"
# The folder of the analyst snapshot's parts (pipeline.publish.snapshot_parts.PARTS): a tenant's
# run and the ingest run each copy their part there and rename it over the old one.
PARTS = "analytics-parts"
TRAINING = ".training"  # `<tenant>.training`: a tenant id never holds a dot


def training_scope(tenant: str) -> str:
    """The lock of a tenant's DPO policies (`models/<tenant>-<id>/`): its training run's."""
    return f"{tenant}{TRAINING}"


def scope_tenant(scope: str | None) -> str | None:
    """The tenant a lock scope is of (None: ingest or the analytics build)."""
    if scope is None or scope == ANALYTICS:
        return None
    return scope.removesuffix(TRAINING)


_held: set[Path] = set()  # lock files this process holds: taking one again is a no-op
_held_guard = threading.Lock()


@contextmanager
def home_lock(
    home: Path,
    command: str,
    wait: bool = False,
    on_busy: Callable[[str], None] | None = None,
    scope: str | None = None,
) -> Iterator[bool]:
    """Hold `<home>/.memorypack.lock`, or the lock of `scope` (a tenant id or ANALYTICS) in
    `<home>/locks/` (flock: released by the kernel if the holder dies).

    A second run refuses at once with one line naming the holder, or with `wait` queues behind it
    (after telling `on_busy` who holds it). Re-entrant within one process: the CLI holds the lock
    when the run's resource takes it again (a second flock there would wait on itself). Yields
    True when this call took the lock, False when this process already held it."""
    path = (home / LOCK_NAME if scope is None else home / "locks" / f"{scope}.lock").resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
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
                what = f"home {home}" + (f" ({scope})" if scope else "")
                raise UserError(
                    f"{what} is busy: {holder}; use --wait to queue behind it"
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


@contextmanager
def held_if_free(home: Path, command: str, scope: str) -> Iterator[bool]:
    """Hold the lock of `scope` if no one holds it (cleaning what a killed holder left), without
    waiting: True when held (or already held by this process), False when another holds it."""
    stack = ExitStack()
    try:
        taken = stack.enter_context(home_lock(home, command, scope=scope))
    except UserError:
        yield False
        return
    with stack:
        if taken:
            clean_leftovers(home, scope)
        yield True


def clean_leftovers(home: Path, scope: str | None = None) -> list[Path]:
    """Remove temp files a killed run left in what the lock of `scope` guards: half-written
    Parquet of the shared tables (ingest), of one tenant's folders, of its DPO policies (its
    training scope: `models/.<tenant>-<id>.<hex>.tmp` folders,
    `models/<tenant>-<id>/.run.json.<hex>.tmp`), a tenant's or ingest's snapshot part copies, or
    analytics copies.

    Call only while holding that lock: then no writer of those files is alive to own them.
    Pack temp folders are cleaned by the publisher under each tenant's publish lock."""
    lake = home / "lake"
    if scope is None:
        from pipeline.tables import SHARED_TABLES  # polars: only when cleaning up

        found = [p for name in SHARED_TABLES for p in (lake / name).rglob(".*.tmp")]
        found += home.glob(f"{PARTS}/..ingest.duckdb.*.tmp*")
    elif scope == ANALYTICS:
        found = [*home.glob(".analytics.duckdb.*.tmp*")]
    elif scope.endswith(TRAINING):
        found = _policy_leftovers(home / "models", scope.removesuffix(TRAINING))
    else:
        found = [p for p in lake.glob(f"*/{TENANT_COLUMN}={scope}") for p in p.rglob(".*.tmp")]
        found += home.glob(f"{PARTS}/.{scope}.duckdb.*.tmp*")
    for path in found:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return sorted(found)


def _policy_leftovers(models: Path, tenant: str) -> list[Path]:
    """A killed policy write of `tenant` (pipeline/preference/dpo/training.py): exactly its own
    policy ids (`<tenant>-<12 hex>`), never another tenant's whose name starts alike."""
    policy = rf"{re.escape(tenant)}-[0-9a-f]{{12}}"
    folder = re.compile(rf"\.{policy}\.[0-9a-f]{{32}}\.tmp")
    run_file = re.compile(r"\.run\.json\.[0-9a-f]{32}\.tmp")
    policies = re.compile(policy)
    if not models.is_dir():
        return []
    found = []
    for child in models.iterdir():
        if folder.fullmatch(child.name):
            found.append(child)
        elif policies.fullmatch(child.name) and child.is_dir():
            found += [p for p in child.iterdir() if run_file.fullmatch(p.name)]
    return found


@contextmanager
def tenant_locks(home: Path, command: str, *scopes: str) -> Iterator[None]:
    """Hold the locks of `scopes` (tenants, their training scopes, then ANALYTICS), waiting for
    each in turn."""
    with ExitStack() as stack:
        for scope in scopes:
            stack.enter_context(home_lock(home, command, wait=True, scope=scope))
        yield
