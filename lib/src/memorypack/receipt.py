"""What an app logs with each call (SPEC §2 `context`): which pack items its prompt used, or none.

A receipt names the pack as `<tenant_id>/<version>`: a version alone (`<publish time>-<hash>`)
cannot say whose pack it is, and the pipeline quarantines a receipt naming another tenant's pack
(`foreign_pack`). Its items are, in prompt order, `<skill>@<template version>`, the memories' ids
and the few-shot examples' memory ids.

The holdout is the clean control the pipeline measures uplift against (SPEC §4.9): a stable share
of calls gets no pack content. The side is a hash of the session id (else the contact id), so one
person's conversation never switches sides; a call with neither is never held out (no stable key).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memorypack.results import FewShotExample, ScoredMemory, Template

HOLDOUT_SHARE = 0.05
# The contract's bound on `items` (pipeline.ingest.contracts.CONTEXT_MAX_ITEMS): more is quarantined.
MAX_ITEMS = 256
_SCALE = float(1 << 64)


@dataclass(frozen=True)
class Receipt:
    """The pack behind one call: `pack_version` (`<tenant_id>/<version>`), the `items` put into
    the prompt in order, and `holdout` (this call deliberately used nothing from the pack)."""

    pack_version: str
    items: tuple[str, ...]
    holdout: bool

    def as_context(self) -> dict[str, Any]:
        """The interaction's `context` field (SPEC §2), ready for `json.dumps`."""
        return {
            "pack_version": self.pack_version,
            "items": list(self.items),
            "holdout": self.holdout,
        }


def template_item(template: Template) -> str:
    return f"{template.skill_id}@{template.version}"


def in_holdout(session_id: str | None, contact_id: str | None, share: float) -> bool:
    """Whether a call falls in the holdout: the first 64 bits of sha256(session id, else contact
    id) as a fraction of 2^64, below `share`."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"holdout share must lie in [0, 1], not {share}")
    key = session_id if session_id is not None else contact_id
    if key is None or share == 0.0:
        return False
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE < share


def _pieces(name: str, values: list[Any], kind: type, source: str) -> None:
    for value in values:
        if not isinstance(value, kind):
            raise ValueError(
                f"receipt {name} must be {kind.__name__} as {source} returns, not {value!r:.60}"
            )


def receipt(
    tenant_id: str,
    version: str,
    template: Template | None = None,
    memories: Iterable[ScoredMemory] = (),
    examples: Iterable[FewShotExample] = (),
    *,
    holdout: bool = False,
) -> Receipt:
    """The receipt of a prompt holding these pieces, in prompt order (template, memories,
    examples; an id once, where it first appears). Each piece is what the pack answered (a
    `Template`, `ScoredMemory`s, `FewShotExample`s): anything else is a ValueError."""
    memories, examples = list(memories), list(examples)
    _pieces("template", [] if template is None else [template], Template, "pack.template(...)")
    _pieces("memories", memories, ScoredMemory, "pack.memories_for(...)")
    _pieces("examples", examples, FewShotExample, "pack.few_shot(...)")
    items = [template_item(template)] if template is not None else []
    items += [m.memory_id for m in memories]
    items += [e.memory_id for e in examples]
    if holdout and items:
        raise ValueError("a holdout call uses no pack content: its receipt holds no items")
    unique = tuple(dict.fromkeys(items))[:MAX_ITEMS]
    return Receipt(f"{tenant_id}/{version}", unique, holdout)
