"""PII redaction's share of the pack stage: the pack stage (load inputs, build, guards, publish) of
one tenant with redaction vs the same stage with redaction skipped, on a first night (empty
redaction cache) and then on an incremental night with ~10 % new memories (so ~10 % new texts).

The lake is `bench/pack_scale.py`'s, with the generator's texts (support, coaching and scan
requests with people's names, 1.5 % with a planted PII sentence; half of them repeat a text of the
bank, as real nights do). A memory's texts depend only on its index, so the incremental night holds
the first night's texts plus the new memories' texts. Redaction time is also measured directly,
inside the stage (`Redactor.seconds`: every frame redacted and the cache flush).

    python -m bench.run --only pii_pack --reps 1                        # 100,000 memories
    python -m bench.run --only pii_pack --pii-pack-memories 2000 --reps 1
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from bench.common import Figure, Sizes, interleaved, rounded, scaled_goal
from pipeline.pii.redactor import Redactor

GOAL_MEMORIES = 100_000
GOAL_SHARE = 0.20  # an incremental night's redaction adds at most this to its pack stage
NEW_SHARE = 0.10
DIM = 384
PII_SHARE = 0.015


def generator_text(prefix: str, index: int) -> str:
    """The text of memory `index` in column `prefix`: the same on every night."""
    from pipeline.generate import texts as bank

    rng = random.Random(f"{prefix}:{index}")
    name = bank.person(rng.randrange(400))
    builder = rng.choice((bank.support_texts, bank.coaching_texts, bank.scan_texts))
    parts = builder(rng, rng.choice(bank.SKILLS), name)
    text = str(parts[3] if prefix == "answer" else parts[1])
    if rng.random() < PII_SHARE:
        text += " " + bank.pii_phrase(rng)[0]
    return f"{text} (#{index})" if rng.random() < 0.5 else text  # half are distinct


def generator_texts(_rng: np.random.Generator, n: int, prefix: str) -> list[str]:
    return [generator_text(prefix, i) for i in range(n)]


class SkippedRedactor(Redactor):
    """Redaction skipped: every frame goes into the pack as it is (the baseline)."""

    def frame(
        self,
        frame: pl.DataFrame,
        identifiers: Iterable[str] = (),
        keep: Iterable[str] = (),
        findings: list[pl.DataFrame] | None = None,
    ) -> tuple[pl.DataFrame, Counter[str]]:
        return frame, Counter()

    def flush(self) -> None:
        return None


def _pack_stage(home: Path, packs: Path, redact: bool) -> dict[str, Any]:
    """One tenant's pack stage as the nightly `memory_pack` asset runs it; what the redactor did."""
    from bench import pack_scale
    from pipeline.config import Paths
    from pipeline.publish.build import build_pack, load_inputs
    from pipeline.publish.guards import run_guards
    from pipeline.publish.writer import publish
    from pipeline.storage.lake import Lake

    paths = Paths.from_env(home)
    inputs = load_inputs(Lake(paths), pack_scale.TENANT, pack_scale.AS_OF)
    home_redactor = inputs.redactor
    assert home_redactor is not None
    redactor = (
        Redactor(home_redactor.key, home_redactor.cache)
        if redact
        else SkippedRedactor(home_redactor.key)
    )
    inputs.redactor = redactor
    content = build_pack(inputs)
    guards = run_guards(content, inputs)
    publish(packs, content, run_id="bench")
    return {
        "redaction_s": redactor.seconds,
        "texts_analysed": redactor.analysed,
        "texts_served": redactor.served,
        "ids_analysed": redactor.ids_analysed,
        "redacted": content.redactions["total"],
        "memories": content.frames["memories.parquet"].height,
        "guards_failed": [g.name for g in guards if not g.passed],
    }


def _night(home: Path, reps: int, label: str) -> tuple[dict[str, Any], list[Figure]]:
    """The pack stage with and without redaction, repetitions in turn; every redacted repetition
    starts from the cache as the night found it (saved aside first)."""
    cache = home / "lake" / "pii_cache"
    saved = home / f"pii_cache.{label}"
    if cache.exists():
        shutil.copytree(cache, saved)

    def restore() -> None:
        shutil.rmtree(cache, ignore_errors=True)
        if saved.exists():
            shutil.copytree(saved, cache)
        shutil.rmtree(home / "packs-redacted", ignore_errors=True)

    timed = interleaved(
        {
            "redacted": lambda: _pack_stage(home, home / "packs-redacted", redact=True),
            "skipped": lambda: _pack_stage(home, home / "packs-skipped", redact=False),
        },
        reps,
        setup={
            "redacted": restore,
            "skipped": lambda: shutil.rmtree(home / "packs-skipped", ignore_errors=True),
        },
    )
    with_s, with_all, outcome = timed["redacted"]
    without_s, without_all, skipped = timed["skipped"]
    details = {
        **outcome,
        "redaction_share_of_stage_without": rounded(outcome["redaction_s"] / without_s),
        "pack_stage_with_redaction_s_all": [rounded(s) for s in with_all],
        "pack_stage_without_redaction_s_all": [rounded(s) for s in without_all],
        "guards_failed_without_redaction": skipped["guards_failed"],
    }
    return details, [
        Figure(
            name=f"pack stage with PII redaction, {label}",
            value=rounded(with_s),
            unit="s",
            baseline_name="the same pack stage, redaction skipped",
            baseline_value=rounded(without_s),
            ratio=rounded(with_s / without_s),
            details=details,
        )
    ]


def run(sizes: Sizes) -> list[Figure]:
    from bench import pack_scale
    from pipeline.pii import analysis_engine

    n = sizes.pii_pack_memories
    extra = int(n * NEW_SHARE)
    analysis_engine()  # loaded once per process, as a night's pack stage finds it after the first tenant
    with tempfile.TemporaryDirectory(prefix="bench-pii-pack-") as tmp:
        first_home, next_home = Path(tmp) / "first", Path(tmp) / "next"
        started = time.perf_counter()
        pack_scale.synthesize(_paths(first_home), n, DIM, sizes.seed, generator_texts)
        pack_scale.synthesize(_paths(next_home), n + extra, DIM, sizes.seed, generator_texts)
        synthesized_s = time.perf_counter() - started
        # The first night's redactions run once: its repetitions would each need an empty cache.
        first, first_figures = _night(first_home, 1, "first night (empty cache)")
        # The next night finds the first night's cache and key.
        shutil.copytree(first_home / "lake" / "pii_cache", next_home / "lake" / "pii_cache")
        shutil.copytree(first_home / "secrets", next_home / "secrets")
        incremental, figures = _night(
            next_home, sizes.reps, f"incremental night ({NEW_SHARE:.0%} new memories)"
        )
    distinct_first = first["texts_analysed"]
    first_figures[0].details |= {
        "memories_in_lake": n,
        # texts and identifiers both: a night redacts every memory's texts and pseudonymizes its ids
        "redaction_ms_per_1k_memories": rounded(first["redaction_s"] / n * 1e6),
        "redaction_min_at_this_size": rounded(first["redaction_s"] / 60),
        "synthesized_s": rounded(synthesized_s),
    }
    incremental_figure = figures[0]
    incremental_figure.details |= {
        "memories_in_lake": n + extra,
        "new_texts_share": rounded(incremental["texts_analysed"] / max(distinct_first, 1)),
    }
    incremental_figure.goal = f"ratio ≤ {1 + GOAL_SHARE:g} (redaction adds ≤ {GOAL_SHARE:.0%})"
    incremental_figure.goal_met = (incremental_figure.ratio or 0) <= 1 + GOAL_SHARE
    incremental_figure = scaled_goal(incremental_figure, n, GOAL_MEMORIES, "memories")
    return [*first_figures, incremental_figure]


def _paths(home: Path) -> Any:
    from pipeline.config import Paths

    home.mkdir(parents=True, exist_ok=True)
    return Paths.from_env(home)
