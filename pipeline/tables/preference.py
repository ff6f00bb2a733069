"""The preference stage's tables: DPO pairs and runs, template history and scores."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import _B, _F, _I, _S, _TS, Table

_DPO_RUN_COLUMNS: dict[str, pl.DataType] = {
    "tenant_id": _S,
    "policy_id": _S,
    "status": _S,
    "skipped_reason": _S,
    "n_train": _I,
    "n_eval": _I,
    "eval_accuracy": _F,
    "eval_margin": _F,
    "eval_accuracy_low": _F,
    "eval_accuracy_high": _F,
    "reference_accuracy": _F,
    "length_rule_accuracy": _F,
    "verdict": _S,
    "train_loss": _F,
    "steps": _I,
    "seconds": _F,
    "model_dir": _S,
    "n_sft": _I,
    "sft_loss": _F,
    "base_model": _S,
    "beta": _F,
    "reused": _B,
    "run_at": _TS,
    "is_latest": _B,
}

TABLES: tuple[Table, ...] = (
    Table(
        "preference_pairs",
        "(prompt, chosen, rejected) pairs for DPO with source, margin and split.",
        {
            "tenant_id": _S,
            "pair_id": _S,
            "prompt": _S,
            "chosen": _S,
            "rejected": _S,
            "source": _S,
            "margin": _F,
            "skill_id": _S,
            "split": _S,
            "chosen_id": _S,
            "rejected_id": _S,
        },
        ("tenant_id", "pair_id"),
        asset="preference_pairs",
        descriptions={
            "margin": "how clearly chosen beats rejected: corrections a fixed margin; "
            "regenerations and near-identical prompts the quality gap (0–2); ranked siblings "
            "the rank gap / (siblings − 1)",
            "split": "train | eval",
        },
    ),
    Table(
        "prompt_index",
        "Distinct prompts per tenant × skill already searched for near-identical ones.",
        {"tenant_id": _S, "skill_id": _S, "text_hash": _S, "model": _S},
        ("tenant_id", "skill_id", "text_hash"),
        asset="prompt_index",
        role="bookkeeping",
    ),
    Table(
        "prompt_neighbors",
        "Near-identical prompt pairs per tenant × skill, with their similarity.",
        {
            "tenant_id": _S,
            "skill_id": _S,
            "text_hash_a": _S,
            "text_hash_b": _S,
            "similarity": pl.Float32(),
        },
        ("tenant_id", "skill_id", "text_hash_a", "text_hash_b"),
        asset="prompt_neighbors",
        role="bookkeeping",
        descriptions={"text_hash_a": "text_hash_a < text_hash_b"},
    ),
    Table(
        "dpo_runs",
        "DPO policy outcomes per tenant: status, eval accuracy with its 95 % interval beside the "
        "reference model's and the length rule's, verdict, margin, loss, steps; a night that "
        "reuses the recorded policy adds no row.",
        _DPO_RUN_COLUMNS,
        ("tenant_id", "run_at"),
        asset="dpo_runs",
        descriptions={
            "eval_accuracy_low": "95 % Wilson interval of eval_accuracy",
            "reference_accuracy": "the model before DPO: Σ log-prob of chosen > of rejected",
            "length_rule_accuracy": "the longer reply wins, a tie counts half",
            "is_latest": "the tenant's newest row",
        },
    ),
    Table(
        "policy_withdrawals",
        "DPO policies withdrawn because an erased person's data trained them.",
        {"tenant_id": _S, "policy_id": _S, "withdrawn_at": _TS, "reason": _S},
        ("tenant_id", "policy_id"),
        asset=None,
        by_tenant=False,
        role="record",
    ),
    Table(
        "template_history",
        "Every prompt template version per tenant × skill, with its DPO score and evidence; "
        "is_current marks the live one.",
        {
            "tenant_id": _S,
            "skill_id": _S,
            "version": _I,
            "template": _S,
            "is_current": _B,
            "eval_accuracy": _F,
            "eval_margin": _F,
            "evidence": _S,
            "policy_id": _S,
            "created_at": _TS,
            "source": _S,
            "base_version": _I,
            "eval_n": _I,
            "win_p_value": _F,
            "gain_low": _F,
            "gain_high": _F,
        },
        ("tenant_id", "skill_id", "version"),
        asset="template_history",
        descriptions={
            "version": "the template's number per tenant × skill, from 1",
            "evidence": "JSON text: why this version exists",
            "source": "registry | refined",
            "base_version": "the registry version this template derives from",
            "gain_low": "95 % interval of the accuracy gain over the version it replaced",
        },
    ),
    Table(
        "template_scores",
        "Memo of candidate template scores under a policy and eval sample: a night scores only "
        "what it has not scored.",
        {
            "tenant_id": _S,
            "skill_id": _S,
            "policy_id": _S,
            "template_sha": _S,
            "eval_sha": _S,
            "eval_accuracy": _F,
            "eval_margin": _F,
            "n_eval": _I,
            "pair_diffs": pl.List(_F),
            "scored_at": _TS,
        },
        ("tenant_id", "skill_id", "policy_id", "template_sha", "eval_sha"),
        asset="template_scores",
        role="bookkeeping",
        descriptions={"pair_diffs": "per eval pair, in canonical order"},
    ),
)
