"""Partition metadata in the instance: a range run's partitions carry their own figures; a re-run of an
old day records the later snapshots it rewrote."""

from pathlib import Path

import dagster as dg
import polars as pl

from assets import examples, feedback, memory
from assets.resources import MemorypackHome
from pipeline.config import Paths
from pipeline.storage import Lake, file_identity
from tests.test_learning_assets import DAY1, DAY2, materialize, write_lake

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


def test_rerunning_an_old_day_rewrites_the_later_snapshots_it_changes(tmp_path: Path) -> None:
    lake = Lake(Paths.from_env(tmp_path))
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
        lake.write("feedback", pl.concat([feedback, late]))
        result = materialize(tmp_path, DAY1, instance)
        checks = _check_evaluations(instance, result.run_id)
        latest = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=dg.AssetKey("decay_snapshots"), asset_partitions=[DAY2]
            ),
            limit=1,
        ).records[0]
    assert (unchanged, kept) == ([], written)  # recomputed, identical: not rewritten
    assert _rewritten(result) == [DAY2]
    assert file_identity(later) != written
    assert latest.run_id == result.run_id  # the UI shows which run rewrote day 2's snapshot
    # ... and that run checked day 2's new snapshot, under day 2; day 1's result is the step's.
    checked = {k for k in checks if k[0] == "every_memory_present"}
    assert checked == {("every_memory_present", DAY1), ("every_memory_present", DAY2)}
    i2 = pl.read_parquet(later).filter(pl.col("memory_id") == "i2")
    assert i2["reputation"].item() < 1.0


def _rewritten(result: dg.ExecuteInProcessResult) -> object:
    """What the run's own (day 1) materialization says it rewrote besides."""
    ours = [
        m for m in result.asset_materializations_for_node("decay_snapshots") if m.partition == DAY1
    ]
    return ours[0].metadata["later_rewritten"].value
