"""What to ask the person about their memories (seed 004's audit, SPEC §4.2): open conflicts,
memories to reconfirm, promotion candidates; and how a memory's date and text are written."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from memorypack.reads import Pack
from memorypack.results import Conflict

# Seed 004, hygiene rule 4: "if acting on memory > 6 months old, mention it" (the pack's `stale`
# flag, as of its publication; the age is checked again as of `now`).
STALE_AFTER_DAYS = 180.0


@dataclass(frozen=True)
class Question:
    """Something to ask the person. `kind`: `conflict` (two memories disagree: which holds?),
    `reconfirm` (high impact and low confidence, or old: is it still right?) or `promote` (the
    audit's promotion candidate: treat it as a preference? — never applied without a yes)."""

    kind: str
    memory_ids: tuple[str, ...]
    text: str


def when(moment: datetime | None) -> str:
    return moment.astimezone(UTC).date().isoformat() if isinstance(moment, datetime) else "never"


def age_days(moment: datetime | None, now: datetime) -> float | None:
    if not isinstance(moment, datetime):
        return None
    return (now - moment).total_seconds() / 86400.0


def quoted(text: str | None) -> str:
    return '"' + " ".join((text or "").split()) + '"'


def conflict_question(conflict: Conflict) -> Question:
    return Question(
        "conflict",
        (conflict.memory_id_a, conflict.memory_id_b),
        f"I have two notes that disagree: {quoted(conflict.text_a)} and "
        f"{quoted(conflict.text_b)}. Which should I follow?",
    )


def reconfirm_question(memory_id: str, text: str | None, why: str) -> Question:
    return Question(
        "reconfirm", (memory_id,), f"This might be outdated ({why}): {quoted(text)}. Still right?"
    )


def promote_question(memory_id: str, text: str | None) -> Question:
    return Question(
        "promote",
        (memory_id,),
        f"I'm noticing {quoted(text)}. Should I treat this as a preference?",
    )


def questions_for(pack: Pack, contact_id: str | None, now: datetime) -> list[Question]:
    """What to ask the person about their memories: each open conflict, then each active memory
    the audit flags (needs reconfirmation, or older than six months), then each promotion
    candidate; a memory is asked about once (seed 004: never ask about the same thing twice)."""
    if contact_id is None:
        return []
    asked: set[str] = set()
    questions = []
    for conflict in pack.conflicts(contact_id):
        questions.append(conflict_question(conflict))
        asked.update((conflict.memory_id_a, conflict.memory_id_b))
    rows = pack.contact_memories(contact_id).to_pylist()
    rows = [
        r for r in rows if r.get("memory_type") != "interaction" and r["memory_id"] not in asked
    ]
    for row in sorted(rows, key=lambda r: r["memory_id"]):
        age = age_days(row.get("last_confirmed"), now)
        if row.get("needs_reconfirmation"):
            why = f"high impact, confidence {float(row['confidence']):.2f}"
        elif row.get("stale") or (age is not None and age > STALE_AFTER_DAYS):
            why = f"last confirmed {when(row.get('last_confirmed'))}"
        else:
            continue
        questions.append(reconfirm_question(row["memory_id"], row.get("text"), why))
        asked.add(row["memory_id"])
    for row in sorted(rows, key=lambda r: r["memory_id"]):
        if row.get("promotion_to") and row["memory_id"] not in asked:
            questions.append(promote_question(row["memory_id"], row.get("text")))
    return questions
