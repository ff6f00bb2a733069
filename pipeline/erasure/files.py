"""The person's bytes outside the lake: the landing files and Dagster's run history under the home.

The lake, caches, models and packs are scrubbed row by row (`pipeline.erasure.person`); these two hold
the same words in other forms: raw log lines, and the metadata previews and log messages Dagster
stored for each run (`<home>/dagster`: SQLite files and compute logs).
"""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from pipeline.erasure.scrub import MIN_ID_CHARS, Needles, text_mention
from pipeline.ingest.landing import Damage, landing_pieces
from pipeline.ingest.listing import landing_entries

ERASED = "[erased]"
# A landing line longer than this is not checked line by line: its file is reported, not rewritten
# (ingest cut any such line to its first characters anyway).
SCRUB_MAX_LINE_BYTES = 64 << 20


@dataclass
class LandingScrub:
    """What an erasure did to landing folders: lines removed per file, and one line per file
    it could not clean (read-only, damaged) — the person's lines are still there."""

    removed: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def scrub_landing(landing: Path, needles: Needles) -> LandingScrub:
    """Drop the person's lines from every landing file (`<landing>/<date>/*.jsonl[.gz]`, regular
    files inside the folder only: pipeline.ingest.listing), each file read as a stream, rewritten
    whole and renamed into place only when it holds one: a line is theirs when it belongs to their
    tenant (or names none readably) and mentions one of their ids or texts. Every other line is
    kept byte for byte. Files are named relative to `landing`."""
    done = LandingScrub()
    if not landing.is_dir():
        return done
    escaped = [json.dumps(t)[1:-1] for t in (*needles.texts, *needles.fragments)]
    theirs = _theirs(needles, escaped)
    for folder in sorted(p for p in landing.iterdir() if p.is_dir()):
        for entry in landing_entries(folder, landing):
            if entry.refusal is not None:
                continue  # never read by ingest: nothing of theirs came from it
            name = str(entry.path.relative_to(landing))
            try:
                found = _scrub_file(entry.path, theirs)
            except _CannotScrub as problem:
                done.problems.append(f"{landing / name}: {problem}")
                continue
            if found:
                done.removed[name] = found
    return done


class _CannotScrub(Exception):
    """Why a landing file is left as it is (one line)."""


def _theirs(needles: Needles, escaped: list[str]) -> Callable[[list[bytes]], list[bool]]:
    def decide(lines: list[bytes]) -> list[bool]:
        frame = pl.DataFrame({"line": [b.decode("utf-8", "replace") for b in lines]})
        tenant = pl.col("line").str.json_path_match("$.tenant_id")
        mention = text_mention(pl.col("line"), needles, scoped=True)
        if escaped:  # a text as JSON writes it inside the line (\u00e9, \")
            mention = mention | pl.col("line").str.contains_any(escaped)
        found = (tenant.is_null() | (tenant == needles.tenant_id)) & mention
        return frame.select(found.fill_null(False)).to_series().to_list()

    return decide


def _lines(path: Path) -> Iterator[bytes]:
    """Blocks of whole lines of a landing file, each ending with a newline (the last may not):
    blank blocks as they are, others to be decided line by line."""
    carry = b""
    for piece in landing_pieces(path):
        if isinstance(piece, Damage):
            raise _CannotScrub(f"not rewritten, its rest cannot be read ({piece.detail})")
        if isinstance(piece, bytes):
            data = carry + piece
            cut = data.rfind(b"\n") + 1
            carry = data[cut:]
            if len(carry) > SCRUB_MAX_LINE_BYTES:
                raise _CannotScrub(f"not rewritten, a line over {SCRUB_MAX_LINE_BYTES} bytes")
            if cut:
                yield data[:cut]
    if carry:
        yield carry


def _kept(block: bytes, theirs: Callable[[list[bytes]], list[bool]]) -> tuple[bytes, int]:
    """The block without the person's lines, and how many it dropped."""
    if not block.strip():  # blank lines only
        return block, 0
    lines = block.split(b"\n")
    last = lines.pop()  # b"" after a final newline, else a last line without one
    lines = [*[line + b"\n" for line in lines], *([last] if last else [])]
    drop = theirs(lines)
    return b"".join(line for line, gone in zip(lines, drop, strict=True) if not gone), sum(drop)


def _scrub_file(path: Path, theirs: Callable[[list[bytes]], list[bool]]) -> int:
    """Lines of theirs removed from one file: a first pass finds whether there are any (most
    files hold none, and a file can decompress to far more than fits in memory), a second
    writes the file again without them."""
    if not any(_kept(block, theirs)[1] for block in _lines(path)):
        return 0
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    removed = 0
    try:
        with (
            tmp.open("wb") as raw,
            (
                gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.name.endswith(".gz") else raw
            ) as out,
        ):
            for block in _lines(path):
                kept, dropped = _kept(block, theirs)
                out.write(kept)
                removed += dropped
        os.replace(tmp, path)
    except OSError as error:  # a read-only landing folder, a full disk
        tmp.unlink(missing_ok=True)
        raise _CannotScrub(f"cannot be rewritten: {error.strerror or error}") from None
    return removed


def _forms(needles: Needles) -> list[str]:
    """Each id, text and fragment as written raw and as JSON writes it inside a string."""
    values = {i for i in needles.ids if len(i) >= MIN_ID_CHARS} | needles.texts
    values |= set(needles.fragments)
    forms = set()
    for value in values:
        forms |= {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    return sorted((f for f in forms if f), key=len, reverse=True)  # longest first


def scrub_dagster_history(dagster_home: Path, needles: Needles) -> dict[str, int]:
    """Replace the person's ids and texts by `[erased]` in every text column of every SQLite file
    under `dagster_home` (run records, event logs: asset metadata previews, log messages) and in
    its compute logs, then VACUUM so no freed page keeps the old bytes. Returns, per file, the
    replacements made (one per cell and form) or 1 for a rewritten log."""
    changed: dict[str, int] = {}
    if not dagster_home.is_dir():
        return changed
    forms = _forms(needles)
    if not forms:
        return changed
    for path in sorted(dagster_home.rglob("*")):
        if not path.is_file() or path.suffix in (".lock", ".tmp"):
            continue
        count = _scrub_sqlite(path, forms) if path.suffix == ".db" else _scrub_text(path, forms)
        if count:
            changed[str(path.relative_to(dagster_home))] = count
    return changed


def _scrub_sqlite(path: Path, forms: list[str]) -> int:
    con = sqlite3.connect(path)
    try:
        count = 0
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            columns = [
                r[1]
                for r in con.execute(f'PRAGMA table_info("{table}")')
                if r[2].upper() in ("TEXT", "") or "CHAR" in r[2].upper()
            ]
            for column in columns:
                for form in forms:
                    cursor = con.execute(
                        f'UPDATE "{table}" SET "{column}" = replace("{column}", ?, ?) '
                        f'WHERE instr("{column}", ?) > 0',
                        (form, ERASED, form),
                    )
                    count += cursor.rowcount
        con.commit()
        if count:
            con.execute("VACUUM")
        return count
    finally:
        con.close()


def _replaced(text: str, forms: list[str]) -> str:
    for form in forms:
        text = text.replace(form, ERASED)
    return text


def erase_in_text(text: str, needles: Needles) -> str:
    """The text with the person's ids, texts and fragments replaced by `[erased]`, as in the run
    history: for what a run still holds in memory and stores after the erasure."""
    return _replaced(text, _forms(needles))


def _scrub_text(path: Path, forms: list[str]) -> int:
    """A compute log (or any other text file Dagster keeps): rewritten without the forms."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return 0
    scrubbed = _replaced(text, forms)
    if scrubbed == text:
        return 0
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(scrubbed, encoding="utf-8")
    os.replace(tmp, path)
    return 1
