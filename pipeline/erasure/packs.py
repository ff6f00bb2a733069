"""Erasure in published packs: every kept version holding a person is rewritten without them,
re-sealed under a new version name at the same publish time, and LATEST follows atomically.

Packs in a local folder are rewritten beside the old version and renamed into place; packs on an
object store (MEMORYPACK_PACKS=s3://…) are downloaded to a private temporary folder, rewritten
there, and uploaded the way the publisher uploads (`pipeline.publish.store.place_version`: data
objects, manifest, seal last, read back and verified) before LATEST is pointed at them and the old version deleted."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import polars as pl

from memorypack.format import (
    EMBEDDINGS,
    PackError,
    read_latest,
    read_manifest,
    sha256_file,
    verify_pack,
)
from memorypack.fs import Location
from pipeline.erasure.scrub import Needles, row_mentions, scrub_frame
from pipeline.publish.content import FILL_ROWS, PackContent, npy_blocks, npy_shape, write_npy
from pipeline.publish.store import (
    clean_leftovers,
    list_versions,
    place_version,
    remove_dir,
    write_latest,
)
from pipeline.publish.writer import content_hash, publish_lock, write_manifest
from pipeline.settings import Settings
from pipeline.stores import store_of
from pipeline.stores.disk import TEMP_PREFIX, fsync_path

MEMORIES = "memories.parquet"
# Manifest counts that follow the rows of a file.
COUNTED = {
    "few_shot.parquet": "few_shot_examples",
    "conflicts.parquet": "conflicts",
    "templates.parquet": "templates",
}


def _parquet_files(manifest: dict[str, Any]) -> list[str]:
    return sorted(name for name in manifest.get("files", {}) if name.endswith(".parquet"))


def _scrubbed_files(
    version_dir: Path, manifest: dict[str, Any], needles: Needles
) -> tuple[dict[str, pl.DataFrame], np.ndarray | None, dict[str, int]]:
    """The files that change (frames), the embedding rows kept (None: unchanged), rows removed."""
    changed: dict[str, pl.DataFrame] = {}
    removed: dict[str, int] = {}
    keep_rows: np.ndarray | None = None
    for name in _parquet_files(manifest):
        frame = pl.read_parquet(version_dir / name)
        scrubbed = scrub_frame(frame, needles)
        if not scrubbed.changed:
            continue
        changed[name] = scrubbed.frame
        removed[name] = scrubbed.removed.height
        if name == MEMORIES and scrubbed.removed.height:
            keep_rows = ~row_mentions(frame, needles).to_numpy()
    return changed, keep_rows, removed


def _kept_blocks(path: Path, keep_rows: np.ndarray, size: int = FILL_ROWS) -> Iterator[np.ndarray]:
    """The rows of the .npy at `path` that `keep_rows` keeps, a block at a time (a 1.3M-memory
    pack's matrix is 2 GB: neither it nor the kept copy is held whole)."""
    start = 0
    for block in npy_blocks(path, size):
        yield block[keep_rows[start : start + len(block)]]
        start += len(block)


def _write_version(
    version_dir: Path,
    temp: Path,
    manifest: dict[str, Any],
    changed: dict[str, pl.DataFrame],
    keep_rows: np.ndarray | None,
) -> dict[str, Any]:
    """The rewritten data files in `temp` (unchanged ones copied); returns the new files entry."""
    files: dict[str, Any] = {}
    for name, entry in manifest["files"].items():
        path = temp / name
        if name in changed:
            changed[name].write_parquet(path, compression="zstd", statistics=True)
            rows = changed[name].height
        elif name == EMBEDDINGS and keep_rows is not None:
            rows = int(keep_rows.sum())
            dim = npy_shape(version_dir / name)[1]
            write_npy(path, _kept_blocks(version_dir / name, keep_rows), rows, dim)
        else:
            shutil.copyfile(version_dir / name, path)
            rows = entry["rows"]
        fsync_path(path)
        files[name] = {"rows": rows, "sha256": sha256_file(path), "bytes": path.stat().st_size}
    return {name: files[name] for name in sorted(files)}


def _new_manifest(
    manifest: dict[str, Any],
    files: dict[str, Any],
    changed: dict[str, pl.DataFrame],
    removed: dict[str, int],
) -> dict[str, Any]:
    identity = SimpleNamespace(
        tenant_id=manifest["tenant_id"],
        models=manifest.get("models"),
        metrics=manifest.get("metrics"),
    )
    digest = content_hash(files, cast(PackContent, identity))
    published = str(manifest["version"]).rsplit("-", 1)[0]
    new = {**manifest, "version": f"{published}-{digest[:8]}", "content_hash": digest}
    new["files"] = files
    counts = dict(new.get("counts") or {})
    if MEMORIES in changed:
        memories = changed[MEMORIES]
        counts["memories"] = memories.height
        if "status" in memories.columns:
            statuses = memories["status"].value_counts().sort("status").iter_rows()
            counts["by_status"] = {str(s): int(n) for s, n in statuses}
    for name, label in COUNTED.items():
        if name in changed:
            counts[label] = changed[name].height
    new["counts"] = counts
    earlier = list((manifest.get("erasures") or {}).get("rewrites", []))
    # No id, no time of request: only that this version was rewritten, and how much it lost.
    new["erasures"] = {
        "rewrites": [*earlier, {"from_version": manifest["version"], "rows_removed": removed}]
    }
    return new


def _rewrite(tenant_dir: Location, version: str, needles: Needles) -> str | None:
    """One version without the person: a new version beside it; None if none held."""
    with store_of(tenant_dir).local_copy(tenant_dir / version) as version_dir:
        manifest = read_manifest(version_dir)
        changed, keep_rows, removed = _scrubbed_files(version_dir, manifest, needles)
        if not changed:
            return None
        temp = version_dir.parent / f"{TEMP_PREFIX}{uuid.uuid4().hex}"
        temp.mkdir()
        try:
            files = _write_version(version_dir, temp, manifest, changed, keep_rows)
            new_manifest = _new_manifest(manifest, files, changed, removed)
            new_version = str(new_manifest["version"])
            write_manifest(temp, new_manifest)
            verify_pack(temp, version=new_version, key=Settings.from_env().pack_key)
            fsync_path(temp)
            place_version(temp, tenant_dir / new_version)
        except BaseException:
            shutil.rmtree(temp, ignore_errors=True)
            raise
    return new_version


def erase_from_packs(tenant_dir: Location, needles: Needles) -> dict[str, str]:
    """Rewrite every kept version of a tenant that holds the person; returns old -> new version.

    Each new version keeps its predecessor's publish time (so versions still sort in publish
    order) and as_of (so LATEST never moves back in time); LATEST is swapped to it atomically
    before the old folder is removed, so an app always finds a complete, verified pack. A version
    that does not verify is not re-sealed (that would launder it): if it holds the person it is
    removed."""
    if not tenant_dir.is_dir():
        return {}
    rewritten: dict[str, str] = {}
    with publish_lock(tenant_dir):
        clean_leftovers(tenant_dir)
        for info in list_versions(tenant_dir):
            try:
                verify_pack(info.path, key=Settings.from_env().pack_key)
            except PackError:
                if pack_mentions_version(info.path, needles):
                    remove_dir(info.path)
                    rewritten[info.version] = "removed (did not verify)"
                continue
            new = _rewrite(tenant_dir, info.version, needles)
            if new is None:
                continue
            if read_latest(tenant_dir) == info.version:
                write_latest(tenant_dir, new)
            remove_dir(info.path)
            rewritten[info.version] = new
    return rewritten


def _frame(path: Location) -> pl.DataFrame | None:
    """A data file read unverified (None when it does not read as Parquet)."""
    try:
        return store_of(path).read_parquet(path)
    except (OSError, ValueError, pl.exceptions.PolarsError):  # pyarrow's ArrowInvalid: ValueError
        return None


def pack_mentions_version(
    version_dir: Location, needles: Needles
) -> dict[str, list[dict[str, Any]]]:
    """The rows of one version's data files that mention the person (unverified read)."""
    found: dict[str, list[dict[str, Any]]] = {}
    children: list[Location] = list(version_dir.iterdir())
    for path in sorted(children, key=lambda p: p.name):
        frame = _frame(path) if path.name.endswith(".parquet") else None
        if frame is None:
            continue
        removed = scrub_frame(frame, needles).removed
        if removed.height:
            vectors = [n for n, t in removed.schema.items() if t == pl.List(pl.Float32())]
            found[path.name] = removed.drop(vectors).to_dicts()
    return found


def pack_mentions(
    tenant_dir: Location, needles: Needles
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per kept version of a tenant: the rows that mention the person (for an export)."""
    out = {}
    for info in list_versions(tenant_dir):
        found = pack_mentions_version(info.path, needles)
        if found:
            out[info.version] = found
    return out
