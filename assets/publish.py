"""Publish assets: the versioned memory pack per tenant (gated by blocking checks) and the analyst snapshot."""

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import polars as pl

from assets import groups
from assets.metadata import frame_metadata
from assets.resources import MemorypackHome
from pipeline.analytics import build_snapshot, pack_versions_frame
from pipeline.pack.build import build_pack as build_tenant_pack
from pipeline.pack.build import load_inputs
from pipeline.pack.guards import GUARD_DESCRIPTIONS, GUARD_NAMES, GuardResult, run_guards
from pipeline.pack.store import DEFAULT_KEEP
from pipeline.pack.writer import PackStage

UPSTREAM = [
    "feedback_scores",
    "decay_snapshots",
    "memory_embeddings",
    "consolidated_summaries",
    "memory_conflicts",
    "few_shot_sets",
    "skill_stats",
    "refined_templates",
    "dpo_policy",
]
PARTITION_TAGS = ("dagster/partition", "dagster/asset_partition_range_end")


class PackConfig(dg.Config):
    keep: int = DEFAULT_KEEP  # versions kept per tenant (the live one is always kept)


def run_as_of(tags: dict[str, str], home: MemorypackHome) -> datetime:
    """The end of the newest load date: the run's (last) partition or the lake's newest, whichever
    is later, so re-running an old date republishes as of the newest night, never back in time."""
    lake = home.lake
    keys = lake.partition_keys("decay_snapshots") + lake.partition_keys("events")
    keys += [tags[t] for t in PARTITION_TAGS if tags.get(t)]
    if not keys:
        raise dg.Failure(description="memory_pack: no load date to publish as of (no events yet)")
    newest = max(keys)
    return datetime.combine(
        date.fromisoformat(newest) + timedelta(days=1), datetime.min.time(), UTC
    )


def _check_results(guards: dict[str, list[GuardResult]]) -> list[dg.AssetCheckResult]:
    """One result per guard across tenants: it passes only if it passed for every tenant."""
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
                description="; ".join(f"{t}: {d}" for t, d in failed.items())
                or GUARD_DESCRIPTIONS[name],
                metadata={
                    "tenants": dg.MetadataValue.json(
                        {t: {"passed": g.passed, "detail": g.detail} for t, g in per_tenant.items()}
                    )
                },
            )
        )
    return results


@dg.asset(
    group_name=groups.PUBLISH,
    deps=UPSTREAM,
    check_specs=[
        dg.AssetCheckSpec(
            name, asset="memory_pack", blocking=True, description=GUARD_DESCRIPTIONS[name]
        )
        for name in GUARD_NAMES
    ],
    description="One verified, versioned memory pack per tenant (SPEC §5), published atomically.",
)
def memory_pack(
    context: dg.AssetExecutionContext, home: MemorypackHome, config: PackConfig
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    as_of = run_as_of(context.run.tags, home)
    inputs = load_inputs(home.lake, as_of)
    if inputs.missing:
        context.log.warning(f"pack inputs not in the lake yet (published empty): {inputs.missing}")
    # One tenant in memory at a time: built, guarded, written out of sight; all go live together
    # only when every tenant passed every guard.
    stage = PackStage(home.paths.packs, run_id=context.run_id, keep=config.keep)
    guards: dict[str, list[GuardResult]] = {}
    rows: list[dict[str, object]] = []
    try:
        for tenant in inputs.tenants():
            content = build_tenant_pack(inputs, tenant)
            guards[tenant] = run_guards(content, inputs)
            rows.append(
                {
                    "tenant_id": tenant,
                    "memories": content.frames["memories.parquet"].height,
                    "redacted": content.redactions["total"],
                    "redactions_by_kind": content.redactions["by_kind"],
                }
            )
            if all(g.passed for found in guards.values() for g in found):
                stage.add(content)
            del content
        checks = _check_results(guards)
        failed = [c for c in checks if not c.passed]
        if failed:
            # Nothing is written: every tenant's LATEST keeps pointing at the pack it had.
            stage.discard()
            yield from checks
            reasons = "; ".join(f"{c.check_name}: {c.description}" for c in failed)
            raise dg.Failure(
                description=f"memory pack not published, previous packs stay live: {reasons}",
                allow_retries=False,
            )
        results = stage.commit()
    except BaseException:
        stage.discard()
        raise
    for r in results:
        context.log.info(f"{r.tenant_id}: {r.reason} {r.version} (removed {r.removed or 'none'})")
    versions = pack_versions_frame(home.paths)
    home.lake.write("pack_versions", versions)
    home.warehouse.refresh(
        "pack_versions", home.lake, comment="Kept memory pack versions per tenant."
    )
    by_tenant = {r["tenant_id"]: r for r in rows}
    summary = pl.DataFrame(
        {
            "tenant_id": [r.tenant_id for r in results],
            "version": [r.version for r in results],
            "published": [r.published for r in results],
            "reason": [r.reason for r in results],
            "memories": [by_tenant[r.tenant_id]["memories"] for r in results],
            "redacted": [by_tenant[r.tenant_id]["redacted"] for r in results],
        },
        schema={
            "tenant_id": pl.String,
            "version": pl.String,
            "published": pl.Boolean,
            "reason": pl.String,
            "memories": pl.Int64,
            "redacted": pl.Int64,
        },
    )
    yield dg.MaterializeResult(
        metadata=frame_metadata(
            summary,
            {
                "as_of": as_of.isoformat(),
                "tenants": len(results),
                "new_versions": sum(r.published for r in results),
                "missing_inputs": inputs.missing,
                "redactions_by_kind": {r["tenant_id"]: r["redactions_by_kind"] for r in rows},
                "packs_folder": str(home.paths.packs),
            },
        )
    )
    yield from checks


@dg.asset(
    group_name=groups.PUBLISH,
    deps=[memory_pack],
    description="analytics.duckdb: a complete, atomically replaced snapshot for analysts (SPEC §6).",
)
def analytics_snapshot(
    context: dg.AssetExecutionContext, home: MemorypackHome
) -> dg.MaterializeResult:
    report = build_snapshot(home.paths)
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
CHECKS: list[dg.AssetChecksDefinition] = []  # the guard checks are check_specs of memory_pack
