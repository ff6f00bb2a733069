"""The policy's model and tokenizer: a tiny GPT-2 built from the corpus, or a pretrained base model."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline.config import offline_environment
from pipeline.preference.dpo.settings import EOS_TOKEN, DPOPolicyConfig


def torch_setup(config: DPOPolicyConfig) -> None:
    import datasets
    import torch
    import transformers

    offline_environment()
    # At most the config's threads and never more than this process was given (jobs/runner.py
    # gives each worker its share of the cores): two workers on 2 cores each running 2 threads
    # made training ~5× slower than one worker (bench scale, 2026-11-25).
    torch.set_num_threads(max(1, min(config.torch_threads, torch.get_num_threads())))
    transformers.set_seed(config.seed)
    # Metrics go to the run record and Dagster metadata, not to progress bars on stdout (TRL's
    # reference pre-pass reads TQDM_DISABLE).
    os.environ.setdefault("TQDM_DISABLE", "1")
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


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
        activation_function="gelu_pytorch_tanh",  # gelu_new's formula, one fused kernel
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


def unpatch(model: Any) -> Any:
    """Drop the fused-LM-head forward TRL trainers install on the instance: its closure points at
    the original object, so a deep copy would silently run the *original* model's forward."""
    model.__dict__.pop("forward", None)
    return model
