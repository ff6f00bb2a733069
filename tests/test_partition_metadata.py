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
