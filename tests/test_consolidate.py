"""Consolidation: paraphrases cluster, unrelated and contradicting memories do not, reinforcement."""

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline.ingest import contracts
from pipeline.semantic.consolidate import ConsolidationConfig, consolidate, membership_problems
from pipeline.semantic.consolidate.clustering import assign_to_clusters, cluster_labels
from pipeline.semantic.embed import embed_with_cache, load_model, memory_texts
from pipeline.storage.vectors import TextVectors
from tests.test_conflicts import embedded_conflicts, statement, statements_frame


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model()


def interaction(
    event_id: str, text: str, system: str = "support", kind: str = "reply", minutes: int = 0
) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(contracts.INTERACTION_COLUMNS)
    row.update(
        tenant_id="acme",
        event_id=event_id,
        system=system,
        kind=kind,
        input=text,
        output="ok",
        ts=datetime(2026, 11, 1, tzinfo=UTC) + timedelta(minutes=minutes),
        contact_id="c1",
        tags=["support"],
    )
    return row


STATEMENTS = [
    statement("e1", "Prefers email over phone calls", "inferred_pattern", day=1),
    # Re-wordings within the statement threshold (0.15): 0.146 apart at most.
    statement("e2", "Would rather get emails than phone calls", "confirmed_pattern", day=5),
    statement("e3", "Prefers email to phone calls", "inferred_pattern", day=8),
    statement("l1", "Always cc legal on vendor contracts", "explicit_instruction", day=2),
    statement("l2", "Never cc legal on vendor contracts", "inferred_pattern", day=9),
    statement("d1", "Has a dog named Rex", "single_inference", day=3),
    statement("b1", "Birthday is in March", "confirmed_pattern", day=4),
    statement("x1", "Prefers email over phone calls", "inferred_pattern", day=1, contact="c2"),
]


@pytest.fixture(scope="module")
def result(model: Any) -> Any:
    statements = statements_frame(STATEMENTS)
    interactions = pl.DataFrame(
        [
            interaction("i1", "Where is my order?"),
            interaction("i2", "Where's my order?", minutes=5),
            interaction("i3", "How do I reset my password?", minutes=9),
            interaction("i4", "Where is my order?", kind="report"),
        ],
        schema=contracts.INTERACTION_SCHEMA,
    )
    embedded = embed_with_cache(memory_texts(interactions, statements), None, model)
    conflicts = embedded_conflicts(statements, model)
    vectors = TextVectors.from_frame(embedded.fresh)
    return statements, consolidate(
        statements, interactions, embedded.embeddings, conflicts, vectors
    )


def _clusters(summaries: pl.DataFrame, scope: str) -> set[tuple[str, ...]]:
    rows = summaries.filter(pl.col("scope") == scope)["member_ids"].to_list()
    return {tuple(ids) for ids in rows}


def test_paraphrases_cluster_and_unrelated_or_contradicting_do_not(result: Any) -> None:
    statements, out = result
    assert _clusters(out.summaries, "statement") == {
        ("e1", "e2", "e3"),
        ("l1",),
        ("l2",),
        ("d1",),
        ("b1",),
        ("x1",),
    }
    assert membership_problems(out.summaries, statements).is_empty()


def test_summary_row_uses_highest_priority_member_and_reinforced_confidence(result: Any) -> None:
    _, out = result
    row = out.summaries.filter(pl.col("representative_id") == "e2").row(0, named=True)
    assert row["summary"] == "Would rather get emails than phone calls"
    assert row["cluster_id"] == "s-e2" and row["n_members"] == 3 and row["contact_id"] == "c1"
    assert row["n_by_type"]["inferred_pattern"] == 2 and row["n_by_type"]["confirmed_pattern"] == 1
    assert row["confidence"] == pytest.approx(0.9)  # 0.8 + 2 × 0.1, capped at 0.9
    assert row["first_seen"].day == 1 and row["last_seen"].day == 8 and row["tags"] == ["t"]


def test_reinforcement_counts_other_members_and_never_contradictions(result: Any) -> None:
    _, out = result
    reinforcement = {r["memory_id"]: r for r in out.reinforcement.iter_rows(named=True)}
    assert set(reinforcement) == {s["event_id"] for s in STATEMENTS}
    assert reinforcement["e1"]["reinforcement_count"] == 2
    assert reinforcement["e1"]["last_reinforced_at"].day == 8
    assert reinforcement["e3"]["last_reinforced_at"].day == 5
    assert [t.day for t in reinforcement["e1"]["reinforced_at"]] == [5, 8]
    assert reinforcement["l1"]["reinforced_at"] == []
    assert reinforcement["l1"]["reinforcement_count"] == 0
    assert reinforcement["l2"]["reinforcement_count"] == 0


def test_interactions_cluster_per_system_and_kind(result: Any) -> None:
    _, out = result
    assert _clusters(out.summaries, "interaction") == {("i1", "i2"), ("i3",), ("i4",)}
    medoid = out.summaries.filter(pl.col("cluster_id").is_in(["i-i1", "i-i2"]))
    assert medoid.height == 1 and medoid["system"][0] == "support"


def test_cluster_labels_honours_cannot_link_and_blocks() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(size=(3, 16))
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    near = base[[0, 0, 0, 1, 1, 2]] + rng.normal(scale=0.01, size=(6, 16))
    near /= np.linalg.norm(near, axis=1, keepdims=True)
    labels = cluster_labels(near, threshold=0.2)
    assert len(set(labels[:3])) == 1 and labels[3] == labels[4] and len(set(labels)) == 3
    split = cluster_labels(near, threshold=0.2, cannot_link=np.array([[0, 1]]))
    assert split[0] != split[1]
    blocked = cluster_labels(near, threshold=0.2, max_block=2)
    # Blocks may split near-duplicates but never merge different directions.
    origin = np.array([0, 0, 0, 1, 1, 2])
    for label in set(blocked):
        assert len(set(origin[blocked == label])) == 1


def unit_query(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_new_text_joins_only_a_cluster_it_is_close_to_in_full() -> None:
    # cosine distance threshold 0.2 ⇔ similarity ≥ 0.8
    e = np.eye(4)
    old = unit_query(np.array([e[0] + 0.3 * e[1], e[0] - 0.3 * e[1], e[2]]))  # A = {0, 1}, B = {2}
    old_labels = np.array([0, 0, 1])
    new = unit_query(
        np.array(
            [
                e[0],  # close to both members of A → joins A
                e[0] + 0.9 * e[1],  # close to A's first member only → stays out
                e[2] + 0.4 * e[3],  # close to B ...
                e[2] - 0.4 * e[3] + 0.05 * e[0],  # ... and so is this one, but not to the former
            ]
        )
    )
    labels = assign_to_clusters(new, old, old_labels, threshold=0.2)
    assert labels[:2].tolist() == [0, -1]
    assert sorted(labels[2:].tolist()) == [-1, 1]  # one of the two joins B, never both


def test_a_new_text_never_joins_a_label_of_another_group() -> None:
    """Labels are global (every tenant × system × kind's clusters): those not among `old` belong
    to other groups and are no candidates, even though "every member is within" holds for none."""
    e = np.eye(4)
    old = unit_query(np.array([e[0] + 0.3 * e[1], e[0] - 0.3 * e[1], e[2]]))  # A = {0, 1}, B = {2}
    old_labels = np.array([3, 3, 5])  # 0-2 and 4: other tenants' or kinds' clusters
    new = unit_query(np.array([e[0], e[3], e[1] + e[3]]))  # joins A; far from all; far from all
    assert assign_to_clusters(new, old, old_labels, threshold=0.2).tolist() == [3, -1, -1]


def _incremental_world(model: Any) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, TextVectors]:
    statements = statements_frame(
        [
            *STATEMENTS,
            statement("e4", "Prefers e-mail to phone calls", "inferred_pattern", day=11),
            statement(
                "x2",
                "Would rather get an email than a phone call",
                "single_inference",
                day=12,
                contact="c2",
            ),
        ]
    )
    interactions = pl.DataFrame(
        [
            interaction("i1", "Where is my order?"),
            interaction("i2", "Where's my order?", minutes=5),
            interaction("i3", "How do I reset my password?", minutes=9),
            interaction("i4", "Where is my order?", kind="report"),
            interaction("i5", "Where is my order?", minutes=20),  # a text seen before
            interaction("i6", "How can I reset my password?", minutes=30),
            interaction("i7", "Can I change my delivery address?", minutes=40),
        ],
        schema=contracts.INTERACTION_SCHEMA,
    )
    embedded = embed_with_cache(memory_texts(interactions, statements), None, model)
    return statements, interactions, embedded.embeddings, TextVectors.from_frame(embedded.fresh)


def test_incremental_consolidation_reuses_unchanged_clusters(model: Any) -> None:
    statements, interactions, embeddings, vectors = _incremental_world(model)
    no_conflicts = embedded_conflicts(statements, model)
    first_s = statements.filter(~pl.col("event_id").is_in(["e4", "x2"]))
    first_i = interactions.filter(~pl.col("event_id").is_in(["i5", "i6", "i7"]))
    night1 = consolidate(first_s, first_i, embeddings, no_conflicts, vectors, salt="m")
    night2 = consolidate(
        statements, interactions, embeddings, no_conflicts, vectors, previous=night1, salt="m"
    )
    full = consolidate(statements, interactions, embeddings, no_conflicts, vectors, salt="m")
    # Statements: contacts c1 and c2 got new statements, so both are clustered again: exact.
    statement_rows = pl.col("scope") == "statement"
    assert night2.summaries.filter(statement_rows).equals(full.summaries.filter(statement_rows))
    assert night2.reinforcement.equals(full.reinforcement)
    # Interactions: i5 repeats a known text (its cluster is summarised again), i6 / i7 are new.
    clusters = _clusters(night2.summaries, "interaction")
    assert ("i1", "i2", "i5") in clusters and ("i4",) in clusters
    members = sorted(m for c in clusters for m in c)
    assert members == ["i1", "i2", "i3", "i4", "i5", "i6", "i7"]  # each exactly once
    assert night2.clusters_reused >= 1  # ("i4",): same members, summary carried over
    # Every cluster still holds only texts within the threshold of each other.
    text_of = dict(embeddings.select("memory_id", "text_hash").iter_rows())
    for cluster in clusters:
        v = vectors.of(pl.Series([text_of[m] for m in cluster]))
        assert (v @ v.T).min() >= 1 - ConsolidationConfig().interaction_distance - 1e-6
    # Another salt (model or config changed) ignores the previous result.
    other = consolidate(
        statements, interactions, embeddings, no_conflicts, vectors, previous=night1, salt="n"
    )
    assert other.clusters_reused == 0
    assert other.summaries.equals(full.summaries)
