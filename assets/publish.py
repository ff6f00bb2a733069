"""Publish assets: the versioned memory pack of a tenant's run (gated by the guards) and the analyst
snapshot."""

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import polars as pl

from assets import groups
from assets.metadata import frame_metadata
from assets.partitions import TENANTS, asset_spec
from assets.resources import MemorypackHome
from pipeline.errors import one_line
from pipeline.publish.analytics import WAREHOUSE_TABLES, build_snapshot, pack_versions_frame
from pipeline.publish.build import build_pack as build_tenant_pack
from pipeline.publish.build import load_inputs
from pipeline.publish.content import PackContent, PackInputs
from pipeline.publish.guards import GUARD_DESCRIPTIONS, GUARD_NAMES, GuardResult, run_guards
from pipeline.publish.inputs import INPUT_TABLES, USAGE_TABLES
from pipeline.publish.snapshot_parts import build_part, part_tables
from pipeline.publish.store import DEFAULT_KEEP
from pipeline.publish.writer import publish
from pipeline.storage.owed import settle
from pipeline.storage.withheld import withheld
from pipeline.tables import PACK_SUMMARY, asset_name

# What a pack reads: its tenant's input tables and what the receipts measured (its event counts and load dates come from its
# typed tables, never from ingest's shared ones).
UPSTREAM = [asset_name(table) for table in (*INPUT_TABLES, *USAGE_TABLES)]
# A tenant's redacted part of the snapshot reads its tables (its rows of events among them), after
# its pack (whose redaction cache and names it reuses).
PART_DEPS = [asset_name(table) for table in part_tables("", WAREHOUSE_TABLES)] + ["memory_pack"]
# The analytics build reads every table of the warehouse, the tenants' parts and the packs folder.
SNAPSHOT_DEPS = [asset_name(table) for table in WAREHOUSE_TABLES] + [
    "memory_pack",
    "analytics_part",
]
BUILT = "pack_built"
BUILT_DESCRIPTION = (
    "The tenant's pack was built and written (a build that raised keeps its previous pack)."
)


class PackConfig(dg.Config):
    keep: int = DEFAULT_KEEP  # versions kept per tenant (the live one is always kept)


def tenant_as_of(home: MemorypackHome) -> datetime:
    """The end of the tenant's newest load date, so re-running an old date republishes as of the
    newest night, never back in time."""
    keys = home.lake.partition_keys("decay_snapshots") + home.lake.partition_keys("interactions")
    if not keys:
        raise dg.Failure(description="memory_pack: no load date to publish as of (no events yet)")
    newest = max(keys)
    return datetime.combine(
        date.fromisoformat(newest) + timedelta(days=1), datetime.min.time(), UTC
    )


def _built(
    context: dg.AssetExecutionContext, inputs: PackInputs
) -> tuple[PackContent, dict[str, object]]:
    """The tenant's pack content and its summary fields, with the time its redaction took and the
    texts it analysed (not served by the cache). Each file's redaction is a line in the run's log."""
    redactor = inputs.redactor
    if redactor is None:  # raises: a pack is never built unredacted
        return build_tenant_pack(inputs, context.log.info), {}
    content = build_tenant_pack(inputs, context.log.info)
    redactor.save_names(inputs.tenant, content.names)  # the snapshot redacts its rows with them
    return content, {
        "memories": content.frames["memories.parquet"].height,
        "redacted": content.redactions["total"],
        "redaction_s": round(redactor.seconds, 3),
        "texts_analysed": redactor.analysed,
    }


def _masked_total(content: PackContent) -> int:
    return sum(sum(kinds.values()) for kinds in content.redactions["pii_masked"].values())


@dataclass
class PublishOutcome:
    """What the run's tenant's publish came to: its summary row (PACK_SUMMARY), its guards (None:
    its pack was not built), why it could not be built or written, its redactions by kind."""

    row: dict[str, object]
    guards: list[GuardResult] | None = None
    broken: str | None = None
    redactions: dict[str, int] = field(default_factory=dict)


def _check_results(tenant: str, guards: list[GuardResult] | None) -> list[dg.AssetCheckResult]:
    """One result per guard of the tenant's pack; a failed one says why its pack was not
    published (a pack that was not built ran no guard: `pack_built` says why)."""
    results = []
    for name in GUARD_NAMES:
        found = next((g for g in guards or [] if g.name == name), None)
        failed = found is not None and not found.passed
        results.append(
            dg.AssetCheckResult(
                check_name=name,
                asset_key="memory_pack",
                passed=not failed,
                severity=dg.AssetCheckSeverity.ERROR,
                description=f"{tenant}: {found.detail} (not published)"
                if found is not None and failed
                else GUARD_DESCRIPTIONS[name],
                metadata={"ran": False}
                if found is None
                else {"ran": True, "detail": found.detail, **found.metadata},
            )
        )
    return results


def _publish_tenant(
    context: dg.AssetExecutionContext, home: MemorypackHome, config: PackConfig, inputs: PackInputs
) -> PublishOutcome:
    """The tenant's pack built, guarded and published, or why not. A pack that is withheld (an
    erasure request the night could not carry out), that fails a guard or whose build raises is
    not published: the tenant keeps its previous pack, and the run reports why (a red check and
    `not_published`), in one line."""
    tenant = inputs.tenant
    done = PublishOutcome(dict.fromkeys(PACK_SUMMARY) | {"tenant_id": tenant, "published": False})
    held = withheld(home.paths, tenant)
    if held:
        done.row["reason"] = f"not published: {next(iter(held.values()))}; previous pack stays"
        context.log.warning(f"{tenant}: {done.row['reason']}")
        return done
    try:
        content, built = _built(context, inputs)
        done.guards = run_guards(content, inputs)  # masks what the PII check finds
        done.row |= built | {"pii_masked": _masked_total(content)}
        done.redactions = content.redactions["by_kind"]
        failed = [g.name for g in done.guards if not g.passed]
        if failed:
            done.row["reason"] = f"not published: failed {', '.join(failed)}; previous pack stays"
        else:
            result = publish(home.paths.packs, content, context.run_id, config.keep)
            done.row |= {"version": result.version, "published": result.published}
            done.row["reason"] = result.reason
            context.log.info(
                f"{tenant}: {result.reason} {result.version} (removed {result.removed or 'none'})"
            )
    except Exception as error:  # reported as the pack_built check and not_published, in one line
        context.log.exception(f"{tenant}: pack not built, previous pack stays")
        done.broken = one_line(error)
        done.row["reason"] = f"not published: {done.broken}; previous pack stays"
    return done


@dg.multi_asset(
    specs=[
        asset_spec(
            "memory_pack",
            groups.PUBLISH,
            UPSTREAM,
            description="One verified, versioned memory pack per tenant (SPEC §5). Tenants are "
            "independent: one that fails a guard (red check) or cannot be built keeps its previous "
            "pack; the others publish.",
        ),
        # Read from the packs folder the step just published to.
        asset_spec("pack_versions", groups.PUBLISH, ["memory_pack"]),
    ],
    check_specs=[
        dg.AssetCheckSpec(
            name, asset="memory_pack", description=GUARD_DESCRIPTIONS[name], partitions_def=TENANTS
        )
        for name in GUARD_NAMES
    ]
    + [
        dg.AssetCheckSpec(
            BUILT, asset="memory_pack", description=BUILT_DESCRIPTION, partitions_def=TENANTS
        )
    ],
)
def memory_pack(
    context: dg.AssetExecutionContext, home: MemorypackHome, config: PackConfig
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    tenant = context.partition_key  # the run's one tenant: its lake folders are all it reads
    as_of = tenant_as_of(home)
    inputs = load_inputs(home.lake, tenant, as_of)
    if inputs.missing:
        context.log.warning(f"pack inputs not in the lake yet (published empty): {inputs.missing}")
    if inputs.has_memories():
        done = _publish_tenant(context, home, config, inputs)
    else:  # nothing to publish, and no previous pack held back
        context.log.info(f"{tenant}: no interactions or statements yet: no pack to publish")
        done = PublishOutcome({})
    versions = pack_versions_frame(home.paths)
    home.lake.write("pack_versions", versions)
    summary = pl.DataFrame([done.row] if done.row else [], schema=PACK_SUMMARY)
    published = done.row.get("version") is not None
    if published:
        settle(home.paths, tenant)  # its live pack holds every load date it owed
    yield dg.MaterializeResult(
        asset_key="memory_pack",
        metadata=frame_metadata(
            summary,
            {
                "as_of": as_of.isoformat(),
                "tenant": tenant,
                "new_versions": int(summary["published"].sum()),
                # tenant → why (jobs/outcomes.py reads it): empty when the tenant is current
                "not_published": {} if published or not done.row else {tenant: done.row["reason"]},
                "redactions_by_kind": done.redactions,
                "pii_masked": int(summary["pii_masked"].fill_null(0).sum()),
                "redaction_seconds": round(float(summary["redaction_s"].fill_null(0).sum()), 3),
                "texts_analysed": int(summary["texts_analysed"].fill_null(0).sum()),
                "missing_inputs": inputs.missing,
                "packs_folder": str(home.paths.packs),
            },
        ),
    )
    yield dg.MaterializeResult(asset_key="pack_versions", metadata=frame_metadata(versions))
    yield from _check_results(tenant, done.guards)
    yield dg.AssetCheckResult(
        check_name=BUILT,
        asset_key="memory_pack",
        passed=done.broken is None,
        severity=dg.AssetCheckSeverity.ERROR,
        description=BUILT_DESCRIPTION
        if done.broken is None
        else f"{tenant}: {done.broken} (not published)",
    )


@dg.asset(
    group_name=groups.PUBLISH,
    deps=PART_DEPS,
    partitions_def=TENANTS,
    description="The tenant's rows of the analyst snapshot, redacted as its pack is (SPEC §5), in "
    "its own run: only rows its tables gained are redacted, texts its pack redacted come from its "
    "cache. A run that fails keeps the previous part; the analytics build says so.",
)
def analytics_part(context: dg.AssetExecutionContext, home: MemorypackHome) -> dg.MaterializeResult:
    tenant = context.partition_key
    report = build_part(home.paths, tenant, WAREHOUSE_TABLES, context.log.info)
    return dg.MaterializeResult(
        metadata=frame_metadata(
            _table_rows(report.tables),
            {
                "tenant": tenant,
                "redactions_by_kind": report.redactions,
                "texts_analysed": report.texts_analysed,
                "redaction_seconds": round(report.seconds, 3),
            },
        )
    )


@dg.asset(
    group_name=groups.PUBLISH,
    deps=SNAPSHOT_DEPS,
    description="The warehouse, caught up with the lake, and analytics.duckdb: a complete, "
    "atomically replaced snapshot for analysts (SPEC §6), put together from the redacted parts "
    "of the tenants' runs and the ingest run (it analyses no text they analysed; a part its host "
    "never made, it makes). Built once after the tenants' runs, so tenant runs never wait on it.",
)
def analytics_snapshot(
    context: dg.AssetExecutionContext, home: MemorypackHome
) -> dg.MaterializeResult:
    report = build_snapshot(home.paths, context.log.info, parts_made=True)
    if report.missing:
        context.log.info(f"analytics snapshot: lake tables not present yet: {report.missing}")
    behind = {p.name: p.state for p in report.parts if p.state != "current"}
    if behind:
        context.log.warning(
            f"analytics snapshot: parts not current (previous rows or none): {behind}"
        )
    return dg.MaterializeResult(
        metadata=frame_metadata(
            _table_rows(report.tables),
            {
                "path": str(report.path),
                "views": report.views,
                "missing_tables": report.missing,
                # part (a tenant, or .ingest) → stale (the previous night's rows) or missing
                "parts_not_current": behind,
                "stale_tables": {p.name: list(p.changed) for p in report.parts if p.changed},
                "texts_analysed": report.texts_analysed,
                "seconds": round(report.seconds, 3),
            },
        )
    )


def _table_rows(tables: dict[str, int]) -> pl.DataFrame:
    """table, rows: a snapshot's or a part's tables and their row counts."""
    return pl.DataFrame(
        {"table": list(tables), "rows": list(tables.values())},
        schema={"table": pl.String, "rows": pl.Int64},
    )


ASSETS = [memory_pack, analytics_part, analytics_snapshot]
CHECKS: list[
    dg.AssetChecksDefinition
] = []  # the guards and pack_built are check_specs of memory_pack
