"""`memorypack generate`: sample logs with planted truths; and the demo's first look at a pack."""

from __future__ import annotations

import argparse
import importlib
from datetime import date
from pathlib import Path

from pipeline.config import Paths
from pipeline.errors import UserError


def progress(message: str) -> None:
    print(f"  {message}", flush=True)


def cmd_generate(args: argparse.Namespace) -> int:
    from pipeline.generate import FEEDBACK_PER_INTERACTION, generate

    for flag, value in [
        ("days", args.days),
        ("tenants", args.tenants),
        ("interactions", args.interactions),
    ]:
        if value < 1:
            raise UserError(f"--{flag} must be at least 1 (got {value})")
    feedback = args.feedback_per_interaction or FEEDBACK_PER_INTERACTION
    if feedback < FEEDBACK_PER_INTERACTION:
        raise UserError(f"--feedback-per-interaction must be at least {FEEDBACK_PER_INTERACTION:g}")
    check_receipts(args.receipts)
    out = Path(args.out)
    print(
        f"memorypack: generating {args.interactions} interactions over {args.days} days into {out}"
    )
    truth = generate(
        out,
        days=args.days,
        interactions=args.interactions,
        tenants=args.tenants,
        seed=args.seed,
        start=date.fromisoformat(args.start),
        progress=progress,
        feedback_per_interaction=feedback,
        receipts=args.receipts,
    )
    ingest = truth.get("ingest", {})
    print(
        f"memorypack: wrote {ingest.get('lines_read', '?')} lines "
        f"({ingest.get('quarantined', '?')} planted bad lines); answers in {out / 'truth.json'}"
    )
    return 0


def check_receipts(share: float) -> None:
    if not 0.0 <= share <= 1.0:
        raise UserError(f"--receipts must lie in [0, 1] (got {share})")


def show_packs(paths: Paths) -> None:
    try:
        showcase = importlib.import_module("pipeline.publish.showcase")
    except ImportError:
        return
    from pipeline.publish.store import tenants

    for tenant in tenants(paths.packs)[:1]:  # one tenant is enough for a first look
        print()
        print(showcase.describe_pack(paths.packs / tenant))
