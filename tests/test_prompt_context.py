"""Ready-to-use prompt pieces (issue 16 item 6): trust lines, age warnings, conflicts, the audit's
questions for the person, and trimming to a character budget in the documented priority order."""

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from memorypack import MemoryPack
from memorypack.context import PRIORITY, distinct_examples, distinct_memories
from memorypack.results import FewShotExample
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.tenant_runs import declared
from tests.test_pack_support import AS_OF, RUN_DATE, make_lake, tenant_frames

TS = pl.Datetime("us", "UTC")
NOW = AS_OF + timedelta(days=1)
# New statements about c1: (id, type, text, impact, last confirmed, confidence, flags).
EXTRA = [
    # Seen twice more, no conflict, evidence 0.7: the audit's promotion candidate.
    ("a-m5", "inferred_pattern", "Books morning flights", "low", datetime(2026, 11, 6), 0.66),
    # Confirmed in March: older than six months, so stale.
    ("a-m6", "explicit_instruction", "Invoices go to the accounts team", "medium",
     datetime(2026, 3, 1), 1.0),
    # High impact, low confidence, not in a conflict: needs reconfirmation.
    ("a-m7", "confirmed_pattern", "Approves refunds up to 500 EUR", "high",
     datetime(2026, 7, 1), 0.55),
]  # fmt: skip


def _lake(home: Path) -> Path:
    paths = make_lake(home, tenants=("acme",)).for_tenant("acme")
    lake, frames = Lake(paths), tenant_frames("acme")
    statements = pl.DataFrame(
        {
            "tenant_id": ["acme"] * len(EXTRA),
            "event_id": [e[0] for e in EXTRA],
            "ts": [e[4].replace(tzinfo=UTC) for e in EXTRA],
            "load_date": [date(2026, 11, 1)] * len(EXTRA),
            "contact_id": ["c1"] * len(EXTRA),
            "memory_type": [e[1] for e in EXTRA],
            "content": [e[2] for e in EXTRA],
            "category": ["other", "money", "money"],
            "impact_level": [e[3] for e in EXTRA],
            "tags": [["travel"], ["billing"], ["billing"]],
        },
        schema_overrides={"ts": TS},
    )
    lake.write(
        "memory_statements",
        declared(
            "memory_statements",
            pl.concat([frames["memory_statements"], statements], how="diagonal_relaxed"),
        ),
    )
    decay = pl.read_parquet(paths.partition("decay_snapshots", RUN_DATE)).with_columns(
        reinforcement_count=pl.lit(0, pl.Int64),
        reinforced_confidence=pl.col("confidence"),
        reputation=pl.lit(1.0),
    )
    extra = pl.DataFrame(
        {
            "as_of": [AS_OF] * len(EXTRA),
            "tenant_id": ["acme"] * len(EXTRA),
            "memory_id": [e[0] for e in EXTRA],
            "memory_kind": ["statement"] * len(EXTRA),
            "memory_type": [e[1] for e in EXTRA],
            "contact_id": ["c1"] * len(EXTRA),
            "confidence": [e[5] for e in EXTRA],
            "status": ["active"] * len(EXTRA),
            "needs_reconfirmation": [False, False, True],
            "stale": [False, True, False],
            "last_confirmed": [e[4].replace(tzinfo=UTC) for e in EXTRA],
            "reinforcement_count": [2, 0, 0],
            "reinforced_confidence": [0.7, 1.0, 0.8],
            "reputation": [1.0, 1.0, 1.0],
        },
        schema_overrides={"as_of": TS, "last_confirmed": TS},
    )
    lake.write_partition(
        "decay_snapshots",
        RUN_DATE,
        declared("decay_snapshots", pl.concat([decay, extra], how="diagonal_relaxed")),
    )
    publish(paths.packs, build_pack(load_inputs(lake, "acme", AS_OF)))
    return paths.packs / "acme"


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> MemoryPack:
    return MemoryPack.load(_lake(tmp_path_factory.mktemp("home")))


def _full(pack: MemoryPack, budget: int = 100_000):
    return pack.prompt_context(
        "c1",
        query="where is my order",
        system="support",
        budget_chars=budget,
        skill_id="concise_response",
        k_memories=10,
        now=NOW,
    )


def test_the_pack_carries_the_audits_promotion_candidates(pack: MemoryPack) -> None:
    promoted = pack.memory("a-m5")
    assert promoted is not None
    assert promoted["promotion_to"] == "confirmed_pattern"
    assert promoted["promotion_reason"].startswith("seen 2 more times, no conflict, confidence 0.7")
    # In a conflict (a-m1) or not an inferred pattern: never a candidate.
    assert (pack.memory("a-m1") or {})["promotion_to"] is None
    assert (pack.memory("a-m6") or {})["promotion_to"] is None


def test_questions_for_the_person_each_memory_once(pack: MemoryPack) -> None:
    questions = pack.questions("c1", now=NOW)
    assert [(q.kind, q.memory_ids) for q in questions] == [
        ("conflict", ("a-m0", "a-m1")),  # a-m1 also needs reconfirmation: asked once, here
        ("reconfirm", ("a-m6",)),
        ("reconfirm", ("a-m7",)),
        ("promote", ("a-m5",)),
    ]
    assert questions[0].text == (
        'I have two notes that disagree: "Always email, never call" and '
        '"Pays from IBAN [IBAN]". Which should I follow?'
    )
    assert questions[1].text == (
        'This might be outdated (last confirmed 2026-03-01): "Invoices go to the accounts team". '
        "Still right?"
    )
    assert questions[2].text.startswith("This might be outdated (high impact, confidence 0.55)")
    assert questions[3].text == (
        'I\'m noticing "Books morning flights". Should I treat this as a preference?'
    )
    assert pack.questions("nobody") == [] and pack.questions(None) == []


def test_prompt_context_holds_every_piece_with_trust_lines(pack: MemoryPack) -> None:
    context = _full(pack)
    assert context.dropped == {}
    assert len(context.text) <= context.budget_chars
    assert context.template is not None and context.template.version == 2
    assert context.text.startswith(
        "## Procedure (concise_response, version 2)\n"
        "Answer in two sentences; confirm the order number first.\n\n"
        "## What we know about this person\n"
    )
    # The query ranks the matching request first; the overruled a-m1 is left out.
    assert context.memories[0].memory_id == "a-i0"
    assert "a-m1" not in {m.memory_id for m in context.memories}
    lines = {
        line.split('"')[1]: line
        for line in context.text.splitlines()
        if line.startswith('- "') and "confidence" in line
    }
    assert lines["Always email, never call"] == (
        '- "Always email, never call" (explicit instruction, confidence 1.00, last confirmed '
        "2026-11-01, 7 days ago) — another memory disagrees: see the conflicts"
    )
    assert lines["Invoices go to the accounts team"].endswith(
        "last confirmed 2026-03-01, 253 days ago) — about 8 months old: say how old it is before "
        "acting on it"
    )
    assert lines["Approves refunds up to 500 EUR"].endswith(
        "— high impact, low confidence: ask the person before acting on it"
    )
    assert "low confidence: say so" in lines["Can I change my delivery address?"]
    assert [c.memory_id_b for c in context.conflicts] == ["a-m1"]
    assert '- "Always email, never call" vs "Pays from IBAN [IBAN]" about contact channel' in (
        context.text
    )
    assert [q.kind for q in context.questions] == ["conflict", "reconfirm", "reconfirm", "promote"]
    assert context.ask.startswith("Before I go on, a few quick checks: (1) I have two notes")
    assert '(4) I\'m noticing "Books morning flights"' in context.ask
    # The skill's own example, a-i0, is the first memory listed: a memory is shown once, so the
    # system's next example stands in.
    assert [e.memory_id for e in context.examples] == ["a-i2"]
    assert context.text.count("Where is my order? mail me at [EMAIL]") == 1
    assert "## Examples of good answers\nInput: " in context.text
    # Without a skill, the system's examples, the query's best first, none a listed memory.
    anyskill = pack.prompt_context("c1", query="billing", system="support", now=NOW)
    assert "a-i0" in {m.memory_id for m in anyskill.memories}
    assert [e.memory_id for e in anyskill.examples] == ["a-i2"]


def test_trimming_keeps_the_documented_priority(pack: MemoryPack) -> None:
    full = _full(pack)
    counts = {
        "template": 1,
        "conflicts": len(full.conflicts),
        "memories": len(full.memories),
        "questions": len(full.questions),
        "examples": len(full.examples),
    }
    assert PRIORITY == ("template", "conflicts", "memories", "questions", "examples")
    seen_orders = set()
    for budget in range(0, len(full.text) + 50, 7):
        context = _full(pack, budget)
        assert len(context.text) <= budget
        kept = {
            "template": int(context.template is not None),
            "conflicts": len(context.conflicts),
            "memories": len(context.memories),
            "questions": len(context.questions),
            "examples": len(context.examples),
        }
        assert {p: kept[p] + context.dropped.get(p, 0) for p in PRIORITY} == counts
        # A part gets anything only once every part before it that fits is whole: the first part
        # with something dropped is followed only by parts that got at most their short lines.
        first_cut = next((p for p in PRIORITY if context.dropped.get(p)), None)
        if first_cut is not None:
            before = PRIORITY[: PRIORITY.index(first_cut)]
            assert all(kept[p] == counts[p] for p in before), (budget, kept)
        seen_orders.add(tuple(p for p in PRIORITY if kept[p]))
    # Every prefix of the priority order is reached as the budget grows.
    assert {PRIORITY[:n] for n in range(len(PRIORITY) + 1)} <= seen_orders
    assert _full(pack, 0).text == "" and _full(pack, 0).dropped == counts
    with pytest.raises(ValueError, match="budget_chars"):
        _full(pack, -1)


def test_a_stranger_gets_general_memories_and_the_tenants_best_template(pack: MemoryPack) -> None:
    context = pack.prompt_context("nobody", system="support", budget_chars=4000, now=NOW)
    assert [m.memory_id for m in context.memories] == ["a-i3"]  # the contact-less memory only
    assert context.conflicts == [] and context.questions == [] and context.ask is None
    # A new user: the skill the tenant's votes like best that has a template.
    assert context.template is not None and context.template.skill_id == "concise_response"
    nothing = pack.prompt_context("nobody", system="no-such-system", budget_chars=4000, now=NOW)
    assert nothing.examples == []


def test_the_template_is_one_of_the_calls_systems_skills(pack: MemoryPack) -> None:
    # The tenant's best skill, concise_response, is a support skill: framescan's calls use only
    # detailed_explanation, which has no template, so a framescan call gets none.
    assert pack.select_skill(None).skill_id == "concise_response"  # type: ignore[union-attr]
    assert pack.skills_of("framescan") == ["detailed_explanation"]
    assert pack.skills_of("support", "support_reply") == ["concise_response", "empathy_direct"]
    framescan = pack.prompt_context("nobody", system="framescan", budget_chars=4000, now=NOW)
    assert framescan.template is None and "## Procedure" not in framescan.text
    support = pack.prompt_context("nobody", system="support", budget_chars=4000, now=NOW)
    assert support.template is not None and support.template.skill_id == "concise_response"
    # A system the pack holds no call of gets no template; a named skill always its own.
    assert pack.prompt_context("nobody", system="elsewhere", now=NOW).template is None
    named = pack.prompt_context("nobody", system="framescan", skill_id="empathy_direct", now=NOW)
    assert named.template is not None and named.template.skill_id == "empathy_direct"


def test_no_line_is_repeated(tmp_path: Path) -> None:
    from bench.retrieval_set import write_pack

    texts = ["Prefers email over calls", "prefers  email over calls", "Works late on Fridays"]
    vectors = np.eye(len(texts), 4, dtype=np.float32)
    twice = MemoryPack.load(write_pack(tmp_path, texts, vectors))
    context = twice.prompt_context(None, query="email", k_memories=2, now=NOW)
    # The same statement logged twice is listed once; the list still holds k_memories.
    assert [m.memory_id for m in context.memories] == ["m000000", "m000002"]
    lines = [line for line in context.text.splitlines() if line.strip()]
    assert len(lines) == len(set(lines))


def _example(memory_id: str, input: str, output: str) -> FewShotExample:
    return FewShotExample(
        memory_id, "support", "reply", None, input, output, 0, 1, 0.5, 0.1, 2, 0.8, False
    )


def test_examples_repeat_neither_a_memory_nor_each_other(pack: MemoryPack) -> None:
    memories = pack.memories_for("c1", k=2, now=NOW)
    shown = memories[0]
    examples = [
        _example(shown.memory_id, "anything", "Fine."),  # the listed memory itself
        _example("x1", shown.text, "Other."),  # its text as an input
        _example("x2", "Is it late?", "category=billing"),
        _example("x3", "Charged twice?", "category=billing"),  # the same output again
        _example("x4", "Where is it?", "It ships tomorrow."),
        _example("x5", "Where now?", "It ships Monday."),
    ]
    kept = distinct_examples(examples, memories, 2)
    assert [e.memory_id for e in kept] == ["x2", "x4"]
    assert distinct_memories([*memories, memories[0]], 5) == memories
