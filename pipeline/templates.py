"""Skill prompt templates: the base registry, candidates from evidence, DPO-scored selection, history."""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import Any

import numpy as np
import polars as pl
import yaml

from pipeline.contracts import FeedbackReason, Signal
from pipeline.errors import one_line

log = logging.getLogger(__name__)

REGISTRY_RESOURCE = "skill_templates.yaml"
SOURCE_REGISTRY = "registry"
SOURCE_REFINED = "refined"

TEMPLATE_HISTORY_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "skill_id": pl.String(),
    "version": pl.Int64(),
    "template": pl.String(),
    "is_current": pl.Boolean(),
    "eval_accuracy": pl.Float64(),
    "eval_margin": pl.Float64(),
    "evidence": pl.String(),  # JSON text: why this version exists
    "policy_id": pl.String(),
    "created_at": pl.Datetime("us", "UTC"),
    "source": pl.String(),  # registry | refined
    "base_version": pl.Int64(),  # the registry version this template derives from
    # A refined version's win over the one it replaced, on the same eval pairs (`Comparison`):
    "eval_n": pl.Int64(),
    "win_p_value": pl.Float64(),
    "gain_low": pl.Float64(),  # 95 % interval of the accuracy gain
    "gain_high": pl.Float64(),
}

# Scores already computed: the same policy, template text and eval pairs always score the same,
# so a night whose policy is reused scores only the candidates whose text changed.
TEMPLATE_SCORE_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "skill_id": pl.String(),
    "policy_id": pl.String(),
    "template_sha": pl.String(),
    "eval_sha": pl.String(),
    "eval_accuracy": pl.Float64(),
    "eval_margin": pl.Float64(),
    "n_eval": pl.Int64(),
    "pair_diffs": pl.List(pl.Float64()),  # per eval pair, in canonical order (see `eval_order`)
    "scored_at": pl.Datetime("us", "UTC"),
}

DECISION_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "skill_id": pl.String(),
    "candidate": pl.String(),
    "eval_accuracy": pl.Float64(),
    "eval_margin": pl.Float64(),
    "n_eval": pl.Int64(),
    "adopted": pl.Boolean(),
    "memo": pl.Boolean(),  # the score came from template_scores, not from the policy
    "win_p_value": pl.Float64(),  # against the current template (candidates only)
    "gain_low": pl.Float64(),
    "gain_high": pl.Float64(),
    "note": pl.String(),
}

# Guidance distilled from feedback reasons; `{n}` is the typical sentence count of good answers.
REASON_GUIDANCE: dict[str, str] = {
    FeedbackReason.TOO_VERBOSE: "Keep answers under {n} sentences.",
    FeedbackReason.TOO_BRIEF: "Give enough detail: explain the why, not only the what.",
    FeedbackReason.WRONG_TONE: "Keep a polite, warm and respectful tone.",
    FeedbackReason.NOT_HELPFUL: "Answer the actual question first, then give one concrete next step.",
    FeedbackReason.INCORRECT_INFO: "State only facts you are sure of; say clearly when you are unsure.",
}

# (prompts, chosen, rejected) → (reward of chosen, reward of rejected): the DPO implicit reward.
RewardFn = Callable[[list[str], list[str], list[str]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class SkillTemplate:
    skill_id: str
    description: str
    template: str
    version: int


@dataclass(frozen=True)
class TemplateConfig:
    """Knobs of template refinement (SPEC §4.7)."""

    # A candidate replaces the current template only when its win on the held-out pairs is
    # significant: a one-sided exact sign test on the pairs where the two disagree, p < `alpha`.
    # Even a clean sweep needs 5 such pairs (0.5**5 = 0.031 < 0.05), so fewer eval pairs than
    # that can never show a win: they are not scored.
    alpha: float = 0.05
    min_eval_pairs: int = 5
    margin_epsilon: float = 1e-3  # at equal accuracy, a candidate must beat the margin by this
    min_reason_count: int = 1  # feedback rows with a reason before it becomes guidance
    max_examples: int = 1  # best outputs / corrections quoted in a candidate
    example_max_chars: int = 300
    default_max_sentences: int = 3


@dataclass(frozen=True)
class TemplateScore:
    accuracy: float
    margin: float
    n: int
    diffs: tuple[float, ...] = ()  # per eval pair: reward(chosen) − reward(rejected)


@dataclass(frozen=True)
class Comparison:
    """A candidate against the current template on the same eval pairs (a paired comparison)."""

    wins: int  # pairs the candidate ranks right and the current template wrong
    losses: int  # the reverse
    n: int
    p_value: float  # one-sided exact sign test (McNemar) on the wins + losses discordant pairs
    gain_low: float  # 95 % interval of the accuracy gain (paired Wald, clipped to [-1, 1])
    gain_high: float

    def note(self) -> str:
        return (
            f"wins {self.wins}, losses {self.losses} of {self.n} pairs, p={self.p_value:.3f}, "
            f"accuracy gain 95% [{self.gain_low:+.2f}, {self.gain_high:+.2f}]"
        )


def compare(candidate: TemplateScore, current: TemplateScore) -> Comparison:
    """Is the candidate's win real? Needs both scores' per-pair differences on the same pairs."""
    if len(candidate.diffs) != len(current.diffs):
        raise ValueError("a paired comparison needs both templates scored on the same pairs")
    right = np.asarray(candidate.diffs) > 0
    was_right = np.asarray(current.diffs) > 0
    wins, losses, n = int((right & ~was_right).sum()), int((~right & was_right).sum()), right.size
    discordant = wins + losses
    p_value = sum(math.comb(discordant, k) for k in range(wins, discordant + 1)) / 2**discordant
    gain = (wins - losses) / n if n else 0.0
    spread = 1.96 * math.sqrt(max(discordant - (wins - losses) ** 2 / n, 0.0)) / n if n else 1.0
    return Comparison(wins, losses, n, p_value, max(gain - spread, -1.0), min(gain + spread, 1.0))


@dataclass(frozen=True)
class Candidate:
    name: str
    template: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class SkillEvidence:
    tenant_id: str
    skill_id: str
    reasons: dict[str, int] = field(default_factory=dict)
    corrections: list[str] = field(default_factory=list)
    best_outputs: list[str] = field(default_factory=list)
    typical_sentences: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "reasons": self.reasons,
            "n_corrections": len(self.corrections),
            "n_best_outputs": len(self.best_outputs),
            "typical_sentences": self.typical_sentences,
        }


def load_registry(resource: str = REGISTRY_RESOURCE) -> dict[str, SkillTemplate]:
    """The base skill templates shipped in the package (`pipeline/skill_templates.yaml`)."""
    text = resources.files("pipeline").joinpath(resource).read_text(encoding="utf-8")
    return parse_registry(text)


def parse_registry(text: str) -> dict[str, SkillTemplate]:
    raw = yaml.safe_load(text) or {}
    skills = raw.get("skills") or {}
    registry: dict[str, SkillTemplate] = {}
    for skill_id, spec in skills.items():
        template = str(spec.get("template") or "").strip()
        if not template:
            raise ValueError(f"skill template registry: {skill_id} has no template")
        registry[str(skill_id)] = SkillTemplate(
            skill_id=str(skill_id),
            description=str(spec.get("description") or "").strip(),
            template=template,
            version=int(spec.get("version", 1)),
        )
    return registry


def format_prompt(prompt: str, template: str | None = None) -> str:
    """The text a policy sees: an optional template prefix, then the request. Ends on a newline so
    the completion starts on a token boundary (TRL tokenizes prompt and prompt+completion)."""
    prefix = f"{template.strip()}\n\n" if template else ""
    return f"{prefix}Request: {prompt.strip()}\nResponse:\n"


# --- evidence ---------------------------------------------------------------------------------


def _sentence_count() -> pl.Expr:
    return pl.max_horizontal(pl.col("text").str.count_matches(r"[.!?]+(\s|$)"), pl.lit(1))


def gather_evidence(
    interactions: pl.DataFrame,
    feedback: pl.DataFrame,
    few_shot_sets: pl.DataFrame | None = None,
    config: TemplateConfig | None = None,
) -> dict[tuple[str, str], SkillEvidence]:
    """Per tenant × skill: feedback reasons, corrected outputs and the best few-shot outputs."""
    config = config or TemplateConfig()
    skills = interactions.select(
        "tenant_id", pl.col("event_id").alias("target_id"), "skill_id"
    ).filter(pl.col("skill_id").is_not_null())
    fb = feedback.join(skills, on=["tenant_id", "target_id"], how="inner")
    reasons = (
        fb.filter(pl.col("reason").is_not_null() & (pl.col("reason") != FeedbackReason.OTHER))
        .group_by("tenant_id", "skill_id", "reason")
        .len()
        .filter(pl.col("len") >= config.min_reason_count)
        .sort("tenant_id", "skill_id", "len", "reason", descending=[False, False, True, False])
    )
    corrections = (
        fb.filter(
            (pl.col("signal") == Signal.CORRECTION) & pl.col("corrected_output").is_not_null()
        )
        .sort("ts", descending=True)
        .select("tenant_id", "skill_id", pl.col("corrected_output").alias("text"))
    )
    best = (
        few_shot_sets.filter(pl.col("skill_id").is_not_null())
        .sort("rank")
        .select("tenant_id", "skill_id", pl.col("output").alias("text"))
        if few_shot_sets is not None and few_shot_sets.height
        else pl.DataFrame(schema={"tenant_id": pl.String, "skill_id": pl.String, "text": pl.String})
    )
    sentences = (
        pl.concat([corrections, best])
        .with_columns(_sentence_count().alias("n"))
        .group_by("tenant_id", "skill_id")
        .agg(pl.col("n").median().round().cast(pl.Int64))
    )
    evidence: dict[tuple[str, str], SkillEvidence] = {}

    def get(tenant: str, skill: str) -> SkillEvidence:
        return evidence.setdefault((tenant, skill), SkillEvidence(tenant, skill))

    for tenant, skill, reason, count in reasons.iter_rows():
        get(tenant, skill).reasons[reason] = int(count)
    for (tenant, skill), group in corrections.group_by(
        "tenant_id", "skill_id", maintain_order=True
    ):
        get(str(tenant), str(skill)).corrections = group["text"].to_list()
    for (tenant, skill), group in best.group_by("tenant_id", "skill_id", maintain_order=True):
        get(str(tenant), str(skill)).best_outputs = group["text"].to_list()
    for tenant, skill, n in sentences.iter_rows():
        if (tenant, skill) in evidence:
            evidence[(tenant, skill)].typical_sentences = int(n)
    return evidence


def _quote(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def candidate_templates(
    base: str, evidence: SkillEvidence, config: TemplateConfig | None = None
) -> list[Candidate]:
    """Refinements of the *base* template (never stacked on an earlier refinement, so templates do
    not grow night after night), each carrying the evidence it came from."""
    config = config or TemplateConfig()
    n = evidence.typical_sentences or config.default_max_sentences
    guidance = [
        (reason, REASON_GUIDANCE[reason].format(n=n))
        for reason in evidence.reasons
        if reason in REASON_GUIDANCE
    ]
    examples = [_quote(t, config.example_max_chars) for t in evidence.best_outputs][
        : config.max_examples
    ]
    corrections = [_quote(t, config.example_max_chars) for t in evidence.corrections][
        : config.max_examples
    ]
    out: list[Candidate] = []
    if guidance:
        reason, line = guidance[0]
        out.append(
            Candidate(
                f"reason:{reason}",
                f"{base}\n{line}",
                {"reasons": {reason: evidence.reasons[reason]}},
            )
        )
    if len(guidance) > 1:
        out.append(
            Candidate(
                "reasons:all",
                "\n".join([base, *(line for _, line in guidance)]),
                {"reasons": {r: evidence.reasons[r] for r, _ in guidance}},
            )
        )
    if examples:
        quoted = "\n".join(f"- {e}" for e in examples)
        out.append(
            Candidate(
                "best_examples",
                f"{base}\nA good answer looks like this:\n{quoted}",
                {"best_outputs": len(examples)},
            )
        )
    if corrections:
        quoted = "\n".join(f"- {c}" for c in corrections)
        out.append(
            Candidate(
                "corrections",
                f"{base}\nPeople corrected answers toward this:\n{quoted}",
                {"corrections": len(corrections)},
            )
        )
    if guidance and (examples or corrections):
        quoted = "\n".join(f"- {e}" for e in (examples or corrections))
        out.append(
            Candidate(
                "combined",
                "\n".join(
                    [
                        base,
                        *(line for _, line in guidance),
                        "A good answer looks like this:",
                        quoted,
                    ]
                ),
                {
                    "reasons": {r: evidence.reasons[r] for r, _ in guidance},
                    "examples": len(examples or corrections),
                },
            )
        )
    seen: set[str] = set()
    unique = []
    for candidate in out:
        if candidate.template not in seen:
            seen.add(candidate.template)
            unique.append(candidate)
    return unique


# --- scoring and selection --------------------------------------------------------------------


def score_template(reward_fn: RewardFn, template: str, eval_pairs: pl.DataFrame) -> TemplateScore:
    """Preference accuracy and mean reward margin of the policy with `template` as prompt prefix."""
    prompts = [format_prompt(p, template) for p in eval_pairs["prompt"].to_list()]
    chosen_r, rejected_r = reward_fn(
        prompts, eval_pairs["chosen"].to_list(), eval_pairs["rejected"].to_list()
    )
    return preference_score(chosen_r, rejected_r)


def preference_score(chosen_rewards: np.ndarray, rejected_rewards: np.ndarray) -> TemplateScore:
    diff = np.asarray(chosen_rewards, dtype=np.float64) - np.asarray(
        rejected_rewards, dtype=np.float64
    )
    if diff.size == 0:
        return TemplateScore(accuracy=float("nan"), margin=float("nan"), n=0)
    return TemplateScore(
        accuracy=float((diff > 0).mean()),
        margin=float(diff.mean()),
        n=int(diff.size),
        diffs=tuple(diff.tolist()),
    )


def beats(candidate: TemplateScore, current: TemplateScore, epsilon: float) -> bool:
    """Strictly better accuracy; at equal accuracy, a margin better by more than `epsilon`."""
    if candidate.accuracy > current.accuracy + 1e-12:
        return True
    return abs(candidate.accuracy - current.accuracy) <= 1e-12 and (
        candidate.margin > current.margin + epsilon
    )


def select_template(
    current: TemplateScore, scored: Sequence[TemplateScore], epsilon: float
) -> int | None:
    """Index of the best candidate if it beats the current template, else None (keep current)."""
    if not scored:
        return None
    best = max(range(len(scored)), key=lambda i: (scored[i].accuracy, scored[i].margin, -i))
    return best if beats(scored[best], current, epsilon) else None


def _sha(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def eval_order(pairs: pl.DataFrame) -> pl.DataFrame:
    """Eval pairs in one canonical order, so per-pair scores line up across templates and nights."""
    return pairs.sort("prompt", "chosen", "rejected")


def eval_set_sha(pairs: pl.DataFrame) -> str:
    """Content hash of a set of eval pairs (order-free)."""
    rows = sorted(zip(pairs["prompt"], pairs["chosen"], pairs["rejected"], strict=True))
    return _sha(*(_sha(*row) for row in rows))


class ScoreMemo:
    """`template_scores` as a lookup: (tenant, skill, policy, template, eval set) → score."""

    def __init__(self, rows: pl.DataFrame | None, created_at: datetime) -> None:
        self.created_at = created_at
        # Scores kept before per-pair differences were recorded cannot be compared: scored again.
        self.rows = (
            rows.select(list(TEMPLATE_SCORE_SCHEMA))
            .cast(TEMPLATE_SCORE_SCHEMA)  # type: ignore[arg-type]
            .filter(pl.col("pair_diffs").is_not_null())
            if rows is not None
            else pl.DataFrame(schema=TEMPLATE_SCORE_SCHEMA)
        )
        self.known = {
            (t, s, p, ts, es): TemplateScore(float(a), float(m), int(n), tuple(d))
            for t, s, p, ts, es, a, m, n, d in self.rows.select(
                list(TEMPLATE_SCORE_SCHEMA)[:-1]
            ).iter_rows()
        }
        self.new: list[dict[str, Any]] = []
        self.hits = 0

    def score(
        self,
        key: tuple[str, str, str],
        reward_fn: RewardFn,
        template: str,
        pairs: pl.DataFrame,
        eval_sha: str,
    ) -> tuple[TemplateScore, bool]:
        """(score, came from the memo) of `template` on `pairs` for (tenant, skill, policy)."""
        full = (*key, _sha(template), eval_sha)
        if full in self.known:
            self.hits += 1
            return self.known[full], True
        score = score_template(reward_fn, template, pairs)
        self.known[full] = score
        self.new.append(
            dict(
                zip(
                    TEMPLATE_SCORE_SCHEMA,
                    (*full, score.accuracy, score.margin, score.n, score.diffs, self.created_at),
                    strict=True,
                )
            )
        )
        return score, False

    def table(self) -> pl.DataFrame:
        if not self.new:
            return self.rows
        return pl.concat([self.rows, pl.DataFrame(self.new, schema=TEMPLATE_SCORE_SCHEMA)])


# --- history ----------------------------------------------------------------------------------


def empty_history() -> pl.DataFrame:
    return pl.DataFrame(schema=TEMPLATE_HISTORY_SCHEMA)


def _row(**values: Any) -> dict[str, Any]:
    return {name: values.get(name) for name in TEMPLATE_HISTORY_SCHEMA}


def seed_registry_rows(
    history: pl.DataFrame,
    registry: Mapping[str, SkillTemplate],
    tenants: Iterable[str],
    created_at: datetime,
) -> pl.DataFrame:
    """Every tenant × registry skill has a current template: the registry one when the tenant has
    none yet, or when the registry's version moved past the one its history derives from."""
    history = history.select(list(TEMPLATE_HISTORY_SCHEMA)).cast(TEMPLATE_HISTORY_SCHEMA)  # type: ignore[arg-type]
    known = {
        (t, s): (int(v), int(b) if b is not None else 0)
        for t, s, v, b in history.group_by("tenant_id", "skill_id")
        .agg(pl.col("version").max(), pl.col("base_version").max())
        .iter_rows()
    }
    new_rows = []
    stale: list[tuple[str, str]] = []
    for tenant in sorted(set(tenants)):
        for skill in registry.values():
            max_version, base_version = known.get((tenant, skill.skill_id), (0, 0))
            if (tenant, skill.skill_id) in known and base_version >= skill.version:
                continue
            if (tenant, skill.skill_id) in known:
                stale.append((tenant, skill.skill_id))
            new_rows.append(
                _row(
                    tenant_id=tenant,
                    skill_id=skill.skill_id,
                    version=max(max_version + 1, skill.version),
                    template=skill.template,
                    is_current=True,
                    evidence=json.dumps(
                        {"source": SOURCE_REGISTRY, "registry_version": skill.version}
                    ),
                    created_at=created_at,
                    source=SOURCE_REGISTRY,
                    base_version=skill.version,
                )
            )
    if stale:
        history = _clear_current(history, stale)
    if not new_rows:
        return history
    return pl.concat([history, pl.DataFrame(new_rows, schema=TEMPLATE_HISTORY_SCHEMA)])


def _clear_current(history: pl.DataFrame, keys: list[tuple[str, str]]) -> pl.DataFrame:
    flagged = pl.DataFrame(
        keys, schema={"tenant_id": pl.String, "skill_id": pl.String}, orient="row"
    )
    return (
        history.join(
            flagged.with_columns(pl.lit(True).alias("_hit")),
            on=["tenant_id", "skill_id"],
            how="left",
        )
        .with_columns(
            pl.when(pl.col("_hit")).then(False).otherwise(pl.col("is_current")).alias("is_current")
        )
        .drop("_hit")
    )


def current_templates(history: pl.DataFrame) -> pl.DataFrame:
    return history.filter(pl.col("is_current"))


def rollback(history: pl.DataFrame, tenant_id: str, skill_id: str, version: int) -> pl.DataFrame:
    """Make an earlier version current again (nothing is deleted)."""
    key = (pl.col("tenant_id") == tenant_id) & (pl.col("skill_id") == skill_id)
    if history.filter(key & (pl.col("version") == version)).is_empty():
        raise ValueError(f"no template version {version} for {tenant_id}/{skill_id}")
    return history.with_columns(
        pl.when(key)
        .then(pl.col("version") == version)
        .otherwise(pl.col("is_current"))
        .alias("is_current")
    )


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
    replaced: list[tuple[str, str]] = []
    current = {
        (r["tenant_id"], r["skill_id"]): r for r in current_templates(history).iter_rows(named=True)
    }
    for (tenant, skill), ev in sorted(evidence.items()):
        note = None
        if skill not in registry:
            note = "skill not in the registry"
        elif tenant not in scorers:
            note = "no trained policy for the tenant"
        pairs = eval_order(
            eval_pairs.filter((pl.col("tenant_id") == tenant) & (pl.col("skill_id") == skill))
        )
        if note is None and pairs.height < config.min_eval_pairs:
            note = f"{pairs.height} eval pairs < min_eval_pairs {config.min_eval_pairs}"
        if note is not None:
            decisions.append(_decision(tenant, skill, "-", None, False, note))
            continue
        policy_id, reward_fn = scorers[tenant]
        now = current[(tenant, skill)]
        candidates = candidate_templates(registry[skill].template, ev, config)
        candidates = [c for c in candidates if c.template != now["template"]]
        key, eval_sha = (tenant, skill, policy_id), eval_set_sha(pairs)
        try:
            current_score, current_memo = memo.score(
                key, reward_fn, now["template"], pairs, eval_sha
            )
            outcomes = [memo.score(key, reward_fn, c.template, pairs, eval_sha) for c in candidates]
        except Exception as error:  # this tenant × skill keeps its template; the others go on
            log.exception("scoring templates of %s × %s failed", tenant, skill)
            note = f"scoring failed, the current template stays: {one_line(error)}"
            decisions.append(_decision(tenant, skill, "-", None, False, note))
            continue
        scored = [score for score, _ in outcomes]
        best = select_template(current_score, scored, config.margin_epsilon)
        versus = [compare(score, current_score) for score in scored]
        winner = best if best is not None and versus[best].p_value < config.alpha else None
        decisions.append(
            _decision(
                tenant,
                skill,
                f"current:v{now['version']}",
                current_score,
                False,
                "current",
                current_memo,
            )
        )
        for i, (cand, (score, from_memo)) in enumerate(zip(candidates, outcomes, strict=True)):
            note = None
            if i == best and winner is None:
                note = f"kept the current template: the win is not significant ({versus[i].note()})"
            decisions.append(
                _decision(tenant, skill, cand.name, score, i == winner, note, from_memo, versus[i])
            )
        if winner is None:
            continue
        cand, score, win = candidates[winner], scored[winner], versus[winner]
        replaced.append((tenant, skill))
        new_rows.append(
            _row(
                tenant_id=tenant,
                skill_id=skill,
                version=int(
                    history.filter((pl.col("tenant_id") == tenant) & (pl.col("skill_id") == skill))[
                        "version"
                    ].max()  # type: ignore[arg-type]
                )
                + 1,
                template=cand.template,
                is_current=True,
                eval_accuracy=score.accuracy,
                eval_margin=score.margin,
                evidence=json.dumps(
                    {
                        "source": SOURCE_REFINED,
                        "candidate": cand.name,
                        "from_evidence": cand.evidence,
                        "skill_evidence": ev.as_json(),
                        "n_eval_pairs": score.n,
                        "significance": win.note(),
                        "replaced": {
                            "version": now["version"],
                            "eval_accuracy": current_score.accuracy,
                            "eval_margin": current_score.margin,
                        },
                    },
                    sort_keys=True,
                ),
                policy_id=policy_id,
                created_at=created_at,
                source=SOURCE_REFINED,
                base_version=registry[skill].version,
                eval_n=score.n,
                win_p_value=win.p_value,
                gain_low=win.gain_low,
                gain_high=win.gain_high,
            )
        )
    if replaced:
        history = _clear_current(history, replaced)
        history = pl.concat([history, pl.DataFrame(new_rows, schema=TEMPLATE_HISTORY_SCHEMA)])
    return RefineResult(
        history=history.sort("tenant_id", "skill_id", "version"),
        decisions=pl.DataFrame(decisions, schema=DECISION_SCHEMA),
        adopted=len(replaced),
        scores=memo.table(),
        scored=len(memo.new),
        memo_hits=memo.hits,
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


def missing_current(
    history: pl.DataFrame, registry: Mapping[str, SkillTemplate], tenants: Iterable[str]
) -> list[str]:
    """`tenant/skill` keys without exactly one current template (the asset check)."""
    counts = {
        (t, s): int(n)
        for t, s, n in history.filter(pl.col("is_current"))
        .group_by("tenant_id", "skill_id")
        .len()
        .iter_rows()
    }
    return [
        f"{t}/{s}" for t in sorted(set(tenants)) for s in registry if counts.get((t, s), 0) != 1
    ]
