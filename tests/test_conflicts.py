"""Conflicts: polarity and subject rules, supersedes links, corrections, source hierarchy."""

from datetime import UTC, datetime
from typing import Any

import polars as pl
import pytest

from pipeline.ingest import contracts
from pipeline.semantic.conflicts import (
    find_conflicts,
    polarity,
    reference_problems,
    subject,
    subject_texts,
    with_hashes,
)
from pipeline.semantic.embed import embed_with_cache, load_model, memory_texts
from pipeline.storage.vectors import TextVectors


def statement(
    event_id: str,
    content: str,
    memory_type: str = "inferred_pattern",
    day: int = 1,
    contact: str | None = "c1",
    tenant: str = "acme",
    **fields: Any,
) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "event_id": event_id,
        "ts": datetime(2026, 10, day, 9, tzinfo=UTC),
        "load_date": datetime(2026, 10, day).date(),
        "contact_id": contact,
        "memory_type": memory_type,
        "content": content,
        "category": "other",
        "impact_level": "medium",
        "confidence": None,
        "supersedes": None,
        "tags": ["t"],
        "metadata": None,
        **fields,
    }


def statements_frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=contracts.MEMORY_SCHEMA)


def no_interactions() -> pl.DataFrame:
    return pl.DataFrame(schema=contracts.INTERACTION_SCHEMA)


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model()


def embedded(
    statements: pl.DataFrame, model: Any
) -> tuple[pl.DataFrame, TextVectors, pl.DataFrame]:
    """The statements' embeddings (memory_id → text_hash), the vectors of their texts and
    subjects, and the conflicts found on them."""
    texts = embed_with_cache(memory_texts(no_interactions(), statements), None, model)
    subjects = embed_with_cache(subject_texts(statements), texts.fresh, model)
    vectors = TextVectors.from_frame(pl.concat([texts.fresh, subjects.fresh]))
    conflicts = find_conflicts(
        with_hashes(statements, texts.embeddings, subjects.embeddings), vectors=vectors
    )
    return texts.embeddings, vectors, conflicts


def embedded_conflicts(statements: pl.DataFrame, model: Any) -> pl.DataFrame:
    return embedded(statements, model)[2]


def test_polarity_and_subject_are_pure_text_rules() -> None:
    frame = pl.DataFrame(
        {
            "text": [
                "Always cc legal on vendor contracts",
                "Never cc legal on vendor contracts.",
                "Doesn’t like morning meetings",
                "Prefers morning meetings",
                "Do not not call",
            ]
        }
    )
    out = frame.select(polarity(pl.col("text")).alias("p"), subject(pl.col("text")).alias("s"))
    assert out["p"].to_list() == [1, -1, -1, 1, 1]
    assert out["s"].to_list() == [
        "cc legal on vendor contracts",
        "cc legal on vendor contracts",
        "morning meetings",
        "morning meetings",
        "call",
    ]


def test_always_never_on_same_subject_conflicts_and_hierarchy_prefers_explicit() -> None:
    frame = statements_frame(
        [
            statement("m1", "Always cc legal on vendor contracts", "explicit_instruction", day=1),
            statement("m2", "Never cc legal on vendor contracts", "inferred_pattern", day=9),
            statement("m3", "Never cc legal on vendor contracts", "inferred_pattern", contact="c2"),
            statement("m4", "Has a dog named Rex", "single_inference"),
        ]
    )
    out = find_conflicts(frame)  # no vectors: exact subject equality
    assert out.select("memory_id_a", "memory_id_b", "preferred_id", "reason", "subject").rows() == [
        ("m1", "m2", "m1", "opposite_polarity", "cc legal on vendor contracts")
    ]


def test_newer_wins_within_a_level() -> None:
    frame = statements_frame(
        [
            statement("a", "Likes phone calls", "inferred_pattern", day=1),
            statement("b", "Dislikes phone calls", "inferred_pattern", day=5),
        ]
    )
    assert find_conflicts(frame)["preferred_id"].to_list() == ["b"]


def test_supersedes_links_are_honoured_within_the_hierarchy() -> None:
    frame = statements_frame(
        [
            statement("old", "Sends the weekly report on Fridays", "confirmed_pattern", day=1),
            statement(
                "new",
                "Sends the weekly report on Mondays",
                "explicit_instruction",
                day=5,
                supersedes=["old", "missing", "elsewhere"],
            ),
            statement("rule", "Book aisle seats", "explicit_instruction", day=1),
            statement("guess", "Book window seats", "single_inference", day=6, supersedes=["rule"]),
            statement("elsewhere", "Sends reports", "confirmed_pattern", contact="c2"),
        ]
    )
    out = find_conflicts(frame).select("memory_id_a", "memory_id_b", "preferred_id", "reason")
    assert sorted(out.rows()) == [
        ("old", "new", "new", "supersedes"),
        ("rule", "guess", "rule", "supersedes"),  # an inference never silently replaces a rule
    ]


def test_with_real_embeddings_corrections_and_paraphrased_subjects(model: Any) -> None:
    frame = statements_frame(
        [
            statement("p1", "Prefers morning meetings", "inferred_pattern", day=1),
            statement("c1", "Avoids meetings in the morning", "correction", day=20),
            statement("s1", "Don't schedule meetings after 5pm", "explicit_instruction", day=2),
            statement("s2", "Schedule meetings before 9am", "inferred_pattern", day=3),
            statement("e1", "Prefers email over phone calls", "inferred_pattern", day=4),
            statement(
                "e2", "Would rather get an email than a phone call", "confirmed_pattern", day=5
            ),
        ]
    )
    out = embedded_conflicts(frame, model)
    assert out.select("memory_id_a", "memory_id_b", "preferred_id", "reason").rows() == [
        ("p1", "c1", "c1", "correction")
    ]
    assert out["subject_similarity"][0] > 0.85


def test_reference_problems_flags_rows_of_other_contacts() -> None:
    frame = statements_frame(
        [
            statement("m1", "Always cc legal", "explicit_instruction"),
            statement("m2", "Never cc legal", day=3),
            statement("m9", "Never cc legal", contact="c2"),
        ]
    )
    good = find_conflicts(frame)
    assert reference_problems(good, frame).is_empty()
    bad = good.with_columns(pl.lit("m9").alias("memory_id_b"))
    assert reference_problems(bad, frame).height == 1
