"""`memorypack pack list|show|verify|rollback`: inspect and steer the published packs."""

from __future__ import annotations

import argparse
import json
from typing import Any

from memorypack.encoder import check_model_files
from memorypack.format import PackError, is_version, read_latest, verify_pack
from memorypack.fs import Location
from pipeline.config import Paths, packs_location, scratch_in_local
from pipeline.errors import UserError
from pipeline.ingest.tenant_ids import check_tenant_id, shown
from pipeline.publish.store import list_versions, rollback, tenants
from pipeline.settings import Settings


def _packs_root(args: argparse.Namespace) -> Location:
    """--packs (a folder or an s3:// URL), else the home's packs (MEMORYPACK_PACKS or <home>/packs)."""
    paths = Paths.from_env(args.home)
    # Publish locks of object-store packs are files in the temp folder: the same one the night
    # of an object-store home uses (its work folder), so a rollback waits for a publish.
    scratch_in_local(paths)
    if args.packs:
        return packs_location(args.packs)
    return paths.packs


def _tenant_dirs(args: argparse.Namespace) -> list[Location]:
    root = _packs_root(args)
    if args.tenant is not None:
        folder = root / check_tenant_id(args.tenant)
        if not folder.is_dir():
            known = ", ".join(tenants(root)) or "none"
            raise UserError(f"no packs for tenant {args.tenant!r} in {root} (tenants: {known})")
        return [folder]
    found = [root / t for t in tenants(root)]
    if not found:
        raise UserError(
            f"no published packs in {root} (run `memorypack demo` or `memorypack run` first)"
        )
    return found


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def cmd_list(args: argparse.Namespace) -> int:
    for tenant_dir in _tenant_dirs(args):
        versions = list_versions(tenant_dir)
        print(
            f"{tenant_dir.name}  ({len(versions)} kept, live = {read_latest(tenant_dir) or 'none'})"
        )
        for info in reversed(versions):
            marker = "*" if info.is_latest else " "
            print(
                f"  {marker} {info.version}  as_of {info.as_of[:19]}  created {info.created_at[:19]}"
                f"  {info.n_memories if info.n_memories is not None else '?':>7} memories  {_size(info.bytes):>9}"
            )
    return 0


def _version_dir(args: argparse.Namespace) -> Location:
    (tenant_dir,) = _tenant_dirs(args)
    version = read_latest(tenant_dir) if args.version is None else args.version
    if version is None or not is_version(version) or not (tenant_dir / version).is_dir():
        raise UserError(f"no version {shown(str(version))} for tenant {tenant_dir.name}")
    return tenant_dir / version


def cmd_show(args: argparse.Namespace) -> int:
    folder = _version_dir(args)
    manifest = verify_pack(folder, check_hashes=False, key=Settings.from_env().pack_key)
    if args.json:
        print(json.dumps(manifest, indent=2))
        return 0
    producer: dict[str, Any] = manifest.get("producer", {})
    inputs: dict[str, Any] = manifest.get("inputs", {})
    models: dict[str, Any] = manifest.get("models", {})
    dpo = (manifest.get("metrics") or {}).get("dpo") or {}
    lines = [
        f"pack {manifest['tenant_id']} {manifest['version']}  (format {manifest['pack_format']})",
        f"  as_of       {manifest['as_of']}   created {manifest.get('created_at')}",
        f"  producer    memorypack {producer.get('version')}, Dagster run {producer.get('dagster_run_id')}",
        f"  load dates  {', '.join(inputs.get('load_dates', [])) or 'none recorded'}",
        f"  events      {inputs.get('events', {})}",
        f"  missing     {inputs.get('missing_tables') or 'none'}",
        f"  embedding   {models.get('embedding', {}).get('model')} ({models.get('embedding', {}).get('dim')} dims)",
        f"  policy      {models.get('policy_id') or 'none'}"
        + (
            f"  eval accuracy {dpo.get('eval_accuracy')}, margin {dpo.get('eval_margin')}"
            if dpo
            else ""
        ),
        *([f"  learning    {dpo['verdict']}"] if dpo.get("verdict") else []),
        f"  counts      {manifest.get('counts', {})}",
        f"  redacted    {manifest.get('redactions', {}).get('by_kind', {})}",
        "  files",
    ]
    for name, entry in manifest["files"].items():
        lines.append(
            f"    {name:<18} {entry['rows']:>8} rows  {_size(entry['bytes']):>9}  sha256 {entry['sha256'][:16]}…"
        )
    print("\n".join(lines))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    failures = 0
    for tenant_dir in _tenant_dirs(args):
        versions = [v.version for v in list_versions(tenant_dir)]
        if args.version is not None:
            if not is_version(args.version):  # a folder name, never a path (`../globex/…`)
                raise UserError(f"{shown(args.version)} is not a pack version")
            versions = [args.version]
        elif not args.all:
            versions = [v for v in [read_latest(tenant_dir)] if v]
        for version in versions:
            try:
                manifest = verify_pack(tenant_dir / version, key=Settings.from_env().pack_key)
                models = check_model_files(tenant_dir, manifest)
                print(
                    f"ok      {tenant_dir.name} {version}  ({len(manifest['files'])} files"
                    + (f" and {models} model files" if models else "")
                    + " verified)"
                )
            except PackError as error:
                failures += 1
                print(f"FAILED  {tenant_dir.name} {version}: {error}")
    if failures:
        raise UserError(f"{failures} pack version(s) failed verification")
    return 0


def cmd_rollback(args: argparse.Namespace) -> int:
    (tenant_dir,) = _tenant_dirs(args)
    before = read_latest(tenant_dir)
    after = rollback(tenant_dir, args.to)
    print(f"memorypack: {tenant_dir.name} LATEST {before} -> {after} (verified)")
    return 0


def register(subparsers: Any) -> None:
    """Add `pack` and its subcommands to the `memorypack` parser."""
    pack = subparsers.add_parser("pack", help="list, show, verify or roll back published packs")
    sub = pack.add_subparsers(dest="pack_command", required=True)

    def common(parser: argparse.ArgumentParser, tenant_required: bool = False) -> None:
        parser.add_argument(
            "--home", default=None, help="memorypack home (default MEMORYPACK_HOME or ./data)"
        )
        parser.add_argument(
            "--packs",
            default=None,
            help="packs folder or s3://bucket/prefix URL (default MEMORYPACK_PACKS or <home>/packs)",
        )
        parser.add_argument(
            "--tenant",
            required=tenant_required,
            help="the tenant (required)" if tenant_required else "one tenant (default: all)",
        )

    listing = sub.add_parser("list", help="kept versions per tenant; * marks the live one")
    common(listing)
    listing.set_defaults(func=cmd_list)

    show = sub.add_parser("show", help="the manifest of a version (default: the live one)")
    common(show, tenant_required=True)
    show.add_argument("--version", default=None)
    show.add_argument("--json", action="store_true", help="print the raw manifest")
    show.set_defaults(func=cmd_show)

    verify = sub.add_parser(
        "verify",
        help="re-check every file's sha256, and the model files the manifest names "
        "(live versions by default)",
    )
    common(verify)
    verify.add_argument("--version", default=None)
    verify.add_argument(
        "--all", action="store_true", help="every kept version, not only the live one"
    )
    verify.set_defaults(func=cmd_verify)

    back = sub.add_parser("rollback", help="point LATEST back to an earlier kept version")
    common(back, tenant_required=True)
    back.add_argument("--to", default=None, help="version to make live (default: the previous one)")
    back.set_defaults(func=cmd_rollback)
