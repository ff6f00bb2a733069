"""Receipts (issue 42 item 1): `prompt_context` says which pack items went into the prompt, and a
stable holdout share of sessions gets no pack content (SPEC §2 `context`, §7)."""

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memorypack import HOLDOUT_SHARE, MemoryPack
from memorypack.receipt import MAX_ITEMS, in_holdout
from tests.test_prompt_context import NOW, _lake


@pytest.fixture(scope="module")
def tenant_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _lake(tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def pack(tenant_dir: Path) -> MemoryPack:
    return MemoryPack.load(tenant_dir)


def _ask(pack: MemoryPack, session_id: str | None = None, contact_id: str | None = "c1"):
    return pack.prompt_context(
        contact_id,
        query="where is my order",
        system="support",
        budget_chars=100_000,
        skill_id="concise_response",
        k_memories=10,
        now=NOW,
        session_id=session_id,
    )


def _session(share: float, held_out: bool) -> str:
    """The first `s<i>` on the asked side of a holdout of `share`."""
    return next(f"s{i}" for i in range(10_000) if in_holdout(f"s{i}", None, share) is held_out)


def test_the_receipt_names_every_item_in_prompt_order(pack: MemoryPack) -> None:
    context = _ask(pack, session_id=_session(HOLDOUT_SHARE, held_out=False))
    assert context.template is not None and context.memories and context.examples
    template = f"concise_response@{context.template.version}"
    expected = [
        template,
        *(m.memory_id for m in context.memories),
        *(e.memory_id for e in context.examples if e.memory_id not in
          {m.memory_id for m in context.memories}),
    ]  # fmt: skip
    receipt = context.receipt
    assert list(receipt.items) == expected
    assert receipt.pack_version == f"acme/{pack.version}" and receipt.holdout is False
    logged = json.loads(json.dumps(receipt.as_context()))
    assert logged == {"pack_version": f"acme/{pack.version}", "items": expected, "holdout": False}
    # The prompt shows the template the receipt names.
    assert f"## Procedure (concise_response, version {context.template.version})" in context.text


def test_only_what_fitted_the_budget_is_on_the_receipt(pack: MemoryPack) -> None:
    full = _ask(pack)
    small = pack.prompt_context(
        "c1", query="where is my order", system="support", budget_chars=400,
        skill_id="concise_response", k_memories=10, now=NOW,
    )  # fmt: skip
    assert small.dropped and len(small.receipt.items) < len(full.receipt.items)
    fitted = [*(m.memory_id for m in small.memories), *(e.memory_id for e in small.examples)]
    assert [i for i in small.receipt.items if "@" not in i] == list(dict.fromkeys(fitted))


def test_a_held_out_session_gets_an_empty_context(pack: MemoryPack) -> None:
    session = _session(HOLDOUT_SHARE, held_out=True)
    context = _ask(pack, session_id=session)
    assert context.text == "" and context.template is None
    assert (context.memories, context.examples, context.conflicts, context.questions) == (
        [],
        [],
        [],
        [],
    )
    assert context.receipt.as_context() == {
        "pack_version": f"acme/{pack.version}",
        "items": [],
        "holdout": True,
    }
    # The session decides, whoever the contact: one conversation stays on one side.
    assert _ask(pack, session_id=session, contact_id="c2").receipt.holdout is True
    assert pack.in_holdout(session) is True and pack.in_holdout(_session(0.05, False)) is False


def test_the_holdout_share_is_configurable(tenant_dir: Path) -> None:
    everyone = MemoryPack.load(tenant_dir, holdout_share=1.0)
    assert _ask(everyone, session_id="any").receipt.holdout is True
    # Without a session or a contact there is no stable key: never held out.
    assert _ask(everyone, contact_id=None).receipt.holdout is False
    nobody = MemoryPack.load(tenant_dir, holdout_share=0.0)
    assert _ask(nobody, session_id=_session(HOLDOUT_SHARE, held_out=True)).receipt.items
    with pytest.raises(ValueError, match="holdout share"):
        MemoryPack.load(tenant_dir, holdout_share=1.5)


def test_an_app_building_its_own_prompt_gets_a_receipt(pack: MemoryPack) -> None:
    template = pack.template("concise_response")
    examples = pack.few_shot("support", k=2)
    memories = pack.memories_for("c1", k=2)
    receipt = pack.receipt(template=template, memories=memories, examples=examples)
    assert template is not None
    assert receipt.items[0] == f"concise_response@{template.version}"
    assert receipt.items[1:3] == tuple(m.memory_id for m in memories)
    with pytest.raises(ValueError, match="holdout call uses no pack content"):
        pack.receipt(memories=memories, holdout=True)
    assert pack.receipt(holdout=True).as_context()["items"] == []
    assert MAX_ITEMS == 256  # the contract's bound (pipeline.ingest.contracts.CONTEXT_MAX_ITEMS)


@settings(derandomize=True, max_examples=40, deadline=None)
@given(
    share=st.floats(min_value=0.01, max_value=0.5),
    prefix=st.text(min_size=0, max_size=12),
)
def test_holdout_is_stable_and_its_share_is_the_configured_one(share: float, prefix: str) -> None:
    n = 4000
    keys = [f"{prefix}{i}" for i in range(n)]
    sides = [in_holdout(k, None, share) for k in keys]
    assert sides == [in_holdout(k, "another contact", share) for k in keys]  # stable, session wins
    # Monotone in the share: raising it only moves calls into the holdout.
    wider = min(1.0, share * 1.5)
    assert all(in_holdout(k, None, wider) for k, held in zip(keys, sides, strict=True) if held)
    observed = sum(sides) / n
    assert abs(observed - share) < 5 * math.sqrt(share * (1 - share) / n)
