"""The commands about data other than a night: importing another log format, and one person's
data (`forget`: erasure, GDPR art. 17; `export`: access, art. 15)."""

from __future__ import annotations

import argparse
from datetime import date
from pathlib import Path
from typing import Any

from pipeline.config import Paths
from pipeline.errors import UserError
from pipeline.storage.homelock import (
    ANALYTICS,
    clean_leftovers,
    home_lock,
    tenant_locks,
    training_scope,
)


def cmd_import_oasst(args: argparse.Namespace) -> int:
    from pipeline.ingest.importers.oasst import import_oasst

    source = Path(args.file)
    if not source.is_file():
        raise UserError(f"{source} is not a file")
    counts = import_oasst(source, Path(args.out))
    print(f"memorypack: imported {source.name}: {counts}")
    return 0


def cmd_import_locomo(args: argparse.Namespace) -> int:
    from pipeline.ingest.importers.locomo import import_locomo

    sources = [Path(f) for f in args.files]
    for source in sources:
        if not source.is_file():
            raise UserError(f"{source} is not a file")
    counts = import_locomo(
        sources, Path(args.out), args.tenant, args.load_date, keep_dates=args.keep_dates
    )
    print(f"memorypack: imported {len(sources)} file(s): {counts}; questions in truth.json")
    return 0


def _person_request(args: argparse.Namespace) -> Paths:
    """The home of a `forget` or `export` request, after checking the tenant and contact."""
    from pipeline.erasure.person import reachable_packs
    from pipeline.erasure.subject import check_known_tenant, check_request

    check_request(args.tenant, args.contact)
    paths = Paths.from_env(args.home)
    if not paths.home.is_dir():
        raise UserError(f"home {paths.home} does not exist")
    reachable_packs(paths)  # the tenants' packs are listed next
    check_known_tenant(paths, args.tenant)
    return paths


def cmd_forget(args: argparse.Namespace) -> int:
    from pipeline.erasure.person import forget

    paths = _person_request(args)

    def busy(holder: str) -> None:
        print(f"memorypack: home {paths.home} is busy: {holder}; waiting for it", flush=True)

    command = f"memorypack forget --tenant {args.tenant}"
    with (
        home_lock(paths.local, command, args.wait, busy),
        tenant_locks(paths.local, command, args.tenant, training_scope(args.tenant), ANALYTICS),
    ):
        clean_leftovers(paths.local)
        landing = Path(args.landing).resolve() if args.landing else None
        report = forget(paths, args.tenant, args.contact, source="cli", landing=landing)
    for line in report.lines():
        print(f"memorypack: {line}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pipeline.erasure.person import export, write_export

    paths = _person_request(args)
    document = export(paths, args.tenant, args.contact)
    out = None if args.out in (None, "-") else Path(args.out)
    write_export(document, out)
    if out is not None:
        found = len(document["events"]) + sum(len(v) for v in document["derived"].values())
        print(f"memorypack: wrote {found} rows held about the person to {out}")
    return 0


def add_people_commands(sub: Any) -> None:
    """import, forget, export: other log formats, and one person's data."""
    imp = sub.add_parser("import", help="turn another log format into contract events")
    imp_sub = imp.add_subparsers(dest="format", required=True)
    oasst = imp_sub.add_parser("oasst", help="OpenAssistant message-tree export (.jsonl)")
    oasst.add_argument("file")
    oasst.add_argument("--out", required=True, help="landing folder to write")
    oasst.set_defaults(func=cmd_import_oasst)
    locomo = imp_sub.add_parser(
        "locomo", help="LoCoMo conversations (.json): turns as memories, questions in truth.json"
    )
    locomo.add_argument("files", nargs="+")
    locomo.add_argument("--out", required=True, help="landing folder to write")
    locomo.add_argument("--tenant", default="locomo")
    locomo.add_argument(
        "--load-date",
        type=date.fromisoformat,
        default=None,
        help="put every event in this one load-date folder (default: one folder per session day)",
    )
    locomo.add_argument(
        "--keep-dates",
        action="store_true",
        help="keep the sessions' own dates (default: each conversation ends on the same day)",
    )
    locomo.set_defaults(func=cmd_import_locomo)

    person = {"help": "the person's contact id, as the apps send it (raw, not a pii- pseudonym)"}
    forget = sub.add_parser(
        "forget", help="erase one person everywhere under the home and tombstone their id"
    )
    forget.add_argument("--home", default=None, help="memorypack home (default MEMORYPACK_HOME)")
    forget.add_argument("--tenant", required=True)
    forget.add_argument("--contact", required=True, **person)
    forget.add_argument(
        "--landing",
        default=None,
        help="a landing folder the nights read besides the home's own: their lines go too",
    )
    forget.add_argument(
        "--wait", action="store_true", help="if a run holds this home, queue behind it"
    )
    forget.set_defaults(func=cmd_forget)

    export = sub.add_parser("export", help="write everything held about one person as JSON")
    export.add_argument("--home", default=None, help="memorypack home (default MEMORYPACK_HOME)")
    export.add_argument("--tenant", required=True)
    export.add_argument("--contact", required=True, **person)
    export.add_argument("--out", default=None, help="file to write (default: standard output)")
    export.set_defaults(func=cmd_export)
