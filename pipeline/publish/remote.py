"""Publishing to an object store: upload a staged version (seal last), read it back, then LATEST.

An object store has no rename and no folders, so the local recipe (dot-folder, rename, swap) becomes:
stage and verify the version on local disk, PUT each data object under `<tenant>/<version>/`, then
`manifest.json`, then `manifest.seal` last; read every object back (sizes and sha256 against the
sealed manifest); only then PUT `LATEST` — one small object, which a reader sees whole or not at
all. A version prefix without its seal is unfinished: listings skip it and the next publish of the
tenant deletes it. Nobody points at a version until `LATEST` does, so a publisher killed between
any two objects leaves the previous pack live and loadable.

The LATEST swap is a compare-and-swap where the store supports conditional writes (S3,
SeaweedFS, MinIO, R2, GCS): read LATEST and its ETag, check the new version is not older, PUT with
`If-Match` (`If-None-Match: *` for a tenant's first pack); a 412 means another publisher moved it
in between, so read again and re-check. pyarrow's S3 client sends no conditional headers, so this
one request goes through boto3. A store that answers 501 to the condition gets a plain PUT; one
publisher per tenant is then kept by the publish lock on this machine and, across machines, by
the run queue (at most one run per tenant at a time).
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from memorypack.format import (
    LATEST,
    MANIFEST,
    SEAL,
    is_version,
    read_latest,
    verify_pack,
    version_time,
)
from memorypack.fs import Location, ObjectPath, s3_settings
from pipeline.errors import UserError
from pipeline.publish.disk import TEMP_PREFIX, TRASH_PREFIX, step_done

# How many times a publisher re-reads LATEST after another publisher moved it in between.
SWAP_ATTEMPTS = 5

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


def write_latest(tenant_dir: ObjectPath, version: str, forward_only: bool = True) -> None:
    """Compare-and-swap LATEST to `version` (module docstring): one PUT a reader sees whole, sent
    only if LATEST still holds what was checked. UserError when it would move back in time
    (`forward_only`) or kept changing under this publisher."""
    step_done("latest_tmp_written")  # the same steps as the local swap
    store = _ConditionalStore(tenant_dir / LATEST)
    for _ in range(SWAP_ATTEMPTS):
        current, etag = store.read()
        if forward_only:
            refuse_backwards(tenant_dir, current, version)
        if store.put((version + "\n").encode(), etag):
            step_done("latest_swapped")
            return
    raise UserError(
        f"LATEST of {tenant_dir} changed {SWAP_ATTEMPTS} times while publishing {version}: "
        "another publisher is writing this tenant (the run queue allows one run per tenant)"
    )


@lru_cache(maxsize=8)
def _s3_client(endpoint: str | None, region: str) -> Any:
    """A boto3 client for the one request pyarrow cannot send (credentials: the AWS environment)."""
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, region_name=region)


class _ConditionalStore:
    """One object read with its ETag and written only if the ETag is still the same."""

    def __init__(self, path: ObjectPath) -> None:
        self.path = path
        self.bucket, _, self.key = path.key.partition("/")
        self.client = _s3_client(*s3_settings())

    def read(self) -> tuple[str | None, str | None]:
        """The object's text (stripped) and ETag; (None, None) when there is none."""
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=self.key)
        except self.client.exceptions.NoSuchKey:
            return None, None
        return answer["Body"].read().decode("utf-8", "replace").strip(), answer["ETag"]

    def put(self, body: bytes, etag: str | None) -> bool:
        """PUT if the object still has `etag` (None: if there is still no object). False when
        another writer came first (412, or 409 for a write in flight)."""
        condition = {"IfMatch": etag} if etag is not None else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(Bucket=self.bucket, Key=self.key, Body=body, **condition)
        except self.client.exceptions.ClientError as error:
            status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status in (409, 412):
                return False
            if status != 501:  # 501: the store has no conditional writes; a plain PUT
                raise
            self.path.write_bytes(body)
        return True


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
