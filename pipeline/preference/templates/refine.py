"""One night of a tenant's refinement: each skill's candidates scored against its current template,
a significant winner becoming the new current version."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from pipeline import tables
from pipeline.errors import one_line
from pipeline.preference.templates.candidates import Candidate, SkillEvidence, candidate_templates
from pipeline.preference.templates.history import (
    TEMPLATE_HISTORY_SCHEMA,
    clear_current,
    current_templates,
    history_row,
    seed_registry_rows,
)
from pipeline.preference.templates.in_use import rolled_back_templates
from pipeline.preference.templates.registry import SOURCE_REFINED, SkillTemplate, TemplateConfig
from pipeline.preference.templates.scores import (
    Comparison,
    RewardFn,
    ScoreMemo,
    ScoringPolicy,
    TemplateScore,
    compare,
    eval_order,
    eval_set_sha,
    select_template,
)

log = logging.getLogger(__name__)


# One decision per candidate of the tenant: its score's columns as template_scores holds them, the
# test against the current template as template_history keeps it (candidates only), and what was
# decided.
DECISION_SCHEMA: dict[str, pl.DataType] = {
    **tables.schema("template_scores", ("skill_id",)),
    "candidate": pl.String(),
    **tables.schema("template_scores", ("eval_accuracy", "eval_margin", "n_eval")),
    "adopted": pl.Boolean(),
    "memo": pl.Boolean(),  # the score came from template_scores, not from the policy
    **tables.schema("template_history", ("win_p_value", "gain_low", "gain_high")),
    "note": pl.String(),
}


@dataclass
class RefineResult:
    history: pl.DataFrame
    decisions: pl.DataFrame
    adopted: int
    scores: pl.DataFrame  # TEMPLATE_SCORE_SCHEMA: every score computed so far (the memo)
    scored: int = 0  # templates scored by a policy in this call
    memo_hits: int = 0  # templates whose score came from the memo

    @classmethod
    def unchanged(cls, history: pl.DataFrame, scores: pl.DataFrame) -> RefineResult:
        """A night that refines nothing: the history and the memo as they are."""
        return cls(history, pl.DataFrame(schema=DECISION_SCHEMA), 0, scores)


def refine_templates(
    history: pl.DataFrame,
    registry: Mapping[str, SkillTemplate],
    tenant: str,
    evidence: Mapping[str, SkillEvidence],
    policy: ScoringPolicy | None,
    created_at: datetime,
    config: TemplateConfig | None = None,
    scores: pl.DataFrame | None = None,
) -> RefineResult:
    """Score the tenant's candidates per skill (`history`, `evidence`: its own) with its policy
    on the policy's held-out pairs; a winner becomes a new current version, the previous one
    stays in the history.

    `scores` is the memo of earlier calls (`RefineResult.scores`): a template already scored by
    the same policy on the same pairs is not scored again.
    """
    config = config or TemplateConfig()
    memo = ScoreMemo(scores, created_at)
    history = seed_registry_rows(history, registry, tenant, created_at)
    decisions: list[dict[str, Any]] = []
    new_rows: list[dict[str, Any]] = []
    current = {r["skill_id"]: r for r in current_templates(history).iter_rows(named=True)}
    for skill, ev in sorted(evidence.items()):
        pairs = _eval_pairs(policy, skill)
        note = _not_scored(skill, pairs, registry, policy, config)
        if policy is None or note is not None:  # without a policy, the note says so
            decisions.append(_decision(skill, "-", None, False, note))
            continue
        cell = _Cell(tenant, skill, ev, pairs, policy.policy_id, policy.reward, current[skill])
        found, row = _refine_cell(cell, registry[skill], history, memo, config, created_at)
        decisions += found
        if row is not None:
            new_rows.append(row)
    if new_rows:
        history = clear_current(history, [r["skill_id"] for r in new_rows])
        history = pl.concat([history, pl.DataFrame(new_rows, schema=TEMPLATE_HISTORY_SCHEMA)])
    return RefineResult(
        history=history.sort("skill_id", "version"),
        decisions=pl.DataFrame(decisions, schema=DECISION_SCHEMA),
        adopted=len(new_rows),
        scores=memo.table(),
        scored=len(memo.new),
        memo_hits=memo.hits,
    )


def _eval_pairs(policy: ScoringPolicy | None, skill: str) -> pl.DataFrame:
    """The skill's held-out pairs of the policy (none without one), in the order every template
    is scored in."""
    if policy is None:
        return pl.DataFrame()
    return eval_order(policy.eval_pairs.filter(pl.col("skill_id") == skill))


def _not_scored(
    skill: str,
    pairs: pl.DataFrame,
    registry: Mapping[str, SkillTemplate],
    policy: ScoringPolicy | None,
    config: TemplateConfig,
) -> str | None:
    """Why this skill keeps its template without scoring, or None when it can be scored."""
    if skill not in registry:
        return "skill not in the registry"
    if policy is None:
        return "no trained policy for the tenant"
    if pairs.height < config.min_eval_pairs:
        return f"{pairs.height} eval pairs < min_eval_pairs {config.min_eval_pairs}"
    return None


@dataclass(frozen=True)
class _Cell:
    """One skill of the tenant being refined: its evidence, eval pairs, policy and current
    template row."""

    tenant: str
    skill: str
    evidence: SkillEvidence
    pairs: pl.DataFrame
    policy_id: str
    reward_fn: RewardFn
    now: dict[str, Any]


def _refine_cell(
    cell: _Cell,
    base: SkillTemplate,
    history: pl.DataFrame,
    memo: ScoreMemo,
    config: TemplateConfig,
    created_at: datetime,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The decisions on one skill's candidates, and its new current row if one wins
    significantly over the current template."""
    tenant, skill, now = cell.tenant, cell.skill, cell.now
    candidates = candidate_templates(base.template, cell.evidence, config)
    # Neither the current text nor one the calls' receipts rolled back (in_use.py) competes.
    excluded = {now["template"], *rolled_back_templates(history, skill)}
    candidates = [c for c in candidates if c.template not in excluded]
    key, eval_sha = (tenant, skill, cell.policy_id), eval_set_sha(cell.pairs)
    try:
        current_score, current_memo = memo.score(
            key, cell.reward_fn, now["template"], cell.pairs, eval_sha
        )
        outcomes = [
            memo.score(key, cell.reward_fn, c.template, cell.pairs, eval_sha) for c in candidates
        ]
    except Exception as error:  # this skill keeps its template; the others go on
        log.exception("scoring templates of %s × %s failed", tenant, skill)
        failed = f"scoring failed, the current template stays: {one_line(error)}"
        return [_decision(skill, "-", None, False, failed)], None
    scored = [score for score, _ in outcomes]
    best = select_template(current_score, scored, config.margin_epsilon)
    versus = [compare(score, current_score) for score in scored]
    winner = best if best is not None and versus[best].p_value < config.alpha else None
    decisions = [
        _decision(
            skill, f"current:v{now['version']}", current_score, False, "current", current_memo
        )
    ]
    for i, (cand, (score, from_memo)) in enumerate(zip(candidates, outcomes, strict=True)):
        note = None
        if i == best and winner is None:
            note = f"kept the current template: the win is not significant ({versus[i].note()})"
        decisions.append(
            _decision(skill, cand.name, score, i == winner, note, from_memo, versus[i])
        )
    if winner is None:
        return decisions, None
    version = int(history.filter(pl.col("skill_id") == skill)["version"].max())  # type: ignore[arg-type]
    won = (candidates[winner], scored[winner], versus[winner])
    return decisions, _refined_row(cell, won, current_score, version + 1, base, created_at)


def _refined_row(
    cell: _Cell,
    won: tuple[Candidate, TemplateScore, Comparison],
    current_score: TemplateScore,
    version: int,
    base: SkillTemplate,
    created_at: datetime,
) -> dict[str, Any]:
    """The history row of a winning candidate, with the evidence and significance that made it."""
    cand, score, win = won
    evidence = {
        "source": SOURCE_REFINED,
        "candidate": cand.name,
        "from_evidence": cand.evidence,
        "skill_evidence": cell.evidence.as_json(),
        "n_eval_pairs": score.n,
        "significance": win.note(),
        "replaced": {
            "version": cell.now["version"],
            "eval_accuracy": current_score.accuracy,
            "eval_margin": current_score.margin,
        },
    }
    return history_row(
        tenant_id=cell.tenant,
        skill_id=cell.skill,
        version=version,
        template=cand.template,
        is_current=True,
        eval_accuracy=score.accuracy,
        eval_margin=score.margin,
        evidence=json.dumps(evidence, sort_keys=True),
        policy_id=cell.policy_id,
        created_at=created_at,
        source=SOURCE_REFINED,
        base_version=base.version,
        eval_n=score.n,
        win_p_value=win.p_value,
        gain_low=win.gain_low,
        gain_high=win.gain_high,
    )


def _decision(
    skill: str,
    name: str,
    score: TemplateScore | None,
    adopted: bool,
    note: str | None,
    memo: bool = False,
    versus: Comparison | None = None,
) -> dict[str, Any]:
    return {
        "skill_id": skill,
        "candidate": name,
        "eval_accuracy": score.accuracy if score else None,
        "eval_margin": score.margin if score else None,
        "n_eval": score.n if score else 0,
        "adopted": adopted,
        "memo": memo,
        "win_p_value": versus.p_value if versus else None,
        "gain_low": versus.gain_low if versus else None,
        "gain_high": versus.gain_high if versus else None,
        "note": note,
    }
