"""What the loader returns: small frozen records an app can log, format into prompts or explain."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class ScoredMemory:
    """One ranked memory with the parts of its score (SPEC §7: similarity × confidence + boosts).

    `confidence` is the memory's own (decayed) confidence. A memory on the losing side of a
    resolved conflict is overruled: `overruled_by` names the memory the pack prefers, and its
    parts hold `superseded` (the other side of a supersedes link won) or `not_preferred` (the
    source hierarchy prefers the other side), equal to minus its `semantic` part: its
    confidence counts for nothing. Only `include_superseded=True` returns such memories.

    `matched` (a query text or vector was given; None otherwise): whether the query points at
    the memory — a query term in its text, a neighbour in time that has one, or the vector
    channel's cosine — i.e. its relevance part is above 0. False: the memory only fills the k
    rows `search` promises (SPEC §7) and ranks after every matched one."""

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
    overruled_by: str | None = None
    matched: bool | None = None


@dataclass(frozen=True)
class FewShotExample:
    """One example to show a model.

    `quality` is how good the shown output is on [−1, 1]: the feedback score smoothed toward 0
    (0 = no evidence either way, +0.2 after one up-vote, +0.83 after 40 up and 2 down; never
    negative here, the pipeline never picks a net-disliked output). `quality_lower` is the 95 %
    lower bound of the same figure, which the pipeline ranks by: with few votes it is negative
    even for a liked output (one up-vote: −0.54), so read it as "at worst", not as "bad". A
    corrected example shows the output a person wrote: both are 1.0.

    `rank` is the position in the answer (1 = first); `group_rank` the pipeline's rank within
    the example's own (system, kind, skill) set. `confidence` is its memory's confidence (None
    when that memory is not in the pack)."""

    memory_id: str
    system: str | None
    kind: str | None
    skill_id: str | None
    input: str
    output: str
    rank: int
    group_rank: int | None
    quality: float | None
    quality_lower: float | None
    n_feedback: int
    confidence: float | None
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
    """The chosen skill: 0.7·confidence + 0.3·preference alignment, or an ε-greedy exploration.

    `confidence` starts at the tenant's confidence in the skill (`tenant_confidence`, from every
    user's votes) and moves to the user's own as their votes (`user_votes`) arrive."""

    skill_id: str
    score: float
    confidence: float
    alignment: float
    tenant_confidence: float
    user_votes: int
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
