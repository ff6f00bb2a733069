"""The publish assets in Dagster: each tenant's run publishes its pack, then the analytics build
makes the snapshot; a tenant that fails a guard, or whose build raises, keeps its previous pack
while the other tenants publish."""

from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest

import assets.publish
from assets.handoffs import resources
from assets.publish import ASSETS, BUILT, CHECKS, UPSTREAM
from assets.resources import MemorypackHome
from memorypack import MemoryPack
from memorypack.format import read_latest
from pipeline.publish.guards import GUARD_NAMES
from tests.tenant_runs import build_analytics, materialize_tenant
from tests.test_pack_support import make_lake

TENANTS = ("acme", "globex")


class Night:
    """Each tenant's run of memory_pack (its partition), then the analytics build."""

    def __init__(self, home: Path, instance: dg.DagsterInstance) -> None:
        self.tenants = {
            tenant: materialize_tenant(
                [assets.publish.memory_pack], home, instance, tenant=tenant, raise_on_error=False
            )
            for tenant in TENANTS
        }
        self.analytics = build_analytics(home, instance)

    @property
    def success(self) -> bool:
        return all(r.success for r in self.tenants.values()) and self.analytics.success

    def checks(self, tenant: str) -> dict[str, dg.AssetCheckEvaluation]:
        return {e.check_name: e for e in self.tenants[tenant].get_asset_check_evaluations()}

    def pack_metadata(self, tenant: str) -> dict[str, object]:
        [event] = [
            m
            for m in self.tenants[tenant].asset_materializations_for_node("memory_pack")
            if m.asset_key.path == ["memory_pack"]
        ]
        return {k: v.value for k, v in event.metadata.items()}


def test_definitions_expose_the_guards_as_checks() -> None:
    defs = dg.Definitions(assets=ASSETS, asset_checks=CHECKS, resources=resources(MemorypackHome()))
    graph = defs.resolve_asset_graph()
    pack_key = dg.AssetKey("memory_pack")
    assert graph.get(pack_key).group_name == "publish"
    assert {k.path[-1] for k in graph.get(pack_key).parent_keys} == set(UPSTREAM)
    assert dg.AssetKey("memory_pack") in graph.get(dg.AssetKey("analytics_snapshot")).parent_keys
    specs = {spec.name: spec for spec in ASSETS[0].check_specs}
    assert set(specs) == {*GUARD_NAMES, BUILT}
    # Not blocking: a tenant's failure must not keep the snapshot (and other tenants) from running.
    assert not any(spec.blocking for spec in specs.values())


def test_publish_assetsNight(tmp_path: Path) -> None:
    paths = make_lake(tmp_path)
    with dg.instance_for_test() as instance:
        night = Night(paths.home, instance)
        assert night.success
        for tenant in TENANTS:
            checks = {name: e.passed for name, e in night.checks(tenant).items()}
            assert checks == dict.fromkeys([*GUARD_NAMES, BUILT], True)
            meta = night.pack_metadata(tenant)
            assert (meta["tenant"], meta["new_versions"]) == (tenant, 1)  # one new version each
            assert meta["as_of"] == "2026-11-08T00:00:00+00:00"
            pack = MemoryPack.load(paths.packs / tenant)
            assert pack.manifest["producer"]["dagster_run_id"] == night.tenants[tenant].run_id
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        rows = con.execute("SELECT tenant_id, is_latest FROM pack_versions ORDER BY 1").fetchall()
    assert rows == [("acme", True), ("globex", True)]
    # Each tenant's run records its own pack versions, in its folder.
    assert [
        pl.read_parquet(paths.for_tenant(t).table("pack_versions")).height for t in TENANTS
    ] == [
        1,
        1,
    ]


def _snapshots(night: Night) -> list[dg.DagsterEvent]:
    return [
        e
        for e in night.analytics.get_asset_materialization_events()
        if e.asset_key is not None and e.asset_key.path == ["analytics_snapshot"]
    ]


def test_a_tenant_failing_a_guard_keeps_its_pack_and_others_publish(tmp_path: Path) -> None:
    paths = make_lake(tmp_path)
    acme = paths.for_tenant("acme")
    with dg.instance_for_test() as instance:
        first = Night(paths.home, instance)
        assert first.success
        # The first night analyses every distinct text of the pack, and says how long that took.
        first_meta = first.pack_metadata("globex")
        assert first_meta["texts_analysed"] > 0 and first_meta["redaction_seconds"] > 0  # type: ignore[operator]
        live = {t: read_latest(paths.packs / t) for t in TENANTS}
        # acme is poisoned: a net-negative example slips into its few-shot set (a-i1 has 0 up,
        # 1 down). Both tenants' confidences change, so both have new content to publish.
        few_shot = pl.read_parquet(acme.table("few_shot_sets")).with_columns(
            pl.when(pl.col("memory_id") == "a-i0")
            .then(pl.lit("a-i1"))
            .otherwise(pl.col("memory_id"))
            .alias("memory_id")
        )
        few_shot.write_parquet(acme.table("few_shot_sets"))
        for tenant in TENANTS:
            key = paths.for_tenant(tenant).partition("decay_snapshots", "2026-11-07")
            pl.read_parquet(key).with_columns(pl.col("confidence") * 0.5).write_parquet(key)
        night = Night(paths.home, instance)
    assert night.success  # the night is not stopped by one tenant
    checks = night.checks("acme")
    assert not checks["pack_few_shot_not_negative"].passed
    assert checks["pack_few_shot_not_negative"].description == (
        "acme: 1 few-shot examples have net-negative feedback, e.g. ['a-i1'] (not published)"
    )
    assert checks["pack_few_shot_not_negative"].metadata["detail"].value.startswith("1 few-shot")
    assert checks["pack_pii_redacted"].passed and checks[BUILT].passed
    assert all(e.passed for e in night.checks("globex").values())
    meta = night.pack_metadata("acme")
    assert meta["new_versions"] == 0 and night.pack_metadata("globex")["new_versions"] == 1
    # The same texts again: every redaction comes from the cache.
    assert night.pack_metadata("globex")["texts_analysed"] == 0
    assert list(meta["not_published"]) == ["acme"]  # type: ignore[call-overload]
    assert "failed pack_few_shot_not_negative" in meta["not_published"]["acme"]  # type: ignore[index]
    # acme's previous pack stays live; globex moved on; the snapshot still ran.
    assert read_latest(paths.packs / "acme") == live["acme"]
    assert MemoryPack.load(paths.packs / "acme").version == live["acme"]
    assert read_latest(paths.packs / "globex") != live["globex"]
    assert MemoryPack.load(paths.packs / "globex").version == read_latest(paths.packs / "globex")
    assert len(_snapshots(night)) == 1


def test_a_tenant_whose_build_raises_keeps_its_pack_and_others_publish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = make_lake(tmp_path)
    real = assets.publish.build_tenant_pack

    def build(inputs, progress=None):  # type: ignore[no-untyped-def]
        if inputs.tenant == "acme":
            raise ValueError("acme's memories cannot be read\nsecond line")
        return real(inputs, progress)

    monkeypatch.setattr(assets.publish, "build_tenant_pack", build)
    with dg.instance_for_test() as instance:
        night = Night(paths.home, instance)
    assert night.success
    built = night.checks("acme")[BUILT]
    assert not built.passed
    assert built.description == "acme: ValueError: acme's memories cannot be read (not published)"
    assert night.checks("globex")[BUILT].passed
    assert not (paths.packs / "acme").exists()
    assert MemoryPack.load(paths.packs / "globex").tenant_id == "globex"
    assert len(_snapshots(night)) == 1
