"""Metadata in the instance: a tenant's run over several load dates records the newest snapshot's
figures and each date's check figures under the tenant; a re-run of an old day records the later
snapshots it rewrote. (decay_snapshots was partitioned by load date; it is partitioned by tenant
now, its load dates passed as run config.)"""

from pathlib import Path

import dagster as dg
import polars as pl

from assets import examples, feedback, memory
from pipeline.storage.lake import file_identity
from tests.tenant_runs import TENANT, declared, materialize_tenant, tenant_lake
from tests.test_learning_assets import DAY1, DAY2, materialize, write_lake

DAYS = [DAY1, "2026-11-03", "2026-11-04", DAY2]

# The stages between the typed tables and the examples (few_shot_sets: tests/test_semantic_assets.py).
ASSETS = [*feedback.ASSETS, *memory.ASSETS, examples.skill_stats]
CHECKS = [*feedback.CHECKS, *memory.CHECKS, *examples.CHECKS]


def _metadata(instance: dg.DagsterInstance, asset: str, key: str) -> dict[str, object]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    materialization = records[0].asset_materialization
    assert materialization is not None
    return {k: v.value for k, v in materialization.metadata.items()}


def test_decay_snapshots_of_several_dates_carry_the_newest_figures(tmp_path: Path) -> None:
    """(Was: a range run's date partitions each carry their own figures. decay_snapshots is now
    partitioned by tenant.) A tenant's run over several load dates records one materialization of
    its partition: the newest snapshot's figures and the dates it snapshotted; each date's own
    snapshot is its lake partition."""
    lake = tenant_lake(tmp_path)
    write_lake(lake, late_feedback=True)
    with dg.instance_for_test() as instance:
        assert materialize_tenant([*ASSETS, *CHECKS], tmp_path, instance, load_dates=DAYS).success
        meta = _metadata(instance, "decay_snapshots", TENANT)
    assert meta["as_of"] == "2026-11-06 00:00:00+00:00"
    # m_temp is active on day 1 (23 h old) and archived by day 2 (past 48 h); m_single archived.
    assert meta["by_status"] == {"active": 3, "archived": 2}
    assert meta["snapshot_dates"] == DAYS and meta["later_rewritten"] == []
    by_status = {
        day: dict(
            pl.read_parquet(lake.paths.partition("decay_snapshots", day))
            .group_by("status")
            .len()
            .sort("status")
            .iter_rows()
        )
        for day in (DAY1, DAY2)
    }
    assert by_status == {DAY1: {"active": 4, "archived": 1}, DAY2: {"active": 3, "archived": 2}}
    assert lake.partition_keys("decay_snapshots") == DAYS


def _check_evaluations(
    instance: dg.DagsterInstance, run_id: str
) -> dict[tuple[str, str | None], dict]:
    """(check name, partition) → metadata of every check evaluation the run recorded."""
    found: dict[tuple[str, str | None], dict] = {}
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        evaluation = entry.dagster_event.event_specific_data  # type: ignore[union-attr]
        found[(evaluation.check_name, evaluation.partition)] = {
            k: v.value for k, v in evaluation.metadata.items()
        } | {"passed": evaluation.passed}
    return found


def test_decay_checks_of_several_dates_are_one_result_with_each_days_figures(
    tmp_path: Path,
) -> None:
    """(Was: a range run's checks are recorded per date partition.) A tenant's run records each
    check once, under the tenant's partition and against its materialization; the figures of
    every date it snapshotted are in that result, and it fails when any date fails."""
    write_lake(tenant_lake(tmp_path), late_feedback=True)
    with dg.instance_for_test() as instance:
        result = materialize_tenant([*ASSETS, *CHECKS], tmp_path, instance, load_dates=DAYS)
        assert result.success
        checks = _check_evaluations(instance, result.run_id)
        present = {k: v for k, v in checks.items() if k[0] == "every_memory_present"}
        assert list(present) == [("every_memory_present", TENANT)]
        figures = present[("every_memory_present", TENANT)]
        assert (figures["passed"], figures["failed_dates"]) == (True, [])
        assert figures[DAY1] == {"rows": 5, "memories": 5, "duplicate_memories": 0}
        assert figures[DAY2]["rows"] == 5
        assert sorted(k for k in figures if k.startswith("2026-")) == DAYS
        # What the UI counts: the tenant's check ran against the tenant's materialization.
        check = dg.AssetCheckKey(dg.AssetKey("decay_snapshots"), "every_memory_present")
        status = {
            info.partition_key: (
                info.latest_execution_status.value,
                info.latest_target_materialization_storage_id
                == info.latest_materialization_storage_id,
            )
            for info in instance.event_log_storage.get_asset_check_partition_info([check])
        }
        assert status == {TENANT: ("SUCCEEDED", True)}
        one_day = materialize_tenant([*ASSETS, *CHECKS], tmp_path, instance, load_dates=[DAY2])
        assert one_day.success
        single = _check_evaluations(instance, one_day.run_id)
    # A one-date run records each check once, under the tenant, with that date's figures.
    assert {k for k in single if k[0] in ("confidence_in_range", "status_consistent")} == {
        ("confidence_in_range", TENANT),
        ("status_consistent", TENANT),
    }
    assert sorted(k for k in single[("status_consistent", TENANT)] if k.startswith("2026-")) == [
        DAY2
    ]


def test_rerunning_an_old_day_rewrites_the_later_snapshots_it_changes(tmp_path: Path) -> None:
    lake = tenant_lake(tmp_path)
    write_lake(lake, late_feedback=False)
    later = lake.paths.partition("decay_snapshots", DAY2)
    with dg.instance_for_test() as instance:
        materialize(tmp_path, DAY1, instance)
        materialize(tmp_path, DAY2, instance)
        written = file_identity(later)
        unchanged = _rewritten(materialize(tmp_path, DAY1, instance))
        kept = file_identity(later)
        # A thumbs-down on i2 arrives late in day 1's landing folder; day 1 runs again.
        feedback = lake.read("feedback").collect()
        late = feedback.head(1).with_columns(
            event_id=pl.lit("f_late"), target_id=pl.lit("i2"), signal=pl.lit("thumbs_down")
        )
        lake.write("feedback", declared("feedback", pl.concat([feedback, late])))
        result = materialize(tmp_path, DAY1, instance)
        checks = _check_evaluations(instance, result.run_id)
        latest = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=dg.AssetKey("decay_snapshots"), asset_partitions=[TENANT]
            ),
            limit=1,
        ).records[0]
    assert (unchanged, kept) == ([], written)  # recomputed, identical: not rewritten
    assert _rewritten(result) == [DAY2]
    assert file_identity(later) != written
    # The UI shows which run rewrote day 2's snapshot: the tenant's latest materialization says so.
    assert latest.run_id == result.run_id
    assert latest.asset_materialization.metadata["later_rewritten"].value == [DAY2]  # type: ignore[union-attr]
    # ... and that run checked day 2's new snapshot beside day 1's, in the tenant's one result.
    present = checks[("every_memory_present", TENANT)]
    assert present["passed"] and sorted(k for k in present if k.startswith("2026-")) == [DAY1, DAY2]
    i2 = pl.read_parquet(later).filter(pl.col("memory_id") == "i2")
    assert i2["reputation"].item() < 1.0


def _rewritten(result: dg.ExecuteInProcessResult) -> object:
    """What the run's own (day 1) materialization says it rewrote besides."""
    ours = [
        m
        for m in result.asset_materializations_for_node("decay_snapshots")
        if m.partition == TENANT
    ]
    return ours[0].metadata["later_rewritten"].value
