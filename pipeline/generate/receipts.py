"""Planted receipts (SPEC §4.9): what an app put into each call, and items whose use shifts the
chance of positive feedback by a stated amount, with the true uplift and item effects.

A call's receipt names the template version, 3 of the tenant's first 8 interactions as few-shot
examples, and up to 2 memories about the call's contact, as `prompt_context` would (memories are
per person). For a memory's effect to be measurable a person must come back often: each tenant
has a regular contact (`REGULAR`) who gets `RETURNING` of the sessions, and whose first two
statements are the planted memories (issue 52 item 3)."""

from __future__ import annotations

import hashlib
import random
from collections import defaultdict
from datetime import date, timedelta
from functools import cache
from typing import Any

from pipeline.feedback.scores import DEFAULT_SCORING
from pipeline.generate.world import NEGATIVE, POSITIVE, SYSTEM_SKILLS, Tenant

HOLDOUT_SHARE = 0.05
EXAMPLES = 8  # the few-shot examples an app picks from: a tenant's first interactions
EXAMPLES_PER_CALL, MEMORIES_PER_CALL = 3, 2
# Pool positions of the planted items and their shift of P(positive feedback) when used: the
# examples among the first interactions, the memories among the regular contact's statements.
PLANTED_EXAMPLES = {0: 0.3, 1: 0.3, 2: -0.3, 3: -0.3}
PLANTED_MEMORIES = {0: 0.3, 1: -0.3}
# The regular contact (its index) and their share of the sessions; a statement is about them with
# the first chance until the planted ones exist, then with the second (a few more memories).
REGULAR, RETURNING = 0, 0.3
ABOUT_REGULAR_FIRST, ABOUT_REGULAR_LATER = 0.5, 0.01
TEMPLATE_SHIFT = -0.3  # a new template version `<skill>@2` in half its skill's calls
FEEDBACK_N = {1: 4 / 7, 2: 2 / 7, 3: 1 / 7}  # core.FEEDBACK_COUNTS given at least one vote


@cache
def expected_score(q: float) -> float:
    """E[§4.1 quality score | at least one vote] of a call whose votes are positive with chance
    `q`, exact over the generator's vote model (signal, optional rating). It ignores that a
    person's repeated click counts once, which moves it by a few percent at most."""
    q = min(max(q, 0.0), 1.0)
    weights = DEFAULT_SCORING.weights()
    one: dict[tuple[float, float], float] = defaultdict(float)
    for sign, bank, chance in ((1, POSITIVE, q), (-1, NEGATIVE, 1 - q)):
        for signal in bank:
            # random_feedback: a rating (value ±0.5 w.p. 0.1, ±1 w.p. 0.15) or the signal's ±1
            for value, p in ((0.5 * sign, 0.1), (1.0 * sign, 0.9)):
                mass = (weights[signal] * (1 + value) / 2, weights[signal] * (1 - value) / 2)
                one[mass] += p * chance / len(bank)
    total, spread = 0.0, {(0.0, 0.0): 1.0}
    for n in range(1, max(FEEDBACK_N) + 1):
        nxt: dict[tuple[float, float], float] = defaultdict(float)
        for (a, b), p in spread.items():
            for (da, db), p1 in one.items():
                nxt[(a + da, b + db)] += p * p1
        spread = nxt
        a0, b0 = DEFAULT_SCORING.prior_positive, DEFAULT_SCORING.prior_negative
        mean = sum(p * (2 * (a + a0) / (a + b + a0 + b0) - 1) for (a, b), p in spread.items())
        total += FEEDBACK_N.get(n, 0.0) * mean
    return total


def pack_version(tenant: str, day: date) -> str:
    """The pack an app would have loaded on `day`: the one published the night before."""
    built = day - timedelta(days=1)
    digest = hashlib.sha256(f"{tenant}/{built}".encode()).hexdigest()[:8]
    return f"{tenant}/{built:%Y%m%d}T030000Z-{digest}"


class Receipts:
    """Per tenant: the pool of pack items, the receipt of each call and the planted truth. Its
    own seeded RNG, so the rest of the generated stream is the same with or without receipts."""

    def __init__(self, seed: int, share: float, holdout: float) -> None:
        if not (0.0 < share <= 1.0 and 0.0 <= holdout < 1.0):
            raise ValueError("receipts share must lie in (0, 1], holdout in [0, 1)")
        self.rng = random.Random(f"receipts-{seed}")
        self.share, self.holdout = share, holdout
        self.examples: dict[str, list[str]] = defaultdict(list)
        # (tenant, contact index) → the ids of the statements about that person so far
        self.memories: dict[tuple[str, int], list[str]] = defaultdict(list)
        self.regular_calls: dict[str, int] = defaultdict(int)  # tenant → the regular's receipts
        # (tenant, pack version, skill) → [pack calls, Σ true effect] (the calls of a version differ:
        # the regular's memories grow); (tenant, item) → [uses, Σ true effect]
        self.uplift: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        self.effects: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        self.templated: dict[str, str] = {}  # tenant → its skill with a planted template

    def interaction(self, t: Tenant, event_id: str) -> None:
        if len(self.examples[t.id]) < EXAMPLES:
            self.examples[t.id].append(event_id)

    def statement(self, t: Tenant, contact: int, event_id: str) -> None:
        self.memories[(t.id, contact)].append(event_id)

    def session_contact(self, contact: int) -> int:
        """The contact of a new session: the regular one `RETURNING` of the time."""
        return REGULAR if self.rng.random() < RETURNING else contact

    def statement_contact(self, t: Tenant, contact: int) -> int:
        """Whom a new statement is about: the regular contact until its planted memories exist,
        with a high chance, then now and then."""
        first = len(self.memories[(t.id, REGULAR)]) < len(PLANTED_MEMORIES)
        chance = ABOUT_REGULAR_FIRST if first else ABOUT_REGULAR_LATER
        return REGULAR if self.rng.random() < chance else contact

    def planted_memories(self, tenant: str) -> list[str]:
        return self.memories[(tenant, REGULAR)][: len(PLANTED_MEMORIES)]

    def skill(self, t: Tenant) -> str:
        """The one skill per tenant with a harmful new template version `<skill>@2`."""
        skills = SYSTEM_SKILLS["support"]
        return self.templated.setdefault(t.id, skills[t.index % len(skills)])

    def shifts(self, tenant: str) -> dict[str, float]:
        planted = {self.examples[tenant][i]: s for i, s in PLANTED_EXAMPLES.items()}
        memories = self.planted_memories(tenant)
        planted |= {memories[i]: s for i, s in PLANTED_MEMORIES.items()}
        return planted | {f"{self.templated[tenant]}@2": TEMPLATE_SHIFT}

    def context(
        self, t: Tenant, day: date, first: date, skill: str, contact: int | None
    ) -> dict[str, Any] | None:
        """The receipt of a call about `contact` (an index; None: about no one); None: the app
        reported none (it had no pack yet, or does not)."""
        rng = self.rng
        full = len(self.examples[t.id]) == EXAMPLES
        full = full and len(self.planted_memories(t.id)) == len(PLANTED_MEMORIES)
        if day == first or not full or rng.random() >= self.share:
            return None
        version = pack_version(t.id, day)
        self.regular_calls[t.id] += contact == REGULAR
        if rng.random() < self.holdout:
            return {"pack_version": version, "items": [], "holdout": True}
        new = skill == self.skill(t) and rng.random() < 0.5
        known = self.memories[(t.id, contact)] if contact is not None else []
        memories = rng.sample(known, min(MEMORIES_PER_CALL, len(known)))
        examples = rng.sample(self.examples[t.id], EXAMPLES_PER_CALL)
        return {
            "pack_version": version,
            "items": [f"{skill}@{1 + new}", *memories, *examples],  # prompt_context's order
            "holdout": False,
        }

    def quality(self, t: Tenant, skill: str, receipt: dict[str, Any] | None, q: float) -> float:
        """The call's chance of positive feedback with the planted shifts of the items it used;
        counts the true uplift and item effects (expected score with minus without)."""
        if receipt is None or receipt["holdout"]:
            return q
        shifts = self.shifts(t.id)
        shifted = q + sum(shifts.get(i, 0.0) for i in receipt["items"])
        calls = self.uplift[(t.id, receipt["pack_version"], skill)]
        calls[0] += 1
        calls[1] += expected_score(shifted) - expected_score(q)
        for item in receipt["items"]:
            used = self.effects[(t.id, item)]
            used[0] += 1
            used[1] += expected_score(shifted) - expected_score(shifted - shifts.get(item, 0.0))
        return shifted

    def truth(self) -> dict[str, Any]:
        """truth.json's `usage`: the planted items, the true uplift per pack version × skill and item
        effects, in §4.1 score units (expected score with the pack minus without, over the calls
        made), and how many receipts the regular contact's calls carried."""
        tenants: dict[str, Any] = {}
        for tenant in sorted(self.examples):
            if tenant not in self.templated or not self.regular_calls[tenant]:
                continue
            items = {}
            for item, shift in sorted(self.shifts(tenant).items()):
                uses, effect = self.effects.get((tenant, item), (0, 0.0))
                items[item] = {
                    "shift": shift,
                    "kind": "template"
                    if "@" in item
                    else "interaction"
                    if item in self.examples[tenant]
                    else "statement",
                    "uses": int(uses),
                    "effect": round(effect / uses, 4) if uses else 0.0,
                }
            uplift: dict[str, dict[str, float]] = defaultdict(dict)
            for (owner, version, skill), (n, total) in sorted(self.uplift.items()):
                if owner == tenant and n:
                    uplift[version][skill] = round(total / n, 4)
            used = {item for owner, item in self.effects if owner == tenant}
            tenants[tenant] = {
                "planted": items,
                "neutral": sorted(used - set(items)),
                "uplift": dict(uplift),
                "regular_contact_calls": self.regular_calls[tenant],
            }
        return {"share": self.share, "holdout": self.holdout, "tenants": tenants}
