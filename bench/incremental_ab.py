"""A night of two commits, side by side on the same machine in one run (what a change saves).

Incremental (the default): a home is built once by this checkout's full night (generated logs
over 7 load dates, cached under bench/.cache), then each round runs one incremental night
(+`--new` interactions on the next date) on a fresh copy of it with the base commit's code and
with this checkout's, in turn, so a noisy neighbour slows both alike. The base commit runs from a
git worktree; the copies' recorded file identities are re-keyed to the copied files, which are
the same data, so neither night rebuilds what it would not have rebuilt in place. Before its
night (untimed), each copy's analytics build runs with that side's code, so a change to what the
warehouse or the redacted base holds is not timed as the night's.

`--night full`: each round runs the full night over the 7 load dates on a fresh home (only the
embedding export in it) with each side's code, in turn.

    python -m bench.incremental_ab --base 6939358 --interactions 250000 --tenants 1 --new 7500
    python -m bench.incremental_ab --base 3d11a5e --night full --interactions 6000 --tenants 3 \
        --dpo-max-steps 0

Prints a table (wall time, when the packs and the analytics build were done, the trainings after
them, ingest, analytics build, each step's seconds summed over tenants) and writes it with the
machine and every night's details to bench/results/<date>-<night>-ab-<base>-<head>.*.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import data
from bench.common import CACHE, ROOT, offline_env, run_child, write_json
from bench.machine import commit, describe, machine
from bench.sections_scale import _embedding_export, _fresh_home, _night
from bench.sections_scale_goal import _night_details

RESULTS = ROOT / "bench" / "results"
CONVERGE = """import sys; from pathlib import Path; from pipeline.publish.analytics import build_snapshot
from pipeline.config import Paths; build_snapshot(Paths.from_env(Path(sys.argv[1])))"""


def _rev(rev: str, root: Path = ROOT) -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()


def _worktree(rev: str) -> Path:
    """A checkout of `rev` beside the bench cache (made once), sharing its cache."""
    tree = CACHE / f"worktree-{rev}"
    if not (tree / "bench").is_dir():
        subprocess.run(["git", "worktree", "add", "-f", "--detach", str(tree), rev], cwd=ROOT,
                       check=True, capture_output=True)  # fmt: skip
        (tree / "bench" / ".cache").symlink_to(CACHE, target_is_directory=True)
    return tree


def rekey(home: Path) -> int:
    """Record the copied files' identities (`storage.file_identity`) where the original's were
    recorded for a file of the same size and mtime: the derived-partition markers and the
    warehouse's and the analytics parts' `_lake_files`. Returns how many were re-keyed."""
    import duckdb

    from pipeline.config import Paths
    from pipeline.publish.snapshot_parts import PARTS
    from pipeline.storage.lake import DERIVED_MARKER, Lake, file_identity
    from pipeline.storage.warehouse import LOADED_FILES

    def same(old: str, path: Path) -> bool:
        return old.split(":")[1:] == file_identity(path).split(":")[1:]

    n = 0
    for marker in (home / "lake").rglob(DERIVED_MARKER.format(consumer="*")):
        for file in marker.parent.glob("*.parquet"):
            if same(marker.read_text(), file):
                marker.write_text(file_identity(file))
                n += 1
    paths = Paths.from_env(home)
    lake = Lake(paths)
    for db in (paths.warehouse, *sorted((paths.local / PARTS).glob("*.duckdb"))):
        if not db.exists():
            continue
        con = duckdb.connect(str(db))
        try:
            recorded = con.execute(f"SELECT table_name, part, identity FROM {LOADED_FILES}")
            files: dict[str, dict[str, Any]] = {}
            for table, part, old in recorded.fetchall():
                copied = files.setdefault(table, lake.files(table)).get(part)
                if isinstance(copied, Path) and same(old, copied):
                    con.execute(
                        f"UPDATE {LOADED_FILES} SET identity = ? WHERE table_name = ? AND part = ?",
                        [file_identity(copied), table, part],
                    )
                    n += 1
            con.execute("CHECKPOINT")
        finally:
            con.close()
    return n


def _base_home(args: argparse.Namespace, key: str) -> tuple[Path, str]:
    """The cached home after the full night (beside it, its landing with the new date added) and
    that date."""
    work = CACHE / f"ab-{key}"
    landing, logs, home = work / "landing", work / "logs", work / "home"
    dates = data.dates(data.START, 7)
    new_day = data.START + timedelta(days=7)
    if not (work / "done").exists():
        shutil.rmtree(work, ignore_errors=True)
        for folder in (landing, logs):
            folder.mkdir(parents=True)
        source, _ = data.landing(
            args.interactions, days=7, seed=0, feedback=3.0, tenants=args.tenants
        )
        for day in dates:
            (landing / day).symlink_to(source / day, target_is_directory=True)
        export, _ = _embedding_export(logs)
        _night(_fresh_home(home, export), landing, dates[0], dates[-1], args.workers,
               args.dpo_max_steps, logs, "full")  # fmt: skip
        data.add_day(landing, new_day, args.new, seed=1000, feedback=3.0, tenants=args.tenants)
        (work / "done").write_text("ok")
    return home, new_day.isoformat()


def _summary(night: dict[str, Any]) -> dict[str, Any]:
    details = _night_details(night, {})
    path = details["path"]
    return {
        "seconds": details["seconds"],
        "packs_and_build_s": path["packs_and_build_s"],
        "trainings_summed_s": path["trainings_summed_s"],
        "ingest_s": details["ingest_s"],
        "analytics_s": details["analytics_s"],
        "peak_rss_mib_largest_worker": details["peak_rss_mib_largest_worker"],
        "steps_s": {k: v for k, v in details["step_totals_s"].items() if v >= 0.5},
    }


def _table(runs: dict[str, list[dict[str, Any]]], labels: dict[str, str]) -> str:
    steps = sorted({s for rs in runs.values() for r in rs for s in r["steps_s"]},
                   key=lambda s: -runs["change"][0]["steps_s"].get(s, 0))  # fmt: skip
    rows = [("night, wall (s)", "seconds"),
            ("packs and analytics build done, from ingest's start (s)", "packs_and_build_s"),
            ("trainings after the publish, summed (s)", "trainings_summed_s"),
            ("ingest (s)", "ingest_s"),
            ("analytics build (s)", "analytics_s"),
            ("largest worker peak RSS (MiB)", "peak_rss_mib_largest_worker"),
            *((f"`{s}` (s)", s) for s in steps if s != "analytics_snapshot")]  # fmt: skip

    def cell(label: str, key: str) -> str:
        return ", ".join(f"{r.get(key, r['steps_s'].get(key, 0.0)):g}" for r in runs[label])

    lines = [f"| | {labels['base']} | {labels['change']} |", "|---|---|---|"]
    lines += [f"| {name} | {cell('base', key)} | {cell('change', key)} |" for name, key in rows]
    for what, key in (("wall", "seconds"), ("packs and build", "packs_and_build_s")):
        base, change = (statistics.median(r[key] for r in runs[k]) for k in ("base", "change"))
        lines.append(f"\nMedian {what}: {base:g} s → {change:g} s ({change / base - 1:+.1%}).")
    return "\n".join(lines)


def _copy(args: argparse.Namespace, label: str, tree: Path, key: str) -> tuple[Path, str, str]:
    """A fresh home of this round for one side (its landing beside it): a copy of the full
    night's home (incremental), or a home holding only the embedding export (full); the dates
    its night runs."""
    copy = CACHE / f"ab-run-{label}"
    shutil.rmtree(copy, ignore_errors=True)
    if args.night == "full":
        dates = data.dates(data.START, 7)
        source, _ = data.landing(args.interactions, days=7, seed=0, feedback=3.0,
                                 tenants=args.tenants)  # fmt: skip
        for folder in (copy / "landing", copy / "logs"):
            folder.mkdir(parents=True)
        for day in dates:
            (copy / "landing" / day).symlink_to(source / day, target_is_directory=True)
        _fresh_home(copy / "home", _embedding_export(copy / "logs")[0])
        return copy, dates[0], dates[-1]
    home, day = _base_home(args, key)
    shutil.copytree(home.parent, copy, symlinks=True)
    rekey(copy / "home")
    converged = run_child([sys.executable, "-c", CONVERGE, str(copy / "home")], cwd=tree)
    assert converged.returncode == 0, f"{label}: the analytics build before the night failed"
    return copy, day, day


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare this checkout with")
    parser.add_argument("--night", choices=("incremental", "full"), default="incremental")
    parser.add_argument("--interactions", type=int, default=250_000)
    parser.add_argument("--tenants", type=int, default=1)
    parser.add_argument("--new", type=int, default=7_500, help="interactions of the new date")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dpo-max-steps", type=int, default=10)
    args = parser.parse_args(argv)
    offline_env()
    base, head = _rev(args.base), _rev("HEAD")
    key = f"i{args.interactions}-t{args.tenants}-n{args.new}-w{args.workers}-s{args.dpo_max_steps}"
    trees = {"base": _worktree(base), "change": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {"base": [], "change": []}
    nights: list[dict[str, Any]] = []
    for round_ in range(args.rounds):
        for label, tree in trees.items():
            copy, first, last = _copy(args, label, tree, key)
            night = _night(copy / "home", copy / "landing", first, last, args.workers,
                           args.dpo_max_steps, copy / "logs", f"{args.night}-{label}",
                           root=tree)  # fmt: skip
            runs[label].append(_summary(night))
            nights.append({"round": round_, "label": label, **night})
            shutil.rmtree(copy, ignore_errors=True)
            print(f"round {round_ + 1} {label}: {night['seconds']} s", flush=True)
    dirty = " (with uncommitted code)" if _dirty() else ""
    labels = {"base": f"{base}", "change": f"{head}{dirty}"}
    table = _table(runs, labels)
    added = f", +{args.new:,} on the next" if args.night == "incremental" else ""
    here = {"git": commit(), "machine": machine()}
    title = (
        f"{args.night.capitalize()} night, {base} vs {head}{dirty}: {args.tenants} tenant(s), "
        f"{args.interactions:,} interactions over 7 dates{added}, --workers {args.workers}, "
        f"dpo max_steps {args.dpo_max_steps}; {args.rounds} rounds (base, change in turn; one "
        f"value per round); {describe(here['machine'])}"
    )
    print(f"\n{title}\n\n{table}")
    name = f"{datetime.now(UTC).date().isoformat()}-{args.night}-ab-{base}-{head}"
    (RESULTS / f"{name}.md").write_text(f"# {title}\n\n{table}\n", encoding="utf-8")
    write_json(
        RESULTS / f"{name}.json",
        {"argv": vars(args), "environment": here, "runs": runs, "nights": nights},
    )


def _dirty() -> bool:
    code = ["pipeline", "jobs", "assets", "lib"]  # what a night runs (not bench/ nor docs)
    status = subprocess.run(["git", "status", "--porcelain", "--", *code], cwd=ROOT,
                            capture_output=True, text=True, check=True)  # fmt: skip
    return bool(status.stdout.strip())


if __name__ == "__main__":
    main()
