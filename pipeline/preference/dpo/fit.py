"""Fitting with TRL: supervised fine-tuning on well-rated outputs, then DPO (or SimPO) on the pairs."""

from __future__ import annotations

import tempfile
import warnings
from typing import Any

import polars as pl

from pipeline.preference.dpo.progress import TrainingProgress, trainer_callback
from pipeline.preference.dpo.settings import DPOPolicyConfig, format_prompt
from pipeline.progress import Progress

# transformers 5 renamed gradient_checkpointing; TRL 1.16 still passes the old name on every run.
warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)


def _train(trainer: Any, progress: Progress, label: str) -> Any:
    """Run a TRL trainer without its per-step printing, reporting to `progress` instead (a line
    every PROGRESS_EVERY_SECONDS: step, epoch, loss); its TrainOutput."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(trainer_callback(TrainingProgress(progress, label)))
    return trainer.train()


def _fit_pairs(
    trainer_class: Any,
    args: Any,
    model: Any,
    tokenizer: Any,
    train: pl.DataFrame,
    progress: Progress,
    label: str,
    **more: Any,
) -> tuple[float, int]:
    """A pair trainer (DPO, CPO) on `train`: its training loss and steps."""
    output = _train(
        trainer_class(
            model=model,
            args=args,
            train_dataset=_pair_dataset(train),
            processing_class=tokenizer,
            **more,
        ),
        progress,
        label,
    )
    return float(output.training_loss), int(output.global_step)


# What every trainer runs with, whatever the config: on the CPU, no checkpoints, no reports.
EXECUTION: dict[str, Any] = {
    "use_cpu": True,
    "bf16": False,
    "fp16": False,
    "gradient_checkpointing": False,
    "report_to": [],
    "save_strategy": "no",
    "logging_steps": 1,  # each step's loss reaches the progress lines (a log is no extra pass)
    "disable_tqdm": True,
    "dataloader_num_workers": 0,
}
# The DPOPolicyConfig fields each TRL config takes, under their TRL names (`sft_` is dropped for
# SFTConfig): the stage's config is TRL's, passed through by name, not mirrored.
SHARED_KNOBS = ("seed", "per_device_train_batch_size", "weight_decay", "max_length")
SFT_KNOBS = (*SHARED_KNOBS, "sft_num_train_epochs", "sft_learning_rate")
PAIR_KNOBS = (*SHARED_KNOBS, "num_train_epochs", "max_steps", "learning_rate", "beta")
DPO_KNOBS = (*PAIR_KNOBS, "precompute_ref_log_probs")


def trl_args(
    trl_config: Any, config: DPOPolicyConfig, knobs: tuple[str, ...], output_dir: str, **fixed: Any
) -> Any:
    """TRL config class `trl_config` with the `knobs` of `config`, the execution settings and the
    arguments fixed by the stage (a loss, a mode)."""
    named = {k.removeprefix("sft_"): getattr(config, k) for k in knobs}
    return trl_config(output_dir=output_dir, data_seed=config.seed, **EXECUTION, **named, **fixed)


def supervised_fit(
    model: Any,
    tokenizer: Any,
    examples: pl.DataFrame,
    config: DPOPolicyConfig,
    progress: Progress,
    label: str = "SFT",
) -> float | None:
    """TRL SFT on (prompt, completion) rows: the policy first learns what well-rated answers look like."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if config.sft_num_train_epochs <= 0 or examples.is_empty():
        return None
    data = Dataset.from_dict(
        {
            "prompt": [format_prompt(p) for p in examples["prompt"].to_list()],
            "completion": [c.strip() for c in examples["completion"].to_list()],
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        args = trl_args(SFTConfig, config, SFT_KNOBS, tmp, packing=False)
        trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
        return float(_train(trainer, progress, label).training_loss)


def _pair_dataset(pairs: pl.DataFrame) -> Any:
    from datasets import Dataset

    return Dataset.from_dict(
        {
            "prompt": [format_prompt(p) for p in pairs["prompt"].to_list()],
            "chosen": pairs["chosen"].to_list(),
            "rejected": pairs["rejected"].to_list(),
        }
    )


def dpo_fit(
    model: Any,
    ref_model: Any,
    tokenizer: Any,
    train: pl.DataFrame,
    config: DPOPolicyConfig,
    progress: Progress,
    label: str = "DPO",
) -> tuple[float, int]:
    """TRL DPOTrainer on the train pairs (CPOTrainer for SimPO); returns (train loss, optimizer
    steps)."""
    from trl import DPOConfig, DPOTrainer

    if config.loss_type == "simpo":
        return simpo_fit(model, tokenizer, train, config, progress, label)
    with tempfile.TemporaryDirectory() as tmp:
        args = trl_args(DPOConfig, config, DPO_KNOBS, tmp, loss_type=[config.loss_type])
        return _fit_pairs(
            DPOTrainer, args, model, tokenizer, train, progress, label, ref_model=ref_model
        )


def simpo_fit(
    model: Any,
    tokenizer: Any,
    train: pl.DataFrame,
    config: DPOPolicyConfig,
    progress: Progress,
    label: str = "SimPO",
) -> tuple[float, int]:
    """SimPO with TRL's CPOTrainer (cpo_alpha 0: no NLL term; SFT is the separate stage):
    reference-free, on the per-token mean log-prob, with a target margin."""
    from trl.experimental.cpo import CPOConfig, CPOTrainer

    # CPOTrainer cuts only the reply, never the prompt: a prompt that fills max_length would run
    # past the model's positions, and one that leaves no reply tokens gives a NaN mean. Such pairs
    # teach DPOTrainer nothing either (it keeps the start), so they are left out.
    prompt_ids = tokenizer(
        [format_prompt(p) for p in train["prompt"].to_list()], add_special_tokens=False
    )["input_ids"]
    train = train.filter(pl.Series([len(ids) < config.max_length - 8 for ids in prompt_ids]))
    with tempfile.TemporaryDirectory() as tmp:
        args = trl_args(
            CPOConfig,
            config,
            PAIR_KNOBS,
            tmp,
            loss_type="simpo",
            cpo_alpha=0.0,
            simpo_gamma=config.simpo_gamma,
        )
        return _fit_pairs(CPOTrainer, args, model, tokenizer, train, progress, label)
