"""What each memory type of the input is worth (SPEC §4.2's table): the confidence a statement
starts at when it states none, the most its kind of evidence can earn, how it fades. Consolidation
(`semantic`) and decay (`memory`) both read it, so it sits with the contract that names the types."""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.ingest.contracts import MemoryType

INTERACTION_TYPE = "interaction"  # memory_type of interaction memories in snapshots
# Each time the same statement is seen again it earns +0.1 (seed 004: "+10–20 %", the low end,
# because a repeat is weaker evidence than a confirmation), never beyond the type cap.
REINFORCEMENT_STEP = 0.1


@dataclass(frozen=True)
class TypeRule:
    """How one memory type starts, decays and goes inactive."""

    base: float  # starting confidence when the event does not state one
    cap: float  # the most confidence this kind of evidence can ever earn
    factor: float  # confidence multiplies by `factor` per `period_days` of age (1.0 = no decay)
    period_days: float
    inactive_below: float | None  # None = never inactive by confidence


TYPE_RULES: dict[str, TypeRule] = {
    # The person said it: permanent until they change it (seed 004 "Explicit Instructions").
    MemoryType.EXPLICIT_INSTRUCTION.value: TypeRule(1.0, 1.0, 1.0, 30.0, None),
    # Corrections are explicit but about one situation: they fade slowly, 5 % per month.
    MemoryType.CORRECTION.value: TypeRule(0.9, 0.95, 0.95, 30.0, 0.5),
    # Reinforced behaviour needs periodic reinforcement: 10 % per month.
    MemoryType.CONFIRMED_PATTERN.value: TypeRule(0.8, 0.9, 0.90, 30.0, 0.5),
    # Our own guess about a pattern: fades unless confirmed, 20 % per month.
    MemoryType.INFERRED_PATTERN.value: TypeRule(0.6, 0.7, 0.80, 30.0, 0.4),
    # One observation: halves every week.
    MemoryType.SINGLE_INFERENCE.value: TypeRule(0.4, 0.5, 0.50, 7.0, 0.3),
    # Thinking-mode notes: halve every day and expire after 48 h (status, below), never "inactive".
    MemoryType.TEMPORARY.value: TypeRule(0.5, 0.5, 0.50, 1.0, None),
    # Interaction memories (seed 001): a 30-day half-life; the base is the event's importance.
    INTERACTION_TYPE: TypeRule(0.5, 1.0, 0.50, 30.0, 0.2),
}

# The §4.2 table as plain lookups, for stages that need a type's base or cap without decaying.
BASE_CONFIDENCE = {t: r.base for t, r in TYPE_RULES.items() if t != INTERACTION_TYPE}
CONFIDENCE_CAP = {t: r.cap for t, r in TYPE_RULES.items() if t != INTERACTION_TYPE}
