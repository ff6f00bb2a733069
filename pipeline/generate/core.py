"""The streaming generator: day by day, tenant by tenant, file by file, counting as it writes."""

from __future__ import annotations

import json
import random
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import asdict
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline.generate import texts
from pipeline.generate.files import DayStats, LandingFile, Tally, split_total
from pipeline.generate.malformed import (
    CONFLICT,
    REPEATABLE,
    VARIANTS,
    Event,
    Variant,
    build,
    dumps,
)
from pipeline.generate.planted import Planter, Truth
from pipeline.generate.receipts import HOLDOUT_SHARE, Receipts
from pipeline.generate.world import SYSTEM_SKILLS as _SKILLS
from pipeline.generate.world import TENANT_NAMES, Tenant, World
from pipeline.ingest.contracts import MemoryCategory, MemoryType

# Per tenant and day, each file in name order (ingest keeps the first copy of an event in name order).
FILES = (
    ("coaching", "little_lord"),
    ("framescan", "framescan"),
    ("memories", None),
    ("support", "support"),
)
SYSTEM_WEIGHTS = {"little_lord": 0.3, "framescan": 0.2, "support": 0.5}
STATEMENTS_PER_INTERACTION = 0.12
LATE_FILE = "_late.jsonl"  # sorts before every tenant file
FEEDBACK_COUNTS = (0, 0, 0, 1, 1, 1, 1, 2, 2, 3)
FEEDBACK_PER_INTERACTION = sum(FEEDBACK_COUNTS) / len(FEEDBACK_COUNTS)  # 1.1
BAD_SHARE = 0.02
RESEND_SAME_DAY, RESEND_LATER = 0.002, 0.002
LATE_FEEDBACK = 0.04
MEMORY_TYPES = (
    ("inferred_pattern",) * 30
    + ("single_inference",) * 22
    + ("confirmed_pattern",) * 15
    + ("explicit_instruction",) * 10
    + ("correction",) * 8
    + ("temporary",) * 15
)
CATEGORIES = tuple(c.value for c in MemoryCategory)
IMPACTS = ("high",) * 2 + ("medium",) * 5 + ("low",) * 3 + (None,)


class Generator:
    def __init__(
        self,
        out: Path,
        days: int,
        interactions: int,
        tenants: int,
        seed: int,
        start: date,
        progress: Callable[[str], None] | None,
        feedback_per_interaction: float = FEEDBACK_PER_INTERACTION,
        receipts: float = 0.0,
        holdout: float = HOLDOUT_SHARE,
    ) -> None:
        if days < 1 or tenants < 1 or interactions < 0:
            raise ValueError("days and tenants must be >= 1, interactions >= 0")
        if feedback_per_interaction < FEEDBACK_PER_INTERACTION:
            raise ValueError(f"feedback_per_interaction must be >= {FEEDBACK_PER_INTERACTION:g}")
        self.out, self.days, self.n, self.seed, self.start = out, days, interactions, seed, start
        # Extra random feedback per interaction on top of FEEDBACK_COUNTS (0 keeps the default
        # stream byte for byte): the issue-7 bench wants 3 feedback events per interaction.
        self.extra_feedback = feedback_per_interaction - FEEDBACK_PER_INTERACTION
        self.progress = progress or (lambda _m: None)
        # Receipts draw from their own RNG: 0 (the default) keeps the stream byte for byte.
        self.receipts = Receipts(seed, receipts, holdout) if receipts else None
        self.rng = random.Random(seed)
        names = list(TENANT_NAMES[:tenants]) + [f"tenant{i:02d}" for i in range(10, tenants)]
        per = max(1, interactions // tenants)
        self.tenants = [
            Tenant(i, name, users=max(60, per // 60), contacts=max(40, per // 12))
            for i, name in enumerate(sorted(names))
        ]
        self.w = World(self.rng, start, self.tenants)
        self.tally = Tally()
        self.truth = Truth()
        self.planter = Planter(self.w, self.truth, days)
        self.late: dict[int, list[tuple[bytes, str, str | None]]] = {}  # day → new events
        self.resend: dict[int, list[bytes]] = {}  # day → identical copies of earlier events
        self.kinds: deque[Variant] = deque(self.rng.sample(VARIANTS, len(VARIANTS)))
        self.bad_ids = 0
        self._plan()

    # -- planning ---------------------------------------------------------------------------
    def _plan(self) -> None:
        day_w = [
            1.0 + 0.25 * ((self.start + timedelta(days=d)).weekday() < 5) for d in range(self.days)
        ]
        per_day = split_total(self.n, day_w)
        tenant_w = [1.0 / (1 + 0.4 * t.index) for t in self.tenants]
        self.chunks: dict[tuple[int, int, str], int] = {}
        for d, n_day in enumerate(per_day):
            for t, n_t in zip(self.tenants, split_total(n_day, tenant_w), strict=True):
                systems = list(SYSTEM_WEIGHTS)
                for s, n_s in zip(
                    systems, split_total(n_t, [SYSTEM_WEIGHTS[x] for x in systems]), strict=True
                ):
                    self.chunks[(d, t.index, s)] = n_s
                self.chunks[(d, t.index, "memories")] = round(n_t * STATEMENTS_PER_INTERACTION)
        keys = list(self.chunks)
        weights = [self.chunks[k] * (1.2 if k[2] == "memories" else 2.3) for k in keys]
        total_bad = max(len(VARIANTS), round(BAD_SHARE * sum(weights)))
        if sum(weights) == 0:  # no bulk data at all: put the bad lines in the first memory file
            weights[keys.index((0, 0, "memories"))] = 1.0
            self.chunks[(0, 0, "memories")] = 1
        self.bad_plan = dict(zip(keys, split_total(total_bad, weights), strict=True))

    # -- main loop --------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        self.out.mkdir(parents=True, exist_ok=True)
        for d in range(self.days):
            load = self.start + timedelta(days=d)
            folder = self.out / load.isoformat()
            folder.mkdir(exist_ok=True)
            stats = self.tally.per_date.setdefault(load.isoformat(), DayStats())
            late, resend = self.late.pop(d, []), self.resend.pop(d, [])
            if late or resend:
                f = LandingFile(folder / LATE_FILE, stats, self.tally)
                for line, etype, signal in late:
                    f.accepted(line, etype, signal)
                for line in resend:
                    f.duplicate(line)
                f.close()
            for t in self.tenants:
                planted = self.planter.for_day(t, d)
                for stem, system in FILES:
                    first = d == 0 and t.index == 0
                    name = f"{t.id}-{stem}.jsonl" + (".gz" if stem == "coaching" else "")
                    f = LandingFile(
                        folder / name,
                        stats,
                        self.tally,
                        crlf=first and stem == "framescan",
                        bom=first and stem == "support",
                    )
                    for s, event in planted:
                        if s == stem:
                            f.accepted(dumps(event), event["event_type"], event.get("signal"))
                    self._chunk(f, t, d, system)
                    f.close()
            self.progress(f"generated {load}: {stats.lines_read} lines")
        return self._truth()

    def _chunk(self, f: LandingFile, t: Tenant, d: int, system: str | None) -> None:
        key = (d, t.index, system or "memories")
        n, n_bad = self.chunks[key], self.bad_plan[key]
        bad_at = Counter(self.rng.randint(1, n) for _ in range(n_bad)) if n else Counter()
        soon: list[bytes] = []
        day0 = self.w.day_start(d)
        session, session_user, session_contact = "", 0, 0
        for k in range(1, n + 1):
            when = day0 + timedelta(seconds=int(86399 * k / (n + 1)) + self.rng.randrange(30))
            if system is None:
                self._statement(f, t, d, when, soon)
            else:
                if not session or self.rng.random() < 0.5:
                    session, session_user = self.w.new_id("s"), self.rng.randrange(t.users)
                    session_contact = self.rng.randrange(t.contacts)
                    if self.receipts:  # its own RNG: the stream is the same without receipts
                        session_contact = self.receipts.session_contact(session_contact)
                if self.rng.random() < 0.03:  # a late-arriving interaction, stamped days ago
                    when -= timedelta(days=self.rng.randint(1, 3))
                self._interaction(
                    f, t, d, system, when, session, session_user, session_contact, soon
                )
            for _ in range(bad_at.get(k, 0)):
                self._bad(f, t, d, when)
            if soon and self.rng.random() < 0.2:
                f.duplicate(soon.pop(0))
        for line in soon:
            f.duplicate(line)

    def _write(
        self, f: LandingFile, t: Tenant, d: int, event: Event, soon: list[bytes], keep: bool = False
    ) -> None:
        """Write a bulk event; maybe schedule an identical re-send; maybe keep it for a conflict."""
        line = dumps(event)
        f.accepted(line, event["event_type"], event.get("signal"))
        r = self.rng.random()
        if r < RESEND_SAME_DAY:
            soon.append(line)
        elif r < RESEND_SAME_DAY + RESEND_LATER and d + 1 < self.days:
            later = d + (2 if r < RESEND_SAME_DAY * 1.5 and d + 2 < self.days else 1)
            self.resend.setdefault(later, []).append(line)
        elif keep:
            t.reservoir.append(event)

    def _interaction(
        self,
        f: LandingFile,
        t: Tenant,
        d: int,
        system: str,
        when: datetime,
        session: str,
        user: int,
        contact: int,
        soon: list[bytes],
    ) -> None:
        rng, w = self.rng, self.w
        skill, about = rng.choice(_SKILLS[system]), contact if rng.random() < 0.9 else None
        event, short = w.interaction(t, system, when, user, about, session, skill)
        receipt, day = None, self.start + timedelta(days=d)
        if self.receipts:
            receipt = self.receipts.context(t, day, self.start, skill, about)
            if receipt is not None:
                event["context"] = receipt
        self._write(f, t, d, event, soon, keep=True)
        q = w.quality(t, user, skill)
        if self.receipts:
            q = self.receipts.quality(t, skill, receipt, q)
            self.receipts.interaction(t, event["event_id"])
        regenerate = False
        for _ in range(self._feedback_count()):
            late = rng.random() < LATE_FEEDBACK
            delay = rng.randint(1, 3) if late else 0
            at = when + timedelta(days=delay, seconds=rng.randint(30, 3 * 3600))
            fb = w.random_feedback(t, event, short, q, at, user)
            if late:
                if d + delay < self.days:
                    self.late.setdefault(d + delay, []).append(
                        (dumps(fb), "feedback", fb["signal"])
                    )
            else:
                self._write(f, t, d, fb, soon)
                regenerate = regenerate or fb["signal"] == "regenerate"
        if regenerate:  # the app asked again: a new answer to the same input
            again, short = w.interaction(
                t,
                system,
                when + timedelta(seconds=40),
                user,
                contact,
                session,
                rng.choice(_SKILLS[system]),
                input_text=event["input"],
                parent=event["event_id"],
            )
            self._write(f, t, d, again, soon)
            for _ in range(rng.randint(0, 2)):
                at = when + timedelta(seconds=rng.randint(60, 3600))
                self._write(
                    f,
                    t,
                    d,
                    w.random_feedback(
                        t, again, short, min(q + 0.25, 0.95), at, user, allow_regenerate=False
                    ),
                    soon,
                )

    def _feedback_count(self) -> int:
        count = FEEDBACK_COUNTS[self.rng.randrange(len(FEEDBACK_COUNTS))]
        if self.extra_feedback > 0:
            whole = int(self.extra_feedback)
            count += whole + (self.rng.random() < self.extra_feedback - whole)
        return count

    def _statement(
        self, f: LandingFile, t: Tenant, d: int, when: datetime, soon: list[bytes]
    ) -> None:
        rng, w = self.rng, self.w
        c = rng.randrange(t.contacts)
        if self.receipts:
            c = self.receipts.statement_contact(t, c)
        name = texts.person(c)
        memory_type = rng.choice(MEMORY_TYPES)
        r = rng.random()
        if memory_type == MemoryType.TEMPORARY:
            category = "other"
            content = rng.choice(texts.TEMPORARY_BANK).format(n=name)
            when -= timedelta(hours=rng.randint(0, 60))
        else:
            category = rng.choice(CATEGORIES)
            content = texts.memory_text(rng, category, name, texts.person(c + 7))
            age = (
                rng.uniform(0, 2)
                if r < 0.6
                else rng.uniform(2, 90)
                if r < 0.9
                else rng.uniform(90, 600)
            )
            when -= timedelta(days=age)
        if rng.random() < 0.02:
            content = w.add_pii(content)
        previous = t.last_memory.get(c)
        supersedes = [previous] if previous and rng.random() < 0.05 else None
        confidence = round(rng.uniform(0.3, 0.95), 2) if rng.random() < 0.3 else None
        event = w.statement(
            t,
            when,
            t.contact(c),
            memory_type,
            content,
            category,
            impact=rng.choice(IMPACTS),
            confidence=confidence,
            supersedes=supersedes,
        )
        t.last_memory[c] = event["event_id"]
        if self.receipts:
            self.receipts.statement(t, c, event["event_id"])
        self._write(f, t, d, event, soon)
        r = rng.random()
        if r < 0.15:
            signal = "validate" if r < 0.08 else "thumbs_up" if r < 0.12 else "thumbs_down"
            at = w.day_start(d) + timedelta(seconds=rng.randrange(86400))
            self._write(f, t, d, w.feedback(t, event, signal, at, rng.randrange(t.users)), soon)

    def _bad(self, f: LandingFile, t: Tenant, d: int, when: datetime) -> None:
        """One malformed line; required kinds first, then random ones."""
        variant = None
        for _ in range(len(self.kinds)):
            candidate = self.kinds.popleft()
            if candidate.reason != CONFLICT or t.reservoir:
                variant = candidate
                break
            self.kinds.append(candidate)  # no accepted original yet: try it later
        if variant is None:
            variant = self.rng.choice(REPEATABLE[:-1])
        if variant.reason == CONFLICT:
            original = t.reservoir.popleft()
            output = original["output"]
            changed = (
                {**output, "frame_score": (output["frame_score"] + 1) % 100}
                if isinstance(output, dict)
                else output + " (edited)"
            )
            f.bad(dumps({**original, "output": changed}), CONFLICT)
        else:
            self.bad_ids += 1
            load = self.start + timedelta(days=d)
            line = build(variant, t.id, load, self.w.ts(when, plain=True), f"q_{self.bad_ids:07d}")
            f.bad(line, variant.reason)
        if not self.kinds:
            self.kinds.append(self.rng.choice(REPEATABLE))

    def _truth(self) -> dict[str, Any]:
        truth: dict[str, Any] = {
            "seed": self.seed,
            "start": self.start.isoformat(),
            "days": self.days,
            "interactions": self.n,
            "tenants": [t.id for t in self.tenants],
            "ingest": self.tally.ingest(),
            "accepted_by_type": {
                k: self.tally.by_type[k] for k in ("interaction", "feedback", "memory")
            },
            "signals": dict(sorted(self.tally.signals.items())),
        }
        truth.update(asdict(self.truth))
        if self.receipts:
            truth["usage"] = self.receipts.truth()
        truth["pii"] = sorted(self.w.pii.union(*(t.pii_ids for t in self.w.tenants)))
        (self.out / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
        return truth


def generate(
    out: Path,
    days: int = 7,
    interactions: int = 2000,
    tenants: int = 3,
    seed: int = 0,
    start: date = date(2026, 11, 1),
    progress: Callable[[str], None] | None = None,
    feedback_per_interaction: float = FEEDBACK_PER_INTERACTION,
    receipts: float = 0.0,
    holdout: float = HOLDOUT_SHARE,
) -> dict[str, Any]:
    """Write realistic landing folders `<out>/<YYYY-MM-DD>/*.jsonl[.gz]` and `<out>/truth.json`.

    Deterministic for a seed (never reads the clock); streams file by file, so memory stays small
    at any `interactions` (the number of base AI calls; regenerations and planted cases add a few).
    Returns the truth dict: exact ingest counts (as if the dates are ingested in order) and the
    planted cases every later stage is tested against. `feedback_per_interaction` (mean number of
    random feedback events per base interaction, default 1.1) raises the feedback volume.
    `receipts` > 0: that share of AI calls from the second day on carries a `context` receipt
    (a `holdout` share of them with no pack content), with planted helpful and harmful items
    (pipeline/generate/receipts.py; truth.json's `usage`); 0 writes none.
    """
    options = (feedback_per_interaction, receipts, holdout)
    return Generator(Path(out), days, interactions, tenants, seed, start, progress, *options).run()
