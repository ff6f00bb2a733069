"""What an importer reads, bounded as ingest's lines are (pipeline.ingest.rawjson): a line or a
file no bigger than IMPORT_MAX_BYTES, nested no deeper than IMPORT_MAX_DEPTH; anything else is one
line for a person (`file:line: reason`), never a traceback."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipeline.errors import UserError
from pipeline.ingest.rawjson import RawJsonError, read_json

# An export's record (an OpenAssistant message tree, a LoCoMo file) is bigger and deeper than an
# event: a tree nests two levels per reply. Still far below Python's recursion limit.
IMPORT_MAX_BYTES = 64 << 20
IMPORT_MAX_DEPTH = 512


def _decoded(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserError(f"{where}: not UTF-8 text (byte {error.start})") from None


def _value(text: str, where: str, what: str) -> Any:
    try:
        return read_json(text, IMPORT_MAX_BYTES, IMPORT_MAX_DEPTH)
    except RawJsonError as error:  # e.g. "too_deep: nested 4001 deep, over 512"
        raise UserError(f"{where}: not a JSON {what} ({error})") from None


def json_lines(file: Path) -> Iterator[tuple[int, Any]]:
    """(line number, JSON value) of each non-blank line of a `.jsonl` or `.jsonl.gz` file."""
    opener = gzip.open if file.name.endswith(".gz") else open
    try:
        with opener(file, "rb") as handle:
            for n, line in enumerate(iter(lambda: handle.readline(IMPORT_MAX_BYTES + 2), b""), 1):
                if len(line.rstrip(b"\r\n")) > IMPORT_MAX_BYTES:
                    raise UserError(f"{file}:{n}: a line over {IMPORT_MAX_BYTES} bytes")
                text = _decoded(line, f"{file}:{n}")
                if text.strip():
                    yield n, _value(text, f"{file}:{n}", "line")
    except FileNotFoundError:
        raise UserError(f"{file} does not exist") from None
    except (OSError, EOFError) as error:  # a damaged gzip, a directory
        raise UserError(f"{file}: cannot be read ({error})") from None


def json_file(file: Path) -> Any:
    """The JSON value of a whole file no bigger than IMPORT_MAX_BYTES."""
    try:
        with open(file, "rb") as handle:
            data = handle.read(IMPORT_MAX_BYTES + 1)
    except FileNotFoundError:
        raise UserError(f"{file} does not exist") from None
    except OSError as error:
        raise UserError(f"{file}: cannot be read ({error.strerror or error})") from None
    if len(data) > IMPORT_MAX_BYTES:
        raise UserError(f"{file}: over {IMPORT_MAX_BYTES} bytes")
    return _value(_decoded(data, str(file)), str(file), "file")
