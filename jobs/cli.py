"""`memorypack` command line: demo, run, generate, import, pack, forget, export (SPEC §8)."""

from __future__ import annotations

import argparse
import importlib
import io
import logging
import sys
import time
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path
from typing import Any, NoReturn

from jobs.cli_generate import check_receipts, cmd_generate, progress, show_packs
from jobs.cli_people import add_people_commands
from memorypack import PackError
from memorypack.fs import Location
from pipeline import __version__
from pipeline.config import Paths, first_partition_date, offline_environment, scratch_in_local
from pipeline.errors import UserError, one_line
from pipeline.storage.homelock import clean_leftovers, home_lock

log = logging.getLogger("memorypack")

DEMO_START = date(2026, 11, 1)
DEMO_DAYS = 7
# The share of the demo's AI calls (from its second day) that log a receipt, 5 % of them holdout:
# enough that the first night measures uplift per pack version (the notebook's uplift plot).
DEMO_RECEIPTS = 0.5


def _date(text: str) -> str:
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not a date (expected YYYY-MM-DD)") from None


def _landing_dates(landing: Path) -> list[str]:
    dates = []
    for child in landing.iterdir() if landing.is_dir() else []:
        try:
            dates.append(date.fromisoformat(child.name).isoformat())
        except ValueError:
            continue
    return sorted(dates)


def _check_range(landing: Path, dates: list[str], start: str, end: str) -> None:
    """A range may have gaps (a warning names them); a range with no landing folder is an error."""
    first = date.fromisoformat(start)
    wanted = [
        (first + timedelta(days=i)).isoformat()
        for i in range((date.fromisoformat(end) - first).days + 1)
    ]
    missing = sorted(set(wanted) - set(dates))
    if len(missing) == len(wanted):
        raise UserError(f"no landing folder for any date {start}..{end} in {landing}")
    if missing:
        print(
            f"memorypack: warning: no landing folder for {', '.join(missing)} in {landing}"
            " (those dates are run as empty nights)",
            file=sys.stderr,
        )


# `memorypack run` ended, but some tenants kept their previous pack (a guard failed, or the build
# raised): the other tenants published. Distinct from 2 (nothing ran) so a scheduler can alert.
EXIT_NOT_PUBLISHED = 3


def _run(
    home: Location,
    landing: Path,
    start: str,
    end: str,
    wait: bool = False,
    workers: int | None = None,
    fast: bool = False,
) -> int:
    """The night under the home's ingest lock: ingest here, then every changed tenant in its own
    process (`workers` at once, default the core count; `fast`: the tenant_nightly_fast job),
    then the analytics build. A tenant changed by an earlier night that was killed, or whose
    run failed, counts as changed until its pack is published (pipeline/storage/owed.py). Returns the
    exit code (0, or EXIT_NOT_PUBLISHED with a line per such tenant) or raises a one-line error
    (also when another run holds the home and `wait` is off)."""
    offline_environment()
    try:  # Dagster is only loaded when a run is asked for: its dependencies checked here
        from jobs import runner  # noqa: F401
    except ImportError as error:
        raise UserError(
            f"running the pipeline needs its dependencies ({error}): pip install memorypack-pipeline"
        ) from None
    from jobs import stopping

    command = f"memorypack run --date {start}" if start == end else f"memorypack run {start}..{end}"

    def busy(holder: str) -> None:
        print(f"memorypack: home {home} is busy: {holder}; waiting for it", flush=True)

    local = Paths.from_env(home).local  # locks are local files (one host; see README)
    scratch_in_local(Paths.from_env(home))
    try:
        with stopping.SignalStop(), home_lock(local, command, wait=wait, on_busy=busy):
            outcome, began = _night(home, landing, start, end, workers, fast)
    except stopping.RunStopped as stop:
        return stopping.reported(Paths.from_env(home), stop)
    if not outcome.success and not outcome.not_published:  # nothing ran, or the analytics build
        raise UserError(
            f"run {outcome.run_id} failed at {outcome.failed_step or 'an unknown step'}: {outcome.error}"
        )
    published = [t for t in outcome.tenants if t not in outcome.not_published]
    print(
        f"memorypack: night succeeded in {time.perf_counter() - began:.1f}s: "
        f"{len(published)} of {len(outcome.tenants)} changed tenant(s) published"
    )
    for notice in outcome.notices:
        print(f"memorypack: {notice}", file=sys.stderr)
    slowest = sorted(outcome.step_seconds.items(), key=lambda kv: -kv[1])[:3]
    if slowest:
        print("memorypack: slowest steps: " + ", ".join(f"{k} {v:.1f}s" for k, v in slowest))
    for tenant, training in outcome.trainings.items():
        state = "trained" if training.success else f"not trained: {training.error}"
        print(
            f"memorypack: {tenant}: next DPO policy {state} after its pack published",
            file=sys.stdout if training.success else sys.stderr,
        )
    for tenant, reason in outcome.not_published.items():
        print(f"memorypack: {tenant}: {reason}", file=sys.stderr)
    return EXIT_NOT_PUBLISHED if outcome.not_published else 0


def _night(
    home: Location, landing: Path, start: str, end: str, workers: int | None, fast: bool
) -> tuple[Any, float]:
    """The night itself, under the lock: leftovers of a killed run removed, then the run."""
    from jobs import instance, runner

    local = Paths.from_env(home).local
    leftovers = clean_leftovers(local)
    if leftovers:
        print(f"memorypack: removed {len(leftovers)} leftover(s) of a killed run")
        log.info("removed %s", ", ".join(map(str, leftovers)))
    began = time.perf_counter()
    workers = workers or int(instance.workers())
    job = "tenant_nightly_fast" if fast else "tenant_nightly"
    print(f"memorypack: ingesting, then each changed tenant ({job}, {workers} at once)", flush=True)
    outcome = runner.run_nightly(
        home, landing, start, end, workers=workers, on_tenant=_tenant_done, fast=fast
    )
    return outcome, began


def _tenant_done(tenant: str, outcome: Any) -> None:
    """One line per tenant as its run ends."""
    seconds = sum(outcome.step_seconds.values())
    state = "kept its previous pack" if outcome.not_published else "published"
    print(f"memorypack: {tenant}: {state} ({seconds:.1f}s of steps)", flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    paths = Paths.from_env(args.home)
    landing = Path(args.landing).resolve() if args.landing else paths.landing
    if not landing.is_dir():
        raise UserError(f"landing folder {landing} does not exist")
    if args.date and (args.start or args.end):
        raise UserError("give either --date or --start/--end, not both")
    dates = _landing_dates(landing)
    if args.date:
        start = end = args.date
        if start not in dates:
            raise UserError(f"no landing folder for {start} in {landing}")
    elif args.start or args.end:
        if not (args.start and args.end):
            raise UserError("give both --start and --end (or --date for one day)")
        start, end = args.start, args.end
        if start > end:
            raise UserError(f"--start {start} is after --end {end}")
        _check_range(landing, dates, start, end)
    else:
        if not dates:
            raise UserError(f"landing folder {landing} has no YYYY-MM-DD folders")
        start, end = dates[0], dates[-1]
    first = first_partition_date()
    if start < first:
        raise UserError(
            f"{start} is before the first partition date {first} (set MEMORYPACK_FIRST_DATE)"
        )
    print(
        f"memorypack: nightly for load dates {start}..{end} (home {paths.home}, landing {landing})"
    )
    if args.workers is not None and args.workers < 1:
        raise UserError(f"--workers must be at least 1 (got {args.workers})")
    return _run(
        paths.home, landing, start, end, wait=args.wait, workers=args.workers, fast=args.fast
    )


def cmd_demo(args: argparse.Namespace) -> int:
    check_receipts(args.receipts)
    paths = Paths.from_env(args.home)
    landing = paths.landing
    end = DEMO_START + timedelta(days=args.days - 1)
    if not _landing_dates(landing):
        from pipeline.generate import generate

        print(f"memorypack demo: 1/3 generating sample logs into {landing}")
        generate(
            landing,
            days=args.days,
            interactions=args.interactions,
            tenants=3,
            seed=args.seed,
            start=DEMO_START,
            progress=progress,
            receipts=args.receipts,
        )
    else:
        print(f"memorypack demo: 1/3 using the sample logs already in {landing}")
    print(
        "memorypack demo: 2/3 running the night over every load date: ingest, then each tenant"
        " in its own process, then the analytics build"
    )
    code = _run(paths.home, landing, DEMO_START.isoformat(), end.isoformat(), fast=True)
    print("memorypack demo: 3/3 done. Where to look:")
    for label, location in [
        ("landing logs", landing),
        ("lake (Parquet)", f"{paths.lake}  (each table by tenant: <table>/tenant_id=<id>/)"),
        ("warehouse", paths.warehouse),
        ("analyst snapshot", paths.analytics),
        ("packs", paths.packs),
        ("models", paths.models),
    ]:
        print(f"  {label:<17} {location}")
    print("  Dagster UI        make ui   (then open http://localhost:3000; PORT=… for another)")
    print(f"  DuckDB            make duckdb   (.venv/bin/duckdb -readonly {paths.analytics})")
    print("  notebook          make notebook   (its plots as PNG beside the executed notebook)")
    show_packs(paths)
    return code


class _Parser(argparse.ArgumentParser):
    """A usage error in one line, as every other refusal (`--help` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        text = " ".join(message.split())
        self.exit(2, f"memorypack: {text} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="memorypack", description="Turn AI interaction logs into a verified memory pack."
    )
    parser.add_argument("--version", action="version", version=f"memorypack {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="show details and tracebacks")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_night_commands(sub)
    add_people_commands(sub)
    try:
        pack_commands = importlib.import_module("pipeline.publish.commands")
    except ImportError:
        pack_commands = None
    if pack_commands is not None:
        pack_commands.register(sub)
    return parser


def _add_night_commands(sub: Any) -> None:
    """demo, run, generate: the night and its sample logs."""
    demo = sub.add_parser("demo", help="generate sample logs, run the nightly job, publish packs")
    demo.add_argument(
        "--home",
        default=None,
        help="memorypack home: a folder or s3://bucket/prefix (default MEMORYPACK_HOME or ./data)",
    )
    demo.add_argument("--days", type=int, default=DEMO_DAYS)
    demo.add_argument("--interactions", type=int, default=1500)
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument(
        "--receipts",
        type=float,
        default=DEMO_RECEIPTS,
        help="share of AI calls that carry a pack receipt (default %(default)s; 0: none)",
    )
    demo.set_defaults(func=cmd_demo)

    run = sub.add_parser("run", help="one Dagster run of the nightly job (no daemon needed)")
    run.add_argument(
        "--home",
        default=None,
        help="memorypack home: a folder or s3://bucket/prefix (default MEMORYPACK_HOME or ./data)",
    )
    run.add_argument("--landing", default=None, help="landing folder (default <home>/landing)")
    run.add_argument("--date", type=_date, help="one load date")
    run.add_argument("--start", type=_date, help="first load date of a range (single-run backfill)")
    run.add_argument("--end", type=_date, help="last load date of a range")
    run.add_argument(
        "--wait",
        action="store_true",
        help="if another run holds this home, queue behind it (default: refuse in one line)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=None,
        help="tenants run at once, each in its own process (default: the core count)",
    )
    run.add_argument(
        "--fast",
        action="store_true",
        help="run tenant_nightly_fast: the same stages with a smoke-sized DPO policy (as the demo)",
    )
    run.set_defaults(func=cmd_run)

    gen = sub.add_parser("generate", help="write realistic sample logs with planted answers")
    gen.add_argument("--out", required=True, help="landing folder to write")
    gen.add_argument("--days", type=int, default=DEMO_DAYS)
    gen.add_argument("--interactions", type=int, default=2000)
    gen.add_argument("--tenants", type=int, default=3)
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--start", type=_date, default=DEMO_START.isoformat())
    gen.add_argument(
        "--feedback-per-interaction",
        type=float,
        help="mean random feedback events per interaction (default and minimum 1.1)",
    )
    gen.add_argument(
        "--receipts",
        type=float,
        default=0.0,
        help="share of AI calls that carry a pack receipt, 5 %% of them holdout, with planted "
        "helpful and harmful items (SPEC §4.9; default 0: none)",
    )
    gen.set_defaults(func=cmd_generate)


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):  # a path of bytes no UTF-8 decodes prints escaped
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING)
    try:
        return int(args.func(args))
    except (UserError, PackError) as error:
        if args.verbose:
            log.exception("details")
        print(f"memorypack: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a folder or file of the arguments that cannot be used
        if args.verbose:
            log.exception("details")
        print(f"memorypack: {one_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memorypack: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
