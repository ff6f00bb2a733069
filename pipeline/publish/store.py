"""The versions of one tenant's packs: place, list, LATEST swap, rollback, retention, in a local
folder or an object store alike (`pipeline.stores`).

A version is written and verified out of sight (a dot-folder beside the versions, or a local folder
for an object store) and placed whole: one rename, or an upload with `manifest.seal` last, read
back and verified. Nobody points at a version until LATEST does, and LATEST is replaced whole (a
temporary file renamed over it, or a compare-and-swap PUT), so a publisher killed anywhere leaves
the previous pack live and loadable. A version without its seal (an interrupted upload) is
unfinished: listings skip it and the next publish of the tenant deletes it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memorypack.format import (
    LATEST,
    MANIFEST,
    SEAL,
    PackError,
    is_version,
    read_latest,
    read_manifest,
    verify_pack,
    version_time,
)
from memorypack.fs import Location
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.stores import store_of
from pipeline.stores.disk import TEMP_PREFIX, TRASH_PREFIX, step_done

DEFAULT_KEEP = 7
# How many times a publisher re-reads LATEST after another publisher moved it in between.
SWAP_ATTEMPTS = 5
LATEST_BYTES = 256  # a LATEST longer than this names no version


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
        if not (is_version(child.name) and child.is_dir() and is_complete(child)):
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


def is_complete(version_dir: Location) -> bool:
    """Whether a version is all there (in an object store: its seal, the last object, is)."""
    return store_of(version_dir).is_whole(version_dir, SEAL)


def place_version(staged: Path, final: Location) -> bool:
    """Put the verified version `staged` at `final`: a rename, or an upload sealed last and
    verified read back. True when `final` was already there, complete and verified (the same
    content: a version's name is its hash), and `staged` was dropped instead."""
    store = store_of(final)
    if final.is_dir() and store.is_whole(final, SEAL):
        verify_pack(final, key=Settings.from_env().pack_key)
        shutil.rmtree(staged)
        return True
    store.put_folder(
        staged,
        final,
        (MANIFEST, SEAL),
        lambda f: verify_pack(f, version=f.name, key=Settings.from_env().pack_key),
    )
    return False


def refuse_backwards(tenant_dir: Location, current: str | None, version: str) -> None:
    """A live pack never moves back in time: LATEST may only name a version published no earlier
    than the one it names now (an operator's rollback says so explicitly)."""
    if (
        current is not None
        and is_version(current)
        and version_time(current) > version_time(version)
    ):
        raise UserError(
            f"LATEST of {tenant_dir} names {current}, published after {version}: not moving it "
            f"back in time ({version} stays kept; `memorypack pack rollback` does this on purpose)"
        )


def write_latest(tenant_dir: Location, version: str, forward_only: bool = True) -> None:
    """Point LATEST at `version`, replaced whole and only if it still holds what was checked (a
    compare-and-swap where the store can; on a local disk the publish lock keeps one writer).
    `forward_only`: refuse a version published before the live one (a UserError); only an
    operator's rollback moves LATEST back. UserError too when LATEST kept changing under us."""
    store, path = store_of(tenant_dir), tenant_dir / LATEST
    for _ in range(SWAP_ATTEMPTS):
        current, tag = store.read_tagged(path, LATEST_BYTES)
        if forward_only:
            refuse_backwards(tenant_dir, current, version)
        if store.write_if(path, f"{version}\n".encode(), tag, _latest_staged):
            step_done("latest_swapped")
            return
    raise UserError(
        f"LATEST of {tenant_dir} changed {SWAP_ATTEMPTS} times while publishing {version}: "
        "another publisher is writing this tenant (the run queue allows one run per tenant)"
    )


def _latest_staged() -> None:
    step_done("latest_tmp_written")


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
    verify_pack(tenant_dir / to, key=Settings.from_env().pack_key)
    write_latest(tenant_dir, to, forward_only=False)
    return to


def remove_dir(version_dir: Location) -> None:
    """Delete a version so that a crash midway never leaves a half version listed (renamed out
    of sight first, or in an object store its seal deleted first)."""
    store_of(version_dir).remove_folder(version_dir, (SEAL,))


def prune(tenant_dir: Location, keep: int = DEFAULT_KEEP) -> list[str]:
    """Keep the newest `keep` versions and always the one LATEST points at; returns removed ones."""
    versions = list_versions(tenant_dir)
    latest = read_latest(tenant_dir)
    doomed = [v.version for v in versions[: max(len(versions) - keep, 0)] if v.version != latest]
    for version in doomed:
        remove_dir(tenant_dir / version)
    return doomed


def clean_leftovers(tenant_dir: Location) -> list[str]:
    """Remove what a publisher that died left (temp folders and files, unfinished versions);
    never the live version (call under the publish lock)."""
    removed = []
    for child in tenant_dir.iterdir() if tenant_dir.is_dir() else []:
        name = child.name
        stray = name.startswith((TEMP_PREFIX, TRASH_PREFIX)) or (
            name.startswith(f".{LATEST}.") and name.endswith(".tmp")
        )
        unfinished = is_version(name) and not is_complete(child) and name != read_latest(tenant_dir)
        if stray or unfinished:
            store_of(child).remove(child)
            removed.append(name)
    return removed
