"""Generated landing data for the bench, cached under bench/.cache/ keyed by size and seed.

Uses the project's generator (`pipeline.generate.generate`, SPEC §2 logs with ~2 % malformed lines,
re-sent duplicates, late arrivals, gzip files): repeated runs reuse the folders.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from bench.common import CACHE

START = date(2026, 11, 1)
TENANTS = 3
# Lines per base interaction written by the generator (feedback, statements, bad lines…), measured
# on 20k interactions: 47,958 lines. Used to size a landing folder by line count.
LINES_PER_INTERACTION = 2.4


def _generate(
    out: Path,
    days: int,
    interactions: int,
    seed: int,
    start: date,
    feedback: float | None,
    tenants: int = TENANTS,
    receipts: float = 0.0,
) -> dict[str, Any]:
    from pipeline.generate import FEEDBACK_PER_INTERACTION, generate

    return generate(
        out,
        days=days,
        interactions=interactions,
        tenants=tenants,
        seed=seed,
        start=start,
        feedback_per_interaction=feedback or FEEDBACK_PER_INTERACTION,
        receipts=receipts,
    )


def landing(
    interactions: int,
    days: int = 1,
    seed: int = 0,
    start: date = START,
    cache: Path = CACHE,
    feedback: float | None = None,
    tenants: int = TENANTS,
    receipts: float = 0.0,
) -> tuple[Path, dict[str, Any]]:
    """A cached landing folder `<cache>/landing-…/<YYYY-MM-DD>/…` and the generator's truth summary.

    `feedback`: mean feedback events per interaction (None: the generator's default, 1.1).
    `receipts`: the share of AI calls from the second day on that carry a receipt (0: none).
    """
    key = f"landing-i{interactions}-d{days}-t{tenants}-s{seed}-{start.isoformat()}"
    key += f"-fb{feedback:g}" if feedback else ""
    key += f"-r{receipts:g}" if receipts else ""
    target = cache / key
    done = target / ".bench-done.json"
    if done.exists():
        return target, json.loads(done.read_text())
    tmp = cache / f".{key}.{uuid.uuid4().hex}.tmp"
    tmp.mkdir(parents=True)
    truth = _generate(tmp, days, interactions, seed, start, feedback, tenants, receipts)
    summary = {
        "interactions": interactions,
        "feedback_per_interaction": feedback,
        "receipts": receipts,
        "days": days,
        "seed": seed,
        "start": start.isoformat(),
        "tenants": tenants,
        "ingest": {k: v for k, v in truth.get("ingest", {}).items() if k != "quarantine_by_reason"},
        "accepted_by_type": truth.get("accepted_by_type"),
    }
    (tmp / ".bench-done.json").write_text(json.dumps(summary, indent=2))
    if target.exists():
        shutil.rmtree(target)
    tmp.rename(target)
    return target, summary


def landing_by_lines(lines: int, seed: int = 0, cache: Path = CACHE) -> tuple[Path, dict[str, Any]]:
    """One load-date folder holding about `lines` lines (returns the folder itself)."""
    interactions = max(50, round(lines / LINES_PER_INTERACTION))
    root, summary = landing(interactions, days=1, seed=seed, cache=cache)
    return root / START.isoformat(), summary


def _rename_ids(data: bytes, prefix: bytes) -> bytes:
    """Give a second generation's events their own ids (the generator counts from 1 every time)."""
    for kind in (b"i", b"f", b"m"):
        data = data.replace(b'"' + kind + b"_0", b'"' + prefix + kind + b"_0")
    return data


def add_day(
    landing_root: Path,
    day: date,
    interactions: int,
    seed: int,
    cache: Path = CACHE,
    feedback: float | None = None,
    tenants: int = TENANTS,
    only_tenant: str | None = None,
    receipts: float | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Copy one extra, freshly generated load date into `landing_root` (ids made unique).

    `only_tenant`: copy only that tenant's files (a night where one tenant received data).
    `receipts` not None: the day is the second of a two-day generation with that share of receipts
    (the generator writes them from a generation's second day), so two such days that differ only
    in the share are alike: late lines, re-sends and planted cases of a second day (events of the
    first day they name are not in the home). The generator's weekday weights split the two days,
    so the day holds about, not exactly, `interactions`."""
    days = 1 if receipts is None else 2
    source_root, summary = landing(
        interactions * days,
        days=days,
        seed=seed,
        start=day - timedelta(days=days - 1),
        cache=cache,
        feedback=feedback,
        tenants=tenants,
        receipts=receipts or 0.0,
    )
    source = source_root / day.isoformat()
    target = landing_root / day.isoformat()
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    prefix = f"n{seed}".encode()
    for path in sorted(source.iterdir()):
        if only_tenant is not None and not path.name.startswith(f"{only_tenant}-"):
            continue
        if path.name.endswith(".gz"):
            raw = gzip.decompress(path.read_bytes())
            (target / path.name).write_bytes(gzip.compress(_rename_ids(raw, prefix), 1))
        else:
            (target / path.name).write_bytes(_rename_ids(path.read_bytes(), prefix))
    return target, summary


def link_day(source: Path, target: Path) -> None:
    """A cached load-date folder into a night's landing, its files hard-linked (no copy): ingest
    refuses a load-date folder that is a symbolic link leaving the landing folder."""
    shutil.copytree(source, target, copy_function=os.link)


def dates(start: date, days: int) -> list[str]:
    return [(start + timedelta(days=d)).isoformat() for d in range(days)]
