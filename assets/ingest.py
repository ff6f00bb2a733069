"""Ingest assets: one landing folder per daily partition → events + quarantine, then typed tables."""

from collections.abc import Iterator
from dataclasses import dataclass

import dagster as dg
import polars as pl

from assets import groups
from assets.metadata import PREVIEW_ROWS, frame_metadata
from assets.partitions import (
    BLOCKING,
    DAILY,
    TENANTS,
    asset_spec,
    check_per_partition,
    daily_check,
    declared_columns,
)
from assets.resources import MemorypackHome
from pipeline import tables
from pipeline.erasure.requests import carry_out_erasures, forget_in_memory
from pipeline.errors import one_line
from pipeline.frames import detached_head
from pipeline.ingest import contracts
from pipeline.ingest.folder import TYPED_TABLES
from pipeline.ingest.layout import build_typed_tables
from pipeline.ingest.partitions import ingest_partition, stats_frame
from pipeline.ingest.tombstones import Tombstones
from pipeline.publish.analytics import WAREHOUSE_TABLES
from pipeline.publish.snapshot_parts import INGEST_PART, build_part
from pipeline.storage.homelock import tenant_locks
from pipeline.tables import COMMENTS, table_name

CONSERVATION = "lines_read_equals_accepted_plus_duplicates_plus_quarantined"
CONTRACT_DESCRIPTION = (
    "The stored rows match the table's declaration and the raw contract (SPEC §2): declared "
    "types, primary key present and unique, then value ranges, allowed values and required "
    "fields; pandera's report when not."
)
TYPED_DESCRIPTIONS = {name: COMMENTS[name] for name in TYPED_TABLES}


INGEST_FIGURES = ("files", "lines_read", "accepted", "duplicates", "quarantined")
FILES_NOT_READ = "files_not_read"  # file → reason: what the run's report names, one line each
ERASURES_FAILED = "erasures_failed"  # tenant → why its requests failed (its pack is withheld)


@dataclass
class PartitionSummary:
    """What a run keeps of one ingested partition: counts and a preview, not the rows."""

    stats: dict[str, int | str]
    conserved: bool
    by_reason: dict[str, int]
    preview: pl.DataFrame
    contract: tuple[bool, dict[str, str]]  # matches_contract: passed, metadata
    erasures: list[tuple[str, str]]  # requests read (tenant_id, contact_id): in memory only
    files_not_read: dict[str, str]  # file → why it (or its rest) was not read
    quarantine_rows: int  # a row may stand for several lines (blank, identical): stats count lines


def _ingest_partition(
    home: MemorypackHome, key: str, log: dg.DagsterLogManager, tombstones: Tombstones
) -> PartitionSummary:
    lake = home.lake
    result = ingest_partition(lake, home.landing_dir, key, tombstones, log)
    contract = _contract_problems("raw_events", result.events)
    lake.write_partition("events", key, result.events)
    lake.write_partition("quarantine", key, result.quarantine)
    lake.write_partition("ingest_stats", key, stats_frame(result))
    log.info(f"ingested {key}: {result.stats}")
    for file, why in result.files_not_read.items():
        log.warning(f"landing file {key}/{file} not read: {why}")
    return PartitionSummary(
        stats=result.stats,
        conserved=result.conserved,
        by_reason=dict(result.quarantine.group_by("reason").agg(pl.col("lines").sum()).iter_rows()),
        preview=detached_head(result.events, PREVIEW_ROWS),
        contract=contract,
        erasures=result.erasures,
        files_not_read=result.files_not_read,
        quarantine_rows=result.quarantine.height,
    )


def _ingest_part(home: MemorypackHome, log: dg.DagsterLogManager) -> str:
    """Ingest's part of the analyst snapshot (quarantine and ingest_stats, redacted: lines of no
    tenant among them), made here so the analytics build analyses no text. One that cannot be
    made stops nothing: the build keeps the previous part and says so."""
    try:
        report = build_part(home.paths, INGEST_PART, WAREHOUSE_TABLES, log.info)
    except Exception as error:  # the night goes on; the reason is shown
        log.warning(f"analytics part of ingest not made: {one_line(error)}")
        return f"not made: {one_line(error)}"
    return f"{sum(report.tables.values())} rows, {report.texts_analysed} texts analysed"


@dg.multi_asset(
    specs=[
        asset_spec(
            "raw_events",
            groups.INGEST,
            partitions_def=DAILY,
            description="Parse and validate one landing folder (load date) into events (lake "
            "table `events`); bad lines to quarantine.",
        ),
        asset_spec("quarantine", groups.INGEST, partitions_def=DAILY),
        asset_spec("ingest_stats", groups.INGEST, partitions_def=DAILY),
    ],
    backfill_policy=dg.BackfillPolicy.single_run(),
    check_specs=[
        daily_check(
            CONSERVATION,
            "raw_events",
            "Per load date, every line read is accounted for: lines read = events accepted + "
            "duplicates skipped + lines quarantined (SPEC §2).",
        ),
        daily_check("matches_contract", "raw_events", CONTRACT_DESCRIPTION),
    ],
)
def raw_events(
    context: dg.AssetExecutionContext, home: MemorypackHome
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    keys = sorted(context.partition_keys)
    tombstones = Tombstones.load(home.paths)
    summaries = [_ingest_partition(home, key, context.log, tombstones) for key in keys]
    erasures = carry_out_erasures(
        home.lake, [pair for s in summaries for pair in s.erasures], context.log, home.landing_dir
    )
    for summary in summaries:  # taken before the erasure; stored in the run history after it
        summary.preview, contract = forget_in_memory(
            summary.preview, summary.contract[1], erasures.erased
        )
        summary.contract = (summary.contract[0], contract)
    # Each partition carries its own day's figures, not the range's (one step, several partitions).
    for key, summary in zip(keys, summaries, strict=True):
        metadata = frame_metadata(
            summary.preview,
            {
                **{k: summary.stats[k] for k in INGEST_FIGURES},
                "quarantine_by_reason": dict(sorted(summary.by_reason.items())),
                FILES_NOT_READ: summary.files_not_read,
            },
            preview_columns=["tenant_id", "event_id", "event_type", "ts", "contact_id"],
        )
        metadata["dagster/row_count"] = dg.MetadataValue.int(int(summary.stats["accepted"]))
        context.add_asset_metadata(metadata, asset_key="raw_events", partition_key=key)
        context.add_asset_metadata(
            {
                "dagster/row_count": dg.MetadataValue.int(summary.quarantine_rows),
                "lines": dg.MetadataValue.int(int(summary.stats["quarantined"])),
                "by_reason": dg.MetadataValue.json(dict(sorted(summary.by_reason.items()))),
                FILES_NOT_READ: dg.MetadataValue.json(summary.files_not_read),
            },
            asset_key="quarantine",
            partition_key=key,
        )
        context.add_asset_metadata(
            frame_metadata(pl.DataFrame([summary.stats])),
            asset_key="ingest_stats",
            partition_key=key,
        )
    part = _ingest_part(home, context.log)
    yield dg.MaterializeResult(
        asset_key="raw_events",
        metadata={
            "run_load_dates": keys,
            "analytics_part": part,
            "erasures_carried_out": len(erasures.erased),
            ERASURES_FAILED: dg.MetadataValue.json(erasures.failed),
        },
    )
    yield dg.MaterializeResult(asset_key="quarantine")
    yield dg.MaterializeResult(asset_key="ingest_stats")
    yield check_per_partition(
        context,
        CONSERVATION,
        {
            key: (s.conserved, {k: s.stats[k] for k in INGEST_FIGURES})
            for key, s in zip(keys, summaries, strict=True)
        },
        asset="raw_events",
    )
    yield check_per_partition(
        context,
        "matches_contract",
        {key: s.contract for key, s in zip(keys, summaries, strict=True)},
        asset="raw_events",
    )


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            name,
            deps=["raw_events"],
            group_name=groups.INGEST,
            description=text,
            metadata=declared_columns(name),
        )
        for name, text in TYPED_DESCRIPTIONS.items()
    ],
    check_specs=[
        dg.AssetCheckSpec(
            "matches_contract",
            asset=name,
            blocking=True,
            description=CONTRACT_DESCRIPTION + BLOCKING,
        )
        for name in TYPED_DESCRIPTIONS
    ],
)
def typed_event_tables(
    context: dg.AssetExecutionContext, home: MemorypackHome
) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
    """interactions, feedback, memory_statements of each tenant: one lake partition per tenant and
    load date. Only load dates whose events were (re)written since are rebuilt, so a night costs
    what it ingested, not the history. A tenant seen for the first time becomes a partition of
    every later asset; `changed` (tenant → load dates whose tables changed) is what the tenants'
    runs are launched for."""
    built = build_typed_tables(
        home.paths,
        lock=lambda t: tenant_locks(home.paths.local, "ingest", t),
        check=lambda name, frame: _contract_problems(name, frame)[1].get("error"),
    )
    known = set(context.instance.get_dynamic_partitions(TENANTS.name))
    new = sorted(set(built.tenants) - known)
    if new:
        context.instance.add_dynamic_partitions(TENANTS.name, new)
    context.log.info(
        f"typed tables rebuilt for load dates {built.dates or 'none'}; changed {built.changed}"
    )
    for name in TYPED_TABLES:
        frame = built.written[name]
        table = home.lake.read_or_empty(name)
        figures: dict[str, object] = {
            "rows_written": built.rows[name],
            "rebuilt_load_dates": built.dates,
            "tenants": len(built.tenants),
            "changed": built.changed,
            "new_tenants": new,
        }
        if name == "feedback":
            figures["by_signal"] = _counts_by(table, "signal")
        if name == "memory_statements":
            figures["by_type"] = _counts_by(table, "memory_type")
        metadata = frame_metadata(frame, figures)
        metadata["dagster/row_count"] = dg.MetadataValue.int(
            table.select(pl.len()).collect().item()
        )
        yield dg.MaterializeResult(asset_key=name, metadata=metadata)
        # Checks the rows this run wrote; earlier partitions were checked when they were written.
        problems = built.problems[name]
        yield dg.AssetCheckResult(
            check_name="matches_contract",
            asset_key=name,
            passed=not problems,
            metadata={"error": problems[0], "partitions_failed": len(problems)} if problems else {},
        )


def _counts_by(table: pl.LazyFrame, column: str) -> dict[str, int]:
    return dict(table.group_by(column).len().sort(column).collect().iter_rows())


def _contract_problems(name: str, frame: pl.DataFrame) -> tuple[bool, dict[str, str]]:
    """Whether `frame` matches its table's contract, and pandera's report when it does not: the
    checks generated from the table's declaration (types, primary key unique and not null), then
    the contract's own rules (value ranges, allowed values, required fields)."""
    try:
        tables.checks(table_name(name)).validate(frame, lazy=True)
        contracts.contract_checks(table_name(name)).validate(frame, lazy=True)
    except Exception as error:  # pandera's SchemaErrors: report, don't crash the step
        return False, {"error": str(error)[:2000]}
    return True, {}


ASSETS = [raw_events, typed_event_tables]
CHECKS: list[dg.AssetChecksDefinition] = []
