"""The newest pack an app has accepted, per tenant, kept in a small local file so that a fresh
process can refuse a rolled-back LATEST too (`refreshed()` compares with the pack in memory; a
process that just started has nothing to compare with).

    pack = MemoryPack.load("s3://bucket/packs/acme", seen="/var/lib/myapp/packs-seen.json")

The file is JSON, `{"<tenant_id>": {"version": …, "as_of": …}}`, written whole and renamed into
place, under an exclusive lock so that app workers starting together never lose each other's
version. A pack published before the recorded one, or with an older `as_of`, is refused with
PackError unless the load says `allow_older=True` (an operator's rollback): the accepted pack then
becomes the tenant's new floor.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from memorypack.format import PackError, is_version, read_regular, version_time

# The file holds one short entry per tenant (~150 bytes): 16 MiB is ~100,000 tenants. A bigger
# file (or a link to /dev/zero) is refused unread.
MAX_SEEN_BYTES = 16 << 20


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `<file>.lock` (not on the file itself: it is replaced by rename),
    opened without blocking (a FIFO there would wait for a reader) and only if it is a file."""
    lock = path.with_name(path.name + ".lock")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC
        fd = os.open(lock, flags, 0o644)
    except OSError as error:
        raise PackError(f"seen-versions file {path}: {error.strerror or error}") from None
    with os.fdopen(fd, "a") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PackError(f"seen-versions lock {lock} is not a file")
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def _entry_ok(entry: Any) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("version"), str):
        return False
    if not is_version(entry["version"]) or not isinstance(entry.get("as_of"), str):
        return False
    with contextlib.suppress(ValueError):
        return datetime.fromisoformat(entry["as_of"]).tzinfo is not None
    return False


def read_seen(path: str | os.PathLike[str]) -> dict[str, dict[str, str]]:
    """The recorded versions per tenant ({} when the file does not exist yet)."""
    path = Path(path)
    if not os.path.lexists(path):
        return {}
    data = read_regular(path, MAX_SEEN_BYTES, "seen-versions file")
    try:
        state = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        state = None
    if not isinstance(state, dict) or not all(_entry_ok(e) for e in state.values()):
        raise PackError(
            f"seen-versions file {path} is not one this library wrote (remove it to reset)"
        )
    return state


def _older(version: str, as_of: datetime, entry: dict[str, str]) -> str | None:
    """Why the pack is older than the recorded one, or None."""
    if version_time(version) < version_time(entry["version"]):
        return f"published before {entry['version']}"
    if as_of < datetime.fromisoformat(entry["as_of"]):
        return f"as of {as_of.isoformat()}, older than {entry['version']} ({entry['as_of']})"
    return None


def _write(path: Path, state: dict[str, dict[str, str]]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(state, handle, indent=1, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def accept(
    path: str | os.PathLike[str], tenant_id: str, version: str, as_of: datetime, allow_older: bool
) -> None:
    """Refuse (PackError) a pack older than the newest this app accepted for `tenant_id`, unless
    `allow_older`; otherwise record it as the tenant's newest."""
    path = Path(path)
    with _locked(path):
        state = read_seen(path)
        entry = state.get(tenant_id)
        why = _older(version, as_of, entry) if entry is not None else None
        if why is not None and not allow_older:
            raise PackError(
                f"pack {version} of tenant {tenant_id} is {why}, the newest this app has loaded "
                f"(recorded in {path}): a rolled-back LATEST? load(..., allow_older=True) accepts it"
            )
        if entry is None or why is not None or entry["version"] != version:
            state[tenant_id] = {"version": version, "as_of": as_of.isoformat()}
            try:
                _write(path, state)
            except OSError as error:
                raise PackError(f"seen-versions file {path}: {error.strerror or error}") from None
