"""Preference assets end to end on a tiny lake: pairs → DPO policy (or a skip) → templates, checks."""

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from assets.config import DPOPolicyRun, StageSettings, settings_config
from assets.preference import ASSETS, CHECKS, learning_beats_baselines
from assets.preference_policy import policy_training
from assets.resources import MemorypackHome
from pipeline.config import Paths
from pipeline.generate.preference import planted_mined_pairs
from pipeline.ingest import contracts
from pipeline.preference.dpo import (
    STATUS_TRAINED,
    DPOPolicyConfig,
    PolicyRun,
    learning_verdict,
    length_rule_accuracy,
    runs_frame,
    wilson_interval,
)
from pipeline.preference.templates import load_registry
from pipeline.storage.lake import Lake
from pipeline.storage.warehouse import Warehouse
from tests.tenant_runs import build_analytics, declared, materialize_tenant, write_by_tenant

TENANTS = ("acme", "tiny")
RUN_CONFIG = {"dpo": {"num_train_epochs": 2.0, "sft_num_train_epochs": 1.0, "min_pairs": 10}}


def _write_lake(home: Path) -> None:
    """acme: 40 interactions corrected from rude/rambling to polite/concise (too_verbose);
    tiny: 2 corrections only → its policy is skipped. Each tenant's rows in its own folders."""
    mined = pl.concat(
        [
            planted_mined_pairs(40, seed=3, tenant="acme"),
            planted_mined_pairs(2, seed=4, tenant="tiny"),
        ]
    )
    inter = mined.select(
        "tenant_id",
        pl.col("rejected_id").alias("event_id"),
        pl.col("prompt").alias("input"),
        pl.col("rejected").alias("output"),
        "skill_id",
    )
    write_by_tenant(
        home,
        "interactions",
        inter.with_columns(
            pl.lit(None, dtype=dt).alias(c)
            for c, dt in contracts.INTERACTION_SCHEMA.items()
            if c not in inter.columns
        )
        .select(list(contracts.INTERACTION_SCHEMA))
        .cast(contracts.INTERACTION_SCHEMA),  # type: ignore[arg-type]
    )
    fb = mined.select(
        "tenant_id",
        pl.col("chosen_id").alias("event_id"),
        pl.col("rejected_id").alias("target_id"),
        pl.lit("correction").alias("signal"),
        pl.lit("too_verbose").alias("reason"),
        pl.col("chosen").alias("corrected_output"),
    )
    write_by_tenant(
        home,
        "feedback",
        fb.with_columns(
            pl.lit(None, dtype=dt).alias(c)
            for c, dt in contracts.FEEDBACK_SCHEMA.items()
            if c not in fb.columns
        )
        .select(list(contracts.FEEDBACK_SCHEMA))
        .cast(contracts.FEEDBACK_SCHEMA),  # type: ignore[arg-type]
    )
    write_by_tenant(
        home,
        "feedback_scores",
        inter.select(
            "tenant_id",
            pl.col("event_id").alias("memory_id"),
            pl.lit(1).alias("n_feedback"),
            pl.lit(-0.3).alias("quality_score"),
            pl.lit(-0.6).alias("quality_lower"),
            pl.lit(0).alias("n_positive"),
            pl.lit(1).alias("n_negative"),
        ),
    )
    # few_shot_sets / memory_embeddings are produced by other stages: left out (read as empty).


@pytest.mark.slow
def test_preference_assets_train_refine_and_check(tmp_path: Path) -> None:
    """A tenant's first night ships a small policy trained in its run; the configured one trains
    after the publish in a run of its own, and the next night ships it."""
    home = tmp_path / "home"
    _write_lake(home)
    with dg.instance_for_test() as instance:
        first = _run_tenants(home, instance)
        meta = {t: _policy_meta(r) for t, r in first.items()}
        assert {t: m["training_due"].value for t, m in meta.items()} == {
            "acme": True,
            "tiny": False,  # under min_pairs: nothing to train
        }
        (small,) = (
            Lake(Paths(home))
            .read("dpo_runs")
            .collect()
            .filter(pl.col("tenant_id") == "acme")
            .iter_rows(named=True)
        )
        assert (small["status"], small["steps"], small["n_sft"]) == ("trained", 10, 0)
        trained = materialize_tenant(
            [policy_training], home, instance, tenant="acme", settings=RUN_CONFIG
        )
        assert trained.success
        (training,) = trained.asset_materializations_for_node("policy_training")
        assert training.metadata["status"].value == "trained"
        # The next night: its run ships the policy trained after the first night's publish.
        results = _run_tenants(home, instance)
        checks = {
            t: {e.check_name: e.passed for e in r.get_asset_check_evaluations()}
            for t, r in results.items()
        }
        passed = {
            "pair_format_valid": True,
            "no_split_leakage": True,
            "eval_accuracy_recorded": True,
            "learning_beats_baselines": True,
            "current_template_per_skill": True,
            "training_ran": True,
        }
        assert checks == {tenant: passed for tenant in TENANTS}
        meta = {t: _policy_meta(r) for t, r in results.items()}
        shipped = {t: (m["status"].value, m["runs_recorded"].value) for t, m in meta.items()}
        assert shipped == {"acme": ("trained", 1), "tiny": ("skipped", 0)}
        assert not any(m["training_due"].value for m in meta.values())
        assert meta["acme"]["learning"].value == (
            "learning beats the length rule, and is not below chance, for every policy (1 judged)"
        )

    lake = Lake(Paths(home))
    pairs = lake.read("preference_pairs").collect()
    assert pairs.group_by("tenant_id").len().sort("tenant_id").rows() == [("acme", 40), ("tiny", 2)]
    assert set(pairs["source"]) == {"correction"}

    runs = lake.read("dpo_runs").collect().filter(pl.col("is_latest")).sort("tenant_id")
    acme, tiny = runs.row(0, named=True), runs.row(1, named=True)
    assert (
        acme["status"] == "trained"
        and acme["eval_accuracy"] > 0.5
        and acme["n_train"] + acme["n_eval"] == 40
        and acme["n_sft"] > 0  # the configured policy: SFT, then DPO for 2 epochs
        and acme["policy_id"] != small["policy_id"]
    )
    assert Path(acme["model_dir"], "policy", "model.safetensors").exists()
    # Beside the accuracy, on the same eval pairs: its 95 % interval and the two baselines. The
    # planted chosen replies are the concise ones, so the length rule gets every pair wrong.
    held_out = pl.read_parquet(Path(acme["model_dir"], "eval_pairs.parquet"))
    assert held_out.height == acme["n_eval"]
    assert acme["length_rule_accuracy"] == length_rule_accuracy(held_out) == 0.0
    assert (acme["eval_accuracy_low"], acme["eval_accuracy_high"]) == pytest.approx(
        wilson_interval(acme["eval_accuracy"], acme["n_eval"])
    )
    assert 0.0 <= acme["reference_accuracy"] <= 1.0
    assert acme["verdict"].startswith("learning beats the length rule: eval accuracy")
    assert tiny["verdict"] is None and tiny["length_rule_accuracy"] is None
    assert tiny["status"] == "skipped" and "min_pairs" in tiny["skipped_reason"]

    history = lake.read("template_history").collect()
    current = history.filter(pl.col("is_current"))
    assert current.group_by("tenant_id").len().sort("tenant_id").rows() == [
        ("acme", len(load_registry())),
        ("tiny", len(load_registry())),
    ]
    # tiny has no policy: its templates are the registry ones.
    assert set(current.filter(pl.col("tenant_id") == "tiny")["source"]) == {"registry"}
    refined = history.filter(pl.col("source") == "refined")
    for row in refined.iter_rows(named=True):
        evidence = json.loads(row["evidence"])
        assert row["policy_id"] in (small["policy_id"], acme["policy_id"])
        assert evidence["replaced"]["eval_accuracy"] < row["eval_accuracy"] or (
            evidence["replaced"]["eval_accuracy"] == row["eval_accuracy"]
            and evidence["replaced"]["eval_margin"] < row["eval_margin"]
        )

    # A third night, no new policy finished: the same one ships, which records no new run
    # (dpo_runs is unchanged, run_at included); template history is appended to, never lost.
    with dg.instance_for_test() as instance:
        again = _run_tenants(home, instance)
        assert [
            m.metadata["runs_recorded"].value
            for r in again.values()
            for m in r.asset_materializations_for_node("dpo_policy")
            if m.asset_key.path == ["dpo_policy"]
        ] == [0, 0]
        # Each tenant's memo is its own: acme's scores all come from it, tiny has none.
        memo = {t: _templates_meta(r) for t, r in again.items()}
        assert {t: (m["templates_scored"], m["scores_from_memo"] > 0) for t, m in memo.items()} == {
            "acme": (0, True),
            "tiny": (0, False),
        }
    scores = Lake(Paths(home)).files("template_scores")
    assert list(scores) == ["tenant_id=acme", "tenant_id=tiny"]  # each run wrote its own slice
    runs2 = lake.read("dpo_runs").collect().filter(pl.col("is_latest"))
    assert runs2.sort("tenant_id").equals(runs)
    history2 = lake.read("template_history").collect()
    assert history2.height == history.height  # nothing new wins against itself, nothing dropped
    with Warehouse(Paths(home)).connect(read_only=True) as con:
        counts = {
            t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("preference_pairs", "dpo_runs", "template_history")
        }  # type: ignore[index]
    assert counts == {"preference_pairs": 42, "dpo_runs": 3, "template_history": history2.height}


def _policy_meta(result: dg.ExecuteInProcessResult) -> dict[str, dg.MetadataValue]:
    found = result.asset_materializations_for_node("dpo_policy")
    return next(m.metadata for m in found if m.asset_key.path == ["dpo_policy"])


def _templates_meta(result: dg.ExecuteInProcessResult) -> dict[str, int]:
    found = result.asset_materializations_for_node("refined_templates")
    (meta,) = [m.metadata for m in found if m.asset_key.path == ["refined_templates"]]
    return {k: meta[k].value for k in ("templates_scored", "scores_from_memo")}  # type: ignore[misc]


def _run_tenants(home: Path, instance: dg.DagsterInstance) -> dict[str, dg.ExecuteInProcessResult]:
    """Each tenant's run of the preference assets, then the analytics build (the warehouse)."""
    pack_path = [a for a in ASSETS if a is not policy_training]  # training: a run of its own
    results = {
        tenant: materialize_tenant(
            [*pack_path, *CHECKS], home, instance, tenant=tenant, settings=RUN_CONFIG
        )
        for tenant in TENANTS
    }
    assert all(r.success for r in results.values())
    build_analytics(home, instance)
    return results


def _runs(rows: list[tuple[str, float, float, bool]]) -> pl.DataFrame:
    """`dpo_runs` history rows (tenant, eval accuracy on 40 pairs, length rule, is_latest)."""
    runs = []
    for tenant, accuracy, length, _ in rows:
        interval = wilson_interval(accuracy, 40)
        runs.append(
            PolicyRun(
                tenant,
                f"{tenant}-p",
                STATUS_TRAINED,
                n_train=160,
                n_eval=40,
                eval_accuracy=accuracy,
                eval_accuracy_low=interval[0],
                eval_accuracy_high=interval[1],
                reference_accuracy=0.5,
                length_rule_accuracy=length,
                verdict=learning_verdict(accuracy, interval, length, 0.5, 40),
            )
        )
    return runs_frame(runs).with_columns(
        pl.lit(datetime(2026, 11, 2, tzinfo=UTC)).alias("run_at"),
        pl.Series("is_latest", [latest for *_, latest in rows]),
    )


def test_baseline_check_warns_on_a_policy_below_chance_or_the_length_rule(tmp_path: Path) -> None:
    home = MemorypackHome(home=str(tmp_path))
    history = _runs(
        [
            ("good", 0.80, 0.30, True),
            ("old", 0.20, 0.70, False),  # an earlier run of a tenant: not judged
            ("newer", 0.75, 0.60, True),
        ]
    )
    home.lake.write("dpo_runs", declared("dpo_runs", history))
    quiet = learning_beats_baselines(dpo_runs=home.table("dpo_runs"))
    assert quiet.passed and quiet.severity == dg.AssetCheckSeverity.WARN
    assert quiet.metadata["short_of_baselines"].value == 0  # type: ignore[attr-defined]

    # Planted: 0.30 on 40 pairs (95 % interval 0.18–0.45) is below chance though it beats a 0.25
    # length rule; 0.60 is above chance but does not beat a 0.70 length rule.
    planted = pl.concat(
        [history, _runs([("chance", 0.30, 0.25, True), ("long", 0.60, 0.70, True)])]
    )
    home.lake.write("dpo_runs", declared("dpo_runs", planted))
    warned = learning_beats_baselines(dpo_runs=home.table("dpo_runs"))
    assert not warned.passed and warned.severity == dg.AssetCheckSeverity.WARN
    assert warned.metadata["short_of_baselines"].value == 2  # type: ignore[attr-defined]
    assert warned.description == (
        "chance: learning beats the length rule and is below chance: eval accuracy 0.30 "
        "(95 % interval 0.18–0.45, 40 pairs), length rule 0.25, reference model 0.50; "
        "long: learning does not beat the length rule: eval accuracy 0.60 "
        "(95 % interval 0.45–0.74, 40 pairs), length rule 0.70, reference model 0.50"
    )


def test_runs_recorded_before_baselines_still_read_and_pass(tmp_path: Path) -> None:
    home = MemorypackHome(home=str(tmp_path))
    new_columns = ["eval_accuracy_low", "eval_accuracy_high", "reference_accuracy"]
    new_columns += ["length_rule_accuracy", "verdict"]
    home.lake.write(
        "dpo_runs", declared("dpo_runs", _runs([("acme", 0.20, 0.70, True)]).drop(new_columns))
    )
    result = learning_beats_baselines(dpo_runs=home.table("dpo_runs"))
    assert result.passed  # unknown baselines are not judged
    (run,) = result.metadata["runs"].value  # type: ignore[attr-defined]
    assert run["eval_accuracy"] == 0.20 and run["length_rule_accuracy"] is None


def test_the_run_config_is_the_policy_config_and_its_loss() -> None:
    """The `dpo` section of the run's settings is generated from DPOPolicyConfig: every field
    reaches it under the same name (the loss too, which is part of the policy id), the defaults
    are the policy's, and a bad loss is refused by the policy's own rule."""
    assert DPOPolicyRun().build() == DPOPolicyConfig()
    chosen = DPOPolicyRun(loss_type="simpo", beta=2.0, simpo_gamma=1.0, n_embd=256)
    config = chosen.build()
    for name, value in chosen.model_dump().items():
        assert getattr(config, name) == (tuple(value) if isinstance(value, list) else value)
    assert set(chosen.model_dump()) == {f.name for f in dataclasses.fields(DPOPolicyConfig)}
    with pytest.raises(ValueError, match="DPO loss_type 'dpo' is not one of"):
        DPOPolicyRun(loss_type="dpo").build()


def test_one_settings_tree_reaches_every_stage_and_later_trees_win() -> None:
    """`settings_config` merges stage sections knob by knob (the fast job's tree, then a test's),
    and the resource builds each stage's dataclass from them."""
    tree = settings_config(
        {"dpo": {"max_steps": 10, "sft_num_train_epochs": 0.0}}, {"dpo": {"max_steps": 3}}
    )
    section = tree["resources"]["settings"]["config"]
    assert section == {"dpo": {"max_steps": 3, "sft_num_train_epochs": 0.0}}
    settings = StageSettings(dpo=DPOPolicyRun(**section["dpo"]))
    assert (
        settings.stage("dpo").max_steps == 3 and settings.stage("dpo").sft_num_train_epochs == 0.0
    )
    assert settings.stage("audit").promotion_min_repeats == 2  # untouched stages keep defaults
