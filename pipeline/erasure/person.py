"""Erasure and export of one person (GDPR art. 17 and 15): find everything held about them, remove
it from the lake, warehouse, analytics snapshot, caches, models and packs, and keep a tombstone."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.config import Paths
from pipeline.erasure.files import LandingScrub, scrub_dagster_history, scrub_landing
from pipeline.erasure.lake import (
    INGEST_TABLES,
    POLICY_WITHDRAWALS,
    rebuild_warehouse,
    scrub_lake,
    sweep_names,
    sweep_redaction_cache,
    tenant_files,
    withdraw_policies,
)
from pipeline.erasure.scrub import Needles, scrub_frame
from pipeline.erasure.subject import (
    check_request,
    find_subject,
)
from pipeline.erasure.tombstones import record_tombstone
from pipeline.errors import UserError
from pipeline.ingest.tombstones import TOMBSTONES, Tombstones, tombstone_hash
from pipeline.pii import pii_key
from pipeline.settings import Settings
from pipeline.storage.lake import Lake, read_file
from pipeline.storage.withheld import release

# --- the whole erasure ------------------------------------------------------------------------


@dataclass
class ForgetReport:
    tenant_id: str
    events: int  # their events found in the lake
    quarantined: int  # their quarantined lines
    new_tombstones: int
    removed: dict[str, int] = field(default_factory=dict)  # lake rows per table
    packs: dict[str, str] = field(default_factory=dict)  # old version -> rewritten version
    policies: list[str] = field(default_factory=list)  # DPO policies withdrawn
    warehouse_tables: int = 0
    analytics: bool = False
    landing: dict[str, int] = field(default_factory=dict)  # landing file -> lines removed
    landing_folders: list[str] = field(default_factory=list)  # the landing folders cleaned
    landing_problems: list[str] = field(default_factory=list)  # a file left as it was, and why
    history: dict[str, int] = field(default_factory=dict)  # Dagster file -> replacements
    seconds: float = 0.0
    # What found the person, in memory only: for a caller still holding rows or texts of theirs
    # it stores later (the night that carried the request: its metadata previews).
    needles: Needles = field(default_factory=lambda: Needles(""), repr=False)

    def lines(self) -> list[str]:
        removed = ", ".join(f"{k} {v}" for k, v in sorted(self.removed.items())) or "none"
        rewritten = ", ".join(f"{a} -> {b}" for a, b in self.packs.items()) or "none"
        return [
            f"found {self.events} events and {self.quarantined} quarantined lines of the person",
            f"lake rows removed: {removed}",
            f"pack versions rewritten: {rewritten}",
            f"DPO policies withdrawn (retrained next night): {', '.join(self.policies) or 'none'}",
            f"warehouse rebuilt ({self.warehouse_tables} tables); analytics snapshot "
            + ("rebuilt" if self.analytics else "absent"),
            f"landing lines removed: {sum(self.landing.values())} in {len(self.landing)} files"
            f" (of {', '.join(self.landing_folders) or 'no landing folder'}); "
            f"Dagster run history scrubbed: {sum(self.history.values())} replacements in "
            f"{len(self.history)} files",
            *(f"landing file not cleaned: {problem}" for problem in self.landing_problems),
            f"tombstone recorded ({self.new_tombstones} new hashes) in {self.seconds:.1f}s",
        ]


def run_histories(paths: Paths) -> list[Path]:
    """Where Dagster keeps this home's runs: `<local>/dagster`, and DAGSTER_HOME when it is set
    (the instance `memorypack run` then uses, see jobs.instance)."""
    folders = [paths.local / "dagster"]
    explicit = Settings.from_env().dagster_home
    if explicit and Path(explicit).resolve() != folders[0].resolve():
        folders.append(Path(explicit).resolve())
    return folders


def reachable_packs(paths: Paths) -> None:
    """An erasure rewrites the packs last: refuse before changing anything when they cannot be
    reached (an object store that is down, wrong credentials), rather than erase half."""
    try:
        paths.packs.is_dir()
    except OSError as error:
        reason = (str(error).splitlines() or [type(error).__name__])[0][:200]
        raise UserError(
            f"packs at {paths.packs} are unreachable ({reason}): nothing was changed"
        ) from None


def forget(
    paths: Paths,
    tenant_id: str,
    contact_id: str,
    source: str = "cli",
    now: datetime | None = None,
    snapshot: bool = True,
    landing: Path | None = None,
) -> ForgetReport:
    """Erase one person of one tenant everywhere under the home (call under the home lock), and
    in `landing` too (the folder the night read, when it is not the home's own).

    Order: tombstone first (nothing can come back from here on), then the lake (source of
    truth), models, packs, and last the warehouse and analytics snapshot rebuilt from the lake.
    Running it again finishes an erasure a crash interrupted and changes nothing otherwise; a
    finished one releases the tenant's pack if the night's request for it had failed
    (pipeline.storage.withheld)."""
    from pipeline.erasure.packs import erase_from_packs

    check_request(tenant_id, contact_id)
    reachable_packs(paths)
    began = time.perf_counter()
    now = now or datetime.now(UTC)
    key = pii_key(paths.home)
    subject = find_subject(paths, tenant_id, contact_id, key)
    report = ForgetReport(
        tenant_id,
        subject.events.height,
        subject.quarantined.height,
        record_tombstone(paths, key, subject, source, now),
        needles=subject.needles,
    )
    report.removed = scrub_lake(paths, subject.needles)
    _scrub_landings(report, [paths.landing, *([landing] if landing is not None else [])])
    for folder in run_histories(paths):
        found = scrub_dagster_history(folder, subject.needles)
        report.history.update((str(folder / name), n) for name, n in found.items())
    swept = sweep_redaction_cache(paths, key)
    if swept:
        report.removed["pii_cache:unused"] = swept
    names = sweep_names(paths, tenant_id)
    if names:
        report.removed["pii_cache:names"] = names
    report.policies = withdraw_policies(paths, subject, now)
    # Local or on an object store (MEMORYPACK_PACKS=s3://…): every kept version is rewritten.
    report.packs = erase_from_packs(paths.packs / tenant_id, subject.needles)
    if paths.packs.is_dir() and (paths.lake / "pack_versions").exists():
        from pipeline.publish.analytics import pack_versions_frame

        Lake(paths).write("pack_versions", pack_versions_frame(paths))
    report.warehouse_tables = len(rebuild_warehouse(paths))
    from pipeline.publish.analytics import WAREHOUSE_TABLES, build_snapshot
    from pipeline.publish.snapshot_parts import INGEST_PART, build_part, remove_parts

    # Their free blocks could keep the person's rows: the tenant's and ingest's parts are made
    # anew (the other tenants' parts never held them).
    for part in remove_parts(paths, [tenant_id, INGEST_PART]):
        build_part(paths, part, WAREHOUSE_TABLES)
    if snapshot and paths.analytics.exists():
        build_snapshot(paths, parts_made=True)
        report.analytics = True
    release(paths, tenant_id, tombstone_hash(key, tenant_id, "contact", contact_id))
    report.seconds = time.perf_counter() - began
    return report


def _scrub_landings(report: ForgetReport, folders: list[Path]) -> None:
    """The person's lines out of each landing folder (once each), as the report says."""
    for folder in dict.fromkeys(f.resolve() for f in folders):
        scrubbed: LandingScrub = scrub_landing(folder, report.needles)
        report.landing_folders.append(str(folder))
        report.landing |= {str(folder / name): n for name, n in scrubbed.removed.items()}
        report.landing_problems += scrubbed.problems


# --- export -----------------------------------------------------------------------------------


def _records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts; vectors are left out (numbers derived from texts listed here)."""
    vectors = [
        n for n, t in frame.schema.items() if isinstance(t, pl.Array) or t == pl.List(pl.Float32())
    ]
    return frame.drop(vectors).to_dicts()


def export(paths: Paths, tenant_id: str, contact_id: str) -> dict[str, Any]:
    """Everything held about one person: their events and quarantined lines, every derived lake
    row that mentions them, and the rows of every kept pack version (where their ids are
    pseudonyms). Nothing is changed."""
    from pipeline.erasure.packs import pack_mentions

    check_request(tenant_id, contact_id)
    key = pii_key(paths.home)
    tombstones = Tombstones.load(paths)
    subject = find_subject(paths, tenant_id, contact_id, key)
    lake: dict[str, list[dict[str, Any]]] = {}
    for table, path in tenant_files(paths, tenant_id):
        if table in (*INGEST_TABLES, TOMBSTONES, POLICY_WITHDRAWALS):
            continue
        removed = scrub_frame(read_file(path), subject.needles).removed
        if removed.height:
            lake.setdefault(table, []).extend(_records(removed))
    return {
        "tenant_id": tenant_id,
        "contact_id": contact_id,
        "exported_at": datetime.now(UTC).isoformat(),
        "erased": tombstones.erased(tenant_id, contact_id),
        "events": _records(
            subject.events.sort("ts") if "ts" in subject.events.columns else subject.events
        ),
        "quarantined_lines": _records(subject.quarantined.drop("raw_bytes", strict=False)),
        "derived": lake,
        "packs": pack_mentions(paths.packs / tenant_id, subject.needles),
        "omitted": "embedding and preference vectors (numbers computed from the texts above)",
    }


def write_export(document: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(document, indent=2, default=str, ensure_ascii=False) + "\n"
    if out is None:
        print(text, end="")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, 0o600)  # personal data: readable by the operator only
    os.replace(tmp, out)
