"""PII detector time per KB of one long text, 1k to 64k characters: bounded analysis keeps it
flat (the detector reads windows, `pipeline.pii.detect.pieces`); without windows it grew with the
text's length (2k, 4k, 8k and 16k characters took 0.6, 2.5, 10 and 42 s).

Three kinds of text: prose (the generator's texts one after another, planted PII included), a
quarantined line whose `metadata` is nested brackets (a 400 KB one stalled the analytics build
in spaCy's tokenizer), and a run of single digits and spaces (the phone matcher's worst case).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from bench.common import Figure, Sizes, rounded
from bench.sections_pii import texts as generated

SIZES = (1_000, 4_000, 16_000, 64_000)  # quick runs stop at 16k
GIVE_UP_SECONDS = 60.0  # a kind whose text took longer is not timed at larger sizes


def prose(n: int) -> str:
    text, seed = "", n
    while len(text) < n:
        text += " ".join(generated(50, seed)) + " "
        seed += 1
    return text[:n]


def brackets(n: int) -> str:
    head = '{"schema_version": 1, "event_id": "e-1", "tenant_id": "acme", "metadata": '
    depth = max(0, (n - len(head) - 1) // 2)
    return head + "[" * depth + "]" * depth + "}"


def digits(n: int) -> str:
    return ("1 " * n)[:n]


KINDS: dict[str, Callable[[int], str]] = {"prose": prose, "brackets": brackets, "digits": digits}


def per_kb(kind: Callable[[int], str], sizes: tuple[int, ...]) -> dict[int, float | None]:
    """Milliseconds per 1,000 characters at each size (None past GIVE_UP_SECONDS)."""
    from pipeline.pii import detect

    out: dict[int, float | None] = {}
    slow = False
    for n in sizes:
        if slow:
            out[n] = None
            continue
        text = kind(n)
        started = time.perf_counter()
        detect([text])
        seconds = time.perf_counter() - started
        out[n] = seconds / n * 1e6
        slow = seconds > GIVE_UP_SECONDS
    return out


def run(sizes: Sizes) -> list[Figure]:
    from pipeline.pii import detect

    detect([json.dumps({"warm": "Priya Lopez in Berlin, +1 415 555 0132, a@b.example"})])
    lengths = SIZES[:-1] if sizes.quick else SIZES
    figures = []
    for name, kind in KINDS.items():
        times = per_kb(kind, lengths)
        first, last = times[lengths[0]], times[lengths[-1]]
        figures.append(
            Figure(
                name=f"pii detector ms per KB, {name}, {lengths[-1] // 1000}k characters",
                value=rounded(last),
                unit="ms/KB",
                baseline_name=f"the same at {lengths[0] // 1000}k characters",
                baseline_value=rounded(first),
                ratio=rounded(last / first) if last and first else None,
                goal="ratio ≤ 2 (time linear in the length)",
                goal_met=last is not None and first is not None and last <= 2 * first,
                details={f"{n // 1000}k": rounded(ms) for n, ms in times.items()},
            )
        )
    return figures


if __name__ == "__main__":
    for figure in run(Sizes()):
        print(figure.name, figure.details)
