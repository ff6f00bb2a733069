"""The preference stage's tables: DPO pairs and runs, template history and scores."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import BOOL, FLOAT, INT, STR, TIMESTAMP, Table, pack_file_columns

_DPO_RUN_COLUMNS: dict[str, pl.DataType] = {
    "tenant_id": STR,
    "policy_id": STR,
    "status": STR,
    "skipped_reason": STR,
    "n_train": INT,
    "n_eval": INT,
    "eval_accuracy": FLOAT,
    "eval_margin": FLOAT,
    "eval_accuracy_low": FLOAT,
    "eval_accuracy_high": FLOAT,
    "reference_accuracy": FLOAT,
    "length_rule_accuracy": FLOAT,
    "verdict": STR,
    "train_loss": FLOAT,
    "steps": INT,
    "seconds": FLOAT,
    "model_dir": STR,
    "n_sft": INT,
    "sft_loss": FLOAT,
    "base_model": STR,
    "beta": FLOAT,
    "reused": BOOL,
    "run_at": TIMESTAMP,
    "is_latest": BOOL,
}

TABLES: tuple[Table, ...] = (
    Table(
        "preference_pairs",
        "(prompt, chosen, rejected) pairs for DPO with source, margin and split.",
        {
            "tenant_id": STR,
            "pair_id": STR,
            "prompt": STR,
            "chosen": STR,
            "rejected": STR,
            "source": STR,
            "margin": FLOAT,
            "skill_id": STR,
            "split": STR,
            "chosen_id": STR,
            "rejected_id": STR,
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
        {"tenant_id": STR, "skill_id": STR, "text_hash": STR, "model": STR},
        ("tenant_id", "skill_id", "text_hash"),
        asset="prompt_index",
        role="bookkeeping",
    ),
    Table(
        "prompt_neighbors",
        "Near-identical prompt pairs per tenant × skill, with their similarity.",
        {
            "tenant_id": STR,
            "skill_id": STR,
            "text_hash_a": STR,
            "text_hash_b": STR,
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
        {"tenant_id": STR, "policy_id": STR, "withdrawn_at": TIMESTAMP, "reason": STR},
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
            **pack_file_columns("templates.parquet"),
            "source": STR,
            "base_version": INT,
            "eval_n": INT,
            "win_p_value": FLOAT,
            "gain_low": FLOAT,
            "gain_high": FLOAT,
            "rollback_reason": STR,
        },
        ("tenant_id", "skill_id", "version"),
        asset="template_history",
        descriptions={
            "version": "the template's number per tenant × skill, from 1",
            "evidence": "JSON text: why this version exists",
            "source": "registry | refined",
            "base_version": "the registry version this template derives from",
            "gain_low": "95 % interval of the accuracy gain over the version it replaced",
            "rollback_reason": "why the calls' receipts rolled this version back (SPEC §4.9), "
            "null while it stands",
        },
    ),
    Table(
        "template_scores",
        "Memo of candidate template scores under a policy and eval sample: a night scores only "
        "what it has not scored.",
        {
            "tenant_id": STR,
            "skill_id": STR,
            "policy_id": STR,
            "template_sha": STR,
            "eval_sha": STR,
            "eval_accuracy": FLOAT,
            "eval_margin": FLOAT,
            "n_eval": INT,
            "pair_diffs": pl.List(FLOAT),
            "scored_at": TIMESTAMP,
        },
        ("tenant_id", "skill_id", "policy_id", "template_sha", "eval_sha"),
        asset="template_scores",
        role="bookkeeping",
        descriptions={"pair_diffs": "per eval pair, in canonical order"},
    ),
)
