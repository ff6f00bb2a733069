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
from pathlib import Path

import polars as pl

from pipeline.erasure.scrub import MIN_ID_CHARS, Needles, text_mention

ERASED = "[erased]"


def scrub_landing(landing: Path, needles: Needles) -> dict[str, int]:
    """Drop the person's lines from every landing file (`*.jsonl`, `*.jsonl.gz`), each file
    rewritten whole and renamed into place: a line is theirs when it belongs to their tenant (or
    names none readably) and mentions one of their ids or texts. Returns lines removed per file."""
    removed: dict[str, int] = {}
    if not landing.is_dir():
        return removed
    escaped = [json.dumps(t)[1:-1] for t in (*needles.texts, *needles.fragments)]
    for path in sorted(landing.glob("*/*.jsonl*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        zipped = path.name.endswith(".gz")
        try:
            raw = gzip.decompress(path.read_bytes()) if zipped else path.read_bytes()
        except (OSError, EOFError):
            continue  # a damaged file: ingest quarantines it as a whole; nothing to read here
        lines = pl.DataFrame({"line": raw.decode("utf-8", "replace").splitlines()})
        tenant = pl.col("line").str.json_path_match("$.tenant_id")
        mention = text_mention(pl.col("line"), needles, scoped=True)
        if escaped:  # a text as JSON writes it inside the line (\u00e9, \")
            mention = mention | pl.col("line").str.contains_any(escaped)
        theirs = (tenant.is_null() | (tenant == needles.tenant_id)) & mention
        kept = lines.filter(~theirs.fill_null(False))
        if kept.height == lines.height:
            continue
        text = "".join(f"{line}\n" for line in kept["line"])
        data = gzip.compress(text.encode()) if zipped else text.encode()
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        removed[str(path.relative_to(landing))] = lines.height - kept.height
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
