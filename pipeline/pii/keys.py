"""Keyed pseudonyms for identifiers: the home's secret key, and HMAC pseudonyms stable per tenant."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

from memorypack.fs import Location, ObjectPath
from pipeline.settings import Settings

KEY_ENV = Settings.variable("pii_key")
PSEUDONYM_PREFIX = "pii-"
PSEUDONYM = rf"^{PSEUDONYM_PREFIX}[0-9a-f]{{24}}$"  # what `pseudonym` returns, as a regex


def pii_key(home: Location) -> bytes:
    """The home's secret for pseudonyms and cache keys: $MEMORYPACK_PII_KEY, or
    `<home>/secrets/pii.key` (32 random bytes as hex, mode 0600, created on first use).

    On an object-store home the key is an object beside the lake (every host must pseudonymize
    alike), readable by whoever can read the bucket: prefer MEMORYPACK_PII_KEY from a secret
    store there. Its first creation happens in ingest, which the run queue runs one at a time."""
    key = Settings.from_env().pii_key
    if key:
        return key.encode()
    if isinstance(home, ObjectPath):
        remote = home / "secrets" / "pii.key"
        if not remote.is_file():
            remote.mkdir(parents=True, exist_ok=True)
            remote.write_text(secrets.token_hex(32) + "\n")
        return remote.read_text().strip().encode()
    path = home / "secrets" / "pii.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Written whole to a private file, then linked into place: `link` fails if the key exists,
        # so two first runs agree on one key and neither can read a half-written one.
        tmp = path.with_name(f".pii.key.{secrets.token_hex(8)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            tmp.unlink()
    return path.read_text().strip().encode()


def pseudonym(key: bytes, tenant_id: str, value: str) -> str:
    """`pii-` + 24 hex of HMAC-SHA256(key, "<tenant_id>\\x00<value>"): the same identifier of
    one tenant always gets the same pseudonym (joins hold); another tenant's differs; without
    the key it cannot be computed or reversed."""
    digest = hmac.new(key, f"{tenant_id}\x00{value}".encode(), hashlib.sha256).hexdigest()
    return PSEUDONYM_PREFIX + digest[:24]
