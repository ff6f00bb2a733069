"""Training off the pack's path (issue 53 item 4): a pack ships the newest finished policy, a
tenant's first night trains a small one in its run, the configured one is due after the publish,
and the training sensor starts a tenant's training run after its pack run succeeded."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets.config import StageSettings, settings_config
from assets.partitions import TENANTS
from jobs.instance import PROCESS_TAG, TRAINING_TAG
from jobs.nightly import TRAINING_PRIORITY, training_sensor
from jobs.runner import run_nightly
from memorypack.format import read_latest
from pipeline.config import Paths
from pipeline.generate import generate
from pipeline.generate.preference import planted_mined_pairs
from pipeline.preference.dpo import (
    MINED,
    RUN_FILE,
    STATUS_SKIPPED,
    STATUS_TRAINED,
    DPOPolicyConfig,
    policy_id_for,
)
from pipeline.preference.dpo.runs import consistent_sample, finished_runs
from pipeline.preference.dpo.settings import TRAINED_AT
from pipeline.preference.dpo.shipped import BUSY, ship_policy, training_due
from pipeline.preference.pairs import finalize_pairs
from pipeline.storage.homelock import training_scope
from tests.test_homelock import held_elsewhere

CONFIG = DPOPolicyConfig(min_pairs=5, max_length=96, n_embd=64, vocab_size=800)


def _train_pairs(n: int, tenant: str = "acme") -> pl.DataFrame:
    return pl.DataFrame(
        {"tenant_id": [tenant] * n, "pair_id": [f"{i:064x}" for i in range(n)], "split": "train"}
    )


def _saved(
    models: Path, tenant: str, pairs: pl.DataFrame, config: DPOPolicyConfig, at: str, mined: int
) -> str:
    """A finished policy as training leaves it (only its run.json matters here): its id."""
    sample = consistent_sample(pairs, config.max_train_pairs)
    policy_id = policy_id_for(tenant, sample, config)
    (models / policy_id).mkdir(parents=True)
    run = {
        "tenant_id": tenant,
        "policy_id": policy_id,
        "status": STATUS_TRAINED,
        "n_train": sample.height,
        "n_eval": 0,
        "steps": config.max_steps,
        "model_dir": str(models / policy_id),
        MINED: mined,
        TRAINED_AT: at,
        "config": json.loads(config.fingerprint()),
    }
    (models / policy_id / RUN_FILE).write_text(json.dumps(run))
    return policy_id


def _never() -> pl.DataFrame:
    raise AssertionError("a pack that has a finished policy reads no pairs")


def test_the_first_policy_is_small_unless_the_configured_one_is() -> None:
    first = DPOPolicyConfig().first_policy()
    assert (first.max_steps, first.sft_num_train_epochs) == (10, 0.0)
    assert first.fingerprint() != DPOPolicyConfig().fingerprint()
    smoke = DPOPolicyConfig(max_steps=10, sft_num_train_epochs=0.0)
    assert smoke.first_policy() == smoke  # nothing to train after the publish
    assert DPOPolicyConfig(max_steps=4).first_policy().max_steps == 4
    assert DPOPolicyConfig(first_max_steps=0).first_policy() == DPOPolicyConfig(first_max_steps=0)


def test_a_pack_ships_the_newest_finished_policy_of_any_config(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    pairs = _train_pairs(20)
    small = _saved(paths.models, "acme", pairs, CONFIG.first_policy(), "2026-11-02T02:00:00", 20)
    full = _saved(paths.models, "acme", pairs, CONFIG, "2026-11-02T02:30:00", 20)
    _saved(paths.models, "acme-eu", pairs, CONFIG, "2026-11-03T00:00:00", 20)  # another tenant
    (paths.models / "acme-000000000000").mkdir()  # a policy whose write never finished
    assert [r["policy_id"] for r in finished_runs("acme", paths.models)] == [full, small]
    run = ship_policy(paths, _never, _never, CONFIG, "acme")
    assert (run.policy_id, run.status, run.reused) == (full, STATUS_TRAINED, True)
    assert run.model_dir == str(paths.models / full)


def test_a_first_night_waits_for_no_training_under_way(tmp_path: Path) -> None:
    """With no finished policy and the tenant's training lock held by a training run, the pack
    goes on without a policy (its templates stay the registry's) instead of waiting."""
    paths = Paths(tmp_path)
    with held_elsewhere(paths.local, training_scope("acme")):
        run = ship_policy(paths, _never, _never, CONFIG, "acme")
    assert (run.policy_id, run.status, run.skipped_reason) == (None, STATUS_SKIPPED, BUSY)


@pytest.mark.slow
def test_a_first_night_trains_the_small_policy_in_its_run(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    pairs = finalize_pairs(planted_mined_pairs(30, seed=2))
    sft = pairs.filter(pl.col("split") == "train").select(
        "tenant_id", "prompt", pl.col("chosen").alias("completion")
    )
    config = replace(CONFIG, first_max_steps=3)
    run = ship_policy(paths, lambda: pairs, lambda: sft, config, "acme")
    assert (run.status, run.steps, run.n_sft, run.reused) == (STATUS_TRAINED, 3, 0, False)
    saved = json.loads((paths.models / str(run.policy_id) / RUN_FILE).read_text())
    assert saved["config"] == json.loads(config.first_policy().fingerprint())
    # the configured policy is still due: it trains after the publish
    train = pairs.filter(pl.col("split") == "train").select("tenant_id", "pair_id")
    assert training_due(train, config, paths, "acme") == "no policy of its config yet"


def test_the_configured_policy_is_due_until_trained_and_again_after_growth(tmp_path: Path) -> None:
    paths = Paths(tmp_path)
    pairs = _train_pairs(20)
    _saved(paths.models, "acme", pairs, CONFIG.first_policy(), "2026-11-02T02:00:00", 20)
    assert training_due(pairs, CONFIG, paths, "acme") == "no policy of its config yet"
    assert training_due(pairs.head(4), CONFIG, paths, "acme") is None  # under min_pairs: skips
    _saved(paths.models, "acme", pairs, CONFIG, "2026-11-02T02:30:00", 20)
    assert training_due(pairs, CONFIG, paths, "acme") is None
    assert training_due(_train_pairs(23), CONFIG, paths, "acme") is None  # +15 %: reused
    grown = training_due(_train_pairs(24), CONFIG, paths, "acme")  # +20 %
    assert grown == "its train pairs grew from 20 to 24 (retrain_growth 20%)"


def _tenant_run(
    instance: dg.DagsterInstance, due: bool, tags: dict[str, str] | None = None
) -> dg.ExecuteInProcessResult:
    """A successful run of acme whose dpo_policy said whether training is due (a stand-in asset
    of the same key, partitions and settings as the tenant job's)."""

    @dg.asset(name="dpo_policy", partitions_def=TENANTS)
    def stand_in(settings: StageSettings) -> dg.MaterializeResult:
        return dg.MaterializeResult(metadata={"training_due": due})

    return dg.materialize(
        [stand_in],
        instance=instance,
        partition_key="acme",
        resources={"settings": StageSettings.configure_at_launch()},
        run_config=settings_config({"dpo": {"max_steps": 40}}),
        tags=tags,
    )


def test_the_training_sensor_trains_after_a_pack_run_that_found_it_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORYPACK_HOME", str(tmp_path))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", ["acme"])
        for due in (True, False):
            result = _tenant_run(instance, due)
            context = dg.build_run_status_sensor_context(
                sensor_name="training_sensor",
                dagster_event=result.get_run_success_event(),
                dagster_instance=instance,
                dagster_run=result.dagster_run,
            )
            request = training_sensor(context)
            if not due:
                assert isinstance(request, dg.SkipReason)
                continue
            assert isinstance(request, dg.RunRequest)
            assert (request.job_name, request.partition_key) == ("tenant_training", "acme")
            assert request.tags == {
                TRAINING_TAG: f"{tmp_path}:acme",
                "dagster/priority": TRAINING_PRIORITY,
            }
            # the settings of the run that found it due: the same policy config
            assert request.run_config == settings_config({"dpo": {"max_steps": 40}})
            assert request.run_key == f"training:{result.run_id}"


def test_the_training_sensor_starts_from_now_and_leaves_memorypack_runs_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first tick (a new instance, a first `make ui`) trains nothing that finished before it;
    a tenant run `memorypack run` made trains in that night, not again from the sensor."""
    monkeypatch.setenv("MEMORYPACK_HOME", str(tmp_path))
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", ["acme"])
        _tenant_run(instance, due=True)  # history: due, before the sensor ever ran
        first = training_sensor.evaluate_tick(dg.build_sensor_context(instance=instance))
        assert first.run_requests == [] and first.cursor
        again = training_sensor.evaluate_tick(
            dg.build_sensor_context(instance=instance, cursor=first.cursor)
        )
        assert again.run_requests == []
        cli = _tenant_run(instance, due=True, tags={PROCESS_TAG: "4242"})
        context = dg.build_run_status_sensor_context(
            sensor_name="training_sensor",
            dagster_event=cli.get_run_success_event(),
            dagster_instance=instance,
            dagster_run=cli.dagster_run,
        )
        assert isinstance(training_sensor(context), dg.SkipReason)


# A policy small enough for a night in a test: the first one 2 DPO steps, the configured one 4.
NIGHT_DPO = {
    "dpo": {
        "min_pairs": 2,
        "max_steps": 4,
        "sft_num_train_epochs": 0.0,
        "first_max_steps": 2,
        "max_length": 96,
        "n_embd": 64,
        "vocab_size": 800,
    }
}


def _shipped(home: Path, tenant: str) -> str | None:
    """The policy id the tenant's live pack names."""
    folder = home / "packs" / tenant
    live = folder / str(read_latest(folder))
    return json.loads((live / "manifest.json").read_text())["models"]["policy_id"]


@pytest.mark.slow
def test_a_night_publishes_before_the_next_policy_trains(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first night's pack ships the small policy its run trained; the configured policy
    trains after the publish (a training run of the night); the next night's pack ships it."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    landing, home = tmp_path / "landing", tmp_path / "home"
    generate(landing, days=2, interactions=80, tenants=1, seed=4, start=date(2026, 11, 1))
    first = run_nightly(home, landing, "2026-11-01", "2026-11-01", settings=NIGHT_DPO)
    assert first.success, (first.failed_step, first.error)
    (tenant,) = first.tenants
    assert first.tenants[tenant].training_due and list(first.trainings) == [tenant]
    assert first.trainings[tenant].success, first.trainings[tenant].error
    runs = {r["steps"]: r for r in finished_runs(tenant, Paths(home).models)}
    assert sorted(runs) == [2, 4]  # the first policy, then the configured one
    assert _shipped(home, tenant) == runs[2]["policy_id"]
    second = run_nightly(home, landing, "2026-11-02", "2026-11-02", settings=NIGHT_DPO)
    assert second.success, (second.failed_step, second.error)
    assert _shipped(home, tenant) == runs[4]["policy_id"]


def test_a_training_run_holds_its_tenants_training_lock_not_its_tenant_lock() -> None:
    """So a tenant's pack run never waits for its training, and an erasure (which takes both)
    never races one."""
    from assets.resources import run_scope
    from jobs.definitions import defs
    from pipeline.storage.homelock import scope_tenant

    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("tenants", ["acme"])
        tags = {"dagster/partition": "acme"}
        runs = {
            job: instance.create_run_for_job(defs.resolve_job_def(job), tags=tags)
            for job in ("tenant_training", "tenant_nightly")
        }
        assert run_scope(runs["tenant_training"], instance) == training_scope("acme")
        assert run_scope(runs["tenant_nightly"], instance) == "acme"
    assert training_scope("acme") == "acme.training"
    assert scope_tenant("acme.training") == scope_tenant("acme") == "acme"
