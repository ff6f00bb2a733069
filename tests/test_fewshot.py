"""Few-shot sets: quality order, no negatives, corrected outputs, no near-duplicates, recency ties."""

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline.examples.fewshot import (
    FewShotConfig,
    few_shot_sets,
    mmr_select,
    near_duplicates,
    negative_examples,
)
from pipeline.ingest import contracts
from pipeline.semantic.embed import embed_with_cache, load_model, memory_texts
from pipeline.storage.vectors import TextVectors
from tests.test_conflicts import statements_frame
from tests.test_consolidate import interaction

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def scores(rows: list[tuple[str, int, float, float, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "tenant_id": "acme",
                "memory_id": m,
                "n_feedback": n,
                "quality_score": q,
                "quality_lower": lo,
                "has_correction": False,
                "n_positive": pos,
                "n_negative": neg,
            }
            for m, n, q, lo, pos, neg in rows
        ]
    )


def correction(event_id: str, target: str, text: str, hours: int) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(contracts.FEEDBACK_COLUMNS)
    row.update(
        tenant_id="acme",
        event_id=event_id,
        target_id=target,
        signal="correction",
        corrected_output=text,
        ts=T0 + timedelta(hours=hours),
    )
    return row


@pytest.fixture(scope="module")
def sets() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    interactions = pl.DataFrame(
        [
            interaction("good", "How do I reset my password?"),
            interaction("dup", "I forgot my password, how can I reset it?"),
            interaction("bad", "Can I get a refund?"),
            interaction("fixed", "Where is my order?"),
            interaction("tie_old", "Do you ship to Norway?", minutes=1),
            interaction("tie_new", "Can I pay with an invoice?", minutes=60),
            interaction("unrated", "What are your opening hours?"),
            interaction("other", "Where is my order?", system="framescan"),
        ],
        schema=contracts.INTERACTION_SCHEMA,
    )
    feedback = pl.DataFrame(
        [
            correction("f1", "fixed", "It left the warehouse today.", 1),
            correction("f2", "fixed", "It left our warehouse today and arrives Friday.", 2),
        ],
        schema=contracts.FEEDBACK_SCHEMA,
    )
    score = scores(
        [
            ("good", 12, 0.8, 0.83, 11, 1),
            ("dup", 12, 0.7, 0.80, 10, 2),
            ("bad", 9, -0.5, 0.05, 2, 7),
            ("fixed", 3, -0.6, 0.0, 0, 3),
            ("tie_old", 4, 0.5, 0.40, 3, 1),
            ("tie_new", 4, 0.5, 0.40, 3, 1),
            ("other", 1, 0.2, 0.10, 1, 0),
        ]
    )
    model = load_model()
    embedded = embed_with_cache(memory_texts(interactions, statements_frame([])), None, model)
    vectors = TextVectors.from_frame(embedded.fresh)
    # tie_old measured helpful in use by more than the boost's cap (SPEC §4.9).
    helpful = pl.DataFrame({"item_id": ["tie_old"], "boost": [0.3]})
    return (
        few_shot_sets(
            interactions, feedback, score, embedded.embeddings, vectors, FewShotConfig(k=5)
        )[0],
        score,
        embedded.embeddings,
        vectors,
        few_shot_sets(
            interactions, feedback, score, embedded.embeddings, vectors, FewShotConfig(k=5), helpful
        )[0],
    )


def test_sets_rank_by_quality_without_negatives_or_near_duplicates(sets: Any) -> None:
    out, score, embeddings, vectors, _ = sets
    support = out.filter(pl.col("system") == "support")
    assert support["memory_id"].to_list() == ["fixed", "good", "tie_new", "tie_old"]
    assert support["rank"].to_list() == [1, 2, 3, 4]
    assert "bad" not in out["memory_id"].to_list()  # net-negative
    assert "dup" not in out["memory_id"].to_list()  # near-duplicate of "good"
    assert "unrated" not in out["memory_id"].to_list()
    assert negative_examples(out, score).is_empty()
    assert near_duplicates(out, embeddings, vectors, FewShotConfig().duplicate_similarity) == 0
    assert out.filter(pl.col("system") == "framescan")["memory_id"].to_list() == ["other"]


def test_corrected_output_replaces_the_wrong_one(sets: Any) -> None:
    out, _, _, _, _ = sets
    row = out.filter(pl.col("memory_id") == "fixed").row(0, named=True)
    assert (
        row["is_corrected"] and row["output"] == "It left our warehouse today and arrives Friday."
    )
    assert "corrected output" in row["why"] and row["why"].startswith(
        "quality_lower 0.0 from 3 votes"
    )
    good = out.filter(pl.col("memory_id") == "good").row(0, named=True)
    assert good["why"].startswith("quality_lower 0.83 from 12 votes; mmr ")


def test_mmr_rejects_duplicates_even_when_nothing_else_is_left() -> None:
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    chosen, values = mmr_select(np.array([0.9, 0.8, 0.1]), vectors, 3, 0.7, 0.9)
    assert chosen.tolist() == [0, 2]
    assert values[0] == pytest.approx(0.63)


def test_a_helpful_example_ranks_higher_by_a_bounded_boost(sets: Any) -> None:
    out, _, _, _, boosted = sets
    support = boosted.filter(pl.col("system") == "support")
    # Its tie goes its way; the boost (capped at 0.1) never lifts it past a clearly better one.
    assert support["memory_id"].to_list() == ["fixed", "good", "tie_old", "tie_new"]
    why = support.filter(pl.col("memory_id") == "tie_old")["why"].item()
    assert "; helpful in use +0.1; mmr " in why
    # Only the order and its explanation change (the selection score and MMR hold the boost).
    unchanged = ["rank", "why", "mmr", "selection_score"]
    assert boosted.drop(unchanged).sort("memory_id").equals(out.drop(unchanged).sort("memory_id"))
