"""Publish assets: the versioned memory pack per tenant (each gated by the guards) and the analyst snapshot."""

from collections.abc import Iterator
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
from pipeline.publish.store import DEFAULT_KEEP
from pipeline.publish.writer import publish
from pipeline.storage.owed import settle
from pipeline.storage.withheld import withheld
from pipeline.tables import PACK_SUMMARY, asset_name

# What a pack reads: its tenant's input tables and what the receipts measured (its event counts and load dates come from its
# typed tables, never from ingest's shared ones).
UPSTREAM = [asset_name(table) for table in (*INPUT_TABLES, *USAGE_TABLES)]
# The analytics build reads every table of the warehouse, and the packs folder.
SNAPSHOT_DEPS = [asset_name(table) for table in WAREHOUSE_TABLES] + ["memory_pack"]
BUILT = "pack_built"
BUILT_DESCRIPTION = (
    "Every tenant's pack was built and written (a tenant that raised kept its previous pack)."
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
    context: dg.AssetExecutionContext, inputs: PackInputs, tenant: str
) -> tuple[PackContent, dict[str, object]]:
    """The tenant's pack content and its summary fields, with the time its redaction took and the
    texts it analysed (not served by the cache; the redactor counts across tenants). Each file's
    redaction is a line in the run's log."""
    redactor = inputs.redactor
    if redactor is None:  # raises: a pack is never built unredacted
        return build_tenant_pack(inputs, tenant, context.log.info), {}
    seconds, analysed = redactor.seconds, redactor.analysed
    content = build_tenant_pack(inputs, tenant, context.log.info)
    redactor.save_names(tenant, content.names)  # the snapshot redacts its rows with them
    return content, {
        "memories": content.frames["memories.parquet"].height,
        "redacted": content.redactions["total"],
        "redaction_s": round(redactor.seconds - seconds, 3),
        "texts_analysed": redactor.analysed - analysed,
    }


def _masked_total(content: PackContent) -> int:
    return sum(sum(kinds.values()) for kinds in content.redactions["pii_masked"].values())


def _check_results(guards: dict[str, list[GuardResult]]) -> list[dg.AssetCheckResult]:
    """One result per guard across tenants: it passes only if it passed for every tenant, and
    its description names each tenant it failed for (that tenant kept its previous pack)."""
    results = []
    for name in GUARD_NAMES:
        per_tenant = {
            tenant: next(g for g in found if g.name == name) for tenant, found in guards.items()
        }
        failed = {tenant: g.detail for tenant, g in per_tenant.items() if not g.passed}
        results.append(
            dg.AssetCheckResult(
                check_name=name,
                asset_key="memory_pack",
                passed=not failed,
                severity=dg.AssetCheckSeverity.ERROR,
                description="; ".join(f"{t}: {d} (not published)" for t, d in failed.items())
                or GUARD_DESCRIPTIONS[name],
                metadata={
                    "tenants": dg.MetadataValue.json(
                        {
                            t: {"passed": g.passed, "detail": g.detail, **g.metadata}
                            for t, g in per_tenant.items()
                        }
                    ),
                    "failed_tenants": sorted(failed),
                },
            )
        )
    return results


def _publish_tenant(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    config: PackConfig,
    inputs: PackInputs,
    tenant: str,
    found: tuple[dict[str, list[GuardResult]], dict[str, str], dict[str, object]],
) -> dict[str, object]:
    """One tenant's pack built, guarded and published (or why not): its summary row, and in
    `found` its guards, why it broke, its redactions. A tenant whose pack is withheld (an erasure
    request the night could not carry out), that fails a guard or whose build raises keeps its
    previous pack; the others still publish."""
    guards, broken, redactions = found
    row: dict[str, object] = dict.fromkeys(PACK_SUMMARY) | {"tenant_id": tenant, "published": False}
    held = withheld(home.paths, tenant)
    if held:
        row["reason"] = f"not published: {next(iter(held.values()))}; previous pack stays"
        context.log.warning(f"{tenant}: {row['reason']}")
        return row
    try:
        content, built = _built(context, inputs, tenant)
        guards[tenant] = run_guards(content, inputs)  # masks what the PII check finds
        row |= built | {"pii_masked": _masked_total(content)}
        redactions[tenant] = content.redactions["by_kind"]
        failed = [g.name for g in guards[tenant] if not g.passed]
        if failed:
            row["reason"] = f"not published: failed {', '.join(failed)}; previous pack stays"
        else:
            result = publish(home.paths.packs, content, context.run_id, config.keep)
            row |= {"version": result.version, "published": result.published}
            row["reason"] = result.reason
            context.log.info(
                f"{tenant}: {result.reason} {result.version} (removed {result.removed or 'none'})"
            )
    except Exception as error:  # this tenant only: the others still publish
        context.log.exception(f"{tenant}: pack not built, previous pack stays")
        broken[tenant] = one_line(error)
        row["reason"] = f"not published: {broken[tenant]}; previous pack stays"
    return row


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
    as_of = tenant_as_of(home)
    inputs = load_inputs(home.lake, as_of)
    if inputs.missing:
        context.log.warning(f"pack inputs not in the lake yet (published empty): {inputs.missing}")
    # One tenant in memory at a time; each is built, guarded and published on its own, so a
    # tenant that fails a guard, or whose build raises, never holds back another's pack.
    guards: dict[str, list[GuardResult]] = {}
    rows: list[dict[str, object]] = []
    broken: dict[str, str] = {}  # tenant → why its pack could not be built or written
    redactions: dict[str, object] = {}
    for tenant in inputs.tenants():
        rows.append(
            _publish_tenant(context, home, config, inputs, tenant, (guards, broken, redactions))
        )
    checks = _check_results(guards)
    versions = pack_versions_frame(home.paths)
    home.lake.write("pack_versions", versions)
    summary = pl.DataFrame(rows, schema=PACK_SUMMARY)
    not_published = {
        r["tenant_id"]: r["reason"]
        for r in summary.filter(pl.col("version").is_null()).iter_rows(named=True)
    }
    for tenant in summary.filter(pl.col("version").is_not_null())["tenant_id"]:
        settle(home.paths, tenant)  # its live pack holds every load date it owed
    yield dg.MaterializeResult(
        asset_key="memory_pack",
        metadata=frame_metadata(
            summary,
            {
                "as_of": as_of.isoformat(),
                "tenants": summary.height,
                "new_versions": int(summary["published"].sum()),
                "not_published": not_published,
                "redactions_by_kind": redactions,
                "pii_masked": int(summary["pii_masked"].fill_null(0).sum()),
                "redaction_seconds": round(float(summary["redaction_s"].fill_null(0).sum()), 3),
                "texts_analysed": int(summary["texts_analysed"].fill_null(0).sum()),
                "missing_inputs": inputs.missing,
                "packs_folder": str(home.paths.packs),
            },
        ),
    )
    yield dg.MaterializeResult(asset_key="pack_versions", metadata=frame_metadata(versions))
    yield from checks
    yield dg.AssetCheckResult(
        check_name=BUILT,
        asset_key="memory_pack",
        passed=not broken,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f"{t}: {why} (not published)" for t, why in broken.items())
        or BUILT_DESCRIPTION,
        metadata={"failed_tenants": sorted(broken)},
    )


@dg.asset(
    group_name=groups.PUBLISH,
    deps=SNAPSHOT_DEPS,
    description="The warehouse, caught up with the lake, and analytics.duckdb: a complete, "
    "atomically replaced snapshot for analysts (SPEC §6). Built once after the tenants' runs, so "
    "tenant runs never wait on a DuckDB file.",
)
def analytics_snapshot(
    context: dg.AssetExecutionContext, home: MemorypackHome
) -> dg.MaterializeResult:
    report = build_snapshot(home.paths, context.log.info)  # a line per slice it redacts
    if report.missing:
        context.log.info(f"analytics snapshot: lake tables not present yet: {report.missing}")
    frame = pl.DataFrame(
        {"table": list(report.tables), "rows": list(report.tables.values())},
        schema={"table": pl.String, "rows": pl.Int64},
    )
    return dg.MaterializeResult(
        metadata=frame_metadata(
            frame,
            {
                "path": str(report.path),
                "views": report.views,
                "missing_tables": report.missing,
                "seconds": round(report.seconds, 3),
            },
        )
    )


ASSETS = [memory_pack, analytics_snapshot]
CHECKS: list[
    dg.AssetChecksDefinition
] = []  # the guards and pack_built are check_specs of memory_pack
