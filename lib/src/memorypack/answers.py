"""The rest of an app's questions: few-shot examples, templates, skills, conflicts, explanations."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from memorypack.arguments import number, optional_number, vector, whole
from memorypack.indexes import TENANT_PRIOR_VOTES, UNKNOWN_SKILL_CONFIDENCE, PackIndexes
from memorypack.questions import STALE_AFTER_DAYS
from memorypack.results import Conflict, FewShotExample, SkillChoice, Template
from memorypack.tables import EMPTY, column_values, has_text
from memorypack.text_queries import TextQueries

# Skill selection (SPEC §4.8).
CONFIDENCE_WEIGHT = 0.7
ALIGNMENT_WEIGHT = 0.3


class Answers:
    """Few-shot examples, templates, skills, conflicts and explanations of one pack."""

    def __init__(self, indexes: PackIndexes, text: TextQueries) -> None:
        self.indexes = indexes
        self.text = text
        self._skill_tags: dict[str, set[str]] | None = None  # built on first use

    def few_shot(
        self,
        system: str | None,
        kind: str | None = None,
        skill_id: str | None = None,
        k: int = 3,
        query_vector: Sequence[float] | np.ndarray | None = None,
        min_confidence: float = 0.0,
        min_score: float | None = None,
        query: str | None = None,
        retrieval: str = "hybrid",
    ) -> list[FewShotExample]:
        """The best examples of a system (× kind × skill); with a query text or vector, the most
        relevant inputs first (`retrieval` as in `search`; `similarity` is the cosine when the
        vector channel ran). Floors: the memory's `confidence` ≥ min_confidence, the example's
        `quality` ≥ min_score. `rank` is the position in this answer."""
        k, query_vector = whole(k, "k"), vector(query_vector)
        min_confidence = number(min_confidence, "min_confidence")
        min_score = optional_number(min_score, "min_score")
        rows = self.indexes.example_groups.get((system, kind, skill_id), EMPTY)
        if min_confidence > 0:
            rows = rows[self.indexes.example_confidence[rows] >= min_confidence]
        if min_score is not None:
            rows = rows[self.indexes.example_quality[rows] >= min_score]
        similarity = np.full(rows.size, np.nan)
        if (query_vector is not None or has_text(query)) and rows.size:
            memory_rows = self.indexes.example_rows[rows]
            known = memory_rows >= 0
            found = self.text.relevance(memory_rows[known], query, query_vector, retrieval)
            relevance = np.full(rows.size, -2.0)
            if "similarity" in found:
                similarity[known] = found["similarity"]
            if found:
                relevance[known] = found.get("relevance", found.get("similarity"))
            # Stable sort: among equally relevant examples the quality order stands.
            order = np.argsort(-relevance, kind="stable")
            rows, similarity = rows[order], similarity[order]
        return [
            replace(
                self.indexes.examples[row],
                rank=position + 1,
                similarity=None if np.isnan(value) else float(value),
            )
            for position, (row, value) in enumerate(zip(rows[:k], similarity[:k], strict=True))
        ]

    def few_shot_systems(self) -> list[str]:
        """Systems that have few-shot examples, the best covered first."""
        counts: dict[str, int] = {}
        for example in self.indexes.examples:
            if example.system:
                counts[example.system] = counts.get(example.system, 0) + 1
        return sorted(counts, key=lambda s: (-counts[s], s))

    def skills_of(self, system: str, kind: str | None = None) -> list[str]:
        """The skills the pack's calls of `system` (× `kind`) used: its interaction memories' and
        few-shot examples' skills, in name order."""
        used = {
            skill
            for row_system, row_kind, skill in zip(
                column_values(self.indexes.memories, "system"),
                column_values(self.indexes.memories, "kind"),
                column_values(self.indexes.memories, "skill_id"),
                strict=True,
            )
            if row_system == system and (kind is None or row_kind == kind)
        }
        used |= {
            e.skill_id
            for e in self.indexes.examples
            if e.system == system and (kind is None or e.kind == kind)
        }
        return sorted(s for s in used if s is not None)

    def template(self, skill_id: str, version: Any = None) -> Template | None:
        """The current template of a skill (or a given version); None when the pack has none."""
        history = self.indexes.templates.get(skill_id, [])
        if version is not None:
            return next((t for t in history if str(t.version) == str(version)), None)
        current = [t for t in history if t.is_current]
        candidates = current or history
        return candidates[-1] if candidates else None

    def template_history(self, skill_id: str) -> list[Template]:
        return list(self.indexes.templates.get(skill_id, []))

    def skills(self) -> list[str]:
        return list(self.indexes.all_skills)

    def _tags_by_skill(self) -> dict[str, set[str]]:
        if self._skill_tags is None:
            found: dict[str, set[str]] = {}
            for skill, tags in zip(
                column_values(self.indexes.memories, "skill_id"),
                column_values(self.indexes.memories, "tags"),
                strict=True,
            ):
                if skill is not None and tags:
                    found.setdefault(skill, set()).update(tags)
            self._skill_tags = found
        return self._skill_tags

    def select_skill(
        self,
        user_id: str | None,
        context_tags: Sequence[str] | None = None,
        epsilon: float = 0.0,
        rng: np.random.Generator | int | None = None,
        min_confidence: float = 0.0,
        min_score: float | None = None,
        skills: Sequence[str] | None = None,
    ) -> SkillChoice | None:
        """0.7·confidence + 0.3·alignment(user preference, skill vector); ε-greedy when asked.

        The confidence starts at the tenant's (every user's votes on the skill) and moves to the
        user's own as their votes arrive, so a new user gets the skills that work for the tenant.
        `skills`: choose among these only (e.g. `skills_of(system)`). Floors: `confidence` ≥
        min_confidence, `score` ≥ min_score; None when no skill passes."""
        epsilon = number(epsilon, "epsilon", low=0, high=1)
        min_confidence = number(min_confidence, "min_confidence")
        min_score = optional_number(min_score, "min_score")
        known = self.indexes.user_skills.get(user_id or "", {})
        candidates = self.indexes.all_skills
        if skills is not None:
            allowed = set(skills)
            candidates = [s for s in candidates if s in allowed]
        if context_tags:
            wanted = set(context_tags)
            tagged = self._tags_by_skill()
            candidates = [s for s in candidates if tagged.get(s, set()) & wanted] or candidates
        preference = self.indexes.user_vectors.get(user_id or "")
        ranking: list[SkillChoice] = []
        for skill in candidates:
            tenant = self.indexes.tenant_skills.get(skill, UNKNOWN_SKILL_CONFIDENCE)
            own, votes = known.get(skill, (tenant, 0))
            confidence = (
                (votes * own + TENANT_PRIOR_VOTES * tenant) / (votes + TENANT_PRIOR_VOTES)
                if votes
                else tenant
            )
            vector = self.indexes.skill_vectors.get(skill)
            alignment = (
                float(np.dot(preference, vector))
                if preference is not None
                and vector is not None
                and preference.shape == vector.shape
                else 0.0
            )
            score = CONFIDENCE_WEIGHT * confidence + ALIGNMENT_WEIGHT * alignment
            if confidence >= min_confidence and (min_score is None or score >= min_score):
                ranking.append(
                    SkillChoice(skill, score, confidence, alignment, tenant, votes, False)
                )
        if not ranking:
            return None
        ranking.sort(key=lambda c: (-c.score, c.skill_id))
        generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        explored = epsilon > 0 and len(ranking) > 1 and generator.random() < epsilon
        pick = ranking[int(generator.integers(len(ranking)))] if explored else ranking[0]
        return replace(pick, explored=explored, ranking=[(c.skill_id, c.score) for c in ranking])

    def contact_memories(self, contact_id: str, include_inactive: bool = False) -> pa.Table:
        """The rows of memories.parquet about one contact (active ones unless asked), pack order."""
        code = self.indexes.contact_code.get(contact_id)
        rows = self.indexes.contact_rows.get(code, EMPTY) if code is not None else EMPTY
        if not include_inactive:
            rows = rows[self.indexes.active[rows]]
        return self.indexes.memories.take(pa.array(np.sort(rows), type=pa.int64()))

    def conflicts(self, contact_id: str | None = None) -> list[Conflict]:
        return [
            Conflict(
                contact_id=row.get("contact_id"),
                memory_id_a=row.get("memory_id_a"),
                memory_id_b=row.get("memory_id_b"),
                preferred_id=row.get("preferred_id"),
                reason=row.get("reason"),
                subject=row.get("subject"),
                text_a=row.get("text_a"),
                text_b=row.get("text_b"),
            )
            for row in self.indexes.conflicts
            if contact_id is None or row.get("contact_id") == contact_id
        ]

    def memory(self, memory_id: str) -> dict[str, Any] | None:
        """A memory's row as the pack holds it; None when the pack does not hold it."""
        row = self.indexes.row_of.get(memory_id)
        return None if row is None else dict(self.indexes.memories.slice(row, 1).to_pylist()[0])

    def explain(self, memory_id: str) -> str | None:
        """Why an app acted: "because of this memory …, last confirmed <date>, confidence <x>";
        None when the pack does not hold the memory."""
        m = self.memory(memory_id)
        if m is None:
            return None
        confirmed = m.get("last_confirmed")
        when = (
            confirmed.astimezone(UTC).date().isoformat()
            if isinstance(confirmed, datetime)
            else "never"
        )
        about = f", about {m['contact_id']}" if m.get("contact_id") else ""
        text = f'because of this memory: "{m.get("text") or ""}" ({m["memory_type"]}{about}), '
        text += f"last confirmed {when}, confidence {float(m['confidence']):.2f}"
        notes = []
        if m.get("n_feedback"):
            quality = m.get("quality_score")
            score = f", quality {float(quality):+.2f}" if quality is not None else ""
            notes.append(f"{m['n_feedback']} feedback signals{score}")
        if m.get("stale"):
            notes.append(
                f"stale: older than {STALE_AFTER_DAYS:.0f} days, mention its age before acting on it"
            )
        if m.get("needs_reconfirmation"):
            notes.append("needs reconfirmation")
        row = self.indexes.row_of[memory_id]
        if self.indexes.overruled[row]:
            why = "superseded" if self.indexes.overruled[row] == 1 else "not preferred"
            notes.append(f"{why}: the pack prefers {self.indexes.overruled_by[row]}")
        for c in self.indexes.conflicts:
            if memory_id in (c.get("memory_id_a"), c.get("memory_id_b")):
                other = (
                    c.get("memory_id_b")
                    if c.get("memory_id_a") == memory_id
                    else c.get("memory_id_a")
                )
                notes.append(
                    f"conflicts with {other} (preferred: {c.get('preferred_id')}); ask the person"
                )
        if m.get("status") != "active":
            notes.append(f"status {m.get('status')}")
        if m.get("usage_reason"):
            notes.append(str(m["usage_reason"]))
        return text + "".join(f"; {note}" for note in notes)
