"""A range run's partitions each carry their own figures in the instance, not the range's."""

from pathlib import Path

import dagster as dg

from assets.learning import ASSETS, CHECKS
from assets.resources import MemorypackHome
from pipeline.config import Paths
from pipeline.storage import Lake
from tests.test_learning_assets import DAY1, DAY2, write_lake


def _metadata(instance: dg.DagsterInstance, asset: str, key: str) -> dict[str, object]:
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1
    ).records
    materialization = records[0].asset_materialization
    assert materialization is not None
    return {k: v.value for k, v in materialization.metadata.items()}


def test_decay_snapshots_of_a_range_carry_each_days_figures(tmp_path: Path) -> None:
    write_lake(Lake(Paths.from_env(tmp_path)), late_feedback=True)
    with dg.instance_for_test() as instance:
        assert dg.materialize(
            [*ASSETS, *CHECKS],
            resources={"home": MemorypackHome(home=str(tmp_path))},
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": DAY1,
                "dagster/asset_partition_range_end": DAY2,
            },
        ).success
        first = _metadata(instance, "decay_snapshots", DAY1)
        last = _metadata(instance, "decay_snapshots", DAY2)
    assert first["as_of"] == "2026-11-03 00:00:00+00:00"
    assert last["as_of"] == "2026-11-06 00:00:00+00:00"
    # m_temp is active on day 1 (23 h old) and archived by day 2 (past 48 h); m_single archived.
    assert first["by_status"] == {"active": 4, "archived": 1}
    assert last["by_status"] == {"active": 3, "archived": 2}
    assert first["run_partitions"] == last["run_partitions"]


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


def test_decay_checks_of_a_range_are_recorded_per_day(tmp_path: Path) -> None:
    write_lake(Lake(Paths.from_env(tmp_path)), late_feedback=True)
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [*ASSETS, *CHECKS],
            resources={"home": MemorypackHome(home=str(tmp_path))},
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": DAY1,
                "dagster/asset_partition_range_end": DAY2,
            },
        )
        assert result.success
        checks = _check_evaluations(instance, result.run_id)
        present = {k: v for k, v in checks.items() if k[0] == "every_memory_present"}
        # Each day's own evaluation, plus the range's result that gates downstream steps.
        assert present[("every_memory_present", DAY1)] == {
            "rows": 5,
            "memories": 5,
            "duplicate_memories": 0,
            "passed": True,
        }
        assert present[("every_memory_present", DAY2)]["rows"] == 5
        assert present[("every_memory_present", None)] == {
            "partitions": 4,  # 2026-11-02 .. 2026-11-05
            "failed_partitions": [],
            "passed": True,
        }
        # What the UI counts: each day's check ran against that day's materialization.
        check = dg.AssetCheckKey(dg.AssetKey("decay_snapshots"), "every_memory_present")
        status = {
            info.partition_key: (
                info.latest_execution_status.value,
                info.latest_target_materialization_storage_id
                == info.latest_materialization_storage_id,
            )
            for info in instance.event_log_storage.get_asset_check_partition_info([check])
        }
        days = ["2026-11-02", "2026-11-03", "2026-11-04", "2026-11-05"]
        # (The range's own result, with no partition, is recorded beside them.)
        assert {k: v for k, v in status.items() if k} == dict.fromkeys(days, ("SUCCEEDED", True))
        one_day = dg.materialize(
            [*ASSETS, *CHECKS],
            resources={"home": MemorypackHome(home=str(tmp_path))},
            instance=instance,
            partition_key=DAY2,
        )
        assert one_day.success
        single = _check_evaluations(instance, one_day.run_id)
    # A one-date run records each check under its date, once.
    assert {k for k in single if k[0] in ("confidence_in_range", "status_consistent")} == {
        ("confidence_in_range", DAY2),
        ("status_consistent", DAY2),
    }
