"""DPO policy (SPEC §4.7): a small causal LM fitted on well-rated outputs (SFT), then TRL DPO on the
train preference pairs; scored by the implicit reward β·(log π(y|x) − log π_ref(y|x)).

Read in data order: settings (the knobs), runs (the record and reuse), model, progress (lines
while a trainer steps), fit, scorer, baselines, training (one training), report, shared (policies
on an object-store home), shipped (the policy a pack ships, and whether the next one is due)."""

from pipeline.preference.dpo.baselines import (
    Z_95,
    baseline_fields,
    learning_verdict,
    length_rule_accuracy,
    short_of_baselines,
    wilson_interval,
)
from pipeline.preference.dpo.fit import dpo_fit, simpo_fit, supervised_fit
from pipeline.preference.dpo.model import (
    build_model,
    build_tokenizer,
    load_base,
    load_pretrained,
)
from pipeline.preference.dpo.runs import (
    DPO_RUNS_HISTORY_SCHEMA,
    DPO_RUNS_SCHEMA,
    SAME_RUN,
    PolicyRun,
    consistent_sample,
    held_out_pairs,
    policy_id_for,
    record_runs,
    runs_frame,
)
from pipeline.preference.dpo.scorer import PolicyScorer, sequence_logps
from pipeline.preference.dpo.settings import (
    ADDED_FIELDS,
    EOS_TOKEN,
    EVAL_FILE,
    HELD_OUT,
    LOSS_TYPES,
    MINED,
    PER_TOKEN_LOSSES,
    POOLED_TENANT,
    REFERENCE_FREE_LOSSES,
    RUN_FILE,
    STATUS_FAILED,
    STATUS_SKIPPED,
    STATUS_TRAINED,
    DPOPolicyConfig,
    smollm2_gguf,
)
from pipeline.preference.dpo.training import (
    FittedPolicy,
    sft_examples_from,
    train_policies,
    train_policy,
)

__all__ = [
    "ADDED_FIELDS",
    "DPO_RUNS_HISTORY_SCHEMA",
    "DPO_RUNS_SCHEMA",
    "EOS_TOKEN",
    "EVAL_FILE",
    "HELD_OUT",
    "LOSS_TYPES",
    "MINED",
    "PER_TOKEN_LOSSES",
    "POOLED_TENANT",
    "REFERENCE_FREE_LOSSES",
    "RUN_FILE",
    "SAME_RUN",
    "STATUS_FAILED",
    "STATUS_SKIPPED",
    "STATUS_TRAINED",
    "Z_95",
    "DPOPolicyConfig",
    "FittedPolicy",
    "PolicyRun",
    "PolicyScorer",
    "baseline_fields",
    "build_model",
    "build_tokenizer",
    "consistent_sample",
    "dpo_fit",
    "held_out_pairs",
    "learning_verdict",
    "length_rule_accuracy",
    "load_base",
    "load_pretrained",
    "policy_id_for",
    "record_runs",
    "runs_frame",
    "sequence_logps",
    "sft_examples_from",
    "short_of_baselines",
    "simpo_fit",
    "smollm2_gguf",
    "supervised_fit",
    "train_policies",
    "train_policy",
    "wilson_interval",
]
