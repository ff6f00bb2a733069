"""Every environment variable the app library reads, in one place (the pipeline's are fields of
its `Settings`; the library cannot import it): the pack key's fallback and the S3 connection.

- `MEMORYPACK_PACK_KEY`: the key packs are verified with when `MemoryPack.load` gets no `key=`
  (an app's deployment sets it as the publisher's Settings do, so one secret serves both).
- `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`: an S3-compatible store (default: AWS).
- `AWS_REGION` / `AWS_DEFAULT_REGION`: its region (default us-east-1).

The credentials (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, or the AWS
config files) are read by pyarrow's S3 client itself, as every AWS client reads them. An empty
variable counts as unset. Each is read when it is used, never at import.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

KEY_ENV = "MEMORYPACK_PACK_KEY"
ENDPOINT_ENVS = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
REGION_ENVS = ("AWS_REGION", "AWS_DEFAULT_REGION")
DEFAULT_REGION = "us-east-1"


def _first(names: Sequence[str]) -> str | None:
    """The value of the first of `names` that is set and not empty."""
    return next((os.environ[name] for name in names if os.environ.get(name)), None)


def pack_key_text() -> str | None:
    """MEMORYPACK_PACK_KEY, the pack key when none is passed; None when unset."""
    return _first((KEY_ENV,))


def s3_settings() -> tuple[str | None, str]:
    """The S3 endpoint (None: AWS) and region."""
    return _first(ENDPOINT_ENVS), _first(REGION_ENVS) or DEFAULT_REGION
