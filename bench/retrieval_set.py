"""A labelled retrieval set with known answers, and a pack holding it, for the hybrid-retrieval bench
and tests.

Two kinds of query, each with exactly one right memory:

- `paraphrase`: a person's wording of a stored memory that shares almost no word with it
  ("how should we reach her" → "Prefers to be contacted by email, never by phone"): the vector
  channel's job.
- `identifier`: an order number, product code or rare surname that occurs in one memory among
  many near-identical ones ("ORD-48213" → "Order ORD-48213 arrived damaged…" among the same
  sentence for other orders): the keyword channel's job.

Filler memories from templates make up the rest of the pack (same vocabulary as the answers, so
neither channel wins by the answers' words being unusual).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

TENANT = "retrieval"
AS_OF = datetime(2026, 11, 21, tzinfo=UTC)

# (stored memory, a person's question about it in other words)
PARAPHRASES = [
    ("Prefers to be contacted by email, never by phone", "how should we reach her"),
    ("Allergic to peanuts and tree nuts", "food restrictions for the team dinner"),
    ("Works night shifts at the hospital", "when is he asleep during the day"),
    ("Wants invoices split per cost centre", "how to divide the bills between departments"),
    ("Is vegetarian and avoids fish as well", "does she eat meat or seafood"),
    ("Hates long meetings, keep calls under 15 minutes", "maximum length for a call with him"),
    ("Travels to Singapore every quarter for board meetings", "regular trips to Asia"),
    ("Asked us to stop sending marketing newsletters", "does he want promotional mail"),
    ("Only flies aisle seats because of a knee injury", "seating preference on planes"),
    ("Pays suppliers on the last Friday of each month", "when do vendors get their money"),
    ("Speaks German at home, English at work", "which languages does she use"),
    ("Daughter starts university in September", "family news about her child's studies"),
    ("Prefers a short summary before any detailed report", "how to present findings to him"),
    ("Uses a wheelchair, needs step-free venues", "accessibility needs for the event"),
    ("Moved the company headquarters to Lisbon last spring", "where is their main office now"),
    ("Dislikes being called by her first name in emails", "how formal to be when writing"),
    ("Budget for the renovation is capped at forty thousand", "spending limit on the building work"),
    ("Celebrates his birthday on the twelfth of March", "when to send him congratulations"),
    ("Needs all contracts reviewed by their lawyer first", "legal sign-off before signing"),
    ("Runs marathons and trains every morning at six", "his exercise routine"),
    ("Cannot attend anything on Friday afternoons", "when is she unavailable each week"),
    ("Prefers tea over coffee, green tea in particular", "what drink to offer at the visit"),
    ("Lost his wallet last week and cancelled his cards", "recent problem with payment cards"),
    ("Wants quotes in euros, not dollars", "which currency for the price offer"),
]  # fmt: skip
SURNAMES = [
    "Okonkwo-Baptiste", "Vanterpool", "Szczepanik", "Quintanilla", "Abernathy-Ruiz",
    "Nakagawa-Holt", "Ferreira-Lund", "Kowalczuk", "Ishikawa-Brandt", "Delacroix-Mbeki",
]  # fmt: skip
IDENTIFIER_TEMPLATES = [
    ("Order {code} arrived damaged and was replaced", "ORD-{n:05d}", "what happened to {code}"),
    ("Ticket {code} about the login error is still open", "TCK-{n:06d}", "{code}"),
    ("Invoice {code} was paid twice by mistake", "INV{n:07d}", "status of invoice {code}"),
    ("Spare part {code} must be reordered for the pump", "SKU-{n:04d}-X", "{code} reorder"),
]
NAME_TEMPLATE = ("Mr {name} asked for a callback about his refund", "{name}")
FILLER = [
    "Asked about the {thing} for the {event}",
    "Complained that the {thing} was late again",
    "Wants an update on the {thing} before the {event}",
    "Said the {thing} looked fine after the {event}",
    "Requested a copy of the {thing} from last month",
    "Was unhappy with how the {thing} was handled",
    "Confirmed the {thing} in writing after the {event}",
]
THINGS = [
    "order", "delivery", "invoice", "refund", "contract", "quote", "booking", "report",
    "payment", "shipment", "appointment", "subscription", "password reset", "warranty claim",
]  # fmt: skip
EVENTS = [
    "meeting", "audit", "trip", "launch", "holiday", "review", "move", "renewal", "visit", "call",
]  # fmt: skip


@dataclass(frozen=True)
class LabelledQuery:
    text: str
    answer: int  # row of the pack's memories (texts list)
    kind: str  # paraphrase | identifier


def labelled_set(
    n_identifiers: int, n_filler: int, seed: int = 0
) -> tuple[list[str], list[LabelledQuery]]:
    """Memory texts (answers and fillers, shuffled) and the queries with their answer's row."""
    rng = np.random.default_rng(seed)
    items: list[tuple[str, str | None, str]] = []  # (text, query, kind)
    items += [(memory, query, "paraphrase") for memory, query in PARAPHRASES]
    numbers = rng.choice(900_000, size=n_identifiers, replace=False) + 10_000
    for i, n in enumerate(numbers.tolist()):
        if i < len(SURNAMES):
            text, query = NAME_TEMPLATE
            items.append(
                (text.format(name=SURNAMES[i]), query.format(name=SURNAMES[i]), "identifier")
            )
            continue
        template, code_format, query = IDENTIFIER_TEMPLATES[i % len(IDENTIFIER_TEMPLATES)]
        code = code_format.format(n=n % 10_000 if "SKU" in code_format else n)
        items.append((template.format(code=code), query.format(code=code), "identifier"))
    for _ in range(n_filler):
        template = FILLER[int(rng.integers(len(FILLER)))]
        thing = THINGS[int(rng.integers(len(THINGS)))]
        event = EVENTS[int(rng.integers(len(EVENTS)))]
        items.append((template.format(thing=thing, event=event), None, "filler"))
    order = rng.permutation(len(items))
    texts = [items[i][0] for i in order]
    queries = [
        LabelledQuery(items[i][1], row, items[i][2])  # type: ignore[arg-type]
        for row, i in enumerate(order)
        if items[i][1] is not None
    ]
    return texts, sorted(queries, key=lambda q: q.answer)


def recall_at(
    found: list[list[str]], queries: list[LabelledQuery], ids: list[str], k: int = 10
) -> dict[str, float]:
    """Share of queries whose answer is in the first k results: per kind, over all queries, and
    `macro` (the mean of the kinds' shares, so each kind counts alike whatever its size)."""
    hits: dict[str, list[bool]] = {"all": []}
    for result, query in zip(found, queries, strict=True):
        hit = ids[query.answer] in result[:k]
        hits["all"].append(hit)
        hits.setdefault(query.kind, []).append(hit)
    recall = {kind: round(float(np.mean(values)), 4) for kind, values in hits.items()}
    recall["macro"] = round(float(np.mean([v for kind, v in recall.items() if kind != "all"])), 4)
    return recall


def write_pack(
    packs_root: Path,
    texts: list[str],
    vectors: np.ndarray,
    models: dict[str, Any] | None = None,
    tenant: str = TENANT,
    model_files: dict[str, Path] | None = None,
    contacts: int = 0,
    statuses: list[str] | None = None,
) -> Path:
    """Publish a pack whose memories are `texts` (ids m000000…; about contacts c0…c<contacts-1>
    in turn, or general when `contacts` is 0) and whose embeddings are `vectors`, through the
    real writer. Returns the tenant folder."""
    from pipeline.publish.content import (
        MEMORY_SCHEMA,
        PACK_CONFLICT_SCHEMA,
        PASS_THROUGH,
        VECTOR_SCHEMA,
        EmbeddingMatrix,
        PackContent,
    )
    from pipeline.publish.writer import publish

    n = len(texts)
    ts = [AS_OF - timedelta(days=1 + i % 30) for i in range(n)]
    memories = pl.DataFrame(
        {
            "tenant_id": [tenant] * n,
            "memory_id": [f"m{i:06d}" for i in range(n)],
            "memory_kind": ["statement"] * n,
            "memory_type": ["confirmed_pattern"] * n,
            "contact_id": [f"c{i % contacts}" if contacts else None for i in range(n)],
            "text": texts,
            "tags": [[] for _ in range(n)],
            "confidence": [0.8] * n,
            "status": statuses or ["active"] * n,  # all active unless given
            "needs_reconfirmation": [False] * n,
            "stale": [False] * n,
            "last_confirmed": ts,
            "quality_score": [0.0] * n,
            "quality_lower": [0.0] * n,
            "n_feedback": [0] * n,
            "has_correction": [False] * n,
            "has_conflict": [False] * n,
            "has_embedding": [True] * n,
            "ts": ts,
        },
        schema_overrides={
            "last_confirmed": pl.Datetime("us", "UTC"),
            "ts": pl.Datetime("us", "UTC"),
            "tags": pl.List(pl.String),
            "contact_id": pl.String,
        },
    )
    memories = memories.with_columns(
        [
            pl.lit(None, dtype=t).alias(c)
            for c, t in MEMORY_SCHEMA.items()
            if c not in memories.columns
        ]
    ).select(list(MEMORY_SCHEMA))
    frames = {
        "memories.parquet": memories,
        "conflicts.parquet": pl.DataFrame(schema=PACK_CONFLICT_SCHEMA),
    }
    for name, (_, schema, _) in PASS_THROUGH.items():
        frames[name] = pl.DataFrame(schema=schema)
    frames["vectors.parquet"] = pl.DataFrame(schema=VECTOR_SCHEMA)
    content = PackContent(
        tenant_id=tenant,
        as_of=AS_OF,
        frames=frames,
        embeddings=EmbeddingMatrix.of(vectors),
        models=models or {"embedding": {"model": "bench", "dim": int(vectors.shape[1])}},
        metrics={},
        inputs={},
        redactions={},
        model_files=model_files or {},
    )
    publish(packs_root, content)
    return packs_root / tenant
