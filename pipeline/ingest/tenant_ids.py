"""The contract's tenant id rule (SPEC §2), light to import: every CLI command checks its tenant by it."""

from __future__ import annotations

import re

from pipeline.errors import UserError

# A tenant id names a folder of every table, cache and pack: nothing else may pass (`..`, `/`).
TENANT_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
SHOWN_CHARS = 70  # of a refused id in its one-line message


def is_tenant_id(text: str) -> bool:
    return re.fullmatch(TENANT_ID_PATTERN, text) is not None


def shown(text: str) -> str:
    """A refused value as one short line: quoted, escapes visible, cut."""
    quoted = repr(text)
    return quoted if len(quoted) <= SHOWN_CHARS else f"{quoted[: SHOWN_CHARS - 1]}…"


def check_tenant_id(text: str, what: str = "--tenant") -> str:
    if not is_tenant_id(text):
        raise UserError(
            f"{what} {shown(text)} is not a tenant id (1 to 64 letters, digits, _ or -)"
        )
    return text
