"""Planted receipts (SPEC §4.9): what an app put into each call, and items whose use shifts the
chance of positive feedback by a stated amount, with the true uplift and item effects."""

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
EXAMPLES, MEMORIES = 8, 6  # the pack items an app picks from: a tenant's first ids of each kind
EXAMPLES_PER_CALL, MEMORIES_PER_CALL = 3, 2
# Pool positions of the planted items and their shift of P(positive feedback) when used.
PLANTED_EXAMPLES = {0: 0.3, 1: 0.3, 2: -0.3, 3: -0.3}
PLANTED_MEMORIES = {0: 0.3, 1: -0.3}
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
        self.memories: dict[str, list[str]] = defaultdict(list)
        # (tenant, skill) → [pack calls, Σ true effect]; (tenant, item) → [uses, Σ true effect]
        self.uplift: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        self.effects: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0.0])
        self.templated: dict[str, str] = {}  # tenant → its skill with a planted template

    def interaction(self, t: Tenant, event_id: str) -> None:
        if len(self.examples[t.id]) < EXAMPLES:
            self.examples[t.id].append(event_id)

    def statement(self, t: Tenant, event_id: str) -> None:
        if len(self.memories[t.id]) < MEMORIES:
            self.memories[t.id].append(event_id)

    def skill(self, t: Tenant) -> str:
        """The one skill per tenant with a harmful new template version `<skill>@2`."""
        skills = SYSTEM_SKILLS["support"]
        return self.templated.setdefault(t.id, skills[t.index % len(skills)])

    def shifts(self, tenant: str) -> dict[str, float]:
        planted = {self.examples[tenant][i]: s for i, s in PLANTED_EXAMPLES.items()}
        planted |= {self.memories[tenant][i]: s for i, s in PLANTED_MEMORIES.items()}
        return planted | {f"{self.templated[tenant]}@2": TEMPLATE_SHIFT}

    def context(self, t: Tenant, day: date, first: date, skill: str) -> dict[str, Any] | None:
        """The call's receipt; None: the app reported none (it had no pack yet, or does not)."""
        rng = self.rng
        full = len(self.examples[t.id]) == EXAMPLES and len(self.memories[t.id]) == MEMORIES
        if day == first or not full or rng.random() >= self.share:
            return None
        version = pack_version(t.id, day)
        if rng.random() < self.holdout:
            return {"pack_version": version, "items": [], "holdout": True}
        new = skill == self.skill(t) and rng.random() < 0.5
        items = rng.sample(self.examples[t.id], EXAMPLES_PER_CALL)
        items += [*rng.sample(self.memories[t.id], MEMORIES_PER_CALL), f"{skill}@{1 + new}"]
        return {"pack_version": version, "items": items, "holdout": False}

    def quality(self, t: Tenant, skill: str, receipt: dict[str, Any] | None, q: float) -> float:
        """The call's chance of positive feedback with the planted shifts of the items it used;
        counts the true uplift and item effects (expected score with minus without)."""
        if receipt is None or receipt["holdout"]:
            return q
        shifts = self.shifts(t.id)
        shifted = q + sum(shifts.get(i, 0.0) for i in receipt["items"])
        calls = self.uplift[(t.id, skill)]
        calls[0] += 1
        calls[1] += expected_score(shifted) - expected_score(q)
        for item in receipt["items"]:
            used = self.effects[(t.id, item)]
            used[0] += 1
            used[1] += expected_score(shifted) - expected_score(shifted - shifts.get(item, 0.0))
        return shifted

    def truth(self) -> dict[str, Any]:
        """truth.json's `usage`: the planted items and the true uplift per skill and item effect,
        in §4.1 score units (expected score with the pack minus without, over the calls made)."""
        tenants: dict[str, Any] = {}
        for tenant in sorted(self.examples):
            if tenant not in self.templated or len(self.memories[tenant]) < MEMORIES:
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
            uplift = {
                skill: round(total / n, 4)
                for (owner, skill), (n, total) in sorted(self.uplift.items())
                if owner == tenant and n
            }
            tenants[tenant] = {
                "planted": items,
                "neutral": [
                    i for i in self.examples[tenant] + self.memories[tenant] if i not in items
                ],
                "uplift": uplift,
            }
        return {"share": self.share, "holdout": self.holdout, "tenants": tenants}
