"""Candidate templates from a tenant's evidence: feedback reasons become guidance, the best rated
outputs and corrections become examples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from pipeline import tables
from pipeline.examples.fewshot import BEST_FIRST
from pipeline.ingest.contracts import FeedbackReason, Signal
from pipeline.preference.templates.registry import TemplateConfig

# Guidance distilled from feedback reasons; `{n}` is the typical sentence count of good answers.
REASON_GUIDANCE: dict[str, str] = {
    FeedbackReason.TOO_VERBOSE: "Keep answers under {n} sentences.",
    FeedbackReason.TOO_BRIEF: "Give enough detail: explain the why, not only the what.",
    FeedbackReason.WRONG_TONE: "Keep a polite, warm and respectful tone.",
    FeedbackReason.NOT_HELPFUL: "Answer the actual question first, then give one concrete next step.",
    FeedbackReason.INCORRECT_INFO: "State only facts you are sure of; say clearly when you are unsure.",
}


@dataclass(frozen=True)
class Candidate:
    name: str
    template: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class SkillEvidence:
    skill_id: str
    reasons: dict[str, int] = field(default_factory=dict)
    corrections: list[str] = field(default_factory=list)  # distinct, the most given first
    best_outputs: list[str] = field(default_factory=list)
    typical_sentences: int | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "reasons": self.reasons,
            "n_distinct_corrections": len(self.corrections),
            "n_best_outputs": len(self.best_outputs),
            "typical_sentences": self.typical_sentences,
        }


def _sentence_count() -> pl.Expr:
    return pl.max_horizontal(pl.col("text").str.count_matches(r"[.!?]+(\s|$)"), pl.lit(1))


# The feedback columns evidence is made of.
EVIDENCE_FEEDBACK_COLUMNS = ("target_id", "ts", "signal", "reason", "corrected_output")


def gather_evidence(
    interactions: pl.DataFrame,
    feedback: pl.DataFrame,
    few_shot_sets: pl.DataFrame | None = None,
    config: TemplateConfig | None = None,
) -> dict[str, SkillEvidence]:
    """Per skill of the tenant (the frames are its rows): feedback reasons, corrected outputs and
    the best few-shot outputs."""
    config = config or TemplateConfig()
    skills = interactions.select(pl.col("event_id").alias("target_id"), "skill_id").filter(
        pl.col("skill_id").is_not_null()
    )
    fb = feedback.join(skills, on="target_id", how="inner")
    reasons = (
        fb.filter(pl.col("reason").is_not_null() & (pl.col("reason") != FeedbackReason.OTHER))
        .group_by("skill_id", "reason")
        .len()
        .filter(pl.col("len") >= config.min_reason_count)
        .sort("skill_id", "len", "reason", descending=[False, True, False])
    )
    corrected = fb.filter(
        (pl.col("signal") == Signal.CORRECTION) & pl.col("corrected_output").is_not_null()
    ).select(
        "skill_id",
        "ts",
        pl.col("corrected_output").str.replace_all(r"\s+", " ").str.strip_chars().alias("text"),
    )
    # The correction people gave most often first (the same words, spacing aside): it is the
    # skill's consensus, and it stays the quoted one while the consensus holds, so its candidate
    # is scored once, not again each night a correction arrives. Ties: the newest, then the text.
    corrections = (
        corrected.group_by("skill_id", "text")
        .agg(pl.len().alias("n"), pl.col("ts").max())
        .sort("skill_id", "n", "ts", "text", descending=[False, True, True, False])
        .select("skill_id", "text")
    )
    # Rank first, then the few-shot sets' own order, across the skill's sets.
    if few_shot_sets is None or few_shot_sets.is_empty():
        few_shot_sets = tables.empty("few_shot_sets")
    best = (
        few_shot_sets.filter(pl.col("skill_id").is_not_null())
        .sort(
            "skill_id",
            "rank",
            *BEST_FIRST,
            descending=[False, False, *BEST_FIRST.values()],
            nulls_last=True,
        )
        .select("skill_id", pl.col("output").alias("text"))
    )
    sentences = (
        pl.concat([corrected.select("skill_id", "text"), best])
        .with_columns(_sentence_count().alias("n"))
        .group_by("skill_id")
        .agg(pl.col("n").median().round().cast(pl.Int64))
    )
    evidence: dict[str, SkillEvidence] = {}

    def get(skill: str) -> SkillEvidence:
        return evidence.setdefault(skill, SkillEvidence(skill))

    for skill, reason, count in reasons.iter_rows():
        get(skill).reasons[reason] = int(count)
    for (skill,), group in corrections.group_by("skill_id", maintain_order=True):
        get(str(skill)).corrections = group["text"].to_list()
    for (skill,), group in best.group_by("skill_id", maintain_order=True):
        get(str(skill)).best_outputs = group["text"].to_list()
    for skill, n in sentences.iter_rows():
        if skill in evidence:
            evidence[skill].typical_sentences = int(n)
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
        out.append(
            _quoting(
                "best_examples", base, "A good answer looks like this:", examples, "best_outputs"
            )
        )
    if corrections:
        out.append(
            _quoting("corrections", base, "People corrected answers toward this:", corrections)
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


def _quoting(
    name: str, base: str, intro: str, quotes: list[str], counted: str | None = None
) -> Candidate:
    """The base template followed by `intro` and the quotes as a list; the evidence counts them."""
    listed = "\n".join(f"- {q}" for q in quotes)
    return Candidate(name, f"{base}\n{intro}\n{listed}", {counted or name: len(quotes)})
