"""A closed loop on the pack's own top k (issue 52): receipts come from the library's
`prompt_context`, which puts the 3 examples of a skill's 5 most relevant to each prompt into it,
so the examples are substitutes; effects are planted after the pack chose.

Per skill, 2 of the 5 examples are harmful, 2 helpful and 1 neutral (the template, in every pack
call, is neutral too). Each example is a random unit vector and each prompt a random query
vector, so which examples compete with which changes with the seed. A call's votes (1–3 thumbs,
each up with chance `BASE + Σ shifts of the items used`) are scored by the product's own §4.1
scoring, so the outcome is what the usage stage would read.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from memorypack import MemoryPack
from pipeline import tables
from pipeline.config import Paths
from pipeline.feedback.scores import compute_scores
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.writer import publish
from pipeline.semantic.embed import normalise_text, text_hashes
from pipeline.storage.lake import Lake
from pipeline.storage.vectors import EmbeddingCache

TENANT, SYSTEM, KIND = "acme", "support", "support_reply"
SKILLS = ("concise_response", "empathy_direct")
EXAMPLES, K = 5, 3  # the pack's few-shot set of a skill, and how many a prompt gets
SHIFTS = (-0.2, -0.2, 0.2, 0.2, 0.0)  # 2 harmful, 2 helpful, 1 neutral, placed at random
BASE = 0.55  # chance of a thumbs-up with no pack item's shift
DIM, MODEL = 8, "substitutes-8d"
AS_OF = datetime(2026, 11, 8, tzinfo=UTC)
TS = pl.Datetime("us", "UTC")


@dataclass(frozen=True)
class Loop:
    """What the loop produced: interactions with receipts, their scores (feedback_scores), and
    the truth: planted shift per item (0 for the neutral ones) and each item's uses."""

    interactions: pl.DataFrame
    scores: pl.DataFrame
    shifts: dict[str, float]
    uses: dict[str, int]

    def items(self, sign: int) -> set[str]:
        """Items whose planted shift has this sign (0: the neutral ones)."""
        return {i for i, s in self.shifts.items() if int(np.sign(s)) == sign}


def _declared(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    columns = tables.schema(name)
    given = frame.select(pl.col(c).cast(columns[c]) for c in frame.columns if c in columns)
    return pl.concat([tables.empty(name), given], how="diagonal")


def _pack(home: Path, rng: np.random.Generator, holdout: float) -> MemoryPack:
    """A one-tenant pack whose only content is the few-shot sets: 5 examples per skill, each a
    random unit vector, every one rated alike (so relevance alone orders them)."""
    paths = Paths.from_env(home).for_tenant(TENANT)  # its folders, as its run writes them
    lake = Lake(paths)
    n = EXAMPLES * len(SKILLS)
    ids = [f"x-{s}-{i}" for s in range(len(SKILLS)) for i in range(EXAMPLES)]
    when = [AS_OF - timedelta(days=2)] * n
    frame = pl.DataFrame(
        {
            "tenant_id": TENANT,
            "event_id": ids,
            "ts": when,
            "load_date": [w.date() for w in when],
            "system": SYSTEM,
            "kind": KIND,
            "skill_id": [s for s in SKILLS for _ in range(EXAMPLES)],
            "input": [f"question {i}" for i in ids],
            "output": [f"answer {i}" for i in ids],
        },
        schema_overrides={"ts": TS},
    )
    lake.write("interactions", _declared("interactions", frame))
    lake.write("memory_statements", tables.empty("memory_statements"))
    memories = {"tenant_id": TENANT, "memory_id": ids, "memory_kind": "interaction"}
    lake.write_partition(
        "decay_snapshots",
        (AS_OF.date() - timedelta(days=1)).isoformat(),
        _declared(
            "decay_snapshots",
            pl.DataFrame(
                {**memories, "as_of": AS_OF, "confidence": 0.9, "status": "active"},
                schema_overrides={"as_of": TS},
            ),
        ),
    )
    votes = {"n_feedback": 4, "n_positive": 4, "n_negative": 0, "quality_lower": 0.4}
    lake.write("feedback_scores", _declared("feedback_scores", pl.DataFrame({**memories, **votes})))
    # Keyed by the text's own key, as memory_embeddings keys it (the pack looks its vectors up so).
    hashes = text_hashes(frame.select(normalise_text(pl.col("input")))["input"]).to_list()
    lake.write(
        "memory_embeddings",
        _declared(
            "memory_embeddings", pl.DataFrame({**memories, "text_hash": hashes, "model": MODEL})
        ),
    )
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    EmbeddingCache(paths.embedding_cache).append(
        MODEL,
        pl.DataFrame(
            {
                "text_hash": hashes,
                "embedding": pl.Series(vectors / np.linalg.norm(vectors, axis=1, keepdims=True)),
                "model": MODEL,
                "dim": pl.Series([DIM] * n, dtype=pl.Int32),
                "embedded_at": pl.Series([AS_OF] * n, dtype=TS),
            }
        ),
    )
    few_shot = frame.select(
        "tenant_id", "system", "kind", "skill_id", pl.col("event_id").alias("memory_id"),
        "input", "output", "ts",
        rank=pl.int_range(pl.len()).over("skill_id") + 1, is_corrected=False,
        quality_lower=0.4, n_feedback=4, why=pl.lit("top quality"),
    )  # fmt: skip
    lake.write("few_shot_sets", _declared("few_shot_sets", few_shot))
    templates = {"tenant_id": TENANT, "skill_id": list(SKILLS), "version": 1, "is_current": True}
    lake.write(
        "template_history",
        _declared(
            "template_history",
            pl.DataFrame({**templates, "template": [f"Answer as {s}." for s in SKILLS]}),
        ),
    )
    publish(paths.packs, build_pack(load_inputs(lake, TENANT, AS_OF)))
    return MemoryPack.load(paths.packs / TENANT, holdout_share=holdout)


def _votes(rng: random.Random, event: str, chance: float, at: datetime) -> list[dict]:
    """1–3 thumbs on a call (as the generator's FEEDBACK_COUNTS, given one), each by another
    person, each up with `chance`."""
    n = rng.choice((1, 1, 1, 1, 2, 2, 3))
    return [
        {
            "tenant_id": TENANT,
            "event_id": f"{event}-f{k}",
            "ts": at,
            "load_date": at.date(),
            "target_id": event,
            "user_id": f"u{k}",
            "signal": "thumbs_up" if rng.random() < chance else "thumbs_down",
        }
        for k in range(n)
    ]


def loop(home: Path, seed: int, calls: int = 3000, holdout: float = 0.1) -> Loop:
    """`calls` prompts (half per skill, `holdout` of them held out), each through
    `prompt_context` on a fresh pack in `home`; planted shifts placed at random per seed."""
    rng = np.random.default_rng(seed)
    draw = random.Random(f"substitutes-{seed}")
    pack = _pack(home, rng, holdout)
    shifts: dict[str, float] = {}
    for s in range(len(SKILLS)):
        placed = rng.permutation(SHIFTS)
        shifts |= {f"x-{s}-{i}": float(placed[i]) for i in range(EXAMPLES)}
    shifts |= {f"{skill}@1": 0.0 for skill in SKILLS}
    rows, feedback, uses = [], [], dict.fromkeys(shifts, 0)
    start = datetime.combine(AS_OF.date(), datetime.min.time(), UTC) + timedelta(hours=8)
    for i in range(calls):
        skill, event = SKILLS[i % len(SKILLS)], f"call-{i:06d}"
        context = pack.prompt_context(
            None, None, SYSTEM, 100_000, skill_id=skill, query_vector=rng.normal(size=DIM),
            k_memories=0, k_examples=K, now=start, session_id=f"s{seed}-{i}",
        )  # fmt: skip
        receipt = context.receipt.as_context()
        for item in receipt["items"]:
            uses[item] += 1
        chance = BASE + sum(shifts[item] for item in receipt["items"])
        at = start + timedelta(seconds=i)
        rows.append({"event_id": event, "ts": at, "skill_id": skill, **_context(receipt)})
        feedback += _votes(draw, event, min(max(chance, 0.02), 0.98), at)
    interactions = _declared(
        "interactions",
        pl.DataFrame(rows).with_columns(
            tenant_id=pl.lit(TENANT), load_date=pl.col("ts").dt.date(), system=pl.lit(SYSTEM)
        ),
    )
    votes = _declared("feedback", pl.DataFrame(feedback))
    scores = compute_scores(interactions, tables.empty("memory_statements"), votes)
    return Loop(interactions, scores, shifts, uses)


def _context(receipt: dict) -> dict:
    """A receipt as the interactions table's columns (SPEC §2 `context`)."""
    return {
        "context_pack_version": receipt["pack_version"],
        "context_items": receipt["items"],
        "context_holdout": receipt["holdout"],
    }
