"""The two partitionings: ingest by load date (one partition per landing folder), everything after
ingest by tenant (one partition per tenant, added by ingest when a tenant first appears)."""

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

# Not exported by `dagster`: what links a check result to the materialization it checked (the UI
# counts a partition's check as run only through it).
from assets.dagster_internals import AssetCheckEvaluationTargetMaterializationData
from assets.metadata import table_schema
from assets.resources import TENANTS_NAME
from pipeline.config import first_partition_date
from pipeline.tables import COMMENTS, table_of_asset

# The UI counts every day from here as a partition ("missing" until run): start near the data.
FIRST_DATE = first_partition_date()

# end_offset=1: today's landing folder is a valid partition as soon as it appears (the sensor's case).
DAILY = dg.DailyPartitionsDefinition(start_date=FIRST_DATE, end_offset=1)

# A tenant's run is one partition of every asset after ingest: its own data, lock and process.
TENANTS = dg.DynamicPartitionsDefinition(name=TENANTS_NAME)

# A check spec with partitions_def is a preview feature: it is how a check's result belongs to a day.
warnings.filterwarnings("ignore", category=dg.PreviewWarning)


def declared_columns(asset: str) -> dict[str, dg.MetadataValue]:
    """`dagster/column_schema` of the asset's lake table, from its declaration in pipeline.tables:
    the catalog shows the columns, their descriptions and the primary key also before a run."""
    table = table_of_asset(asset)
    if table is None:
        return {}
    return {"dagster/column_schema": dg.MetadataValue.table_schema(table_schema(table))}


def asset_spec(
    name: str,
    group: str,
    deps: Sequence[str | dg.AssetDep] = (),
    partitions_def: dg.PartitionsDefinition = TENANTS,
    description: str | None = None,
) -> dg.AssetSpec:
    """One asset of a step (by default partitioned by tenant, described by its lake table's
    comment). A step that writes tables beside its main one declares each as a spec like this,
    with the step's partitions, so the graph shows every table, who writes it and who reads it."""
    return dg.AssetSpec(
        name,
        deps=deps,
        group_name=group,
        partitions_def=partitions_def,
        description=description or COMMENTS[name],
        metadata=declared_columns(name),
    )


# What a blocking check's failure does, said in each blocking check's description.
BLOCKING = " Blocking: a failure stops the steps after it; the live pack stays."


def daily_check(name: str, asset: str, description: str) -> dg.AssetCheckSpec:
    """A blocking check whose results are recorded per load date, like the asset's metadata."""
    return dg.AssetCheckSpec(
        name, asset=asset, blocking=True, partitions_def=DAILY, description=description + BLOCKING
    )


def _materialization(
    context: dg.AssetExecutionContext, key: dg.AssetKey, partition: str
) -> AssetCheckEvaluationTargetMaterializationData | None:
    """The partition's latest materialization (this run's: the step yields it before its checks)."""
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition]), limit=1
    ).records
    if not records:
        return None
    return AssetCheckEvaluationTargetMaterializationData(
        storage_id=records[0].storage_id, run_id=records[0].run_id, timestamp=records[0].timestamp
    )


def check_per_partition(
    context: dg.AssetExecutionContext,
    check_name: str,
    results: Mapping[str, tuple[bool, Mapping[str, Any]]],
    asset: str | None = None,
) -> dg.AssetCheckResult:
    """One check's result for each partition the step wrote (partition key → passed, metadata).

    Each date's evaluation is recorded under that date. A one-date run's own date is the result
    Dagster records for the step; every other date (a range run's, or later snapshots a re-run
    rewrote) is logged beside it. The returned result gates the downstream steps: it fails when
    any date fails, and names the failing dates.
    """
    key = dg.AssetKey(asset) if asset else context.asset_key
    own = context.partition_key if context.has_partition_key else None
    for partition, (passed, metadata) in results.items():
        if partition == own:
            continue
        context.log_event(
            dg.AssetCheckEvaluation(
                asset_key=key,
                check_name=check_name,
                passed=passed,
                metadata=dict(metadata),
                partition=partition,
                target_materialization_data=_materialization(context, key, partition),
            )
        )
    failed = [partition for partition, (passed, _) in results.items() if not passed]
    if own is not None and own in results:
        metadata = {**results[own][1], **({"failed_partitions": failed} if failed else {})}
        others = [p for p in failed if p != own]
        return dg.AssetCheckResult(
            asset_key=key,
            check_name=check_name,
            passed=not failed,
            metadata=metadata,
            # The step's one result gates the next steps: a failing later date fails it too.
            description=f"{own} passed; failed: {', '.join(others)}"
            if others and results[own][0]
            else None,
        )
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=check_name,
        passed=not failed,
        metadata={"partitions": len(results), "failed_partitions": failed},
    )
