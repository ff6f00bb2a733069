"""Ingest throughput: the `raw_events` path vs a bare DuckDB and a bare polars read of the same files."""

from __future__ import annotations

import importlib
import shutil
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

from bench import data
from bench.common import Figure, Sizes, interleaved, ratio, rounded


def _ingest_once(folder: Path, home: Path, split: dict[str, float]) -> dict[str, Any]:
    """What the `raw_events` asset does: parse, validate, quarantine, dedupe, Parquet, DuckDB."""
    from pipeline.config import Paths
    from pipeline.ingest.folder import ingest_folder
    from pipeline.storage.lake import Lake
    from pipeline.storage.warehouse import Warehouse

    paths = Paths.from_env(home)
    lake, warehouse = Lake(paths), Warehouse(paths)
    key = folder.name
    t0 = time.perf_counter()
    result = ingest_folder(folder, date.fromisoformat(key), None)
    t1 = time.perf_counter()
    lake.write_partition("events", key, result.events)
    lake.write_partition("quarantine", key, result.quarantine)
    t2 = time.perf_counter()
    warehouse.refresh("events", lake)
    warehouse.refresh("quarantine", lake)
    t3 = time.perf_counter()
    for part, seconds in (
        ("parse_validate_dedupe", t1 - t0),
        ("parquet", t2 - t1),
        ("duckdb", t3 - t2),
    ):
        split.setdefault(part, []).append(round(seconds, 4))  # type: ignore[attr-defined]
    return dict(result.stats)


def landing_files(*folders: Path) -> list[str]:
    """The landing files of load-date folders, as the bare reads take them."""
    return sorted(
        str(p) for f in folders for p in f.iterdir() if p.name.endswith((".jsonl", ".jsonl.gz"))
    )


def _read_json(files: list[str], options: str = "") -> str:
    listed = ", ".join(f"'{f}'" for f in files)
    return f"read_json([{listed}], format='newline_delimited', ignore_errors=true{options})"


def duck_count(files: list[str]) -> int:
    import duckdb

    with duckdb.connect() as con:
        row = con.execute(f"SELECT count(*) FROM {_read_json(files)}").fetchone()
    return int(row[0]) if row else 0


def polars_count(files: list[str]) -> int:
    """0 when polars cannot read the files: some malformed lines (NaN) stop even its count."""
    import polars as pl

    try:
        return int(pl.scan_ndjson(files, ignore_errors=True).select(pl.len()).collect().item())
    except pl.exceptions.ComputeError:
        return 0


def duck_parse(files: list[str]) -> int:
    """A bare read that parses every line's JSON: DuckDB materialises every contract field (a
    count(*) may skip that; polars' scan_ndjson cannot: the malformed lines stop it)."""
    import duckdb

    from pipeline.ingest.contracts import FIELDS

    columns = "{" + ", ".join(f"'{f.name}': 'JSON'" for f in FIELDS) + "}"
    with duckdb.connect() as con:
        con.execute(
            f"CREATE TEMP TABLE t AS SELECT * FROM {_read_json(files, f', columns={columns}')}"
        )
        row = con.execute("SELECT count(*) FROM t").fetchone()
    return int(row[0]) if row else 0


def run(sizes: Sizes) -> list[Figure]:
    for module in (
        "pipeline.ingest.folder",
        "pipeline.storage.lake",
        "pipeline.storage.warehouse",
    ):  # imported before timing
        importlib.import_module(module)
    folder, summary = data.landing_by_lines(sizes.ingest_lines, seed=sizes.seed)
    files = landing_files(folder)
    scratch = Path(tempfile.mkdtemp(prefix="bench-ingest-"))
    split: dict[str, Any] = {}

    try:
        timed = interleaved(
            {
                "ingest": lambda: _ingest_once(folder, scratch / "home", split),
                "duck_count": lambda: duck_count(files),
                "polars_count": lambda: polars_count(files),
                "duck_parse": lambda: duck_parse(files),
            },
            sizes.reps,
            setup={"ingest": lambda: shutil.rmtree(scratch / "home", ignore_errors=True)},
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ingest_s, _, stats = timed["ingest"]
    lines = int(stats["lines_read"])
    rate = lines / ingest_s
    bare = {"DuckDB read_json count(*)": lines / timed["duck_count"][0]}
    if timed["polars_count"][2]:
        bare["polars scan_ndjson len()"] = lines / timed["polars_count"][0]
    best_name = max(bare, key=lambda k: bare[k])
    slowdown = ratio(bare[best_name], rate)
    parse_rate = lines / timed["duck_parse"][0]
    details = {
        "lines": lines,
        "files": len(files),
        "bytes": sum(Path(f).stat().st_size for f in files),
        "ingest_stats": stats,
        "generator": summary,
        "seconds_reps": {name: t[1] for name, t in timed.items()},
        "ingest_split_seconds_reps": split,
        "bare_rows": {name: t[2] for name, t in timed.items() if name != "ingest"},
        "bare_rows_per_s": {k: round(v) for k, v in bare.items()},
        "ratio_means": "fastest bare read rows/s ÷ ingest rows/s (how many times slower)",
        "note": "count(*) reads may count newlines without parsing: see the full-parse figure",
    }
    return [
        Figure(
            name="ingest rows/s (parse, validate, quarantine, dedupe, Parquet + DuckDB)",
            value=round(rate),
            unit="lines/s",
            baseline_name=f"bare {best_name}",
            baseline_value=round(bare[best_name]),
            ratio=rounded(slowdown),
            goal="within 2× of the faster bare read (ratio ≤ 2)",
            goal_met=slowdown is not None and slowdown <= 2.0,
            details=details,
        ),
        Figure(
            name="ingest rows/s vs a bare read that parses every field",
            value=round(rate),
            unit="lines/s",
            baseline_name="bare DuckDB read_json of every contract field",
            baseline_value=round(parse_rate),
            ratio=rounded(ratio(parse_rate, rate)),
            goal="context only (no goal)",
            goal_met=None,
            details={"ratio_means": "bare full-parse rows/s ÷ ingest rows/s"},
        ),
    ]
