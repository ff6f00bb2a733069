"""Keyed pseudonyms for identifiers: the home's secret key, and HMAC pseudonyms stable per tenant."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from memorypack.fs import Location
from pipeline.settings import Settings
from pipeline.stores import store_of

KEY_ENV = Settings.variable("pii_key")
PSEUDONYM_PREFIX = "pii-"
PSEUDONYM = rf"^{PSEUDONYM_PREFIX}[0-9a-f]{{24}}$"  # what `pseudonym` returns, as a regex


def pii_key(home: Location) -> bytes:
    """The home's secret for pseudonyms and cache keys: $MEMORYPACK_PII_KEY, or
    `<home>/secrets/pii.key` (32 random bytes as hex, mode 0600, created on first use).

    On an object-store home the key is an object beside the lake (every host must pseudonymize
    alike), readable by whoever can read the bucket: prefer MEMORYPACK_PII_KEY from a secret
    store there. Created once (`Store.write_once`): two first runs agree on one key."""
    key = Settings.from_env().pii_key
    if key:
        return key.encode()
    path = home / "secrets" / "pii.key"
    if not path.is_file():
        store_of(path).write_once(path, (secrets.token_hex(32) + "\n").encode())
    return path.read_text().strip().encode()


def pseudonym(key: bytes, tenant_id: str, value: str) -> str:
    """`pii-` + 24 hex of HMAC-SHA256(key, "<tenant_id>\\x00<value>"): the same identifier of
    one tenant always gets the same pseudonym (joins hold); another tenant's differs; without
    the key it cannot be computed or reversed."""
    digest = hmac.new(key, f"{tenant_id}\x00{value}".encode(), hashlib.sha256).hexdigest()
    return PSEUDONYM_PREFIX + digest[:24]
