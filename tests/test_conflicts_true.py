"""True conflicts only (SPEC §4.4 round 3): not two phrasings of one statement, not two people's
lines; clusters never mix speakers; precision held on hand-labelled LoCoMo conflicts."""

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from bench.sections_conversations import (
    cluster_labels,
    conflict_labels,
    judged_cluster_pairs,
    shared_members,
)
from pipeline.ingest import contracts
from pipeline.ingest.folder import ingest_folder, typed_tables
from pipeline.ingest.importers.locomo import end_date, import_locomo
from pipeline.semantic.conflict_vectors import conflict_vectors
from pipeline.semantic.conflicts import (
    ConflictConfig,
    find_conflicts,
    polarity,
    subject,
    subject_texts,
    with_hashes,
)
from pipeline.semantic.consolidate import consolidate
from pipeline.semantic.embed import embed_with_cache, encode, load_model, memory_texts
from pipeline.semantic.embed.exact import embedded_texts
from pipeline.semantic.wording import speaker, subject_words, word_overlap
from pipeline.storage.vectors import TextVectors
from tests.test_conflicts import (
    embedded,
    embedded_conflicts,
    no_interactions,
    statement,
    statements_frame,
)

LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo"
PRECISION_FLOOR = 0.9
# Pairs sharing a statement cluster on LoCoMo's dev half by the merge judgement (the default; its
# chat turns of several sentences merge by the distance rule): 104, every one labelled, 9 of them
# two different facts (the distance rule at 0.15 with the value guard: 102 and 9). The int8 encoder
# alone gave the rule 84-95 by CPU (its numerics with and without AVX-512 VNNI); decided in fp32
# near a merge, the CPU no longer moves them, but for fp32's own ~1e-6 (a pair or two of slack).
CLUSTER_PAIRS = (102, 106)
UNLABELLED_PAIRS = 1
DIFFERENT_FACTS = 10


def said(who: str | None) -> str | None:
    return None if who is None else json.dumps({"speaker": who})


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model()


def test_speaker_is_metadata_speaker_or_null() -> None:
    frame = pl.DataFrame(
        {"metadata": ['{"speaker": "Ana", "x": 1}', '{"speaker": " "}', '{"x": 1}', None]}
    )
    assert frame.select(speaker(pl.col("metadata")))["metadata"].to_list() == [
        "Ana",
        None,
        None,
        None,
    ]


def test_idioms_with_a_negating_word_keep_the_polarity() -> None:
    texts = [
        "I won't quit.",
        "I won't quit, no matter what.",
        "Can't wait to see the show!",
        "No worries, I'll bring the cake.",
        "I can't make it to the show.",
    ]
    frame = pl.DataFrame({"t": texts})
    assert frame.select(polarity(pl.col("t"))).to_series().to_list() == [-1, -1, 1, 1, -1]


def test_word_overlap_ignores_function_words_and_counts_content_words() -> None:
    subjects = pl.DataFrame(
        {"t": ["Call Ana before 9am", "call ana before 9am", "Meetings in the morning"]}
    ).select(subject(pl.col("t")))["t"]
    words = subject_words(pl.concat([subjects, pl.Series(["morning meetings", ""])]))
    i, j = np.array([0, 2, 0, 3]), np.array([1, 3, 2, 4])
    assert word_overlap(words, i, j).round(3).tolist() == [1.0, 1.0, 0.0, 0.0]


def test_two_speakers_never_conflict_one_speaker_does() -> None:
    rows = [
        statement("a1", "Always cc legal on vendor contracts", metadata=said("Ana")),
        statement("b1", "Never cc legal on vendor contracts", metadata=said("Ben")),
        statement("a2", "Never cc legal on vendor contracts", day=3, metadata=said("Ana")),
    ]
    out = find_conflicts(statements_frame(rows))
    assert out.select("memory_id_a", "memory_id_b", "reason").rows() == [
        ("a1", "a2", "opposite_polarity")
    ]


def test_a_reworded_statement_with_a_flipped_word_is_no_conflict(model: Any) -> None:
    rows = [
        # ≈ 0.93 apart on the subject, but "give up" / "keep going" is a re-wording, not a flip.
        statement("p1", "Thanks, Ana! I won't give up on my marathon training.", day=1),
        statement("p2", "Thanks, Ana! I will keep going with my marathon training.", day=4),
        statement("t1", "I don't have time for the marathon training this month.", day=2),
        statement("t2", "I have time for the marathon training this month.", day=5),
    ]
    out = embedded_conflicts(statements_frame(rows), model)
    assert out.select("memory_id_a", "memory_id_b", "reason").rows() == [
        ("t1", "t2", "opposite_polarity")
    ]


def test_clusters_never_mix_speakers(model: Any) -> None:
    rows = [
        statement("a1", "Loves hiking in the mountains", metadata=said("Ana")),
        statement("a2", "Loves hiking in the mountains!", day=2, metadata=said("Ana")),
        statement("b1", "Loves hiking in the mountains", day=3, metadata=said("Ben")),
    ]
    statements = statements_frame(rows)
    embedded = embed_with_cache(memory_texts(no_interactions(), statements), None, model)
    result = consolidate(
        statements,
        no_interactions(),
        embedded.embeddings,
        embedded_conflicts(statements, model),
        TextVectors.from_frame(embedded.fresh),
    )
    assert sorted(result.summaries["member_ids"].to_list()) == [["a1", "a2"], ["b1"]]


@pytest.fixture(scope="module")
def locomo(tmp_path_factory: pytest.TempPathFactory) -> tuple[pl.DataFrame, pl.DataFrame, Any]:
    """The dev half of LoCoMo ingested as one night would (skips without the data): its
    statements, the conflicts found on them, and their consolidation."""
    files = sorted(LOCOMO.glob("conv-*.json"))
    if not files:
        pytest.skip(f"no LoCoMo conversations in {LOCOMO}")
    landing, day = tmp_path_factory.mktemp("locomo"), end_date(files)
    import_locomo(files, landing, load_date=day)
    ingested = ingest_folder(landing / day.isoformat(), day)
    assert ingested.quarantine.height == 0
    statements = typed_tables(ingested.events.lazy())["memory_statements"]
    assert statements.height > 2000 and statements.schema == contracts.MEMORY_SCHEMA
    embeddings, vectors, _ = embedded(statements, None)
    # As a night decides: the statements near a merge or a conflict's bar in fp32 (every CPU alike).
    fp32 = load_model(None, "onnx")
    exact = lambda rows: encode(embedded_texts(rows)["text"], model=fp32)  # noqa: E731
    hashed = with_hashes(statements, embeddings, subject_texts(statements))
    decided, _ = conflict_vectors(
        hashed, vectors, ConflictConfig(), exact, lambda rows: encode(rows["text"], model=fp32)
    )
    conflicts = find_conflicts(hashed, vectors=decided)
    return (
        statements,
        conflicts,
        consolidate(statements, no_interactions(), embeddings, conflicts, vectors, exact=exact),
    )


@pytest.mark.slow
def test_conflicts_on_real_conversations_hold_their_precision(locomo: Any) -> None:
    """Every conflict the dev half of LoCoMo produces is judged against the hand labels (ids
    only: the data is CC BY-NC; tests/fixtures/locomo_conflicts.csv holds every pair flagged
    before and after round 3); one nobody labelled counts as false."""
    _, flagged, _ = locomo
    labels = conflict_labels()
    pairs = flagged.select("memory_id_a", "memory_id_b").rows()
    true = sum(labels.get(pair, False) for pair in pairs)
    precision = true / len(pairs) if pairs else 1.0
    assert precision >= PRECISION_FLOOR, (precision, [p for p in pairs if not labels.get(p)])
    assert len(labels) >= 18  # every conflict the rules before round 3 flagged is labelled


@pytest.mark.slow
def test_clusters_on_real_conversations_rarely_mix_different_facts(locomo: Any) -> None:
    """Every pair of turns that shares a statement cluster on the dev half of LoCoMo is judged
    against the hand labels (tests/fixtures/locomo_cluster_pairs.csv: every pair that shared a
    cluster at the statement thresholds 0.20 and 0.15 on a CPU without AVX-512 VNNI and one with it,
    and with the fp32 decisions; ids only). At 0.20, 68 of 276 pairs said two different facts; at
    0.15 on int8 vectors alone, 9 of 95 (AVX2) and 6 of 85 (AVX-512 VNNI); with the value guard and
    fp32 near the threshold, 9 of 102 on any CPU; as a night decides now (the judgement), 9 of 104."""
    _, _, result = locomo
    judged = judged_cluster_pairs(shared_members(result.summaries), cluster_labels())
    assert judged["cluster_pairs_unlabelled"] <= UNLABELLED_PAIRS, judged
    assert CLUSTER_PAIRS[0] <= judged["cluster_pairs"] <= CLUSTER_PAIRS[1], judged
    assert judged["cluster_pairs_different_facts"] <= DIFFERENT_FACTS, judged
    assert judged["cluster_pairs_different_share"] <= 0.1, judged
