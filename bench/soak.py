"""Kill -9 soak: SIGKILL `memorypack run` at seeded moments, then check every safe-run invariant.

    python -m bench.soak --kills 20 --seed 0          # prints one line per attempt and a summary

After every kill: each tenant's live pack verifies and its as_of never moved back; every Parquet
file of the lake reads back. After the closing runs (every load date once, to completion): the runs
succeed, the warehouse equals the lake table by table and partition by partition, each event is in
exactly one partition, ingest counts are conserved, and no crash leftover remains under the home.
The kill moments come from a seeded generator, but the invariants hold wherever a kill lands: a
failure here is a bug, never bad luck.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq

from memorypack.format import LATEST, read_latest, verify_pack
from pipeline.config import Paths
from pipeline.generate import generate
from pipeline.publish.analytics import TABLES
from pipeline.storage.lake import Lake
from pipeline.stores.base import hive_values

ROOT = Path(__file__).resolve().parents[1]
START = date(2026, 11, 1)


@dataclass
class Attempt:
    load_date: str
    kill_after_s: float
    exit_code: int | None  # None: killed
    broken: list[str] = field(default_factory=list)


def live_as_of(paths: Paths) -> dict[str, str]:
    """Tenant → as_of of its live pack (the pack must verify)."""
    found = {}
    for tenant_dir in sorted(paths.packs.glob("*")) if paths.packs.is_dir() else []:
        if not (tenant_dir / LATEST).is_file():
            continue
        version = read_latest(tenant_dir)
        manifest = verify_pack(tenant_dir / str(version))
        found[tenant_dir.name] = str(manifest["as_of"])
    return found


def unreadable_lake_files(paths: Paths) -> list[str]:
    bad = []
    for path in sorted(paths.lake.rglob("*.parquet")):
        if path.name.startswith("."):
            continue  # a writer's temp file, never read
        try:
            pq.read_table(path)
        except Exception as error:  # any unreadable file is the finding
            bad.append(f"{path.relative_to(paths.home)}: {error}")
    return bad


def leftovers(paths: Paths) -> list[str]:
    """Crash leftovers: temp files and folders a killed writer left behind."""
    found = []
    for path in paths.home.rglob("*"):
        name = path.name
        if name.endswith(".tmp") or name.startswith((".tmp-", ".trash-")):
            found.append(str(path.relative_to(paths.home)))
    return sorted(found)


def warehouse_differences(paths: Paths) -> list[str]:
    """Tables (and partitions) whose row counts differ between the warehouse and the lake, and
    analyst tables the lake has and the warehouse lacks."""
    lake = Lake(paths)
    with duckdb.connect(str(paths.warehouse), read_only=True) as con:
        tables = [
            row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        ]
        differences = [
            f"{name}: in the lake, not in the warehouse"
            for name in TABLES
            if name not in tables and lake.exists(name)
        ]
        for name in tables:
            if not lake.exists(name):
                continue
            files = lake.files(name)
            if list(files) == [""]:
                ours = con.execute(f'SELECT count(*) FROM "{name}"').fetchone()
                theirs = lake.read(name).select(pl.len()).collect().item()
                if ours is None or ours[0] != theirs:
                    differences.append(f"{name}: warehouse {ours}, lake {theirs}")
                continue
            # Per lake file (a tenant's, a load date's): its rows, found again by its hive values.
            columns = list(hive_values(next(iter(files))))
            selected = ", ".join(f'CAST("{c}" AS VARCHAR)' for c in columns)
            rows = con.execute(f'SELECT {selected}, count(*) FROM "{name}" GROUP BY ALL').fetchall()
            in_warehouse = {
                "/".join(f"{c}={v}" for c, v in zip(columns, row[:-1], strict=True)): int(row[-1])
                for row in rows
            }
            in_lake = {key: pq.read_metadata(path).num_rows for key, path in files.items()}
            in_lake = {k: n for k, n in in_lake.items() if n}
            if in_warehouse != in_lake:
                differences.append(f"{name}: warehouse {in_warehouse}, lake {in_lake}")
    return differences


def ingest_problems(paths: Paths) -> list[str]:
    lake = Lake(paths)
    problems = []
    stats = lake.read("ingest_stats").collect()
    unbalanced = stats.filter(
        pl.col("lines_read") != pl.col("accepted") + pl.col("duplicates") + pl.col("quarantined")
    )
    if unbalanced.height:
        problems.append(f"ingest counts not conserved: {unbalanced.to_dicts()}")
    events = lake.read("events").select("tenant_id", "event_id").collect()
    repeated = events.height - events.unique().height
    if repeated:
        problems.append(f"{repeated} events stored in more than one partition")
    return problems


def run_cli(home: Path, landing: Path, load_date: str, kill_after: float | None) -> int | None:
    """One `memorypack run` in its own process group; SIGKILL it after `kill_after` seconds."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "lib" / "src")]),
        "HF_HUB_OFFLINE": "1",
    }
    command = [sys.executable, "-m", "jobs.cli", "run", "--home", str(home)]
    command += ["--landing", str(landing), "--date", load_date]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        return process.wait(timeout=kill_after if kill_after is not None else 900)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return None


def soak(workdir: Path, kills: int, seed: int, days: int = 3) -> dict:
    """Run the soak in `workdir` (a fresh home and landing); returns the report.

    A first clean run of the newest date gives every tenant a live pack to protect and times a
    run; each kill then lands at a seeded moment within that time, on a seeded date (re-runs of
    older dates included)."""
    landing, home = workdir / "landing", workdir / "home"
    generate(landing, days=days, interactions=120, tenants=2, seed=seed, start=START)
    paths = Paths(home)
    dates = [(START + timedelta(days=d)).isoformat() for d in range(days)]
    rng = random.Random(seed)
    started = time.monotonic()
    first = run_cli(home, landing, dates[-1], None)
    run_seconds = time.monotonic() - started
    if first != 0:
        return {
            "kills": 0,
            "seed": seed,
            "attempts": [],
            "ok": False,
            "final_problems": [f"first run of {dates[-1]} exited {first}"],
        }
    attempts: list[Attempt] = []
    seen: dict[str, str] = live_as_of(paths)
    for _ in range(kills):
        load_date = rng.choice(dates)
        delay = round(rng.uniform(0.3, 0.95 * run_seconds), 2)
        attempt = Attempt(load_date, delay, run_cli(home, landing, load_date, delay))
        live = live_as_of(paths)
        attempt.broken += [
            f"{tenant}: live pack moved back from {seen[tenant]} to {as_of}"
            for tenant, as_of in live.items()
            if tenant in seen and as_of < seen[tenant]
        ]
        attempt.broken += [f"tenant {t} lost its live pack" for t in seen if t not in live]
        attempt.broken += unreadable_lake_files(paths)
        seen.update(live)
        attempts.append(attempt)
    final: list[str] = []
    for load_date in dates:  # oldest first: re-runs of old dates must not roll a pack back
        code = run_cli(home, landing, load_date, None)
        if code:
            final.append(f"closing run {load_date} exited {code}")
        live = live_as_of(paths)
        final += [
            f"{t}: live pack moved back from {seen[t]} to {a} (closing run {load_date})"
            for t, a in live.items()
            if a < seen.get(t, "")
        ]
        seen.update(live)
    if not final:
        final += unreadable_lake_files(paths)
        final += warehouse_differences(paths)
        final += ingest_problems(paths)
        final += [f"leftover {name}" for name in leftovers(paths)]
    return {
        "kills": kills,
        "seed": seed,
        "run_seconds": round(run_seconds, 1),
        "attempts": [a.__dict__ for a in attempts],
        "final_problems": final,
        "ok": not final and not any(a.broken for a in attempts),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="memorypack-soak-"))
    started = time.monotonic()
    report = soak(workdir, args.kills, args.seed)
    for a in report["attempts"]:
        outcome = "killed" if a["exit_code"] is None else f"exit {a['exit_code']}"
        print(
            f"{a['load_date']} kill at {a['kill_after_s']:5.2f}s: {outcome}; broken: {a['broken']}"
        )
    print(json.dumps({"ok": report["ok"], "final_problems": report["final_problems"]}))
    print(f"{args.kills} kills in {time.monotonic() - started:.0f} s, home {workdir / 'home'}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
