"""What the loader returns: small frozen records an app can log, format into prompts or explain."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ScoredMemory:
    """One ranked memory with the parts of its score (SPEC §7: similarity × confidence + boosts)."""

    memory_id: str
    text: str
    contact_id: str | None
    memory_type: str
    kind: str | None
    confidence: float
    status: str
    stale: bool
    needs_reconfirmation: bool
    has_conflict: bool
    last_confirmed: datetime | None
    tags: list[str]
    score: float
    parts: dict[str, float]
    selector_reason: str | None = None


@dataclass(frozen=True)
class FewShotExample:
    memory_id: str
    system: str | None
    kind: str | None
    skill_id: str | None
    input: str
    output: str
    rank: int | None
    quality_lower: float | None
    is_corrected: bool
    similarity: float | None = None

    def as_prompt(self) -> str:
        note = " (a corrected answer)" if self.is_corrected else ""
        return f"Input: {self.input}\nOutput{note}: {self.output}"


@dataclass(frozen=True)
class Template:
    skill_id: str
    version: Any
    template: str
    is_current: bool
    eval_accuracy: float | None
    eval_margin: float | None
    policy_id: str | None
    created_at: datetime | None
    evidence: str | None


@dataclass(frozen=True)
class SkillChoice:
    """The chosen skill: 0.7·confidence + 0.3·preference alignment, or an ε-greedy exploration."""

    skill_id: str
    score: float
    confidence: float
    alignment: float
    explored: bool
    ranking: list[tuple[str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class Conflict:
    contact_id: str | None
    memory_id_a: str
    memory_id_b: str
    preferred_id: str | None
    reason: str | None
    subject: str | None
    text_a: str | None
    text_b: str | None


@dataclass(frozen=True)
class Selection:
    """The memories to inject, and how they were chosen (`selector` or `algorithmic` fallback)."""

    memories: list[ScoredMemory]
    strategy: str
    fallback_reason: str | None
    elapsed_ms: float
