"""The versions of one tenant's packs: list, LATEST swap, rollback, retention (a local folder or an
object store, see `pipeline.publish.remote`)."""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any

from memorypack.format import (
    LATEST,
    PackError,
    is_version,
    read_latest,
    read_manifest,
    verify_pack,
    version_time,
)
from memorypack.fs import Location, ObjectPath
from pipeline.errors import UserError
from pipeline.publish import remote
from pipeline.publish.disk import TEMP_PREFIX, TRASH_PREFIX, fsync_path, step_done

DEFAULT_KEEP = 7


@dataclass(frozen=True)
class VersionInfo:
    version: str
    path: Location
    as_of: str
    created_at: str
    n_memories: int | None
    bytes: int
    is_latest: bool
    manifest: dict[str, Any]


def list_versions(tenant_dir: Location) -> list[VersionInfo]:
    """Every published version, in publish order (oldest first); in an object store, only
    complete ones (sealed)."""
    if not tenant_dir.is_dir():
        return []
    latest = read_latest(tenant_dir)
    infos = []
    for child in tenant_dir.iterdir():
        if not (is_version(child.name) and child.is_dir() and remote.is_complete(child)):
            continue
        try:
            manifest = read_manifest(child)
        except PackError:
            manifest = {}
        # Listing reads manifests unverified: a malformed one lists as unknown, never crashes.
        files = manifest.get("files")
        files = (
            {k: v for k, v in files.items() if isinstance(v, dict)}
            if isinstance(files, dict)
            else {}
        )
        sizes = [f.get("bytes") for f in files.values()]
        rows = files.get("memories.parquet", {}).get("rows")
        infos.append(
            VersionInfo(
                version=child.name,
                path=child,
                as_of=str(manifest.get("as_of", "")),
                created_at=str(manifest.get("created_at", "")),
                n_memories=rows if isinstance(rows, int) else None,
                bytes=sum(b for b in sizes if isinstance(b, int) and not isinstance(b, bool)),
                is_latest=child.name == latest,
                manifest=manifest,
            )
        )
    return sorted(infos, key=lambda i: (version_time(i.version), i.version))


def tenant_folders(packs_root: Location) -> list[Location]:
    """Every folder under the packs root, by name (a tenant's, live pack or not)."""
    if not packs_root.is_dir():
        return []
    found: list[Location] = [p for p in packs_root.iterdir() if p.is_dir()]
    return sorted(found, key=lambda p: p.name)


def tenants(packs_root: Location) -> list[str]:
    if not packs_root.is_dir():
        return []
    return sorted(p.name for p in packs_root.iterdir() if p.is_dir() and (p / LATEST).is_file())


def write_latest(tenant_dir: Location, version: str, forward_only: bool = True) -> None:
    """Point LATEST at `version`: temp file, fsync, rename over, fsync the folder (a conditional
    PUT in an object store). `forward_only`: refuse a version published before the live one (a
    UserError); only an operator's rollback moves LATEST back."""
    if isinstance(tenant_dir, ObjectPath):
        remote.write_latest(tenant_dir, version, forward_only)
        return
    if forward_only:
        try:
            current = read_latest(tenant_dir)
        except PackError:  # a LATEST that names no version is replaced
            current = None
        remote.refuse_backwards(tenant_dir, current, version)
    tmp = tenant_dir / f".{LATEST}.{uuid.uuid4().hex}.tmp"
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(version + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    step_done("latest_tmp_written")
    os.replace(tmp, tenant_dir / LATEST)
    fsync_path(tenant_dir)
    step_done("latest_swapped")


def rollback(tenant_dir: Location, to: str | None = None) -> str:
    """Point LATEST back at `to` (default: the version before the current one) after verifying it.

    UserError when there is nothing to roll back to; PackError when `to` does not verify."""
    versions = list_versions(tenant_dir)
    if not versions:
        raise UserError(f"no packs in {tenant_dir}")
    latest = read_latest(tenant_dir)
    if to is None:
        names = [v.version for v in versions]
        position = names.index(latest) if latest in names else len(names)
        if position == 0:
            raise UserError(
                f"{latest} is the oldest kept version of {tenant_dir.name}; nothing to roll back to"
            )
        to = names[position - 1]
    if to not in {v.version for v in versions}:
        known = ", ".join(v.version for v in versions)
        raise UserError(f"no version {to!r} for tenant {tenant_dir.name} (kept: {known})")
    verify_pack(tenant_dir / to)
    write_latest(tenant_dir, to, forward_only=False)
    return to


def remove_dir(path: Location) -> None:
    """Rename out of sight first, so a crash mid-delete never leaves a half version visible (in an
    object store: delete the seal first, which takes the version out of every listing)."""
    if isinstance(path, ObjectPath):
        remote.remove_version(path)
        return
    trash = path.with_name(f"{TRASH_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}")
    os.rename(path, trash)
    step_done("pruning")
    shutil.rmtree(trash, ignore_errors=True)


def prune(tenant_dir: Location, keep: int = DEFAULT_KEEP) -> list[str]:
    """Keep the newest `keep` versions and always the one LATEST points at; returns removed ones."""
    versions = list_versions(tenant_dir)
    latest = read_latest(tenant_dir)
    doomed = [v.version for v in versions[: max(len(versions) - keep, 0)] if v.version != latest]
    for version in doomed:
        remove_dir(tenant_dir / version)
    return doomed


def clean_leftovers(tenant_dir: Location) -> list[str]:
    """Remove temp folders and files left by a publisher that died (call under the publish lock)."""
    if isinstance(tenant_dir, ObjectPath):
        return remote.clean_leftovers(tenant_dir)
    removed = []
    for child in tenant_dir.iterdir() if tenant_dir.is_dir() else []:
        if child.name.startswith((TEMP_PREFIX, TRASH_PREFIX)):
            shutil.rmtree(child, ignore_errors=True)
            removed.append(child.name)
        elif child.name.startswith(f".{LATEST}.") and child.name.endswith(".tmp"):
            child.unlink(missing_ok=True)
            removed.append(child.name)
    return removed
