"""Publishing to an object store: upload a staged version (seal last), read it back, then LATEST.

An object store has no rename and no folders, so the local recipe (dot-folder, rename, swap) becomes:
stage and verify the version on local disk, PUT each data object under `<tenant>/<version>/`, then
`manifest.json`, then `manifest.seal` last; read every object back (sizes and sha256 against the
sealed manifest); only then PUT `LATEST` — one small object, which a reader sees whole or not at
all. A version prefix without its seal is unfinished: listings skip it and the next publish of the
tenant deletes it. Nobody points at a version until `LATEST` does, so a publisher killed between
any two objects leaves the previous pack live and loadable.

pyarrow's S3 client sends no conditional headers (If-None-Match / If-Match), so the LATEST swap is
a plain PUT: one publisher per tenant is kept by the tenant's publish lock on this machine, and
across machines by the run queue (at most one run per tenant at a time).
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from pathlib import Path

from memorypack.format import LATEST, MANIFEST, SEAL, is_version, read_latest, verify_pack
from memorypack.fs import Location, ObjectPath
from pipeline.pack.disk import TEMP_PREFIX, TRASH_PREFIX, step_done

LOCKS_FOLDER = "memorypack-publish-locks"


def is_remote(where: Location) -> bool:
    return isinstance(where, ObjectPath)


def lock_file(tenant_dir: ObjectPath) -> Path:
    """The local file whose lock stands for a remote tenant folder (one per URL on this host)."""
    folder = Path(tempfile.gettempdir()) / LOCKS_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(str(tenant_dir).encode()).hexdigest()[:24]
    return folder / f"{tenant_dir.name}-{digest}.lock"


def is_complete(version_dir: Location) -> bool:
    """A remote version is complete once its seal, the last object written, is there."""
    return not isinstance(version_dir, ObjectPath) or (version_dir / SEAL).is_file()


def upload_version(staged: Path, final: ObjectPath) -> None:
    """Upload a verified local version folder to `final`, seal last, and verify it read back.

    On any failure the partial upload is removed (best effort) and the error raised: LATEST was
    never touched."""
    names = sorted(p.name for p in staged.iterdir() if p.name not in (MANIFEST, SEAL))
    try:
        for name in [*names, MANIFEST, SEAL]:
            (final / name).upload(staged / name)
            step_done("first_object_uploaded")
        verify_pack(final, version=final.name)
    except BaseException:
        # Unsealed objects a failed delete leaves behind go with the tenant's next publish.
        with contextlib.suppress(OSError):
            remove_version(final)
        raise


def remove_version(version_dir: ObjectPath) -> None:
    """Delete the seal first, so an interrupted delete leaves an unfinished version (skipped by
    listings, deleted by the next publish), never a listed version with objects missing."""
    (version_dir / SEAL).unlink(missing_ok=True)
    step_done("pruning")
    version_dir.remove_tree()


def write_latest(tenant_dir: ObjectPath, version: str) -> None:
    """One PUT: S3 replaces an object atomically, so a reader gets the old or the new name."""
    step_done("latest_tmp_written")  # the same steps as the local swap
    (tenant_dir / LATEST).write_bytes((version + "\n").encode())
    step_done("latest_swapped")


def clean_leftovers(tenant_dir: ObjectPath) -> list[str]:
    """Delete unfinished versions (no seal) and stray temp prefixes; never the live version."""
    live = read_latest(tenant_dir)
    removed = []
    for child in tenant_dir.iterdir():
        stray = child.name.startswith((TEMP_PREFIX, TRASH_PREFIX))
        unfinished = is_version(child.name) and child.name != live and not is_complete(child)
        if stray or unfinished:
            child.remove_tree()
            removed.append(child.name)
    return removed
