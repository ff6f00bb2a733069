"""Skill prompt templates: the base registry, candidates from evidence, DPO-scored selection, history.

Read in data order: registry (the base templates and knobs), candidates (from evidence), scores
(a policy's verdict on a template), history (the versions), in_use (what the calls' receipts say
of an adopted one: rolled back when worse), refine (one night). Each function handles one tenant:
its run's frames hold only its rows."""

from pipeline.preference.dpo.settings import format_prompt
from pipeline.preference.templates.candidates import (
    EVIDENCE_FEEDBACK_COLUMNS,
    REASON_GUIDANCE,
    Candidate,
    SkillEvidence,
    candidate_templates,
    gather_evidence,
)
from pipeline.preference.templates.history import (
    TEMPLATE_HISTORY_SCHEMA,
    clear_current,
    current_templates,
    empty_history,
    history_row,
    missing_current,
    rollback,
    seed_registry_rows,
)
from pipeline.preference.templates.in_use import roll_back_worse
from pipeline.preference.templates.refine import DECISION_SCHEMA, RefineResult, refine_templates
from pipeline.preference.templates.registry import (
    REGISTRY_RESOURCE,
    SOURCE_REFINED,
    SOURCE_REGISTRY,
    SkillTemplate,
    TemplateConfig,
    load_registry,
    parse_registry,
)
from pipeline.preference.templates.scores import (
    TEMPLATE_SCORE_SCHEMA,
    Comparison,
    RewardFn,
    ScoreMemo,
    ScoringPolicy,
    TemplateScore,
    beats,
    compare,
    eval_order,
    eval_set_sha,
    preference_score,
    score_template,
    select_template,
)

__all__ = [
    "DECISION_SCHEMA",
    "EVIDENCE_FEEDBACK_COLUMNS",
    "REASON_GUIDANCE",
    "REGISTRY_RESOURCE",
    "SOURCE_REFINED",
    "SOURCE_REGISTRY",
    "TEMPLATE_HISTORY_SCHEMA",
    "TEMPLATE_SCORE_SCHEMA",
    "Candidate",
    "Comparison",
    "RefineResult",
    "RewardFn",
    "ScoreMemo",
    "ScoringPolicy",
    "SkillEvidence",
    "SkillTemplate",
    "TemplateConfig",
    "TemplateScore",
    "beats",
    "candidate_templates",
    "clear_current",
    "compare",
    "current_templates",
    "empty_history",
    "eval_order",
    "eval_set_sha",
    "format_prompt",
    "gather_evidence",
    "history_row",
    "load_registry",
    "missing_current",
    "parse_registry",
    "preference_score",
    "refine_templates",
    "roll_back_worse",
    "rollback",
    "score_template",
    "seed_registry_rows",
    "select_template",
]
