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
            "load_date": pl.Date(),
        },
        ("tenant_id", "pair_id"),
        asset="preference_pairs",
        descriptions={
            "prompt": "the prompt both replies answer (an interaction's input)",
            "chosen": "the better reply",
            "rejected": "the worse reply",
            "source": "correction | regenerate | same_prompt (near-identical prompts, same skill) "
            "| ranked (imported siblings)",
            "margin": "how clearly chosen beats rejected: corrections a fixed margin (1.0); "
            "regenerations and near-identical prompts the quality gap (0–2); ranked siblings "
            "the rank gap / (siblings − 1)",
            "split": "train | eval",
            "chosen_id": "the event holding the chosen reply (an interaction, or a correction)",
            "rejected_id": "the interaction holding the rejected reply",
            "load_date": "the load date of the newer of the two events behind the pair "
            "(chosen_id, rejected_id; the prompt is one of theirs): pairs per day need no join",
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
        descriptions={
            "text_hash_a": "text_hash_a < text_hash_b",
            "similarity": "cosine of the two prompts' embeddings, −1 to 1 (kept from 0.90)",
        },
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
            "status": "trained | skipped (with skipped_reason)",
            "skipped_reason": "why no policy was trained (e.g. fewer train pairs than min_pairs)",
            "n_train": "train pairs trained on (a consistent sample above max_train_pairs)",
            "n_eval": "held-out pairs it was scored on",
            "eval_accuracy_low": "lower end of eval_accuracy's 95 % Wilson interval",
            "eval_accuracy_high": "upper end of eval_accuracy's 95 % Wilson interval",
            "reference_accuracy": "the model before DPO, 0 to 1: share of held-out pairs whose "
            "chosen reply has the higher Σ log-prob",
            "length_rule_accuracy": "the longer reply wins, a tie counts half: 0 to 1",
            "verdict": "whether learning beats the length rule and chance, in one sentence",
            "train_loss": "mean DPO training loss over the steps (the sigmoid loss starts near "
            "0.69)",
            "steps": "optimizer steps of DPO",
            "seconds": "wall time of SFT, DPO and scoring",
            "model_dir": "where the policy's weights are on this host",
            "n_sft": "well-rated outputs the policy was first fine-tuned on (SFT)",
            "sft_loss": "mean SFT training loss (cross-entropy per token)",
            "base_model": "the model trained: a local path, or gpt2-config:<layers>x<width>",
            "beta": "DPO's β: the implicit reward's scale",
            "reused": "the recorded policy was reused: the train pairs grew too little",
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
        descriptions={
            "withdrawn_at": "when the erasure withdrew it",
            "reason": "why, in words (the erasure that withdrew it)",
        },
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
            "template": "the procedure text the model follows",
            "is_current": "the live version of its skill",
            "eval_accuracy": "the policy's preference accuracy on held-out pairs with this "
            "template as the prompt, 0 to 1",
            "created_at": "when this version was made",
            "eval_n": "held-out pairs it was scored on",
            "win_p_value": "one-sided sign test of its wins against the version it replaced, 0 "
            "to 1 (adopted only when small)",
            "gain_high": "upper end of that interval",
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
        descriptions={
            "pair_diffs": "per eval pair, in canonical order: reward(chosen) − reward(rejected)",
            "eval_accuracy": "share of the eval pairs the policy ranks right with this template, "
            "0 to 1",
            "scored_at": "when the score was computed",
        },
    ),
)
