"""The pack format (SPEC §5): file names, manifest, sha256 verification. Standard library only."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.errors import UserError

PACK_FORMAT = 1
MANIFEST = "manifest.json"
LATEST = "LATEST"
EMBEDDINGS = "embeddings.npy"
# Data files of format 1. `skills.parquet` holds per-user skill statistics; `vectors.parquet`
# holds the vectors selection needs: user preference vectors and skill vectors (owner column).
DATA_FILES = (
    "memories.parquet",
    "summaries.parquet",
    "conflicts.parquet",
    "few_shot.parquet",
    "templates.parquet",
    "skills.parquet",
    "vectors.parquet",
    EMBEDDINGS,
)
# A version is `<publish time UTC to the microsecond>-<8 hex of the content hash>`, so names sort in
# publish order (never by hash). Packs published before round 2 carry a seconds-only time (their
# as_of); they still load and sort by that time.
VERSION_PATTERN = re.compile(r"^(\d{8}T\d{6})(\d{6})?Z-[0-9a-f]{8}$")
VERSION_TIME_FORMAT = "%Y%m%dT%H%M%S%fZ"
TEMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
HASH_CHUNK = 1 << 20
CRASH_ENV = "MEMORYPACK_CRASH_AT"


class PackError(UserError):
    """A pack that cannot be used: missing, tampered with, or of a format this loader does not know."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def is_version(name: str) -> bool:
    return bool(VERSION_PATTERN.match(name))


def version_time(name: str) -> datetime:
    """The publish time a version's name carries (UTC); the order of versions."""
    match = VERSION_PATTERN.match(name)
    if match is None:
        raise PackError(f"{name!r} is not a pack version")
    seconds, micros = match.group(1), match.group(2) or "000000"
    return datetime.strptime(seconds + micros, "%Y%m%dT%H%M%S%f").replace(tzinfo=UTC)


def read_manifest(version_dir: Path) -> dict[str, Any]:
    path = version_dir / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PackError(f"{version_dir} is not a pack (no {MANIFEST})") from None
    except (OSError, ValueError) as error:
        raise PackError(f"{path} is unreadable: {error}") from None
    if not isinstance(manifest, dict):
        raise PackError(f"{path} is not a JSON object")
    return manifest


def check_format(manifest: dict[str, Any], where: Path) -> None:
    found = manifest.get("pack_format")
    if found != PACK_FORMAT:
        raise PackError(
            f"pack {where} has pack_format {found!r}; this loader reads format {PACK_FORMAT} only "
            "(upgrade memorypack, keep using the pack you have)"
        )


def verify_pack(version_dir: Path, check_hashes: bool = True) -> dict[str, Any]:
    """The manifest of a pack whose format is known and whose every file matches size and sha256."""
    manifest = read_manifest(version_dir)
    check_format(manifest, version_dir)
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise PackError(f"pack {version_dir} lists no files in its manifest")
    for name, entry in sorted(files.items()):
        if "/" in name or "\\" in name or name.startswith(".") or name == MANIFEST:
            raise PackError(f"pack {version_dir} lists an invalid file name {name!r}")
        path = version_dir / name
        if not path.is_file():
            raise PackError(f"pack {version_dir} is missing {name}")
        size = path.stat().st_size
        if size != entry.get("bytes"):
            raise PackError(
                f"pack {version_dir}: {name} has {size} bytes, the manifest says {entry.get('bytes')}"
            )
        if check_hashes:
            check_hash(version_dir, name, entry)
    return manifest


def check_hash(version_dir: Path, name: str, entry: dict[str, Any]) -> None:
    """PackError unless the file's sha256 is the manifest's."""
    if sha256_file(version_dir / name) != entry.get("sha256"):
        raise PackError(f"pack {version_dir}: {name} does not match its sha256 (tampered?)")


def read_latest(tenant_dir: Path) -> str | None:
    try:
        version = (tenant_dir / LATEST).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    if not is_version(version):
        raise PackError(f"{tenant_dir / LATEST} holds {version[:40]!r}, not a pack version")
    return version


def resolve(path: str | os.PathLike[str], version: str | None = None) -> Path:
    """A version folder from a tenant folder (its LATEST, or `version`) or a version folder itself."""
    root = Path(path)
    if version is not None:
        if not is_version(version):
            raise PackError(
                f"{version!r} is not a pack version (expected e.g. 20261121T054012123456Z-1a2b3c4d)"
            )
        return root / version
    if (root / MANIFEST).is_file():
        return root
    latest = read_latest(root)
    if latest is None:
        raise PackError(f"no published pack at {root} (no {LATEST} file)")
    return root / latest


def fsync_path(path: Path) -> None:
    """Flush a file or a folder entry to disk (folders: so a rename survives a power cut)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def crash_point(step: str) -> None:
    """Test hook: MEMORYPACK_CRASH_AT=<step> kills this process at that step of a publish."""
    if os.environ.get(CRASH_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)
