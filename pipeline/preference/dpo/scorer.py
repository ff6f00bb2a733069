"""Scoring replies with a trained policy: the implicit reward of each loss, and accuracy on pairs."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from pipeline.config import offline_environment
from pipeline.preference.dpo.settings import (
    PER_TOKEN_LOSSES,
    REFERENCE_FREE_LOSSES,
    RUN_FILE,
    format_prompt,
)


def _common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


# A prefix all rows share is computed once, apart, from this many tokens on (below: not worth it).
MIN_SHARED_TOKENS = 16


def _shared_prefix(seqs: Sequence[list[int]], limit: int) -> int:
    """How many leading tokens every row has in common (at most `limit`; 0 below
    MIN_SHARED_TOKENS)."""
    prefix = seqs[0][: max(limit, 0)]
    for seq in seqs[1:]:
        prefix = prefix[: _common_prefix(prefix, seq)]
    return len(prefix) if len(prefix) >= MIN_SHARED_TOKENS else 0


# Logits one forward pass holds (rows × positions × vocabulary floats, ≈ 256 MB; log_softmax makes
# a second copy): 32 long rows over a 50k vocabulary would otherwise take 1.6 GB each.
MAX_LOGIT_CELLS = 64_000_000


def logit_batches(
    lengths: Sequence[int], batch_size: int, vocab: int, max_cells: int = MAX_LOGIT_CELLS
) -> Iterator[np.ndarray]:
    """Row indices, shortest first (batches pad little), at most `batch_size` rows and
    `max_cells` logits a batch (a row alone may exceed it)."""
    batch: list[int] = []
    for i in np.argsort(lengths, kind="stable").tolist():
        if batch and (
            len(batch) == batch_size or (len(batch) + 1) * lengths[i] * vocab > max_cells
        ):
            yield np.array(batch)
            batch = []
        batch.append(i)
    if batch:
        yield np.array(batch)


@dataclass(frozen=True)
class Tokenized:
    """Rows tokenized the way TRL does (completion + EOS, cut at `max_length` from the end), with
    where each row's completion begins: what every model sharing the tokenizer scores."""

    seqs: list[list[int]]
    splits: list[int]
    pad: int

    @property
    def counts(self) -> np.ndarray:
        """Completion tokens of each row."""
        return np.array(
            [max(0, len(s) - b) for s, b in zip(self.seqs, self.splits, strict=True)], np.float64
        )


def tokenize(
    tokenizer: Any, prompts: Sequence[str], completions: Sequence[str], max_length: int
) -> Tokenized:
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
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return Tokenized(seqs, splits, pad)


def sequence_logps(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    completions: Sequence[str],
    max_length: int,
    batch_size: int = 32,
) -> tuple[np.ndarray, np.ndarray]:
    """(Σ log p(completion tokens | prompt), number of completion tokens), tokenized the way TRL
    does (`tokenize`)."""
    rows = tokenize(tokenizer, prompts, completions, max_length)
    return tokenized_logps(model, rows, batch_size), rows.counts


def _plain_head(model: Any) -> Any:
    """The vocabulary head of a Hugging Face causal LM whose logits are exactly head(its base
    model's last hidden state), else None (a wrapper, e.g. peft's, or scaled or capped logits)."""
    from transformers import PreTrainedModel

    config = getattr(model, "config", None)
    if not isinstance(model, PreTrainedModel) or model.base_model is model:
        return None
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None):
        return None
    return model.get_output_embeddings()


def tokenized_logps(model: Any, rows: Tokenized, batch_size: int = 32) -> np.ndarray:
    """Σ log p(completion tokens | prompt) of each row.

    Rows are scored in `logit_batches`. The vocabulary head (vocabulary × width: most of a small
    model's work) runs only at the positions that predict a completion token, and a token's
    log-probability is its logit less the log-sum-exp of its position's logits (no full
    log-softmax is made). A model whose logits are not plainly its head's (`_plain_head`) is run
    whole, from the batch's first completion token on."""
    import inspect

    import torch

    seqs, splits, pad = rows.seqs, rows.splits, rows.pad
    can_skip = "logits_to_keep" in inspect.signature(model.forward).parameters
    # The tokens every row starts with (a template, when candidate templates are scored), short
    # of every completion: run once, for one row, and handed to each batch through a copy of its
    # key/value cache (a batch's forward pass appends to the cache it is given).
    shared = _shared_prefix(seqs, min(splits) - 1) if can_skip and seqs else 0
    out = np.zeros(len(seqs), dtype=np.float64)
    vocab = int(getattr(getattr(model, "config", None), "vocab_size", 0) or 1)
    model.eval()
    head = _plain_head(model) if can_skip else None
    prefix_cache = None
    if shared:
        with torch.no_grad():
            prefix = torch.tensor([seqs[0][:shared]])
            prefix_cache = model(input_ids=prefix, use_cache=True, logits_to_keep=1).past_key_values
        if not hasattr(prefix_cache, "batch_repeat_interleave"):  # a cache that cannot repeat
            prefix_cache = None
    for batch in logit_batches([len(s) for s in seqs], batch_size, vocab, MAX_LOGIT_CELLS):
        width = max(len(seqs[i]) for i in batch)
        ids = torch.tensor([seqs[i] + [pad] * (width - len(seqs[i])) for i in batch])
        attention = torch.tensor([[1] * len(seqs[i]) + [0] * (width - len(seqs[i])) for i in batch])
        first = min(splits[i] for i in batch) if can_skip else 1
        # The completion tokens: (row, position - first) of each, predicted from position - 1.
        positions = torch.arange(first, width)[None, :]
        lengths = torch.tensor([len(seqs[i]) for i in batch])[:, None]
        begins = torch.tensor([splits[i] for i in batch])[:, None]
        row, at = ((positions >= begins) & (positions < lengths)).nonzero(as_tuple=True)
        inputs, extra = ids, {}
        with torch.no_grad():
            if prefix_cache is not None:
                cache = copy.deepcopy(prefix_cache)
                cache.batch_repeat_interleave(len(batch))
                inputs, extra["past_key_values"] = ids[:, shared:], cache
            if head is not None:
                states = model.base_model(input_ids=inputs, attention_mask=attention, **extra)
                found = states.last_hidden_state
            else:
                keep = {"logits_to_keep": width - first + 1} if can_skip else {}
                found = model(input_ids=inputs, attention_mask=attention, **extra, **keep).logits
            # `found` holds the last positions of the batch (not the shared prefix's, nor the
            # prompts' before `first` when cut).
            before = found[row, at + first - 1 - width + found.shape[1]]
            logits = (head(before) if head is not None else before).float()
            token = logits.gather(-1, ids[row, at + first][:, None]).squeeze(-1)
            token = token - torch.logsumexp(logits, dim=-1)
        sums = torch.zeros(len(batch), dtype=torch.float64).index_add_(0, row, token.double())
        out[batch] = sums.numpy()
    return out


def fused_gelu(model: Any) -> None:
    """GPT-2's `gelu_new` (the tanh approximation, in five tensor operations) replaced by
    PyTorch's fused kernel of the same formula, equal to float rounding: the five took ~18 % of
    scoring a small policy's candidates, and scoring on one thread takes ~8 % less. Models built
    since (`build_model`) use it already."""
    from transformers.activations import GELUTanh, NewGELUActivation

    for module in model.modules():
        if isinstance(getattr(module, "act", None), NewGELUActivation):
            module.act = GELUTanh()


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
        for model in (policy, reference):
            fused_gelu(model)
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
        rows = tokenize(self.tokenizer, prompts, completions, self.max_length)
        policy = tokenized_logps(self.policy, rows, self.batch_size)
        reference = tokenized_logps(self.reference, rows, self.batch_size)
        return policy, reference, rows.counts

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
        # One pass over both sides: rows of a template share its prefix, computed once a model.
        rewards = self.rewards(prompts + prompts, chosen + rejected)
        return rewards[: len(chosen)], rewards[len(chosen) :]

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
