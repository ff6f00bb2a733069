"""A custom (e.g. LLM) memory selector behind a timeout, with its output validated (seed 003)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

SelectorOutput = Any  # list of ids, list of {"id", "relevance_score", "reason"}, or that JSON
Selector = Callable[[Sequence[Any]], SelectorOutput]


class SelectorFailed(Exception):
    """The selector raised, timed out or answered something we cannot use: fall back."""


@dataclass(frozen=True)
class Choice:
    memory_id: str
    relevance: float | None
    reason: str | None


def call_with_timeout(
    selector: Selector, candidates: Sequence[Any], timeout_ms: float
) -> SelectorOutput:
    """Run the selector in a daemon thread; a late answer is ignored (the thread cannot be killed)."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = selector(candidates)
        except BaseException as error:  # whatever the selector raises means "fall back"
            box["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, name="memorypack-selector", daemon=True).start()
    if not done.wait(timeout_ms / 1000.0):
        raise SelectorFailed(f"selector timed out after {timeout_ms:g} ms")
    if "error" in box:
        error = box["error"]
        raise SelectorFailed(f"selector failed: {type(error).__name__}: {error}")
    return box.get("value")


def parse_choices(raw: SelectorOutput, allowed: set[str]) -> list[Choice]:
    """Validate the selector's answer: known ids only, scores in [0, 1]; anything else is malformed."""
    if isinstance(raw, bytes | str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise SelectorFailed("selector returned text that is not JSON") from None
    if isinstance(raw, dict):
        raw = raw.get("selected_memories")
    if not isinstance(raw, list):
        raise SelectorFailed(f"selector returned {type(raw).__name__}, expected a list of memories")
    choices: list[Choice] = []
    seen: set[str] = set()
    for item in raw:
        if isinstance(item, str):
            choice = Choice(item, None, None)
        elif isinstance(item, dict) and isinstance(item.get("id"), str):
            score = item.get("relevance_score")
            if score is not None and (
                isinstance(score, bool) or not isinstance(score, int | float) or not 0 <= score <= 1
            ):
                raise SelectorFailed(
                    f"selector gave {item['id']} an invalid relevance_score {score!r}"
                )
            reason = item.get("reason")
            choice = Choice(
                item["id"], None if score is None else float(score), str(reason) if reason else None
            )
        else:
            raise SelectorFailed(f"selector returned an item that is not an id: {str(item)[:60]!r}")
        if choice.memory_id not in allowed:
            raise SelectorFailed(f"selector chose {choice.memory_id!r}, which is not a candidate")
        if choice.memory_id not in seen:
            seen.add(choice.memory_id)
            choices.append(choice)
    if choices and all(c.relevance is not None for c in choices):
        choices.sort(key=lambda c: -(c.relevance or 0.0))
    return choices
