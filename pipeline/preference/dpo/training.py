"""One night of the policy stage: the SFT examples, one policy per tenant (or one pooled), reused
when its data has not grown enough, written atomically under `<models>/<policy_id>/`."""

from __future__ import annotations

import copy
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.errors import one_line
from pipeline.preference.dpo.baselines import baseline_fields
from pipeline.preference.dpo.fit import dpo_fit, supervised_fit
from pipeline.preference.dpo.model import load_base, torch_setup, unpatch
from pipeline.preference.dpo.runs import (
    PolicyRun,
    consistent_sample,
    policy_id_for,
    reusable_run,
    run_of,
)
from pipeline.preference.dpo.scorer import PolicyScorer
from pipeline.preference.dpo.settings import (
    EVAL_FILE,
    HELD_OUT,
    MINED,
    POOLED_TENANT,
    RUN_FILE,
    STATUS_FAILED,
    STATUS_SKIPPED,
    STATUS_TRAINED,
    TRAINED_AT,
    DPOPolicyConfig,
    format_prompt,
)
from pipeline.progress import Progress, reporter

log = logging.getLogger(__name__)


def _corpus(train: pl.DataFrame, sft: pl.DataFrame) -> list[str]:
    texts = [format_prompt(p) for p in train["prompt"].to_list() + sft["prompt"].to_list()]
    return (
        texts
        + train["chosen"].to_list()
        + train["rejected"].to_list()
        + sft["completion"].to_list()
    )


def _save(model: Any, tokenizer: Any, folder: Path) -> None:
    model.save_pretrained(str(folder), safe_serialization=True)
    tokenizer.save_pretrained(str(folder))


def _with_baselines(saved: dict[str, Any], config: DPOPolicyConfig) -> dict[str, Any]:
    """A policy saved before baselines were recorded gets them once, from its frozen eval pairs;
    its run.json is rewritten (atomically) so later nights read them."""
    folder = Path(saved.get("model_dir") or "")
    if (
        "verdict" in saved
        or saved.get("eval_accuracy") is None
        or not (folder / EVAL_FILE).exists()
    ):
        return saved
    torch_setup(config)
    pairs = pl.read_parquet(folder / EVAL_FILE)
    reference_accuracy = PolicyScorer.load(folder, config.eval_batch_size).evaluate(pairs)[2]
    saved = {**saved, **baseline_fields(pairs, saved["eval_accuracy"], reference_accuracy)}
    tmp = folder / f".{RUN_FILE}.{uuid.uuid4().hex}.tmp"
    tmp.write_text(json.dumps(saved, indent=2, default=list))
    os.replace(tmp, folder / RUN_FILE)
    return saved


def train_policy(
    tenant_id: str,
    train: pl.DataFrame,
    eval_pairs: pl.DataFrame,
    sft_examples: pl.DataFrame,
    config: DPOPolicyConfig,
    models_dir: str | os.PathLike[str],
    progress: Progress | None = None,
) -> PolicyRun:
    """SFT then DPO for one tenant (or the pooled set); weights under `<models>/<policy_id>/`.
    A policy whose id (train pairs + config) already exists on disk is reused, not retrained.
    What it does, and every few seconds of training its step, epoch and loss, go to `progress`
    (default: the log)."""
    report = reporter(progress)
    n_train, n_eval = train.height, eval_pairs.height
    if n_train < config.min_pairs:
        return PolicyRun(
            tenant_id,
            None,
            STATUS_SKIPPED,
            skipped_reason=f"{n_train} train pairs < min_pairs {config.min_pairs}",
            n_train=n_train,
            n_eval=n_eval,
        )
    mined = n_train  # the growth rule compares what was mined, not the capped sample
    saved = reusable_run(tenant_id, train, config, models_dir)
    if saved is not None:
        growth = (
            f"{mined} mined train pairs; retrained once they grow by {config.retrain_growth:.0%}"
        )
        report(f"{tenant_id}: policy {saved['policy_id']} reused ({growth})")
        return run_of(_with_baselines(saved, config), tenant_id, models_dir)
    train = consistent_sample(train, config.max_train_pairs)
    eval_pairs = consistent_sample(eval_pairs, config.max_eval_pairs)
    if sft_examples.height > config.max_sft_examples:
        sft_examples = sft_examples.sample(config.max_sft_examples, seed=config.seed)
    policy_id = policy_id_for(tenant_id, train, config)
    model_dir = Path(models_dir) / policy_id
    started = time.perf_counter()
    sizes = f"{train.height} train pairs and {sft_examples.height} SFT examples"
    report(f"{tenant_id}: training policy {policy_id} on {sizes}")
    fitted = _fit_policy(train, sft_examples, config, report, tenant_id)
    report(f"{tenant_id}: scoring {eval_pairs.height} eval pairs")
    accuracy, margin, reference_accuracy = fitted.scorer(config).evaluate(eval_pairs)
    seconds = time.perf_counter() - started
    run = PolicyRun(
        tenant_id=tenant_id,
        policy_id=policy_id,
        status=STATUS_TRAINED,
        n_train=train.height,
        n_eval=eval_pairs.height,
        eval_accuracy=accuracy,
        eval_margin=margin,
        **baseline_fields(eval_pairs, accuracy, reference_accuracy),
        train_loss=fitted.train_loss,
        steps=fitted.steps,
        seconds=round(seconds, 3),
        model_dir=str(model_dir),
        n_sft=sft_examples.height if config.sft_num_train_epochs > 0 else 0,
        sft_loss=fitted.sft_loss,
        base_model=config.base_model_path or f"gpt2-config:{config.n_layer}x{config.n_embd}",
        beta=config.beta,
    )
    record = {
        **run.row(),
        MINED: mined,
        HELD_OUT: sorted(eval_pairs["pair_id"].to_list()),
        TRAINED_AT: datetime.now(UTC).isoformat(),
        "max_length": config.max_length,
        "config": config.identity(),
        "loss_type": config.loss_type,
    }
    _write_policy(model_dir, fitted, eval_pairs, record)
    report(f"{tenant_id}: policy {policy_id} saved ({seconds:.1f} s)")
    return run


@dataclass
class FittedPolicy:
    """What one training leaves: the policy, its frozen reference (the model after SFT) and their
    tokenizer, with the losses and steps it took."""

    policy: Any
    reference: Any
    tokenizer: Any
    train_loss: float | None
    steps: int
    sft_loss: float | None

    def scorer(self, config: DPOPolicyConfig) -> PolicyScorer:
        return PolicyScorer(
            self.policy,
            self.reference,
            self.tokenizer,
            config.beta,
            config.max_length,
            config.eval_batch_size,
            config.loss_type,
        )


def _fit_policy(
    train: pl.DataFrame,
    sft_examples: pl.DataFrame,
    config: DPOPolicyConfig,
    progress: Progress,
    tenant_id: str,
) -> FittedPolicy:
    """SFT on the well-rated outputs, freeze a copy as the reference, then DPO (through LoRA
    adapters merged back when `use_lora`)."""
    torch_setup(config)
    model, tokenizer = load_base(_corpus(train, sft_examples), config)
    sft_loss = supervised_fit(model, tokenizer, sft_examples, config, progress, f"{tenant_id} SFT")
    reference = copy.deepcopy(unpatch(model)).eval()
    for param in reference.parameters():
        param.requires_grad_(False)
    policy = _with_lora(model, config) if config.use_lora else model
    label = f"{tenant_id} {'SimPO' if config.loss_type == 'simpo' else 'DPO'}"
    train_loss, steps = dpo_fit(policy, reference, tokenizer, train, config, progress, label)
    if config.use_lora:
        policy = policy.merge_and_unload()
    return FittedPolicy(unpatch(policy), unpatch(reference), tokenizer, train_loss, steps, sft_loss)


def _with_lora(model: Any, config: DPOPolicyConfig) -> Any:
    from peft import LoraConfig, get_peft_model

    return get_peft_model(
        model,
        LoraConfig(
            task_type="CAUSAL_LM",
            r=config.lora_r,
            lora_alpha=config.lora_alpha,
            lora_dropout=config.lora_dropout,
            target_modules=list(config.lora_target_modules) or None,
        ),
    )


def _write_policy(
    model_dir: Path, fitted: FittedPolicy, eval_pairs: pl.DataFrame, record: dict[str, Any]
) -> None:
    """Policy, reference, frozen eval pairs and run.json, written to a temporary sibling and
    renamed: a crash never leaves half a policy behind."""
    tmp = model_dir.with_name(f".{model_dir.name}.{uuid.uuid4().hex}.tmp")
    _save(fitted.policy, fitted.tokenizer, tmp / "policy")
    _save(fitted.reference, fitted.tokenizer, tmp / "reference")
    eval_pairs.write_parquet(tmp / EVAL_FILE)
    (tmp / RUN_FILE).write_text(json.dumps(record, indent=2, default=list))
    if model_dir.exists():
        shutil.rmtree(model_dir)
    os.replace(tmp, model_dir)


def train_policies(
    pairs: pl.DataFrame,
    sft_examples: pl.DataFrame,
    config: DPOPolicyConfig,
    models_dir: str | os.PathLike[str],
    tenants: Sequence[str] | None = None,
    progress: Progress | None = None,
) -> list[PolicyRun]:
    """One run per tenant, or one pooled run shared by every tenant (`config.pooled`); each
    reports to `progress` (see `train_policy`)."""
    tenants = sorted(set(tenants or []) | set(pairs["tenant_id"].unique().to_list()))
    train = pairs.filter(pl.col("split") == "train")
    evals = pairs.filter(pl.col("split") == "eval")
    if config.pooled:
        run = train_or_fail(POOLED_TENANT, train, evals, sft_examples, config, models_dir, progress)
        return [PolicyRun(**{**asdict(run), "tenant_id": t}) for t in tenants]
    runs = []
    for tenant in tenants:
        mine = pl.col("tenant_id") == tenant
        runs.append(
            train_or_fail(
                tenant,
                train.filter(mine),
                evals.filter(mine),
                sft_examples.filter(mine) if "tenant_id" in sft_examples.columns else sft_examples,
                config,
                models_dir,
                progress,
            )
        )
    return runs


def train_or_fail(tenant_id: str, *args: Any) -> PolicyRun:
    """`train_policy`, or a STATUS_FAILED run saying why (in one line): a tenant's error (bad
    data, a full disk) is its own, and its previous policy stays."""
    try:
        return train_policy(tenant_id, *args)
    except Exception as error:
        log.exception("DPO training failed for %s", tenant_id)
        return PolicyRun(tenant_id, None, STATUS_FAILED, skipped_reason=one_line(error))


def sft_examples_from(
    interactions: pl.DataFrame, scores: pl.DataFrame, pairs: pl.DataFrame, min_quality: float = 0.0
) -> pl.DataFrame:
    """(tenant_id, prompt, completion): positively rated outputs plus the chosen side of train pairs."""
    rated = (
        interactions.select("tenant_id", pl.col("event_id").alias("memory_id"), "input", "output")
        .join(
            scores.select("tenant_id", "memory_id", "quality_score"),
            on=["tenant_id", "memory_id"],
            how="inner",
        )
        .filter(pl.col("quality_score") > min_quality)
        .select("tenant_id", pl.col("input").alias("prompt"), pl.col("output").alias("completion"))
    )
    chosen = pairs.filter(pl.col("split") == "train").select(
        "tenant_id", "prompt", pl.col("chosen").alias("completion")
    )
    return (
        pl.concat([rated, chosen])
        .filter(pl.col("prompt").is_not_null() & pl.col("completion").is_not_null())
        .unique(maintain_order=True)
        .sort("tenant_id", "prompt", "completion")
    )
