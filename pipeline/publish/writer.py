"""Publish a pack atomically: temp folder, fsync, verify, rename, then swap LATEST; then retention.

Packs may live in an object store (`s3://…`): the version is then staged on local disk and the
rename becomes an upload read back and verified before LATEST moves (`pipeline.publish.store`)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memorypack.format import (
    EMBEDDINGS,
    MANIFEST,
    PACK_FORMAT,
    SEAL,
    VERSION_TIME_FORMAT,
    PackError,
    pack_key,
    read_latest,
    read_manifest,
    seal_text,
    sha256_file,
    verify_pack,
    version_time,
)
from memorypack.fs import Location
from pipeline import __version__
from pipeline.publish.content import PackContent
from pipeline.publish.models import prune_models, ship
from pipeline.publish.store import (
    DEFAULT_KEEP,
    clean_leftovers,
    list_versions,
    place_version,
    prune,
    write_latest,
)
from pipeline.settings import Settings
from pipeline.stores import store_of
from pipeline.stores.disk import TEMP_PREFIX, fsync_path, step_done


@dataclass
class PublishResult:
    tenant_id: str
    version: str
    published: bool  # False: identical content was already live
    reason: str
    path: Location
    removed: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)


@contextmanager
def publish_lock(tenant_dir: Location) -> Iterator[None]:
    """One publisher per tenant at a time (a sensor run and a scheduled run may overlap); for an
    object store the lock is a local file (across hosts the run queue keeps one run per tenant)."""
    tenant_dir.mkdir(parents=True, exist_ok=True)
    with store_of(tenant_dir).lock_file(tenant_dir).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _fsynced(path: Path) -> Path:
    fsync_path(path)
    return path


def _write_files(folder: Path, content: PackContent) -> dict[str, dict[str, Any]]:
    files: dict[str, dict[str, Any]] = {}
    for name in sorted(content.frames):
        frame = content.frames[name]
        path = folder / name
        frame.write_parquet(path, compression="zstd", statistics=True)
        _fsynced(path)
        files[name] = {"rows": frame.height}
        step_done("first_file_written")
    _fsynced(Path(shutil.copyfile(content.embeddings.path, folder / EMBEDDINGS)))
    files[EMBEDDINGS] = {"rows": content.embeddings.rows}
    for name, entry in files.items():
        entry["sha256"] = sha256_file(folder / name)
        entry["bytes"] = (folder / name).stat().st_size
    return {name: files[name] for name in sorted(files)}


def content_hash(files: dict[str, dict[str, Any]], content: PackContent) -> str:
    """What makes two packs the same: the data files, models and metrics (not run ids or times)."""
    identity = {
        "pack_format": PACK_FORMAT,
        "tenant_id": content.tenant_id,
        "files": {name: entry["sha256"] for name, entry in files.items()},
        "models": content.models,
        "metrics": content.metrics,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def make_version(kept: Sequence[str], digest: str, now: datetime | None = None) -> str:
    """`<publish time>-<hash>`, strictly after every `kept` version of the tenant even if the clock
    stepped back or two publishes share a microsecond (called under the tenant's publish lock)."""
    published = (now or datetime.now(UTC)).astimezone(UTC)
    newest = max((version_time(v) for v in kept), default=None)
    if newest is not None and published <= newest:
        published = newest + timedelta(microseconds=1)
    return f"{published.strftime(VERSION_TIME_FORMAT)}-{digest[:8]}"


def _utc_text(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _manifest(
    content: PackContent, version: str, digest: str, files: dict[str, Any], run_id: str | None
) -> dict[str, Any]:
    memories = content.frames["memories.parquet"]
    statuses = memories["status"].value_counts().sort("status").iter_rows()
    return {
        "pack_format": PACK_FORMAT,
        "tenant_id": content.tenant_id,
        "version": version,
        "content_hash": digest,
        "as_of": _utc_text(content.as_of),
        "created_at": _utc_text(version_time(version)),
        "producer": {"package": "memorypack", "version": __version__, "dagster_run_id": run_id},
        "inputs": content.inputs,
        "models": content.models,
        "metrics": content.metrics,
        "counts": {
            "memories": memories.height,
            "by_status": {status: int(n) for status, n in statuses},
            "few_shot_examples": content.frames["few_shot.parquet"].height,
            "conflicts": content.frames["conflicts.parquet"].height,
            "templates": content.frames["templates.parquet"].height,
        },
        "redactions": content.redactions,
        "files": files,
    }


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """manifest.json, then its seal (signed with MEMORYPACK_PACK_KEY when set), both fsynced."""
    data = (json.dumps(manifest, indent=2, sort_keys=False, default=str) + "\n").encode()
    seal = seal_text(data, pack_key(Settings.from_env().pack_key)).encode()
    for name, content in ((MANIFEST, data), (SEAL, seal)):
        with (folder / name).open("wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())


def _accepted(version_dir: Location) -> bool:
    """Whether apps would load this kept version (an older memorypack wrote no seal; a pack key
    may have been set since): only such a version may stand for identical content."""
    try:
        verify_pack(version_dir, check_hashes=False, key=Settings.from_env().pack_key)
    except PackError:
        return False
    return True


def _live_manifest(tenant_dir: Location, latest: str | None) -> dict[str, Any]:
    """The live pack's manifest; empty when there is none or it is unreadable (replace it)."""
    try:
        return read_manifest(tenant_dir / latest) if latest is not None else {}
    except PackError:
        return {}


@dataclass
class _Staged:
    content_tenant: str
    tenant_dir: Location
    temp: Path | None  # None: identical content is already live
    version: str
    manifest: dict[str, Any]
    kept_reason: str = ""  # why nothing new goes live (temp is None)


class PackStage:
    """The steps of one publish: `add` writes and verifies a pack out of sight (a dot-folder
    nobody points at, or a local folder for an object store), `commit` makes it live, `discard`
    drops it. `publish` runs them for one tenant; the nightly publishes each tenant on its own, so
    one tenant's failure never holds back another's pack (assets/publish.py).

    A crash before `commit` leaves the previous pack live (the dot-folders are cleaned up by the
    next publish). The tenant's lock is held from `add` to `commit` / `discard`.
    """

    def __init__(
        self, packs_root: Location, run_id: str | None = None, keep: int = DEFAULT_KEEP
    ) -> None:
        self.packs_root, self.run_id, self.keep = packs_root, run_id, keep
        self._locks = ExitStack()
        self._staged: list[_Staged] = []
        self._scratch: Path | None = None  # local staging for an object store

    def _temp_folder(self, tenant_dir: Location) -> Path:
        """Where a version is written out of sight: a dot-folder beside the versions, or for an
        object store a local folder named after the tenant (the pack's checks read that name)."""
        folder = store_of(tenant_dir).staging(tenant_dir, self._scratch_folder)
        return folder / f"{TEMP_PREFIX}{uuid.uuid4().hex}"

    def _scratch_folder(self) -> Path:
        if self._scratch is None:
            self._scratch = Path(tempfile.mkdtemp(prefix="memorypack-stage-"))
        return self._scratch

    def _end(self) -> None:
        self._staged = []
        self._locks.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def add(self, content: PackContent) -> None:
        tenant_dir = self.packs_root / content.tenant_id
        self._locks.enter_context(publish_lock(tenant_dir))
        clean_leftovers(tenant_dir)
        temp = self._temp_folder(tenant_dir)
        temp.mkdir()
        try:
            files = _write_files(temp, content)
            ship(tenant_dir, content.model_files)  # content-addressed: safe before the swap
            step_done("files_written")
            digest = content_hash(files, content)
            latest = read_latest(tenant_dir)
            live = _live_manifest(tenant_dir, latest)
            as_of = _utc_text(content.as_of)
            identical = live.get("content_hash") == digest and _accepted(tenant_dir / str(latest))
            kept_as = "identical to the live pack" if identical else ""
            if live and not kept_as and str(live.get("as_of", "")) > as_of:
                # SPEC §5: a live pack never moves back in time (re-runs of old dates feed later
                # nights; only an operator's `rollback` points LATEST at an older pack).
                kept_as = (
                    f"not published: as_of {as_of} is older than the live pack's {live['as_of']}"
                )
            if kept_as:
                shutil.rmtree(temp)
                staged = _Staged(content.tenant_id, tenant_dir, None, str(latest), {}, kept_as)
                self._staged.append(staged)
                return
            kept = list_versions(tenant_dir)
            same = [
                v.version
                for v in kept
                if v.manifest.get("content_hash") == digest and _accepted(v.path)
            ]
            version = same[-1] if same else make_version([v.version for v in kept], digest)
            manifest = _manifest(content, version, digest, files, self.run_id)
            write_manifest(temp, manifest)
            step_done("manifest_written")
            verify_pack(temp, version=version, key=Settings.from_env().pack_key)
            fsync_path(temp)
            step_done("verified")
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
        self._staged.append(_Staged(content.tenant_id, tenant_dir, temp, version, manifest))

    def commit(self) -> list[PublishResult]:
        """Rename every staged pack into place and swap its LATEST; then retention."""
        results = []
        try:
            for staged in self._staged:
                results.append(self._commit_one(staged))
        finally:
            self._end()
        return results

    def _commit_one(self, staged: _Staged) -> PublishResult:
        tenant_dir, version = staged.tenant_dir, staged.version
        if staged.temp is None:
            removed = prune(tenant_dir, self.keep)
            prune_models(tenant_dir, [v.manifest for v in list_versions(tenant_dir)])
            return PublishResult(
                staged.content_tenant,
                version,
                False,
                staged.kept_reason,
                tenant_dir / version,
                removed,
            )
        final = tenant_dir / version
        manifest, reason = staged.manifest, "published"
        if place_version(staged.temp, final):
            # Same content as a kept older version (e.g. after a rollback): reuse that version.
            manifest = read_manifest(final)
            reason = "re-activated an identical kept version"
        step_done("renamed")
        write_latest(tenant_dir, version)
        removed = prune(tenant_dir, self.keep)
        prune_models(tenant_dir, [v.manifest for v in list_versions(tenant_dir)])
        step_done("pruned")
        return PublishResult(staged.content_tenant, version, True, reason, final, removed, manifest)

    def discard(self) -> None:
        """Nothing staged goes live; every tenant keeps the pack it had."""
        try:
            for staged in self._staged:
                if staged.temp is not None:
                    shutil.rmtree(staged.temp, ignore_errors=True)
        finally:
            self._end()


def publish(
    packs_root: Location, content: PackContent, run_id: str | None = None, keep: int = DEFAULT_KEEP
) -> PublishResult:
    """Make `content` the live pack of its tenant, or do nothing if identical content is live.

    Every step before the LATEST swap happens out of sight (a dot-folder, then a complete version
    folder nobody points at), so a crash anywhere leaves the previous pack live and loadable.
    """
    stage = PackStage(packs_root, run_id, keep)
    try:
        stage.add(content)
    except BaseException:
        stage.discard()
        raise
    return stage.commit()[0]
