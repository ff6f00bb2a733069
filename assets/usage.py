"""Usage stage: which pack items the calls used, their effects, and the pack's uplift (SPEC §4.9)."""

import dagster as dg
import polars as pl

from assets import groups
from assets.handoffs import reads
from assets.metadata import frame_metadata
from assets.partitions import TENANTS, declared_columns
from assets.resources import MemorypackHome
from pipeline import usage as stage
from pipeline.tables import COMMENTS

SHOWN = ["pack_version", "skill_id"]
NO_RECEIPTS = "no interaction carries a receipt (context): nothing to measure, empty tables"


@dg.asset(
    partitions_def=TENANTS,
    group_name=groups.USAGE,
    ins=reads("interactions", "feedback_scores", "memory_statements"),
    description=COMMENTS["pack_usage"],
    metadata=declared_columns("pack_usage"),
)
def pack_usage(
    context: dg.AssetExecutionContext,
    home: MemorypackHome,
    interactions: pl.LazyFrame,
    feedback_scores: pl.LazyFrame,
    memory_statements: pl.LazyFrame,
) -> dg.MaterializeResult:
    receipts = stage.calls(interactions, feedback_scores)
    usage = stage.pack_usage(receipts, stage.known_items(interactions, memory_statements))
    home.lake.write("pack_usage", usage)
    figures: dict[str, object] = {
        "calls_with_receipt": receipts.height,
        "holdout_calls": int(receipts["holdout"].sum()),
        "items": usage.height,
        "unknown_items": int((usage["item_kind"] == "unknown").sum()),
        "harmful_items": int((usage["verdict"] == "harmful").sum()),
        "helpful_items": int((usage["verdict"] == "helpful").sum()),
    }
    if receipts.is_empty():
        context.log.info(NO_RECEIPTS)  # the stage says so once, here; pack_uplift stays quiet
        figures["note"] = NO_RECEIPTS
    return dg.MaterializeResult(
        metadata=frame_metadata(
            usage.sort("uses", descending=True),
            figures,
            preview_columns=["item_id", "item_kind", "skill_id", "uses", "effect", "verdict"],
        )
    )


@dg.asset(
    partitions_def=TENANTS,
    group_name=groups.USAGE,
    ins=reads("interactions", "feedback_scores"),
    description=COMMENTS["pack_uplift"],
    metadata=declared_columns("pack_uplift"),
)
def pack_uplift(
    home: MemorypackHome, interactions: pl.LazyFrame, feedback_scores: pl.LazyFrame
) -> dg.MaterializeResult:
    uplift = stage.pack_uplift(stage.calls(interactions, feedback_scores))
    home.lake.write("pack_uplift", uplift)
    hurting = uplift.filter(pl.col("uplift_upper") < 0)
    return dg.MaterializeResult(
        metadata=frame_metadata(
            uplift,
            {"pack_versions": uplift["pack_version"].n_unique(), "hurting": hurting.height},
            preview_columns=["pack_version", "skill_id", "uplift", "uplift_lower", "uplift_upper"],
        )
    )


@dg.asset_check(
    partitions_def=TENANTS,
    asset="pack_uplift",
    blocking=False,
    description="Warns when a pack version's uplift interval lies below 0: the pack is hurting.",
)
def pack_not_hurting(home: MemorypackHome) -> dg.AssetCheckResult:
    uplift = home.lake.read_or_empty("pack_uplift").collect()
    hurting = uplift.filter(pl.col("uplift_upper") < 0)
    return dg.AssetCheckResult(
        passed=hurting.is_empty(),
        severity=dg.AssetCheckSeverity.WARN,
        description="the pack is hurting" if hurting.height else None,
        metadata={
            "hurting": ", ".join(
                f"{version} × {skill}" for version, skill in hurting.select(SHOWN).iter_rows()
            ),
            "pack_versions_measured": uplift["pack_version"].n_unique(),
        },
    )


ASSETS = [pack_usage, pack_uplift]
CHECKS = [pack_not_hurting]
