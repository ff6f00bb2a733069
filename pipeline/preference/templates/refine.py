"""One night of refinement: each tenant × skill's candidates scored against its current template,
a significant winner becoming the new current version."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
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
    TemplateScore,
    compare,
    eval_order,
    eval_set_sha,
    select_template,
)

log = logging.getLogger(__name__)


# One decision per candidate: its score's columns as template_scores holds them, the test against
# the current template as template_history keeps it (candidates only), and what was decided.
DECISION_SCHEMA: dict[str, pl.DataType] = {
    **tables.schema("template_scores", ("tenant_id", "skill_id")),
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


def refine_templates(
    history: pl.DataFrame,
    registry: Mapping[str, SkillTemplate],
    tenants: Iterable[str],
    evidence: Mapping[tuple[str, str], SkillEvidence],
    eval_pairs: pl.DataFrame,
    scorers: Mapping[str, tuple[str, RewardFn]],
    created_at: datetime,
    config: TemplateConfig | None = None,
    scores: pl.DataFrame | None = None,
) -> RefineResult:
    """Score candidates per tenant × skill with the tenant's policy (`scorers`: tenant → (policy_id,
    reward_fn)); a winner becomes a new current version, the previous one stays in the history.

    `eval_pairs` are the held-out pairs to score on; `scores` is the memo of earlier calls
    (`RefineResult.scores`): a template already scored by the same policy on the same pairs is
    not scored again.
    """
    config = config or TemplateConfig()
    memo = ScoreMemo(scores, created_at)
    history = seed_registry_rows(history, registry, tenants, created_at)
    decisions: list[dict[str, Any]] = []
    new_rows: list[dict[str, Any]] = []
    current = {
        (r["tenant_id"], r["skill_id"]): r for r in current_templates(history).iter_rows(named=True)
    }
    for (tenant, skill), ev in sorted(evidence.items()):
        pairs = eval_order(
            eval_pairs.filter((pl.col("tenant_id") == tenant) & (pl.col("skill_id") == skill))
        )
        note = _not_scored(tenant, skill, pairs, registry, scorers, config)
        if note is not None:
            decisions.append(_decision(tenant, skill, "-", None, False, note))
            continue
        policy_id, reward_fn = scorers[tenant]
        cell = _Cell(tenant, skill, ev, pairs, policy_id, reward_fn, current[(tenant, skill)])
        found, row = _refine_cell(cell, registry[skill], history, memo, config, created_at)
        decisions += found
        if row is not None:
            new_rows.append(row)
    if new_rows:
        history = clear_current(history, [(r["tenant_id"], r["skill_id"]) for r in new_rows])
        history = pl.concat([history, pl.DataFrame(new_rows, schema=TEMPLATE_HISTORY_SCHEMA)])
    return RefineResult(
        history=history.sort("tenant_id", "skill_id", "version"),
        decisions=pl.DataFrame(decisions, schema=DECISION_SCHEMA),
        adopted=len(new_rows),
        scores=memo.table(),
        scored=len(memo.new),
        memo_hits=memo.hits,
    )


def _not_scored(
    tenant: str,
    skill: str,
    pairs: pl.DataFrame,
    registry: Mapping[str, SkillTemplate],
    scorers: Mapping[str, tuple[str, RewardFn]],
    config: TemplateConfig,
) -> str | None:
    """Why this tenant × skill keeps its template without scoring, or None when it can be scored."""
    if skill not in registry:
        return "skill not in the registry"
    if tenant not in scorers:
        return "no trained policy for the tenant"
    if pairs.height < config.min_eval_pairs:
        return f"{pairs.height} eval pairs < min_eval_pairs {config.min_eval_pairs}"
    return None


@dataclass(frozen=True)
class _Cell:
    """One tenant × skill being refined: its evidence, eval pairs, policy and current template row."""

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
    """The decisions on one tenant × skill's candidates, and its new current row if one wins
    significantly over the current template."""
    tenant, skill, now = cell.tenant, cell.skill, cell.now
    candidates = candidate_templates(base.template, cell.evidence, config)
    # Neither the current text nor one the calls' receipts rolled back (in_use.py) competes.
    excluded = {now["template"], *rolled_back_templates(history, tenant, skill)}
    candidates = [c for c in candidates if c.template not in excluded]
    key, eval_sha = (tenant, skill, cell.policy_id), eval_set_sha(cell.pairs)
    try:
        current_score, current_memo = memo.score(
            key, cell.reward_fn, now["template"], cell.pairs, eval_sha
        )
        outcomes = [
            memo.score(key, cell.reward_fn, c.template, cell.pairs, eval_sha) for c in candidates
        ]
    except Exception as error:  # this tenant × skill keeps its template; the others go on
        log.exception("scoring templates of %s × %s failed", tenant, skill)
        failed = f"scoring failed, the current template stays: {one_line(error)}"
        return [_decision(tenant, skill, "-", None, False, failed)], None
    scored = [score for score, _ in outcomes]
    best = select_template(current_score, scored, config.margin_epsilon)
    versus = [compare(score, current_score) for score in scored]
    winner = best if best is not None and versus[best].p_value < config.alpha else None
    decisions = [
        _decision(
            tenant,
            skill,
            f"current:v{now['version']}",
            current_score,
            False,
            "current",
            current_memo,
        )
    ]
    for i, (cand, (score, from_memo)) in enumerate(zip(candidates, outcomes, strict=True)):
        note = None
        if i == best and winner is None:
            note = f"kept the current template: the win is not significant ({versus[i].note()})"
        decisions.append(
            _decision(tenant, skill, cand.name, score, i == winner, note, from_memo, versus[i])
        )
    if winner is None:
        return decisions, None
    version = int(
        history.filter((pl.col("tenant_id") == tenant) & (pl.col("skill_id") == skill))[
            "version"
        ].max()  # type: ignore[arg-type]
    )
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
    tenant: str,
    skill: str,
    name: str,
    score: TemplateScore | None,
    adopted: bool,
    note: str | None,
    memo: bool = False,
    versus: Comparison | None = None,
) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
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
