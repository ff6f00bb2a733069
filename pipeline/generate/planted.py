"""Planted cases with known answers (truth.json): orderings, decay, paraphrases, conflicts, pairs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pipeline.generate import texts
from pipeline.generate.cases import CONFLICTS, DECAY_CASES, PARAPHRASES
from pipeline.generate.malformed import Event
from pipeline.generate.world import Tenant, World

PLANTED_TENANTS = 3  # planted cases go to the first tenants only: truth stays small at any scale
Planted = list[tuple[str, Event]]  # (file stem, event), in write order


@dataclass
class Truth:
    score_orderings: list[dict[str, Any]] = field(default_factory=list)
    decay_cases: list[dict[str, Any]] = field(default_factory=list)
    paraphrase_groups: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    corrections: list[dict[str, Any]] = field(default_factory=list)
    regenerations: list[dict[str, Any]] = field(default_factory=list)
    negative_interactions: list[dict[str, Any]] = field(default_factory=list)


class Planter:
    """Builds each planted case on its day; `for_day` returns the events and records the answers."""

    def __init__(self, world: World, truth: Truth, days: int) -> None:
        self.w, self.truth, self.days = world, truth, days
        self.cases: list[Callable[[Tenant, int, int], Planted]] = [
            self._score_a,
            self._score_c,
            self._showcase,
            self._validated,
            *[self._negative] * 3,
            *[self._correction] * 4,
            *[self._regeneration] * 4,
            *[self._decay] * len(DECAY_CASES),
            *[self._paraphrase] * len(PARAPHRASES),
            *[self._conflict] * len(CONFLICTS),
        ]

    def for_day(self, t: Tenant, day: int) -> Planted:
        if t.index >= PLANTED_TENANTS:
            return []
        out: Planted = []
        seen: dict[Callable[[Tenant, int, int], Planted], int] = {}
        for j, case in enumerate(self.cases):
            k = seen.get(case, 0)
            seen[case] = k + 1
            if j % self.days == day:
                out += case(t, day, k)
        return out

    # -- helpers --------------------------------------------------------------------------
    def _at(self, day: int, minutes: int) -> datetime:
        return self.w.day_start(day) + timedelta(hours=8, minutes=minutes)

    def _ask(
        self,
        t: Tenant,
        day: int,
        system: str,
        skill: str,
        minute: int,
        user: int = 0,
        contact: int = 1,
    ) -> tuple[Event, str]:
        return self.w.interaction(
            t, system, self._at(day, minute), user, contact, self.w.new_id("s"), skill, plain=True
        )

    def _votes(
        self,
        t: Tenant,
        target: Event,
        day: int,
        minute: int,
        signals: list[str],
        first_user: int = 0,
        rating: int | None = None,
    ) -> Planted:
        """One feedback event per signal, each from a different user."""
        return [
            (
                "",
                self.w.feedback(
                    t,
                    target,
                    s,
                    self._at(day, minute + 1 + i // 10),
                    first_user + i,
                    rating=rating,
                    plain=True,
                ),
            )
            for i, s in enumerate(signals)
        ]

    def _with_stem(self, system: str, planted: Planted) -> Planted:
        stem = {"support": "support", "little_lord": "coaching", "framescan": "framescan"}[system]
        return [(stem, e) for _, e in planted]

    # -- interaction cases ------------------------------------------------------------------
    def _score_a(self, t: Tenant, day: int, k: int) -> Planted:
        a, _ = self._ask(t, day, "support", "concise_response", 0)
        b, _ = self._ask(t, day, "support", "concise_response", 2, user=1)
        n, _ = self._ask(t, day, "support", "concise_response", 4, user=2)
        out = [("", a), *self._votes(t, a, day, 0, ["thumbs_up"] * 40 + ["thumbs_down"] * 2)]
        out += [("", b), *self._votes(t, b, day, 2, ["thumbs_up"], first_user=3)]
        out += [("", n), *self._votes(t, n, day, 4, ["thumbs_down"] * 4 + ["action_ignored"], 5)]
        self.truth.score_orderings += [
            {"tenant_id": t.id, "better_id": a["event_id"], "worse_id": b["event_id"]},
            {"tenant_id": t.id, "better_id": b["event_id"], "worse_id": n["event_id"]},
            {"tenant_id": t.id, "better_id": a["event_id"], "worse_id": n["event_id"]},
        ]
        self.truth.negative_interactions.append({"tenant_id": t.id, "memory_id": n["event_id"]})
        return self._with_stem("support", out)

    def _score_c(self, t: Tenant, day: int, k: int) -> Planted:
        c, _ = self._ask(t, day, "little_lord", "empathy_direct", 10)
        d, _ = self._ask(t, day, "little_lord", "empathy_direct", 12, user=1)
        out = [("", c), *self._votes(t, c, day, 10, ["thumbs_up"] * 12 + ["copy"] * 3, rating=5)]
        out += [
            ("", d),
            *self._votes(t, d, day, 12, ["thumbs_up", "thumbs_down"] * 2, first_user=20),
        ]
        self.truth.score_orderings.append(
            {"tenant_id": t.id, "better_id": c["event_id"], "worse_id": d["event_id"]}
        )
        return self._with_stem("little_lord", out)

    def _showcase(self, t: Tenant, day: int, k: int) -> Planted:
        s, _ = self._ask(t, day, "support", "proactive_suggestions", 20)
        signals = [
            "follow_up",
            "user_override",
            "user_edit",
            "action_taken",
            "action_ignored",
            "copy",
            "thumbs_up",
            "thumbs_down",
        ]
        votes = self._votes(t, s, day, 20, signals)
        value = texts.PII_PHONES[0]
        self.w.pii.add(value)
        votes[-1][1]["comment"] = texts.LONG_COMMENT + f"Call me on {value} to discuss."
        return self._with_stem("support", [("", s), *votes])

    def _negative(self, t: Tenant, day: int, k: int) -> Planted:
        system = ("framescan", "support", "little_lord")[k % 3]
        n, _ = self._ask(t, day, system, "technical_precision" if k == 0 else "casual_chat", 30 + k)
        votes = self._votes(
            t, n, day, 30 + k, ["thumbs_down"] * 4 + ["action_ignored"], 10, rating=1
        )
        votes[0][1]["reason"] = "not_helpful"
        self.truth.negative_interactions.append({"tenant_id": t.id, "memory_id": n["event_id"]})
        return self._with_stem(system, [("", n), *votes])

    def _correction(self, t: Tenant, day: int, k: int) -> Planted:
        system = ("support", "little_lord")[k % 2]
        x, short = self._ask(t, day, system, "detailed_explanation", 40 + k)
        if k == 0:
            value = texts.PII_CARDS[0]
            self.w.pii.add(value)
            x["input"] += f" The charge was on my card {value}."
        fixed = short  # too verbose: the person kept only the answer itself
        fb = self.w.feedback(
            t,
            x,
            "correction",
            self._at(day, 41 + k),
            0,
            rating=2,
            reason="too_verbose",
            corrected=fixed,
            plain=True,
        )
        self.truth.corrections.append(
            {"tenant_id": t.id, "interaction_id": x["event_id"], "corrected_output": fixed}
        )
        return self._with_stem(system, [("", x), ("", fb)])

    def _regeneration(self, t: Tenant, day: int, k: int) -> Planted:
        system = ("support", "little_lord")[k % 2]
        o, _ = self._ask(t, day, system, "concise_response", 50 + k, user=k)
        when = self._at(day, 51 + k)
        regen = self.w.feedback(t, o, "regenerate", when, k, reason="too_brief", plain=True)
        r, _ = self.w.interaction(
            t,
            system,
            when + timedelta(seconds=20),
            k,
            1,
            o["session_id"],
            "detailed_explanation",
            plain=True,
            input_text=o["input"],
            parent=o["event_id"],
        )
        if r["output"] == o["output"]:
            r["output"] += " Let me know if you want more detail."
        up = self.w.feedback(
            t, r, "thumbs_up", when + timedelta(minutes=2), k, rating=5, plain=True
        )
        cp = self.w.feedback(t, r, "copy", when + timedelta(minutes=3), k, plain=True)
        self.truth.regenerations.append(
            {"tenant_id": t.id, "original_id": o["event_id"], "regenerated_id": r["event_id"]}
        )
        return self._with_stem(system, [("", o), ("", regen), ("", r), ("", up), ("", cp)])

    # -- statement cases ----------------------------------------------------------------------
    def _contact(self, t: Tenant, tag: str, k: int) -> tuple[str, str]:
        n = sum(map(ord, tag)) * 10 + k
        return f"cx-{tag}-{k:02d}", texts.person(n)

    def _validated(self, t: Tenant, day: int, k: int) -> Planted:
        contact, name = self._contact(t, "val", k)
        email, iban = texts.PII_EMAILS[0], texts.PII_IBANS[0]
        self.w.pii.update((email, iban))
        m = self.w.statement(
            t,
            self._at(day, 60) - timedelta(days=20),
            contact,
            "confirmed_pattern",
            f"{name} wants refunds paid to IBAN {iban} and receipts sent to {email}.",
            "money",
            impact="high",
            plain=True,
        )
        v = self.w.feedback(t, m, "validate", self._at(day, 61), 0, plain=True)
        return [("memories", m), ("memories", v)]

    def _decay(self, t: Tenant, day: int, k: int) -> Planted:
        memory_type, age, impact, status, reconfirm, stale, content = DECAY_CASES[k]
        contact, name = self._contact(t, "decay", k)
        as_of = self.w.day_start(day + 1)
        m = self.w.statement(
            t,
            as_of - age,
            contact,
            memory_type,
            content.format(n=name),
            "other",
            impact=impact,
            plain=True,
        )
        self.truth.decay_cases.append(
            {
                "tenant_id": t.id,
                "memory_id": m["event_id"],
                "memory_type": memory_type,
                "snapshot_date": (self.w.start + timedelta(days=day)).isoformat(),
                "status": status,
                "needs_reconfirmation": reconfirm,
                "stale": stale,
                "age_days": round(age.total_seconds() / 86400, 3),
            }
        )
        return [("memories", m)]

    def _paraphrase(self, t: Tenant, day: int, k: int) -> Planted:
        category, phrasings = PARAPHRASES[k]
        contact, name = self._contact(t, "para", k)
        other = texts.person(k + 3)
        out: Planted = []
        for i, text in enumerate(phrasings):
            when = self._at(day, 70 + i) - timedelta(days=9 - 3 * i)
            out.append(
                (
                    "memories",
                    self.w.statement(
                        t,
                        when,
                        contact,
                        "inferred_pattern",
                        text.format(n=name),
                        category,
                        plain=True,
                    ),
                )
            )
        unrelated = (
            ("other", f"{name} is allergic to peanuts."),
            ("relationships", f"{name} reports to {other}."),
        )
        for i, (cat, text) in enumerate(unrelated):
            when = self._at(day, 75 + i) - timedelta(days=5)
            out.append(
                (
                    "memories",
                    self.w.statement(t, when, contact, "confirmed_pattern", text, cat, plain=True),
                )
            )
        self.truth.paraphrase_groups.append(
            {
                "tenant_id": t.id,
                "contact_id": contact,
                "memory_ids": [e["event_id"] for _, e in out[:3]],
            }
        )
        return out

    def _conflict(self, t: Tenant, day: int, k: int) -> Planted:
        kind, category, (type_a, text_a), (type_b, text_b), preferred = CONFLICTS[k]
        contact, name = self._contact(t, "conf", k)
        a = self.w.statement(
            t,
            self._at(day, 80) - timedelta(days=40),
            contact,
            type_a,
            text_a.format(n=name),
            category,
            plain=True,
        )
        b = self.w.statement(
            t,
            self._at(day, 81) - timedelta(days=2),
            contact,
            type_b,
            text_b.format(n=name),
            category,
            plain=True,
            supersedes=[a["event_id"]] if kind == "supersedes" else None,
        )
        ids = [a["event_id"], b["event_id"]]
        self.truth.conflicts.append(
            {
                "tenant_id": t.id,
                "contact_id": contact,
                "memory_ids": ids,
                "preferred_id": ids[0] if preferred == "a" else ids[1],
                "kind": kind,
            }
        )
        return [("memories", a), ("memories", b)]
