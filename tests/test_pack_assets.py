"""The publish assets in Dagster: packs and snapshot materialize; a tenant that fails a guard, or
whose build raises, keeps its previous pack while the other tenants publish."""

from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

import assets.publish
from assets.publish import ASSETS, BUILT, CHECKS, UPSTREAM
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


def test_definitions_expose_the_guards_as_checks() -> None:
    defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, resources={"home": MemorypackHome()})
    graph = defs.resolve_asset_graph()
    pack_key = dg.AssetKey("memory_pack")
    assert graph.get(pack_key).group_name == "publish"
    assert {k.path[-1] for k in graph.get(pack_key).parent_keys} == set(UPSTREAM)
    assert dg.AssetKey("memory_pack") in graph.get(dg.AssetKey("analytics_snapshot")).parent_keys
    specs = {spec.name: spec for spec in ASSETS[0].check_specs}
    assert set(specs) == {*GUARD_NAMES, BUILT}
    # Not blocking: a tenant's failure must not keep the snapshot (and other tenants) from running.
    assert not any(spec.blocking for spec in specs.values())


def test_publish_assets_materialize(tmp_path: Path) -> None:
    paths = make_lake(tmp_path)
    with dg.instance_for_test() as instance:
        result = _materialize(paths.home, instance)
        assert result.success
        checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
        assert checks == dict.fromkeys([*GUARD_NAMES, BUILT], True)
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


def _snapshots(result: dg.ExecuteInProcessResult) -> list[dg.EventLogEntry]:
    return [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.path == ["analytics_snapshot"]
    ]


def test_a_tenant_failing_a_guard_keeps_its_pack_and_others_publish(tmp_path: Path) -> None:
    paths = make_lake(tmp_path)
    with dg.instance_for_test() as instance:
        assert _materialize(paths.home, instance).success
        live = {t: read_latest(paths.packs / t) for t in ("acme", "globex")}
        # acme is poisoned: a net-negative example slips into its few-shot set (a-i1 has 0 up,
        # 1 down). Both tenants' confidences change, so both have new content to publish.
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
    assert result.success  # the night is not stopped by one tenant
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not checks["pack_few_shot_not_negative"].passed
    assert checks["pack_few_shot_not_negative"].description == (
        "acme: 1 few-shot examples have net-negative feedback, e.g. ['a-i1'] (not published)"
    )
    assert checks["pack_few_shot_not_negative"].metadata["failed_tenants"].value == ["acme"]
    assert checks["pack_pii_redacted"].passed and checks[BUILT].passed
    meta = result.asset_materializations_for_node("memory_pack")[0].metadata
    assert meta["new_versions"].value == 1
    assert list(meta["not_published"].value) == ["acme"]
    assert "failed pack_few_shot_not_negative" in meta["not_published"].value["acme"]
    # acme's previous pack stays live; globex moved on; the snapshot still ran.
    assert read_latest(paths.packs / "acme") == live["acme"]
    assert MemoryPack.load(paths.packs / "acme").version == live["acme"]
    assert read_latest(paths.packs / "globex") != live["globex"]
    assert MemoryPack.load(paths.packs / "globex").version == read_latest(paths.packs / "globex")
    assert len(_snapshots(result)) == 1


def test_a_tenant_whose_build_raises_keeps_its_pack_and_others_publish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = make_lake(tmp_path)
    real = assets.publish.build_tenant_pack

    def build(inputs, tenant):  # type: ignore[no-untyped-def]
        if tenant == "acme":
            raise ValueError("acme's memories cannot be read\nsecond line")
        return real(inputs, tenant)

    monkeypatch.setattr(assets.publish, "build_tenant_pack", build)
    with dg.instance_for_test() as instance:
        result = _materialize(paths.home, instance)
    assert result.success
    built = next(e for e in result.get_asset_check_evaluations() if e.check_name == BUILT)
    assert not built.passed
    assert built.description == "acme: ValueError: acme's memories cannot be read (not published)"
    assert not (paths.packs / "acme").exists()
    assert MemoryPack.load(paths.packs / "globex").tenant_id == "globex"
    assert len(_snapshots(result)) == 1
