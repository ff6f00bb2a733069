"""The contract's tenant id rule (SPEC §2), light to import: every CLI command checks its tenant by it."""

from __future__ import annotations

import re

from pipeline.errors import UserError

# A tenant id names a folder of every table, cache and pack: nothing else may pass (`..`, `/`).
TENANT_ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
# Names the systems around the lake give a meaning: Hive-style partitioning (polars, pyarrow,
# DuckDB, Spark) reads a folder `tenant_id=__HIVE_DEFAULT_PARTITION__` as null, and Dagster and
# Hive keep `__`-names for themselves. A tenant id may not start with two underscores. (The
# pattern leaves no `.`, `..`, `/`, `%` or control character; every other id reads back as
# itself from the lake, the warehouse and Dagster: tests/test_tenant_ids.py.)
RESERVED_PREFIX = "__"
SHOWN_CHARS = 70  # of a refused id in its one-line message


def is_tenant_id(text: str) -> bool:
    return re.fullmatch(TENANT_ID_PATTERN, text) is not None and not text.startswith(
        RESERVED_PREFIX
    )


def shown(text: str) -> str:
    """A refused value as one short line: quoted, escapes visible, cut."""
    quoted = repr(text)
    return quoted if len(quoted) <= SHOWN_CHARS else f"{quoted[: SHOWN_CHARS - 1]}…"


def check_tenant_id(text: str, what: str = "--tenant") -> str:
    if not is_tenant_id(text):
        raise UserError(
            f"{what} {shown(text)} is not a tenant id (1 to 64 letters, digits, _ or -, "
            f"not starting with {RESERVED_PREFIX})"
        )
    return text
