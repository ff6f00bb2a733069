"""An empty night is normal: every stage's pure function takes empty frames and returns empty ones."""

from datetime import UTC, datetime

import numpy as np
import polars as pl

from pipeline import tables
from pipeline.examples.fewshot import few_shot_sets
from pipeline.examples.skill_stats import skill_stats
from pipeline.feedback.scores import compute_scores
from pipeline.ingest.contracts import FEEDBACK_SCHEMA, INTERACTION_SCHEMA, MEMORY_SCHEMA
from pipeline.memory.audit import audit, audit_figures
from pipeline.memory.decay import snapshot
from pipeline.preference.pairs import SCORE_SCHEMA, mine_pairs
from pipeline.semantic.conflicts import find_conflicts
from pipeline.semantic.consolidate import consolidate
from pipeline.semantic.embed import memory_texts
from pipeline.storage.vectors import TextVectors

AS_OF = datetime(2026, 11, 6, tzinfo=UTC)
INTERACTIONS = pl.DataFrame(schema=INTERACTION_SCHEMA)
STATEMENTS = pl.DataFrame(schema=MEMORY_SCHEMA)
FEEDBACK = pl.DataFrame(schema=FEEDBACK_SCHEMA)
# memory_embeddings: which cached vector each memory has.
EMBEDDINGS_SCHEMA = {
    "tenant_id": pl.String(),
    "memory_id": pl.String(),
    "memory_kind": pl.String(),
    "text_hash": pl.String(),
    "model": pl.String(),
}
NO_VECTORS = TextVectors(
    pl.DataFrame(schema={"row": pl.UInt32, "text_hash": pl.String}), np.zeros((0, 4), np.float32)
)


def test_scores_decay_and_audit_of_nothing_are_empty() -> None:
    assert compute_scores(INTERACTIONS, STATEMENTS, FEEDBACK).is_empty()
    snap = snapshot(INTERACTIONS, STATEMENTS, FEEDBACK, None, AS_OF)
    assert snap.is_empty()
    findings = audit(snap, tables.empty("memory_conflicts"), STATEMENTS)
    assert findings.is_empty()
    assert set(audit_figures(findings).values()) <= {0}


def test_texts_conflicts_and_consolidation_of_nothing_are_empty() -> None:
    assert memory_texts(INTERACTIONS, STATEMENTS).is_empty()
    conflicts = find_conflicts(STATEMENTS)
    assert conflicts.is_empty()
    result = consolidate(
        STATEMENTS,
        INTERACTIONS,
        pl.DataFrame(schema=EMBEDDINGS_SCHEMA),
        conflicts,
        NO_VECTORS,
    )
    assert result.summaries.is_empty() and result.reinforcement.is_empty()


def test_skill_stats_and_pairs_of_nothing_are_empty() -> None:
    assert skill_stats(INTERACTIONS, FEEDBACK).is_empty()
    scores = pl.DataFrame(schema=SCORE_SCHEMA)
    assert mine_pairs(INTERACTIONS, FEEDBACK, scores).is_empty()


def test_few_shot_sets_of_nothing_are_empty() -> None:
    scores = compute_scores(INTERACTIONS, STATEMENTS, FEEDBACK)
    embeddings = pl.DataFrame(schema=EMBEDDINGS_SCHEMA)
    assert few_shot_sets(INTERACTIONS, FEEDBACK, scores, embeddings, NO_VECTORS)[0].is_empty()
