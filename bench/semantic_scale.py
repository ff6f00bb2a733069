"""Scale check of the semantic stage: 100k synthetic memories, embedded twice (cache) and clustered.

Run: `.venv/bin/python bench/semantic_scale.py [--n 100000] [--batch-size 128] [--threads 2]`.
Prints one JSON object with throughput and wall times.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline import contracts
from pipeline.conflicts import find_conflicts, with_subjects
from pipeline.consolidate import consolidate
from pipeline.embed import (
    EmbedConfig,
    embed_with_cache,
    load_model,
    memory_texts,
    model_name,
    normalise_text,
    text_hashes,
)

SUBJECTS = [
    "my order",
    "the invoice",
    "my password",
    "the delivery",
    "my account",
    "the refund",
    "the subscription",
    "my card",
    "the report",
    "the meeting",
    "the contract",
    "my plan",
]
ASKS = [
    "Where is {s} number {n}?",
    "How do I change {s} for {c}?",
    "Can you cancel {s} from {c}?",
    "Why was {s} {n} charged twice?",
    "Please resend {s} to {c}",
    "Is {s} {n} ready yet?",
    "I need help with {s}, it says error {n}",
    "Can {s} be moved to {d}?",
]
STATEMENTS = [
    "{p} email over phone calls about {s}",
    "{a} cc {c} on {s}",
    "{p} meetings on {d}",
    "{a} book flights with {c}",
    "Sends {s} every {d}",
    "{a} call after {n}pm",
    "Has a {c} named {d}",
    "{p} short replies about {s}",
]
POLAR = ["Prefers", "Avoids", "Likes", "Dislikes"]
ALWAYS = ["Always", "Never", "Please", "Do not"]
CITIES = [
    "Berlin",
    "Lisbon",
    "Oslo",
    "Madrid",
    "Paris",
    "Rome",
    "Vienna",
    "Prague",
    "Dublin",
    "Warsaw",
    "legal",
    "finance",
    "United",
    "Lufthansa",
    "dog",
    "cat",
    "parrot",
]
DAYS = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "March",
    "April",
    "May",
]


def _pick(rng: np.random.Generator, items: list[str], n: int) -> np.ndarray:
    return np.asarray(items, dtype=object)[rng.integers(0, len(items), n)]


def synthesize(n: int, seed: int = 7) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    n_statements = n * 3 // 10
    n_interactions = n - n_statements
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def fill(templates: list[str], count: int) -> list[str]:
        out = pl.DataFrame(
            {
                "t": _pick(rng, templates, count),
                "s": _pick(rng, SUBJECTS, count),
                "c": _pick(rng, CITIES, count),
                "d": _pick(rng, DAYS, count),
                "p": _pick(rng, POLAR, count),
                "a": _pick(rng, ALWAYS, count),
                "n": rng.integers(1, 5000, count).astype(str),
            }
        )
        expr = pl.col("t")
        for key in ("s", "c", "d", "p", "a", "n"):
            expr = expr.str.replace_all("{" + key + "}", pl.col(key), literal=True)
        return out.select(expr)["t"].to_list()

    ts = [start + timedelta(minutes=int(m)) for m in rng.integers(0, 60 * 24 * 300, n)]
    interactions = (
        pl.DataFrame(
            {
                "tenant_id": _pick(rng, [f"t{i}" for i in range(10)], n_interactions),
                "event_id": [f"i{i}" for i in range(n_interactions)],
                "ts": ts[:n_interactions],
                "contact_id": _pick(rng, [f"c{i}" for i in range(2000)], n_interactions),
                "system": _pick(rng, ["support", "framescan", "little_lord"], n_interactions),
                "kind": _pick(rng, ["reply", "report"], n_interactions),
                "input": fill(ASKS, n_interactions),
                "output": ["ok"] * n_interactions,
                "tags": [["bench"]] * n_interactions,
                "importance": rng.random(n_interactions),
            }
        )
        .with_columns(
            [
                pl.lit(None, contracts.INTERACTION_SCHEMA[c]).alias(c)
                for c in contracts.INTERACTION_COLUMNS
                if c
                not in {
                    "tenant_id",
                    "event_id",
                    "ts",
                    "contact_id",
                    "system",
                    "kind",
                    "input",
                    "output",
                    "tags",
                    "importance",
                }
            ]
        )
        .select(contracts.INTERACTION_COLUMNS)
        .cast(pl.Schema(contracts.INTERACTION_SCHEMA))
    )
    statements = (
        pl.DataFrame(
            {
                "tenant_id": _pick(rng, [f"t{i}" for i in range(10)], n_statements),
                "event_id": [f"m{i}" for i in range(n_statements)],
                "ts": ts[n_interactions:],
                "contact_id": _pick(rng, [f"c{i}" for i in range(2000)], n_statements),
                "memory_type": _pick(rng, [str(t) for t in contracts.MemoryType], n_statements),
                "content": fill(STATEMENTS, n_statements),
                "tags": [["bench"]] * n_statements,
            }
        )
        .with_columns(
            [
                pl.lit(None, contracts.MEMORY_SCHEMA[c]).alias(c)
                for c in contracts.MEMORY_COLUMNS
                if c
                not in {
                    "tenant_id",
                    "event_id",
                    "ts",
                    "contact_id",
                    "memory_type",
                    "content",
                    "tags",
                }
            ]
        )
        .select(contracts.MEMORY_COLUMNS)
        .cast(pl.Schema(contracts.MEMORY_SCHEMA))
    )
    return interactions, statements


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=EmbedConfig.batch_size)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = default)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    config = EmbedConfig(batch_size=args.batch_size, torch_threads=args.threads or None)
    figures: dict[str, object] = {"n_memories": args.n, "batch_size": args.batch_size}
    figures["load_average_at_start"] = round(os.getloadavg()[0], 1)

    interactions, statements = synthesize(args.n)
    t0 = time.perf_counter()
    model = load_model()
    figures["model_load_s"] = round(time.perf_counter() - t0, 1)
    name = model_name()
    now = datetime(2026, 11, 3, tzinfo=UTC)

    t0 = time.perf_counter()
    texts = memory_texts(interactions, statements)
    first = embed_with_cache(texts, None, model, name, now, config)
    figures["first_run_s"] = round(time.perf_counter() - t0, 1)
    figures["distinct_texts"] = first.n_new
    figures["texts_per_s"] = round(first.texts_per_second, 1)

    t0 = time.perf_counter()
    texts = memory_texts(interactions, statements)
    second = embed_with_cache(texts, first.cache, model, name, now, config)
    figures["incremental_run_s"] = round(time.perf_counter() - t0, 2)
    figures["incremental_new_texts"] = second.n_new

    t0 = time.perf_counter()
    subjects = with_subjects(statements)
    subject_texts = subjects.select(
        "tenant_id",
        pl.col("event_id").alias("memory_id"),
        normalise_text(pl.col("subject")).alias("text"),
    )
    subject_texts = subject_texts.with_columns(text_hashes(subject_texts["text"]))
    subject_run = embed_with_cache(subject_texts, second.cache, model, name, now, config)
    vectors = second.embeddings.select(
        "tenant_id", pl.col("memory_id").alias("event_id"), "embedding"
    )
    sub_vectors = subject_run.embeddings.select(
        "tenant_id",
        pl.col("memory_id").alias("event_id"),
        pl.col("embedding").alias("subject_embedding"),
    )
    conflicts = find_conflicts(
        subjects.join(vectors, on=["tenant_id", "event_id"]).join(
            sub_vectors, on=["tenant_id", "event_id"]
        )
    )
    figures["conflicts_s"] = round(time.perf_counter() - t0, 1)
    figures["subject_texts_embedded"] = subject_run.n_new
    figures["conflicts"] = conflicts.height

    t0 = time.perf_counter()
    result = consolidate(statements, interactions, second.embeddings, conflicts)
    figures["consolidation_s"] = round(time.perf_counter() - t0, 1)
    figures["clusters"] = result.summaries.height
    figures["statement_clusters"] = result.summaries.filter(pl.col("scope") == "statement").height
    figures["largest_cluster"] = int(result.summaries["n_members"].max() or 0)  # type: ignore[arg-type]
    figures["load_average_at_end"] = round(os.getloadavg()[0], 1)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
