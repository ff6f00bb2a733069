"""The Definitions load, and carry the asset names, job, schedule and sensor the contract names."""

import ast
import json
import warnings
from datetime import UTC
from pathlib import Path

import dagster as dg

from assets.config import FAST, settings_config
from assets.groups import STAGES
from assets.partitions import TENANTS
from jobs.definitions import defs
from jobs.instance import TENANT_TAG
from jobs.nightly import (
    analytics_sensor,
    landing_fingerprints,
    landing_sensor,
    nightly_schedule,
    tenant_run_config,
    tenant_sensor,
)
from pipeline import tables
from pipeline.config import Paths
from pipeline.ingest.folder import TYPED_TABLES
from pipeline.publish.analytics import WAREHOUSE_TABLES
from pipeline.publish.snapshot_parts import INGEST_TABLES
from pipeline.storage import owed
from pipeline.tables import BOOKKEEPING, TABLES, asset_name

warnings.filterwarnings("ignore", category=dg.BetaWarning)

SPEC_ASSETS = {
    "raw_events",
    "interactions",
    "feedback",
    "memory_statements",
    "feedback_scores",
    "decay_snapshots",
    "memory_embeddings",
    "consolidated_summaries",
    "memory_conflicts",
    "few_shot_sets",
    "preference_pairs",
    "dpo_policy",
    "refined_templates",
    "skill_stats",
    "memory_pack",
    "analytics_snapshot",
}


def test_every_spec_asset_is_defined() -> None:
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert keys >= SPEC_ASSETS


def test_the_graph_flows_one_way_through_the_stage_groups() -> None:
    """No edge from a later group to an earlier one: the UI's groups read in data order."""
    graph = defs.resolve_asset_graph()
    backwards = []
    for key in graph.get_all_asset_keys():
        node = graph.get(key)
        assert node.group_name in STAGES, key
        for parent in node.parent_keys:
            if STAGES.index(graph.get(parent).group_name) > STAGES.index(node.group_name):
                backwards.append(f"{parent.to_user_string()} -> {key.to_user_string()}")
    assert backwards == []


ASSETS_FOLDER = Path(__file__).parent.parent / "assets"
WRITES = ("write", "write_partition")


def _lake_writes() -> dict[str, str]:
    """Every lake table a module of assets/ writes (`….lake.write("name", …)` or `lake.write…`),
    → where. A name that is not a literal fails: this test could not see which table it is."""
    found: dict[str, str] = {}
    for module in sorted(ASSETS_FOLDER.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            target = node.func.value
            on_lake = (isinstance(target, ast.Name) and target.id == "lake") or (
                isinstance(target, ast.Attribute) and target.attr == "lake"
            )
            if node.func.attr not in WRITES or not on_lake:
                continue
            where = f"{module.name}:{node.lineno}"
            name = node.args[0]
            assert isinstance(name, ast.Constant) and isinstance(name.value, str), where
            found[name.value] = where
    return found


def test_every_lake_table_an_asset_writes_is_an_asset() -> None:
    """A table written beside an asset's main one is an asset too (a spec of the same step, with
    its partitions), so the lineage the UI shows is the lineage in the code."""
    graph = defs.resolve_asset_graph()
    written = _lake_writes() | {
        name: "pipeline.ingest.layout (typed tables)" for name in TYPED_TABLES
    }
    assert len(written) >= 25  # the scan sees the writes (a renamed resource would hide them)
    for table, where in written.items():
        key = dg.AssetKey(asset_name(table))
        assert graph.has(key), f"{table} (written at {where}) is not an asset"
        writer = {k.to_user_string() for k in graph.get(key).execution_set_asset_keys}
        # Written by the step that materializes it, with that step's partitions.
        assert len({graph.get(dg.AssetKey(k)).partitions_def for k in writer}) == 1, table


def test_the_analytics_build_reads_every_warehouse_table_and_declares_it() -> None:
    """Every lake table an asset writes is in the warehouse or named bookkeeping, and the
    analytics build depends on each warehouse table it loads."""
    graph = defs.resolve_asset_graph()
    written = set(_lake_writes()) | set(TYPED_TABLES)
    assert written - set(WAREHOUSE_TABLES) == set(BOOKKEEPING)
    assert set(WAREHOUSE_TABLES) <= written
    parents = {k.to_user_string() for k in graph.get(dg.AssetKey("analytics_snapshot")).parent_keys}
    assert parents == {asset_name(t) for t in WAREHOUSE_TABLES} | {"memory_pack", "analytics_part"}
    # A tenant's part reads its own tables and its rows of events, after its pack; ingest's part
    # (quarantine, ingest_stats) is made by the step that writes them.
    parents = {k.to_user_string() for k in graph.get(dg.AssetKey("analytics_part")).parent_keys}
    assert parents == {
        asset_name(t) for t in WAREHOUSE_TABLES if t not in INGEST_TABLES | {"pack_versions"}
    } | {"memory_pack"}


READS = ("read", "read_or_empty", "table", "exists", "partition_keys")
# Steps that read their inputs through one pipeline function driven by the same list that declares
# their dependencies (memory_pack: pack.inputs.INPUT_TABLES, with a dated decay snapshot and
# load-date filters; the analytics build and a tenant's part of it: analytics.WAREHOUSE_TABLES,
# loaded by DuckDB), or only
# the partitions of their input that changed (typed_event_tables: raw_events' changed load dates,
# pipeline.ingest.layout).
LIST_DRIVEN = {"memory_pack", "analytics_part", "analytics_snapshot", "typed_event_tables"}


def _step_functions() -> dict[str, ast.FunctionDef]:
    """Every function of assets/ by name (a step's function has its node's name)."""
    return {
        node.name: node
        for module in sorted(ASSETS_FOLDER.glob("*.py"))
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.FunctionDef)
    }


def _tables_named_in_reads(function: ast.FunctionDef) -> set[str]:
    """Literal table names a function passes to a lake read (`….read("x")`, `home.table("x")`)."""
    return {
        node.args[0].value
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in READS
        and node.args
        and isinstance(node.args[0], ast.Constant)
        and isinstance(node.args[0].value, str)
    }


def test_a_step_reads_exactly_the_tables_it_declares() -> None:
    """Declared hand-offs (issue 15): each upstream table a step reads is one of its inputs
    (`ins=reads(...)`, loaded by assets/handoffs.py), and every dependency is read. By name, a
    step reads only its own tables (its previous output, incremental) and its inputs' folders'
    partition keys; no upstream table is read behind the graph's back."""
    graph = defs.resolve_asset_graph()
    functions = _step_functions()
    seen = set()
    for assets_def in graph.assets_defs:
        name = assets_def.node_def.name if assets_def.is_executable else ""
        if name not in functions or name in LIST_DRIVEN:
            continue
        own = {tables.table_name(k.to_user_string()) for k in assets_def.keys}
        loaded = {  # inputs with a value (a declared dependency alone is a Nothing input)
            assets_def.keys_by_input_name[i.name].to_user_string()
            for i in assets_def.node_def.input_defs
            if not i.dagster_type.is_nothing
        }
        parents = {p.to_user_string() for k in assets_def.keys for p in graph.get(k).parent_keys}
        parents -= {k.to_user_string() for k in assets_def.keys}
        seen.add(name)
        # the policies are files in the models folder, no lake table
        assert loaded == parents - {"dpo_policy", "policy_training"}, name
        named = _tables_named_in_reads(functions[name])
        assert named - own <= {tables.table_name(p) for p in loaded}, (name, named - own)
    assert len(seen) >= 9  # the scan saw the steps


def test_every_asset_with_a_lake_table_shows_its_declared_columns_before_any_run() -> None:
    """Column schema, descriptions and primary key come from pipeline.tables for every asset
    that is a lake table, and every asset that is one has an asset."""
    graph = defs.resolve_asset_graph()
    shown = {}
    for table in TABLES.values():
        if table.asset is None:
            continue
        assert graph.has(dg.AssetKey(table.asset)), table.name
        shown[table.name] = graph.get(dg.AssetKey(table.asset)).metadata["dagster/column_schema"]
    for name, value in shown.items():
        assert [(c.name, c.type) for c in value.schema.columns] == [
            (c, str(t)) for c, t in TABLES[name].columns.items()
        ], name
    assert len(shown) == 29
    runs = {c.name: c for c in shown["dpo_runs"].schema.columns}
    assert len(runs) == 24
    assert (runs["eval_accuracy"].type, runs["is_latest"].type) == ("Float64", "Boolean")
    assert runs["length_rule_accuracy"].description == (
        "the longer reply wins, a tie counts half: 0 to 1"
    )
    assert not runs["run_at"].constraints.nullable and runs["policy_id"].constraints.nullable
    assert shown["dpo_runs"].schema.constraints.other == ["primary key (tenant_id, run_at)"]
    assert shown["memory_audit"].schema.constraints.other == []  # findings: no key
    assert "dagster/column_schema" not in graph.get(dg.AssetKey("memory_pack")).metadata


def test_every_asset_has_an_owner_kinds_and_a_code_version() -> None:
    graph = defs.resolve_asset_graph()
    nodes = {k.to_user_string(): graph.get(k) for k in graph.get_all_asset_keys()}
    assert {n.owners[0] for n in nodes.values()} == {"team:memorypack"}
    assert all(n.kinds and n.code_version and len(n.code_version) == 12 for n in nodes.values())
    assert nodes["dpo_policy"].kinds >= {"pytorch", "polars", "parquet", "duckdb"}
    assert nodes["analytics_snapshot"].kinds == {"duckdb"}
    # The typed tables come from one function, so they share its version; others differ.
    assert nodes["interactions"].code_version == nodes["feedback"].code_version
    assert nodes["feedback_scores"].code_version != nodes["feedback"].code_version


def test_frame_metadata_has_the_column_schema_and_a_table_preview() -> None:
    import polars as pl

    from assets.metadata import frame_metadata

    frame = pl.DataFrame({"id": ["a", "b"], "n": [1, None], "tags": [["x", "y"], []]})
    meta = frame_metadata(frame, {"share": 0.5})
    assert [(c.name, c.type) for c in meta["dagster/column_schema"].schema.columns] == [
        ("id", "String"),
        ("n", "Int64"),
        ("tags", "List(String)"),
    ]
    assert [r.data for r in meta["preview"].records] == [
        {"id": "a", "n": 1, "tags": "['x', 'y']"},
        {"id": "b", "n": None, "tags": "[]"},
    ]
    assert meta["dagster/row_count"].value == 2 and meta["share"].value == 0.5


def test_the_night_is_three_jobs_and_its_schedule_and_sensors() -> None:
    """Ingest by load date; each tenant on its own; the analytics build after."""
    jobs = {name: defs.resolve_job_def(name) for name in ("ingest", "tenant_nightly", "analytics")}
    assert isinstance(jobs["ingest"].partitions_def, dg.DailyPartitionsDefinition)
    assert jobs["tenant_nightly"].partitions_def == TENANTS
    assert jobs["analytics"].partitions_def is None
    schedule = defs.resolve_schedule_def("nightly_schedule")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.execution_timezone == "UTC"
    assert schedule.job_name == "ingest"
    # README: nightly runs at 02:00 out of the box; the landing sensor is switched on by hand.
    assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    sensor = defs.resolve_sensor_def("landing_sensor")
    assert sensor.job_name == "ingest"
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED
    for name in ("tenant_sensor", "training_sensor", "analytics_sensor"):
        assert defs.resolve_sensor_def(name).default_status == dg.DefaultSensorStatus.RUNNING


def test_training_is_off_the_packs_path_in_its_own_job() -> None:
    """A tenant's run ships the newest finished policy (dpo_policy) and publishes; the next
    policy trains in tenant_training, which holds no asset of the pack's path. The lineage says
    where a shipped policy comes from: policy_training → dpo_policy → refined_templates."""
    graph = defs.resolve_asset_graph()
    training = defs.resolve_job_def("tenant_training")
    assert training.partitions_def == TENANTS
    assert {k.to_user_string() for k in training.asset_layer.executable_asset_keys} == {
        "policy_training"
    }
    for name in ("tenant_nightly", "tenant_nightly_fast"):
        keys = defs.resolve_job_def(name).asset_layer.executable_asset_keys
        assert dg.AssetKey("policy_training") not in keys
        assert {dg.AssetKey("dpo_policy"), dg.AssetKey("memory_pack")} <= set(keys)
    parents = {p.to_user_string() for p in graph.get(dg.AssetKey("dpo_policy")).parent_keys}
    assert parents == {"policy_training", "preference_pairs", "interactions", "feedback_scores"}
    assert {p.to_user_string() for p in graph.get(dg.AssetKey("policy_training")).parent_keys} == {
        "preference_pairs",
        "interactions",
        "feedback_scores",
    }


def test_the_fast_tenant_job_differs_only_in_its_config_tree() -> None:
    """tenant_nightly_fast: the same assets and partitions as tenant_nightly; its run config is
    the settings tree of assets/config.py FAST (tests, the demo and `run --fast` use it)."""
    full, fast = (defs.resolve_job_def(n) for n in ("tenant_nightly", "tenant_nightly_fast"))
    assert fast.partitions_def == full.partitions_def == TENANTS
    assert set(fast.asset_layer.executable_asset_keys) == set(
        full.asset_layer.executable_asset_keys
    )
    assert fast.get_run_config_for_partition_key("acme") == settings_config(FAST)
    assert full.get_run_config_for_partition_key("acme") == {}
    assert settings_config(FAST)["resources"]["settings"]["config"]["dpo"]["max_steps"] == 10


def test_every_asset_after_ingest_is_partitioned_by_tenant() -> None:
    graph = defs.resolve_asset_graph()
    by_key = {
        key.to_user_string(): graph.get(key).partitions_def
        for key in graph.materializable_asset_keys
    }
    ingest = {
        "raw_events",
        "quarantine",
        "ingest_stats",
        "interactions",
        "feedback",
        "memory_statements",
    }
    assert {k for k, p in by_key.items() if p == TENANTS} == set(by_key) - ingest - {
        "analytics_snapshot"
    }
    assert by_key["analytics_snapshot"] is None


def test_the_tenant_sensor_launches_one_run_per_changed_tenant(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MEMORYPACK_HOME", str(tmp_path))
    with dg.instance_for_test() as instance:
        start = tenant_sensor(dg.build_sensor_context(instance=instance))  # starts from now
        changed = {"acme": ["2026-11-01", "2026-11-02"], "globex": ["2026-11-02"]}
        instance.report_runless_asset_event(
            dg.AssetMaterialization("interactions", metadata={"changed": changed})
        )
        result = tenant_sensor(dg.build_sensor_context(instance=instance, cursor=start.cursor))
        requests = {r.partition_key: r for r in result.run_requests}
        assert set(requests) == {"acme", "globex"}
        assert requests["acme"].run_config == {
            "ops": {"decay_snapshots": {"config": {"load_dates": changed["acme"]}}}
        }
        assert requests["globex"].tags[TENANT_TAG] == f"{tmp_path}:globex"
        again = tenant_sensor(dg.build_sensor_context(instance=instance, cursor=result.cursor))
        assert again.run_requests == []  # nothing new ingested


def test_the_tenant_sensor_runs_a_tenant_its_pack_still_owes_once(
    tmp_path: Path, monkeypatch
) -> None:
    """A tenant whose run failed (or whose worker was killed) keeps what its pack owes: the next
    tick asks for one run of it, unless a run of it is waiting or an ingest is under way."""
    monkeypatch.setenv("MEMORYPACK_HOME", str(tmp_path))
    paths = Paths.from_env()
    with dg.instance_for_test() as instance:
        start = tenant_sensor(dg.build_sensor_context(instance=instance))  # starts from now
        for tenant in ("acme", "globex", "initech"):
            owed.record(paths, tenant, "2026-11-02")
        owed.record(paths, "acme", "2026-11-03")
        instance.add_dynamic_partitions("tenants", ["acme", "globex", "initech"])
        tenant_job = defs.resolve_job_def("tenant_nightly")
        instance.create_run_for_job(tenant_job, tags={TENANT_TAG: f"{tmp_path}:globex"})
        changed = {"initech": ["2026-11-02"]}  # also just ingested: asked for once, not twice
        instance.report_runless_asset_event(
            dg.AssetMaterialization("interactions", metadata={"changed": changed})
        )
        result = tenant_sensor(dg.build_sensor_context(instance=instance, cursor=start.cursor))
        requests = sorted((r.partition_key, r.run_key) for r in result.run_requests)
        assert [tenant for tenant, _ in requests] == ["acme", "initech"]
        acme = next(r for r in result.run_requests if r.partition_key == "acme")
        assert acme.run_key and acme.run_key.startswith("owed:acme:")
        assert acme.run_config == tenant_run_config(["2026-11-02", "2026-11-03"])
        # the daemon launches both; acme's fails again: asked for under the same key, which the
        # daemon does not launch twice (no retry loop), while initech's run is still queued
        runs = {
            r.partition_key: instance.create_run_for_job(tenant_job, tags=r.tags)
            for r in result.run_requests
        }
        instance.report_run_failed(runs["acme"])
        again = tenant_sensor(dg.build_sensor_context(instance=instance, cursor=result.cursor))
        assert [r.run_key for r in again.run_requests] == [acme.run_key]
        instance.create_run_for_job(defs.resolve_job_def("ingest"), tags={})
        during_ingest = tenant_sensor(
            dg.build_sensor_context(instance=instance, cursor=start.cursor)
        )
        # ingest is under way: only what it changed (from the start: initech's again), nothing owed
        assert [r.partition_key for r in during_ingest.run_requests] == ["initech"]


def test_the_analytics_build_waits_for_the_tenant_runs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MEMORYPACK_HOME", str(tmp_path))
    with dg.instance_for_test() as instance:
        start = analytics_sensor(dg.build_sensor_context(instance=instance))  # starts from now
        assert isinstance(start, dg.SensorResult) and start.run_requests == []
        nothing = analytics_sensor(dg.build_sensor_context(instance=instance, cursor=start.cursor))
        assert isinstance(nothing, dg.SkipReason)
        instance.report_runless_asset_event(
            dg.AssetMaterialization("memory_pack", partition="acme")
        )
        instance.add_dynamic_partitions("tenants", ["acme"])
        queued = instance.create_run_for_job(
            defs.resolve_job_def("tenant_nightly"), tags={"dagster/partition": "acme"}
        )
        instance.report_run_canceled(queued)  # not active: the build may start
        ready = analytics_sensor(dg.build_sensor_context(instance=instance, cursor=start.cursor))
        assert not isinstance(ready, dg.SkipReason) and len(ready.run_requests) == 1


def test_schedule_targets_the_day_that_ended_once() -> None:
    from datetime import datetime

    from dagster._core.test_utils import create_run_for_test

    tick = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
    # the context enters the instance, so it is closed as one too (else the instance's state
    # storage stays current for every later test in the process)
    with (
        dg.instance_for_test() as instance,
        dg.build_schedule_context(instance=instance, scheduled_execution_time=tick) as context,
    ):
        request = nightly_schedule(context)
        assert isinstance(request, dg.RunRequest) and request.partition_key == "2026-11-20"
        # a manual run of that date does not count; the schedule's own run does
        create_run_for_test(instance, job_name="ingest", tags={"dagster/partition": "2026-11-20"})
        assert isinstance(nightly_schedule(context), dg.RunRequest)
        tags = {"dagster/partition": "2026-11-20", "dagster/schedule_name": "nightly_schedule"}
        create_run_for_test(instance, job_name="ingest", tags=tags)
        skipped = nightly_schedule(context)
        assert isinstance(skipped, dg.SkipReason)
        assert skipped.skip_message == "2026-11-20 was already ingested by the schedule"


def test_sensor_requests_new_and_changed_folders(tmp_path: Path, monkeypatch) -> None:
    landing = tmp_path / "landing"
    (landing / "2026-11-01").mkdir(parents=True)
    (landing / "2026-11-01" / "a.jsonl").write_text("{}\n")
    (landing / "not-a-date").mkdir()
    monkeypatch.setenv("MEMORYPACK_LANDING", str(landing))
    first = landing_sensor(dg.build_sensor_context())
    assert first.run_requests == []  # starts from now: what was there is the operator's
    monkeypatch.setenv("MEMORYPACK_SENSORS_CATCH_UP", "1")
    caught_up = landing_sensor(dg.build_sensor_context())
    assert [r.partition_key for r in caught_up.run_requests] == ["2026-11-01"]
    cursor = first.cursor
    unchanged = landing_sensor(dg.build_sensor_context(cursor=cursor))
    assert unchanged.run_requests == []
    (landing / "2026-11-01" / "b.jsonl").write_text("{}\n")
    (landing / "2026-11-02").mkdir()
    (landing / "2026-11-02" / "a.jsonl.gz").write_bytes(b"")
    changed = landing_sensor(dg.build_sensor_context(cursor=cursor))
    assert sorted(r.partition_key for r in changed.run_requests) == ["2026-11-01", "2026-11-02"]
    assert set(json.loads(changed.cursor)) == set(landing_fingerprints(landing))
