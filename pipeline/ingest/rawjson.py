"""The one way a raw JSON text is read in Python: bounded in size and nesting depth, strict (RFC
8259: no duplicate key, no NaN or Infinity), and never a `RecursionError`.

Ingest reads its lines with DuckDB and polars; every Python reader of a raw line — ingest's strict
re-check, erasure and export reading a quarantined line again, the importers — goes through
`read_json`, so a line 3,000 objects deep is `too_deep` everywhere, found by a scan that does not
recurse, before any parser sees it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pipeline.ingest.contracts import LINE_MAX_BYTES, MAX_JSON_DEPTH, Reason

# A JSON string (skipped whole: brackets inside it do not nest) or a bracket.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_OPENING = frozenset("[{")


class RawJsonError(ValueError):
    """Why a raw text is not read: `reason` is the quarantine reason it would get."""

    def __init__(self, reason: Reason, detail: str) -> None:
        super().__init__(f"{reason.value}: {detail}")
        self.reason = reason
        self.detail = detail


def json_depth(text: str) -> int:
    """How deeply arrays and objects nest in `text` (0 for a scalar), counted without parsing:
    strings are skipped whole, so a bracket inside one does not count. Invalid JSON gets a number
    too (its brackets'), which only bounds what a parser would face."""
    depth = deepest = 0
    for token in _TOKEN.findall(text):
        if token in _OPENING:
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


class _DuplicateKeyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    if len({k for k, _ in pairs}) < len(pairs):
        raise _DuplicateKeyError
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_json(text: str, max_bytes: int = LINE_MAX_BYTES, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value of `text`, or RawJsonError with the reason ingest gives such a line:
    `line_too_long` (over `max_bytes` UTF-8 bytes), `too_deep` (nesting over `max_depth`),
    `duplicate_key`, `invalid_json`."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise RawJsonError(Reason.LINE_TOO_LONG, f"{size} bytes, over {max_bytes}")
    # Counting brackets is C-fast; only a text with more of them than the limit can nest past it.
    deep = text.count("[") + text.count("{") > max_depth
    depth = json_depth(text) if deep else 0
    if depth > max_depth:
        raise RawJsonError(Reason.TOO_DEEP, f"nested {depth} deep, over {max_depth}")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except _DuplicateKeyError:
        raise RawJsonError(Reason.DUPLICATE_KEY, "a key twice in one object") from None
    except (ValueError, RecursionError) as error:  # RecursionError: unreachable below the bound
        raise RawJsonError(Reason.INVALID_JSON, str(error).splitlines()[0][:200]) from None


def json_reason(
    text: str, max_bytes: int = LINE_MAX_BYTES, max_depth: int = MAX_JSON_DEPTH
) -> str | None:
    """`read_json`'s reason for `text`, or None when it reads."""
    try:
        read_json(text, max_bytes, max_depth)
    except RawJsonError as error:
        return error.reason.value
    return None


def read_object(text: str) -> dict[str, Any] | None:
    """A raw line read again (erasure, export): its JSON object, or None when it is not one a
    bounded reader accepts (the caller keeps the raw text as it is)."""
    try:
        value = read_json(text)
    except RawJsonError:
        return None
    return value if isinstance(value, dict) else None
