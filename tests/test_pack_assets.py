"""The publish assets in Dagster: packs and snapshot materialize; a failing guard blocks the publish."""

from pathlib import Path

import dagster as dg
import duckdb
import polars as pl

from assets.publish import ASSETS, CHECKS, UPSTREAM
from assets.resources import MemorypackHome
from memorypack import MemoryPack
from memorypack.format import read_latest
from pipeline.pack.guards import GUARD_NAMES
from tests.test_pack_support import make_lake

TAGS = {"dagster/partition": "2026-11-07"}


def _materialize(home: Path, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        ASSETS,
        instance=instance,
        resources={"home": MemorypackHome(home=str(home))},
        tags=TAGS,
        raise_on_error=False,
    )


def test_definitions_expose_blocking_guards() -> None:
    defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, resources={"home": MemorypackHome()})
    graph = defs.resolve_asset_graph()
    pack_key = dg.AssetKey("memory_pack")
    assert graph.get(pack_key).group_name == "publish"
    assert {k.path[-1] for k in graph.get(pack_key).parent_keys} == set(UPSTREAM)
    assert dg.AssetKey("memory_pack") in graph.get(dg.AssetKey("analytics_snapshot")).parent_keys
    specs = {spec.name: spec for spec in ASSETS[0].check_specs}
    assert set(specs) == set(GUARD_NAMES)
    assert all(spec.blocking for spec in specs.values())


def test_publish_assets_materialize(tmp_path: Path) -> None:
    paths = make_lake(tmp_path)
    with dg.instance_for_test() as instance:
        result = _materialize(paths.home, instance)
        assert result.success
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert checks == dict.fromkeys(GUARD_NAMES, True)
        meta = result.asset_materializations_for_node("memory_pack")[0].metadata
        assert meta["new_versions"].value == 2
        assert meta["as_of"].value == "2026-11-08T00:00:00+00:00"
        run_id = result.run_id
    pack = MemoryPack.load(paths.packs / "acme")
    assert pack.manifest["producer"]["dagster_run_id"] == run_id
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        rows = con.execute("SELECT tenant_id, is_latest FROM pack_versions ORDER BY 1").fetchall()
    assert rows == [("acme", True), ("globex", True)]
    assert pl.read_parquet(paths.table("pack_versions")).height == 2


def test_failing_guard_blocks_the_publish_and_says_why(tmp_path: Path) -> None:
    paths = make_lake(tmp_path)
    with dg.instance_for_test() as instance:
        assert _materialize(paths.home, instance).success
        live = read_latest(paths.packs / "acme")
        # A net-negative example slips into the few-shot set (a-i1 has 0 up, 1 down).
        few_shot = pl.read_parquet(paths.table("few_shot_sets")).with_columns(
            pl.when(pl.col("memory_id") == "a-i0")
            .then(pl.lit("a-i1"))
            .otherwise(pl.col("memory_id"))
            .alias("memory_id")
        )
        few_shot.write_parquet(paths.table("few_shot_sets"))
        key = paths.partition("decay_snapshots", "2026-11-07")
        pl.read_parquet(key).with_columns(pl.col("confidence") * 0.5).write_parquet(key)
        result = _materialize(paths.home, instance)
    assert not result.success
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not checks["pack_few_shot_not_negative"].passed
    assert (
        "acme: 1 few-shot examples have net-negative feedback"
        in checks["pack_few_shot_not_negative"].description
    )
    assert checks["pack_pii_redacted"].passed
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert failure.step_key == "memory_pack"
    assert (
        "memory pack not published, previous packs stay live"
        in failure.step_failure_data.error.message
    )
    snapshots = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.path == ["analytics_snapshot"]
    ]
    assert snapshots == []
    assert read_latest(paths.packs / "acme") == live
    assert MemoryPack.load(paths.packs / "acme").version == live
