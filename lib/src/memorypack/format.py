"""The pack format (SPEC §5): file names, manifest, seal, sha256 verification. Standard library only
(a pack in an object store is read through `memorypack.fs`)."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from datetime import UTC, datetime
from typing import Any

from memorypack.environment import KEY_ENV, pack_key_text
from memorypack.fs import Location, Unreadable, absolute, files, location

PACK_FORMAT = 1
MANIFEST = "manifest.json"
# Beside the manifest, the one thing that covers it: `sha256 <hex>` of manifest.json's bytes, plus
# `hmac-sha256 <hex>` when the publisher holds a pack key (KEY_ENV). See `check_seal`.
SEAL = "manifest.seal"
MIN_KEY_BYTES = 16
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
REQUIRED_FILES = ("memories.parquet", EMBEDDINGS)
# No text (or identifier) in a pack is longer than this many characters: the publisher cuts longer
# ones (keeping a marker), the loader refuses a pack holding one. A manifest is a few KiB.
MAX_FIELD_CHARS = 16_384
TRUNCATION_MARK = "…[truncated]"
MAX_MANIFEST_BYTES = 1 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
# A version is `<publish time UTC to the microsecond>-<8 hex of the content hash>`, so names sort in
# publish order (never by hash). Packs published before round 2 carry a seconds-only time (their
# as_of); they still load and sort by that time.
VERSION_PATTERN = re.compile(r"^(\d{8}T\d{6})(\d{6})?Z-[0-9a-f]{8}$")
VERSION_TIME_FORMAT = "%Y%m%dT%H%M%S%fZ"
HASH_CHUNK = 1 << 20


class PackError(Exception):
    """A pack that cannot be used: missing, tampered with, or of a format this loader does not know.

    The message is one line meant for a person (the pipeline's CLI prints it as it is)."""


def sha256_file(path: Location, limit: int | None = None) -> str:
    """The file's sha256 (of at most `limit` + 1 bytes: a file grown since its size was checked
    is not read whole, and cannot match)."""
    digest = hashlib.sha256()
    left = -1 if limit is None else limit + 1
    with path.open("rb") as handle:
        while left and (chunk := handle.read(HASH_CHUNK if left < 0 else min(HASH_CHUNK, left))):
            digest.update(chunk)
            left = left - len(chunk) if left > 0 else left
    return digest.hexdigest()


def read_regular(path: Location, limit: int, what: str, exact: bool = False) -> bytes:
    """A file's bytes, PackError (one line) unless it is a regular file of at most `limit` bytes
    (exactly `limit` with `exact`): what it is and its size are checked before anything is read,
    on what was opened (a link to /dev/zero is a device; a FIFO never blocks the open), and the
    read itself stops after `limit` + 1 bytes."""
    try:
        handle, size = files(path).open_regular()
    except Unreadable as why:
        raise PackError(f"{what} {path} {why}") from None
    with handle:
        return _checked(handle, size, limit, what, path, exact)


def _checked(handle: Any, size: int, limit: int, what: str, path: Location, exact: bool) -> bytes:
    if size > limit or (exact and size != limit):
        expected = f"{'' if exact else 'at most '}{limit}"
        raise PackError(f"{what} {path} has {size} bytes, not {expected}")
    try:
        data = bytes(handle.read(limit + 1))
    except OSError as error:
        raise PackError(f"{what} {path} is unreadable: {error.strerror or error}") from None
    if len(data) > limit or (exact and len(data) != limit):
        raise PackError(f"{what} {path} changed size while it was read")
    return data


def is_version(name: str) -> bool:
    """A version's name: the pattern, and a publish time that exists (not month 13)."""
    try:
        version_time(name)
    except PackError:
        return False
    return True


def version_time(name: str) -> datetime:
    """The publish time a version's name carries (UTC); the order of versions."""
    match = VERSION_PATTERN.match(name)
    if match is None:
        raise PackError(f"{name!r} is not a pack version")
    seconds, micros = match.group(1), match.group(2) or "000000"
    try:
        return datetime.strptime(seconds + micros, "%Y%m%dT%H%M%S%f").replace(tzinfo=UTC)
    except ValueError:
        raise PackError(f"{name!r} is not a pack version: no such time") from None


def _read_bounded(path: Location, limit: int, what: str) -> bytes:
    """A small file's bytes; PackError (one line) when it is absent, not a file, or too big."""
    return read_regular(path, limit, what)


def _parse_manifest(data: bytes, path: Location) -> dict[str, Any]:
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise PackError(f"{path} is not valid UTF-8 JSON: {reason[:200]}") from None
    if not isinstance(manifest, dict):
        raise PackError(f"{path} is not a JSON object")
    return manifest


def _manifest_bytes(version_dir: Location) -> bytes:
    path = version_dir / MANIFEST
    if not path.exists():
        raise PackError(f"{version_dir} is not a pack (no {MANIFEST})")
    return _read_bounded(path, MAX_MANIFEST_BYTES, "manifest")


def read_manifest(version_dir: Location) -> dict[str, Any]:
    """A version's manifest as JSON, for listing; `verify_pack` is what checks it."""
    return _parse_manifest(_manifest_bytes(version_dir), version_dir / MANIFEST)


def pack_key(key: str | bytes | None = None) -> bytes | None:
    """The pack key (argument, else the MEMORYPACK_PACK_KEY environment variable); None: no key."""
    if key is None:
        key = pack_key_text()
    if key is None:
        return None
    raw = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    if len(raw) < MIN_KEY_BYTES:
        raise PackError(f"the pack key ({KEY_ENV}) must be at least {MIN_KEY_BYTES} bytes long")
    return raw


def seal_text(manifest_bytes: bytes, key: bytes | None) -> str:
    """What the publisher writes to `manifest.seal` for these manifest bytes."""
    lines = [f"sha256 {hashlib.sha256(manifest_bytes).hexdigest()}"]
    if key is not None:
        lines.append(f"hmac-sha256 {hmac.new(key, manifest_bytes, hashlib.sha256).hexdigest()}")
    return "\n".join(lines) + "\n"


def check_seal(version_dir: Location, manifest_bytes: bytes, key: bytes | None) -> None:
    """PackError unless `manifest.seal` matches the manifest's bytes (and the key, when one is set).

    Without a key the seal detects corruption and edits that forget it; only a key stops someone
    who can write the folder and recompute a sha256."""
    path = version_dir / SEAL
    if not path.exists():
        raise PackError(
            f"pack {version_dir} has no {SEAL} (published by an older memorypack, or the seal was "
            "removed): run the pipeline again to republish it"
        )
    try:
        text = _read_bounded(path, 1024, "seal").decode("ascii")
        seal = dict(line.split(" ", 1) for line in text.splitlines() if line)
    except ValueError:
        raise PackError(f"seal {path} is malformed") from None
    expected = dict(line.split(" ", 1) for line in seal_text(manifest_bytes, key).splitlines())
    if not hmac.compare_digest(seal.get("sha256", ""), expected["sha256"]):
        raise PackError(f"pack {version_dir}: {MANIFEST} does not match its seal (tampered?)")
    if key is not None and not hmac.compare_digest(
        seal.get("hmac-sha256", ""), expected["hmac-sha256"]
    ):
        raise PackError(
            f"pack {version_dir} is not signed with this app's pack key ({KEY_ENV}): refused"
        )


def _shown(value: Any) -> str:
    """A manifest value for a one-line message (a forged one may be huge)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_format(manifest: dict[str, Any], where: Location) -> None:
    found = manifest.get("pack_format")
    if type(found) is not int or found != PACK_FORMAT:  # not True, not 1.0
        raise PackError(
            f"pack {where} has pack_format {_shown(found)}; this loader reads format {PACK_FORMAT} only "
            "(upgrade memorypack, keep using the pack you have)"
        )


def _check_fields(manifest: dict[str, Any], version_dir: Location, version: str) -> None:
    """The manifest fields the loader relies on: their types, and that they name this folder."""
    tenant = absolute(version_dir).parent.name
    if manifest.get("tenant_id") != tenant:
        raise PackError(
            f"pack {version_dir} belongs to tenant {_shown(manifest.get('tenant_id'))}, "
            f"not to {tenant!r} whose folder holds it"
        )
    if manifest.get("version") != version:
        raise PackError(
            f"pack {version_dir} says it is version {_shown(manifest.get('version'))}, not {version!r}"
        )
    as_of = manifest.get("as_of")
    try:
        moment = datetime.fromisoformat(as_of.replace("Z", "+00:00"))  # type: ignore[union-attr]
    except (AttributeError, ValueError):
        raise PackError(f"pack {version_dir} has as_of {_shown(as_of)}, not an ISO time") from None
    if moment.tzinfo is None:
        raise PackError(f"pack {version_dir} has as_of {_shown(as_of)} without a time zone")
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        raise PackError(f"pack {version_dir} lists no files in its manifest")
    for name in REQUIRED_FILES:
        if name not in files:
            raise PackError(f"pack {version_dir} does not list {name} in its manifest")
    for name, entry in files.items():
        if name not in DATA_FILES:
            raise PackError(f"pack {version_dir} lists {_shown(name)}, not a file of format 1")
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and _SHA256.match(entry["sha256"])
            and all(type(entry.get(n)) is int and entry[n] >= 0 for n in ("bytes", "rows"))
        ):
            raise PackError(
                f"pack {version_dir}: the manifest entry of {name} needs sha256 (64 hex), "
                "bytes and rows (integers)"
            )


def verify_pack(
    version_dir: Location,
    check_hashes: bool = True,
    version: str | None = None,
    key: str | bytes | None = None,
) -> dict[str, Any]:
    """The manifest of a pack that is what it says: sealed (and signed when a key is set), of
    format 1, naming its tenant folder and `version` (default: its folder's name), listing every
    file its folder holds, each of the listed size (and sha256 unless `check_hashes` is False)."""
    try:
        return _verified(version_dir, check_hashes, version, key)
    except OSError as error:  # e.g. an object store that went away mid-way
        raise PackError(f"pack {version_dir} is unreadable: {_reason(error)}") from None


def _reason(error: OSError) -> str:
    return error.strerror or (str(error).splitlines() or [type(error).__name__])[0][:200]


def _verified(
    version_dir: Location, check_hashes: bool, version: str | None, key: str | bytes | None
) -> dict[str, Any]:
    data = _manifest_bytes(version_dir)
    check_seal(version_dir, data, pack_key(key))
    manifest = _parse_manifest(data, version_dir / MANIFEST)
    check_format(manifest, version_dir)
    _check_fields(manifest, version_dir, version or version_dir.name)
    files: dict[str, dict[str, Any]] = manifest["files"]
    try:
        present = {child.name for child in version_dir.iterdir()}
    except OSError as error:
        raise PackError(f"pack {version_dir} is unreadable: {error.strerror or error}") from None
    unlisted = sorted(present - set(files) - {MANIFEST, SEAL})
    if unlisted:
        raise PackError(f"pack {version_dir} holds files its manifest does not list: {unlisted}")
    for name, entry in sorted(files.items()):
        file = version_dir / name
        if not file.is_file():
            kind = "not a file" if file.exists() else "missing"
            raise PackError(f"pack {version_dir}: {name} is {kind}")
        size = file.stat().st_size
        if size != entry["bytes"]:
            raise PackError(
                f"pack {version_dir}: {name} has {size} bytes, the manifest says {entry['bytes']}"
            )
        if check_hashes:
            check_hash(version_dir, name, entry)
    return manifest


def check_hash(version_dir: Location, name: str, entry: dict[str, Any]) -> None:
    """PackError unless the file's sha256 is the manifest's."""
    try:
        digest = sha256_file(version_dir / name, int(entry.get("bytes", 0)))
    except OSError as error:
        raise PackError(f"pack {version_dir}: {name} is unreadable: {_reason(error)}") from None
    if digest != entry.get("sha256"):
        raise PackError(f"pack {version_dir}: {name} does not match its sha256 (tampered?)")


def read_latest(tenant_dir: Location) -> str | None:
    path = tenant_dir / LATEST
    if not path.exists():
        return None
    try:
        version = _read_bounded(path, 256, "LATEST").decode("utf-8").strip()
    except ValueError:
        raise PackError(f"{path} is not UTF-8 text") from None
    if not is_version(version):
        raise PackError(f"{tenant_dir / LATEST} holds {version[:40]!r}, not a pack version")
    return version


def resolve(path: str | os.PathLike[str] | Location, version: str | None = None) -> Location:
    """A version folder from a tenant folder (its LATEST, or `version`) or a version folder itself."""
    root = location(path)
    try:
        return _resolved(root, version)
    except OSError as error:
        raise PackError(f"packs at {root} are unreachable: {_reason(error)}") from None


def _resolved(root: Location, version: str | None) -> Location:
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
