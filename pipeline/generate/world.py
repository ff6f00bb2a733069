"""The generator's state: ids, clocks, tenants' people, and the event builders shared by bulk and planted data."""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from pipeline.generate import texts
from pipeline.generate.malformed import Event

TENANT_NAMES = (
    "acme",
    "globex",
    "initech",
    "umbrella",
    "hooli",
    "stark",
    "wayne",
    "wonka",
    "cyberdyne",
    "tyrell",
)
# system → (file stem, kind)
SYSTEMS = {
    "little_lord": ("coaching", "little_lord_exchange"),
    "framescan": ("framescan", "framescan_report"),
    "support": ("support", "support_reply"),
}
SYSTEM_SKILLS = {
    "support": (
        "concise_response",
        "detailed_explanation",
        "empathy_direct",
        "empathy_subtle",
        "technical_precision",
        "proactive_suggestions",
        "reactive_only",
        "casual_chat",
        "code_review_constructive",
        "summarize_key_points",
    ),
    "little_lord": (
        "empathy_direct",
        "empathy_subtle",
        "concise_response",
        "detailed_explanation",
        "casual_chat",
        "proactive_suggestions",
        "reactive_only",
        "summarize_key_points",
    ),
    "framescan": (
        "technical_precision",
        "concise_response",
        "detailed_explanation",
        "summarize_key_points",
    ),
}
POSITIVE = ("thumbs_up",) * 9 + ("copy",) * 4 + ("action_taken",) * 4 + ("follow_up",) * 3
NEGATIVE = (
    ("thumbs_down",) * 7
    + ("action_ignored",) * 3
    + ("regenerate",) * 3
    + ("user_edit",) * 2
    + ("user_override",) * 2
    + ("correction",) * 3
)
REASONS = ("too_verbose", "too_brief", "wrong_tone", "not_helpful", "incorrect_info", "other")
SUMMARIES = {
    "support": "{topic} question from {name}",
    "framescan": "{topic} frame in a message from {name}",
    "little_lord": "advice about a {topic}",
}
OFFSETS = (("+02:00", 2), ("-05:00", -5), ("+05:30", 5.5), ("+09:00", 9), ("-08:00", -8))


# Users (contacts) 1, 14, 27 (2, 15, 28) of each tenant have a phone number (an e-mail address)
# as their id: a few per tenant, whatever the size.
PII_ID_EVERY = 13
PII_ID_BELOW = 40


@dataclass
class Tenant:
    index: int
    id: str
    users: int
    contacts: int
    reservoir: deque[Event] = field(default_factory=lambda: deque(maxlen=64))
    last_memory: dict[int, str] = field(default_factory=dict)
    pii_ids: set[str] = field(default_factory=set)  # ids that are personal data (planted)

    def user(self, n: int) -> str:
        """Mostly `u00042`; some apps key users by their phone number (PII in an id)."""
        if n % PII_ID_EVERY == 1 and n < PII_ID_BELOW:
            self.pii_ids.add(phone := f"+44 20 7946 {n % 10000:04d}")
            return phone
        return f"u{n:05d}"

    def contact(self, n: int) -> str:
        """Mostly `c00042`; some apps key contacts by their e-mail address (PII in an id)."""
        if n % PII_ID_EVERY == 2 and n < PII_ID_BELOW:
            first, last = texts.person(n).lower().split()
            self.pii_ids.add(email := f"{first}.{last}.{n}@example.com")
            return email
        return f"c{n:05d}"

    def taste(self, user: int) -> tuple[str, str]:
        """The skill a user likes and the one they dislike (stable per user)."""
        liked = texts.SKILLS[(user * 7 + self.index * 3) % len(texts.SKILLS)]
        disliked = texts.SKILLS[(user * 3 + self.index + 5) % len(texts.SKILLS)]
        return liked, (disliked if disliked != liked else texts.SKILLS[0])


class World:
    """Ids, clock formatting, people and event builders; everything drawn from one seeded RNG."""

    def __init__(self, rng: random.Random, start: date, tenants: list[Tenant]) -> None:
        self.rng = rng
        self.start = start
        self.tenants = tenants
        self.counters: dict[str, int] = {}
        self.pii: set[str] = set()

    def new_id(self, prefix: str) -> str:
        n = self.counters.get(prefix, 0) + 1
        self.counters[prefix] = n
        return f"{prefix}_{n:08d}"

    def day_start(self, day: int) -> datetime:
        d = self.start + timedelta(days=day)
        return datetime(d.year, d.month, d.day, tzinfo=UTC)

    def ts(self, when: datetime, plain: bool = False) -> str:
        """RFC 3339: mostly `Z`, sometimes a local offset or milliseconds (same instant)."""
        r = 0.0 if plain else self.rng.random()
        if r < 0.75:
            return when.strftime("%Y-%m-%dT%H:%M:%SZ")
        if r < 0.9:
            label, hours = OFFSETS[int(r * 1000) % len(OFFSETS)]
            return (when + timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%S") + label
        return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{int(r * 1e6) % 1000:03d}Z"

    def add_pii(self, text: str) -> str:
        sentence, value = texts.pii_phrase(self.rng)
        self.pii.add(value)
        return f"{text} {sentence}"

    def interaction(
        self,
        t: Tenant,
        system: str,
        when: datetime,
        user: int,
        contact: int | None,
        session: str,
        skill: str,
        *,
        input_text: str | None = None,
        parent: str | None = None,
        plain: bool = False,
    ) -> tuple[Event, str]:
        """One AI call (and the short answer a correction would use)."""
        rng = self.rng
        name = texts.person(contact if contact is not None else user + 500)
        output: Any
        if system == "support":
            topic, text, output, short = texts.support_texts(rng, skill, name)
        elif system == "little_lord":
            topic, text, output, short = texts.coaching_texts(rng, skill, name)
        else:
            topic, text, output, short = texts.scan_texts(rng, skill, name)
        kind = SYSTEMS[system][1]
        stage = {"support": "draft", "framescan": "classify"}.get(system)
        if system == "support" and not plain and input_text is None and rng.random() < 0.15:
            kind, stage = "ticket_triage", "classify"
            priority = rng.choice(("low", "normal", "high", "urgent"))
            output = f"category={topic}; priority={priority}; queue={topic}-{priority}"
            fixed = "urgent" if priority != "urgent" else "high"  # what a correction would set
            short = f"category={topic}; priority={fixed}; queue={topic}-{fixed}"
        if input_text is not None:
            text = input_text
        elif not plain and rng.random() < 0.015:
            text = self.add_pii(text)
        if isinstance(output, str) and not plain and rng.random() < 0.005:
            value = rng.choice(texts.PII_EMAILS + texts.PII_PHONES)
            self.pii.add(value)
            output += f" I've noted {value} on the ticket."
        event: Event = {
            "event_id": self.new_id("i"),
            "event_type": "interaction",
            "ts": self.ts(when, plain),
            "tenant_id": t.id,
            "contact_id": t.contact(contact) if contact is not None else None,
            "user_id": t.user(user),
            "system": system,
            "kind": kind,
            "session_id": session,
            "skill_id": skill,
            "input": text,
            "output": output,
            "model": rng.choice(texts.MODELS),
            "category": topic,
            "tags": [topic, system],
        }
        if stage:
            event["stage"] = stage
        if parent:
            event["parent_event_id"] = parent
        r = rng.random()
        if r < 0.6:
            event["importance"] = round(0.2 + r, 2)
        if r < 0.3:
            event["schema_version"] = 1
            event["summary"] = SUMMARIES[system].format(topic=topic, name=name.split()[0])
        if r > 0.8:
            event["metadata"] = {
                "app_version": f"3.{int(r * 100) % 9}.0",
                "latency_ms": int(r * 10000) % 2400 + 300,
            }
        return event, short

    def feedback(
        self,
        t: Tenant,
        target: Event,
        signal: str,
        when: datetime,
        user: int,
        *,
        rating: int | None = None,
        reason: str | None = None,
        comment: str | None = None,
        corrected: Any = None,
        plain: bool = False,
    ) -> Event:
        event: Event = {
            "event_id": self.new_id("f"),
            "event_type": "feedback",
            "ts": self.ts(when, plain),
            "tenant_id": t.id,
            "contact_id": target.get("contact_id"),
            "target_id": target["event_id"],
            "signal": signal,
            "user_id": t.user(user),
        }
        if rating is not None:
            event["rating"] = rating
        if reason is not None:
            event["reason"] = reason
        if comment is not None:
            event["comment"] = comment
        if signal == "correction":
            event["corrected_output"] = corrected
        return event

    def random_feedback(
        self,
        t: Tenant,
        target: Event,
        short: str,
        q: float,
        when: datetime,
        owner: int,
        allow_regenerate: bool = True,
    ) -> Event:
        """A signal drawn by the target's latent quality `q`, with optional rating, reason, comment."""
        rng = self.rng
        positive = rng.random() < q
        signal = rng.choice(POSITIVE if positive else NEGATIVE)
        if signal == "regenerate" and not allow_regenerate:
            signal = "thumbs_down"
        user = owner if rng.random() < 0.7 else rng.randrange(t.users)
        r = rng.random()
        rating = None
        if r < 0.25:
            rating = (5 - (r < 0.1)) if positive else (1 + (r < 0.1))
        reason = rng.choice(REASONS) if not positive and rng.random() < 0.5 else None
        comment = None
        if rng.random() < 0.08:
            if rng.random() < 0.1:
                comment = texts.LONG_COMMENT + rng.choice(texts.COMMENTS_NEG)
            else:
                comment = rng.choice(texts.COMMENTS_POS if positive else texts.COMMENTS_NEG)
            if rng.random() < 0.05:
                comment = self.add_pii(comment)
        corrected: Any = None
        if signal == "correction":
            reason = reason or "incorrect_info"
            out = target["output"]
            if isinstance(out, dict):
                corrected = {
                    **out,
                    "dominant_frame": rng.choice(texts.SCAN_FRAMES),
                    "recommendation": rng.choice(texts.COACH_ADVICE),
                }
            else:
                extra = texts.CORRECTION_ADDITIONS[reason] or texts.CORRECTION_ADDITIONS["other"]
                corrected = f"{short} {extra}" if out == short else short
        return self.feedback(
            t,
            target,
            signal,
            when,
            user,
            rating=rating,
            reason=reason,
            comment=comment,
            corrected=corrected,
        )

    def quality(self, t: Tenant, user: int, skill: str) -> float:
        liked, disliked = t.taste(user)
        q = 0.55 + (0.3 if skill == liked else 0.0) - (0.3 if skill == disliked else 0.0)
        return q + self.rng.uniform(-0.2, 0.2)

    def statement(
        self,
        t: Tenant,
        when: datetime,
        contact: str,
        memory_type: str,
        content: str,
        category: str,
        *,
        impact: str | None = "medium",
        confidence: float | None = None,
        supersedes: list[str] | None = None,
        plain: bool = False,
    ) -> Event:
        event: Event = {
            "event_id": self.new_id("m"),
            "event_type": "memory",
            "ts": self.ts(when, plain),
            "tenant_id": t.id,
            "contact_id": contact,
            "memory_type": memory_type,
            "content": content,
            "category": category,
        }
        if impact is not None:
            event["impact_level"] = impact
        if confidence is not None:
            event["confidence"] = confidence
        if supersedes:
            event["supersedes"] = supersedes
        event["tags"] = [category, memory_type]
        return event
