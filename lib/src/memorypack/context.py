"""Ready-to-use prompt pieces (`MemoryPack.prompt_context`): what an app pastes into a model call.

The pieces follow seed 004's trust rules (SPEC §4.2): every memory line carries its trust line
(type, confidence, when it was last confirmed) and says so when the app must mention its age or
ask before acting; conflicts are surfaced, never silently resolved; the audit's reconfirmation
and promotion questions are handed to the app to ask the person, bundled into one question.

Trimming to `budget_chars` keeps whole lines and drops them in reverse order of this priority:

1. the current template (the procedure the model follows),
2. open conflicts about the person (acting on either side unasked is the failure seed 004 forbids),
3. the person's memories, best ranked first,
4. the questions to ask the person,
5. the few-shot examples, best first.

A line that does not fit is skipped and a later, shorter one may still fit; what was left out is
counted in `PromptContext.dropped`. The rendered order is fixed (template, memories, conflicts,
questions, examples) whatever fitted.

`PromptContext.receipt` is what the app logs with the call (`memorypack.receipt`): the template,
memories and examples that fitted, in that order. A call in the holdout gets an empty context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memorypack.arguments import vector, whole
from memorypack.questions import (
    STALE_AFTER_DAYS,
    Question,
    age_days,
    questions_for,
    quoted,
    when,
)
from memorypack.reads import Pack
from memorypack.receipt import Receipt, in_holdout, receipt
from memorypack.results import Conflict, FewShotExample, ScoredMemory, Template

# Seed 004: "if acting on low-confidence memory, state it"; "confidence < 0.6 being used for
# autonomous action: stop, state confidence level, ask for confirmation".
LOW_CONFIDENCE = 0.6
PRIORITY = ("template", "conflicts", "memories", "questions", "examples")
RENDER_ORDER = ("template", "memories", "conflicts", "questions", "examples")
HEADERS = {
    "memories": (
        "## What we know about this person\n"
        "(each: type, confidence, last confirmed; act only on what you could explain this way)"
    ),
    "conflicts": "## Open conflicts: ask the person which holds before acting on either",
    "questions": "## Questions for the person (ask them together, once)",
    "examples": "## Examples of good answers",
}


@dataclass(frozen=True)
class PromptContext:
    """The pieces that fitted `budget_chars`, and `text`, their rendering (≤ budget_chars)."""

    contact_id: str | None
    query: str | None
    system: str | None
    budget_chars: int
    text: str
    template: Template | None
    memories: list[ScoredMemory]
    conflicts: list[Conflict]
    questions: list[Question]
    examples: list[FewShotExample]
    # What the app logs as the interaction's `context` (`receipt.as_context()`, SPEC §2).
    receipt: Receipt
    # Lines left out to fit the budget, per part (template, conflicts, memories, questions, examples).
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def ask(self) -> str | None:
        """The questions bundled into one sentence for the person (seed 004: ask sparingly, bundle
        checks into one question); None when there is nothing to ask."""
        if not self.questions:
            return None
        if len(self.questions) == 1:
            return self.questions[0].text
        numbered = " ".join(f"({i}) {q.text}" for i, q in enumerate(self.questions, 1))
        return f"Before I go on, a few quick checks: {numbered}"


def memory_line(memory: ScoredMemory, now: datetime) -> str:
    """`- "text" (type, confidence 0.58, last confirmed 2026-11-02, 6 days ago)` plus the warnings
    the trust rules ask for."""
    age = age_days(memory.last_confirmed, now)
    ago = f", {int(age)} days ago" if age is not None and age >= 0 else ""
    kind = memory.memory_type.replace("_", " ")
    line = (
        f"- {quoted(memory.text)} ({kind}, confidence {memory.confidence:.2f}, "
        f"last confirmed {when(memory.last_confirmed)}{ago})"
    )
    warnings = []
    if memory.stale or (age is not None and age > STALE_AFTER_DAYS):
        months = int(age // 30) if age is not None else 6
        warnings.append(f"about {months} months old: say how old it is before acting on it")
    if memory.needs_reconfirmation:
        warnings.append("high impact, low confidence: ask the person before acting on it")
    elif memory.confidence < LOW_CONFIDENCE:
        warnings.append("low confidence: say so, do not act on it alone")
    if memory.has_conflict:
        warnings.append("another memory disagrees: see the conflicts")
    if memory.overruled_by:
        warnings.append(f"overruled by {memory.overruled_by}: do not act on it")
    return line + "".join(f" — {w}" for w in warnings)


def conflict_line(conflict: Conflict) -> str:
    prefers = ""
    if conflict.preferred_id in (conflict.memory_id_a, conflict.memory_id_b):
        first = conflict.preferred_id == conflict.memory_id_a
        prefers = f" (the trust order prefers the {'first' if first else 'second'})"
    about = f" about {conflict.subject}" if conflict.subject else ""
    return f"- {quoted(conflict.text_a)} vs {quoted(conflict.text_b)}{about}{prefers}"


def example_block(example: FewShotExample) -> str:
    return example.as_prompt()


def template_block(template: Template) -> str:
    return f"## Procedure ({template.skill_id}, version {template.version})\n{template.template}"


def _render(chosen: dict[str, list[str]]) -> str:
    blocks = []
    for part in RENDER_ORDER:
        lines = chosen.get(part) or []
        if not lines:
            continue
        if part == "template":
            blocks.append(lines[0])
        else:
            separator = "\n\n" if part == "examples" else "\n"
            blocks.append(HEADERS[part] + "\n" + separator.join(lines))
    return "\n\n".join(blocks)


def fit(candidates: dict[str, list[str]], budget_chars: int) -> tuple[dict[str, list[int]], str]:
    """Which lines of each part fit the budget, taken in PRIORITY order (best line of a part
    first), and the rendering. Returns part → indices kept, and the text (≤ budget_chars)."""
    kept: dict[str, list[int]] = {part: [] for part in PRIORITY}
    chosen: dict[str, list[str]] = {part: [] for part in PRIORITY}
    for part in PRIORITY:
        for index, line in enumerate(candidates.get(part, [])):
            chosen[part].append(line)
            if len(_render(chosen)) <= budget_chars:
                kept[part].append(index)
            else:
                chosen[part].pop()
    return kept, _render(chosen)


def _template(
    pack: Pack,
    skill_id: str | None,
    user_id: str | None,
    tags: Sequence[str] | None,
    system: str | None,
    kind: str | None,
) -> Template | None:
    """The current template of `skill_id`, else of the best skill for this user that has one (a
    skill may have statistics only) among the skills `system`'s calls used (of `kind`, when it
    has any): a support call never gets a procedure only another system's calls use. A system
    the pack holds no call of gets none."""
    if skill_id is not None:
        return pack.template(skill_id)
    among = None
    if system is not None:
        among = (pack.skills_of(system, kind) if kind is not None else []) or pack.skills_of(system)
    choice = pack.select_skill(user_id, context_tags=tags, skills=among)
    for skill, _ in choice.ranking if choice is not None else []:
        template = pack.template(skill)
        if template is not None:
            return template
    return None


def _said(text: str | None) -> str:
    """A text as a reader compares it: spacing and case aside."""
    return " ".join((text or "").split()).casefold()


def distinct_memories(memories: Sequence[ScoredMemory], k: int) -> list[ScoredMemory]:
    """The first k memories whose texts differ (a statement logged twice, a request sent twice:
    the better ranked one stands for both)."""
    seen: set[str] = set()
    kept: list[ScoredMemory] = []
    for memory in memories:
        if _said(memory.text) not in seen and len(kept) < k:
            seen.add(_said(memory.text))
            kept.append(memory)
    return kept


def distinct_examples(
    examples: Sequence[FewShotExample], memories: Sequence[ScoredMemory], k: int
) -> list[FewShotExample]:
    """The first k examples that repeat nothing: not a memory already listed (by id or text), not
    an input or an output an earlier example shows."""
    seen = {m.memory_id for m in memories} | {_said(m.text) for m in memories}
    kept: list[FewShotExample] = []
    for example in examples:
        said = {example.memory_id, _said(example.input), _said(example.output)}
        if not said & seen and len(kept) < k:
            seen |= said
            kept.append(example)
    return kept


def _memories(
    pack: Pack, contact_id: str | None, k: int, asked: dict[str, Any]
) -> list[ScoredMemory]:
    """`memories_for`'s k best with distinct texts: ranked as `memories_for(k)` ranks them, asked
    again for twice as many while repeats left the list short (and the pack holds more)."""
    fetch, kept = k, []
    while k > 0:
        ranked = pack.memories_for(contact_id, k=fetch, **asked)
        kept = distinct_memories(ranked, k)
        if len(kept) == k or len(ranked) < fetch:
            break
        fetch *= 2
    return kept


def _unique_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line not in lines[:i]]


def _examples(
    pack: Pack,
    system: str | None,
    kind: str | None,
    skill_id: str | None,
    query: str | None,
    query_vector: Sequence[float] | np.ndarray | None,
    memories: list[ScoredMemory],
    k: int,
) -> list[FewShotExample]:
    """`system`'s examples (of the skill, else any skill's when the skill has none left) that
    repeat nothing (`distinct_examples`)."""
    if system is None or k <= 0:
        return []
    asked = {"kind": kind, "k": 3 * k, "query": query, "query_vector": query_vector}
    own = pack.few_shot(system, skill_id=skill_id, **asked)  # type: ignore[arg-type]
    examples = distinct_examples(own, memories, k)
    if not examples and skill_id is not None:
        examples = distinct_examples(pack.few_shot(system, **asked), memories, k)  # type: ignore[arg-type]
    return examples


def prompt_context(
    pack: Pack,
    contact_id: str | None,
    query: str | None = None,
    system: str | None = None,
    budget_chars: int = 4000,
    *,
    kind: str | None = None,
    skill_id: str | None = None,
    user_id: str | None = None,
    tags: Sequence[str] | None = None,
    query_vector: Sequence[float] | np.ndarray | None = None,
    k_memories: int = 8,
    k_examples: int = 3,
    now: datetime | None = None,
    session_id: str | None = None,
) -> PromptContext:
    """The prompt pieces for one call about `contact_id`: the current template (of `skill_id`,
    else of the skill `select_skill(user_id, tags)` picks among `skills_of(system, kind)`,
    the skills that system's calls used; none for a system the pack holds no call of), the
    person's memories ranked for `query` with their trust lines and age warnings, open
    conflicts, the questions to ask the person, and `system`'s few-shot examples — trimmed
    to `budget_chars` in the priority order of this module's docstring. Nothing is
    said twice: a memory whose text an earlier one has, an example that is a listed memory
    or repeats an earlier example's input or output, is left out for the next one. `.text`
    is the rendering; the fields are the pieces that fitted, `dropped` counts the rest.
    `now` (default: the clock) dates ages.

    `.receipt` is what the app logs with the call: `event["context"] =
    ctx.receipt.as_context()`. A call whose session (else contact) falls in the holdout
    (`holdout_share`) gets an empty context and a receipt with `holdout: True`."""
    budget_chars, query_vector = whole(budget_chars, "budget_chars", low=0), vector(query_vector)
    k_memories, k_examples = whole(k_memories, "k_memories"), whole(k_examples, "k_examples")
    if in_holdout(session_id, contact_id, pack.holdout_share):  # the control: no pack content
        empty = receipt(pack.tenant_id, pack.version, holdout=True)
        return PromptContext(
            contact_id, query, system, budget_chars, "", None, [], [], [], [], empty
        )
    now = now or datetime.now(UTC)
    template = _template(pack, skill_id, user_id, tags, system, kind)
    asked = {"tags": tags, "query": query, "query_vector": query_vector, "kind": kind, "now": now}
    memories = _memories(pack, contact_id, k_memories, asked)
    examples = _examples(pack, system, kind, skill_id, query, query_vector, memories, k_examples)
    conflicts = pack.conflicts(contact_id) if contact_id is not None else []
    conflicts = [conflicts[i] for i in _unique_lines([conflict_line(c) for c in conflicts])]
    questions = questions_for(pack, contact_id, now)
    questions = [questions[i] for i in _unique_lines([q.text for q in questions])]
    candidates = {
        "template": [template_block(template)] if template is not None else [],
        "conflicts": [conflict_line(c) for c in conflicts],
        "memories": [memory_line(m, now) for m in memories],
        "questions": [f"- {q.text}" for q in questions],
        "examples": [example_block(e) for e in examples],
    }
    kept, text = fit(candidates, budget_chars)
    dropped = {part: len(lines) - len(kept[part]) for part, lines in candidates.items() if lines}
    fitted_memories = [memories[i] for i in kept["memories"]]
    fitted_examples = [examples[i] for i in kept["examples"]]
    fitted_template = template if kept["template"] else None
    used = receipt(pack.tenant_id, pack.version, fitted_template, fitted_memories, fitted_examples)
    return PromptContext(
        contact_id=contact_id,
        query=query,
        system=system,
        budget_chars=budget_chars,
        text=text,
        template=fitted_template,
        memories=fitted_memories,
        conflicts=[conflicts[i] for i in kept["conflicts"]],
        questions=[questions[i] for i in kept["questions"]],
        examples=fitted_examples,
        receipt=used,
        dropped={part: n for part, n in dropped.items() if n},
    )
