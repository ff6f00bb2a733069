"""The merge judgement (pipeline/semantic/judgement.py, the default) and the value guard (inside
it, and on with the distance rule): held-out figures on pairs people scored, one subject with
another value never merges, a pair with several sentences on a side merges by the distance rule,
the committed coefficients are what the training command makes, and decisions hold under the
encoder's ISA-level numerics (any x86-64 CPU)."""

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline.semantic.consolidate import ConsolidationConfig
from pipeline.semantic.consolidate.clusters import merge_rule
from pipeline.semantic.embed import EmbedConfig, encode, load_model, normalise_text
from pipeline.semantic.judgement import (
    PairTexts,
    judged_distances,
    pair_probabilities,
    shipped,
)
from pipeline.semantic.training import TRAIN_FILE, labelled_features, pair_vectors, read_pairs
from pipeline.semantic.training import train as train_judgement

SAMPLE = TRAIN_FILE.with_name("stsb_sample.tsv")
needs_data = pytest.mark.skipif(
    not (SAMPLE.exists() and TRAIN_FILE.exists()), reason=f"no STS-B files beside {SAMPLE}"
)
CONFIG = ConsolidationConfig()
# The goal on the held-out sample (480 pairs, half scored ≥ 4).
PRECISION_GOAL, RECALL_GOAL = 0.9, 0.75

# Held out from training (written here, never seen by the fit): one subject, another value.
SUBJECTS = [
    ("{n} prefers afternoon meetings.", "{n} prefers morning meetings."),
    ("{n} prefers meetings in the afternoon.", "{n} prefers meetings in the morning."),
    ("{n} likes calls early in the day.", "{n} likes calls in the evening."),
    ("{n} has two kids.", "{n} has three kids."),
    ("{n} has 2 cats.", "{n} has 3 cats."),
    ("{n} lives in Lisbon.", "{n} lives in Porto."),
    ("{n} moved to Berlin last year.", "{n} moved to Munich last year."),
    ("{n} is free on Mondays.", "{n} is free on Fridays."),
    ("{n}'s birthday is in March.", "{n}'s birthday is in October."),
    ("Call {n} before 9am.", "Call {n} after 9am."),
    ("Call {n} at 9am.", "Call {n} at 10am."),
    ("Call {n} at 9am.", "Call {n} at 9pm."),
    ("{n} prefers email for project updates.", "{n} prefers phone calls for project updates."),
    ("{n} wants weekly reports.", "{n} wants monthly reports."),
    ("{n} drinks coffee with milk.", "{n} drinks coffee without milk."),
    ("{n} likes long answers.", "{n} likes short answers."),
    ("{n} prefers a formal tone.", "{n} prefers a casual tone."),
    ("{n} books the red room for workshops.", "{n} books the blue room for workshops."),
    ("{n} takes the 8:15 train.", "{n} takes the 8:45 train."),
    ("{n} wants invoices on the 1st of the month.", "{n} wants invoices on the 15th of the month."),
    ("{n} speaks Spanish at home.", "{n} speaks Portuguese at home."),
    ("{n} flies with Lufthansa.", "{n} flies with Ryanair."),
]
NAMES = ("Ana Diaz", "Tom Becker", "Aiko Tanaka", "Omar Lopez")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_model(None, EmbedConfig.backend, tmp_path_factory.mktemp("onnx"))


@pytest.fixture(scope="module")
def fp32_model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The fp32 encoder a night decides pairs near the cut with: the same on every CPU (the int8
    one puts a pair's P on either side of the cut, with and without AVX-512 VNNI)."""
    return load_model(None, "onnx", tmp_path_factory.mktemp("onnx-fp32"))


def judged(texts: list[str], model: Any) -> tuple[PairTexts, np.ndarray]:
    vectors = encode(pl.DataFrame({"t": texts}).select(normalise_text(pl.col("t")))["t"], model)
    pairs = PairTexts(pl.Series(texts), vectors)
    return pairs, judged_distances(
        pairs, shipped(), merge_rule(CONFIG), CONFIG.candidate_distance, np.arange(len(texts))
    )


def test_one_subject_with_another_value_never_merges(model: Any) -> None:
    texts = [t.format(n=n) for n in NAMES for pair in SUBJECTS for t in pair]
    pairs, distance = judged(texts, model)
    a, b = np.arange(0, len(texts), 2), np.arange(1, len(texts), 2)
    assert (distance[a, b] == 1.0).all(), [texts[k] for k in a[distance[a, b] < 1.0]]
    cosine = np.einsum("ij,ij->i", pairs.vectors[a], pairs.vectors[b])
    # Most sit closer than the old distance rule's 0.15 and would have merged under it.
    assert (1.0 - cosine <= ConsolidationConfig().statement_distance).mean() > 0.5


def test_rewordings_of_one_preference_are_judged_the_same(model: Any) -> None:
    texts = [
        "Ana Diaz wants invoices sent as PDF attachments.",
        "Send invoices to Ana Diaz as attached PDF files.",
        "Ana Diaz prefers to receive invoices as attached PDFs.",
    ]
    _, distance = judged(texts, model)
    for i, j in itertools.combinations(range(3), 2):
        assert distance[i, j] <= 1.0 - CONFIG.merge_probability, (texts[i], texts[j])


# A chat turn, and the same turn with one more fact (people's conversations, not STS-B's single
# sentences): the judgement alone calls them one statement; two facts are not one.
TURNS = [
    "Thanks, Gina! Your support means a lot to me.",
    "Thanks, Gina! Your support means a lot to me. I adopted a puppy.",
    "Thanks, Gina! Your support really means a lot to me.",
]


def test_a_pair_with_several_sentences_merges_by_the_distance_rule(fp32_model: Any) -> None:
    pairs, distance = judged(TURNS, fp32_model)
    assert pairs.sentences.tolist() == [2, 3, 2]
    rows = np.arange(len(TURNS))
    cosine = pairs.vectors @ pairs.vectors.T
    alone = shipped().probability(pairs.features(rows[[0, 0]], rows[[1, 2]]))
    assert (alone >= CONFIG.merge_probability).all()  # what the judgement alone would merge
    # The added fact stays apart (beyond the rule's distance); the rewording merges (within it).
    assert 1.0 - cosine[0, 1] > CONFIG.statement_distance and distance[0, 1] > 1.0 / 3.0
    assert 1.0 - cosine[0, 2] <= CONFIG.statement_distance and distance[0, 2] <= 1.0 / 3.0
    # In the rule's order: the judged distance grows with the cosine distance.
    assert distance[0, 2] < distance[0, 1]


@pytest.fixture(scope="module")
def sample(model: Any) -> tuple[np.ndarray, np.ndarray, PairTexts, np.ndarray, np.ndarray]:
    pairs = read_pairs(SAMPLE)
    a, b = pair_vectors(pairs, model)
    features, same, texts = labelled_features(pairs, a, b)
    return features, same, texts, a, b


def merged(features: np.ndarray, texts: PairTexts) -> np.ndarray:
    n = len(features)
    rows = np.arange(n)
    same = pair_probabilities(texts, shipped(), merge_rule(CONFIG), rows, rows + n, features[:, 0])
    return (same >= CONFIG.merge_probability) & (1.0 - features[:, 0] <= CONFIG.candidate_distance)


@needs_data
def test_held_out_precision_and_recall(sample: Any) -> None:
    features, same, texts, _, _ = sample
    decided = merged(features, texts)
    precision, recall = (decided & same).sum() / decided.sum(), (decided & same).sum() / same.sum()
    assert precision >= PRECISION_GOAL and recall >= RECALL_GOAL, (precision, recall)


@needs_data
def test_decisions_hold_under_isa_level_noise(sample: Any) -> None:
    """The int8 encoder's vectors differ in the third or fourth decimal between CPUs with and
    without AVX-512 VNNI. Perturbed ten times by noise of that size (each component ± 1e-3, so a
    cosine moves by ~1e-3), the sample's decisions flip for at most 1 % of pairs and precision and
    recall stay within 0.01 of the goal."""
    features, same, texts, a, b = sample
    base = merged(features, texts)
    rng = np.random.default_rng(52)
    n, rows = len(features), np.arange(len(features))

    def shaken(v: np.ndarray) -> np.ndarray:
        noisy = v + rng.normal(scale=1e-3, size=v.shape)
        return (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)

    for _ in range(10):
        noisy = PairTexts(texts.texts, np.vstack([shaken(a), shaken(b)]))
        decided = merged(noisy.features(rows, rows + n), noisy)
        assert (decided != base).mean() <= 0.01
        true = (decided & same).sum()
        assert true / decided.sum() >= PRECISION_GOAL - 0.01, true / decided.sum()
        assert true / same.sum() >= RECALL_GOAL - 0.01, true / same.sum()


@needs_data
def test_the_committed_judgement_is_what_training_makes(model: Any, sample: Any) -> None:
    """`python -m pipeline.semantic.training` on the shared train file gives the committed
    coefficients, to the noise of the CPU's int8 encoder, and the same decisions on the sample.
    Retrained with AVX-512 hidden (tests/cpu/no_avx512.c), the coefficients moved by up to 0.125
    and 1 of the sample's 480 decisions changed; on the CPU that trained them, by nothing."""
    retrained = train_judgement(TRAIN_FILE, model)
    committed = shipped()
    assert retrained.source["trained_on"] == committed.source["trained_on"]
    assert np.allclose(retrained.coefficients, committed.coefficients, atol=0.25)
    features = sample[0]
    again = retrained.probability(features) >= CONFIG.merge_probability
    assert (again != (committed.probability(features) >= CONFIG.merge_probability)).mean() <= 0.01


def test_the_judgement_file_names_its_source() -> None:
    source = shipped().source
    assert source["trained_on"]["file"] == "stsb_train.tsv" and source["trained_on"]["pairs"] > 0
    assert Path(TRAIN_FILE).name == "stsb_train.tsv"


def test_pairs_judged_for_all_groups_at_once_equal_those_judged_per_group(model: Any) -> None:
    """Consolidation judges every proposed pair of a night in one call (JudgedPairs); each group's
    distances are those the judgement gives that group alone."""
    from pipeline.semantic.consolidate.clusters import JudgedPairs

    texts = [t.format(n=n) for n in NAMES for pair in SUBJECTS[:6] for t in pair]
    pairs, _ = judged(texts, model)
    size = len(texts) // len(NAMES)
    bounds = [(k * size, (k + 1) * size) for k in range(len(NAMES))]
    together = JudgedPairs.of(pairs, bounds, CONFIG)
    assert len(together.i) > len(NAMES)  # pairs are proposed in every group
    for start, end in bounds:
        alone = judged_distances(
            pairs, shipped(), merge_rule(CONFIG), CONFIG.candidate_distance, np.arange(start, end)
        )
        local = np.arange(end - start)
        assert np.allclose(together.distances(start, end)(local), alone, atol=1e-6)
        subset = local[::2]  # a block of a large group: its rows only
        assert np.allclose(together.distances(start, end)(subset), alone[np.ix_(subset, subset)])


def test_no_merge_keeps_one_subject_with_another_value_together(model: Any) -> None:
    """The default (the judgement) and the distance rule with the value guard: pairs of SUBJECTS
    that sit within the rule's distance would merge by the rule without the guard and never merge
    with it."""
    from pipeline.semantic.consolidate import consolidate
    from tests.test_conflicts import embedded, no_interactions, statement, statements_frame

    assert CONFIG.statement_judgement and CONFIG.value_guard
    rows = [
        statement(f"m{k}-{side}", text.format(n="Ana Diaz"), contact=f"c{k}", day=1 + side)
        for k, pair in enumerate(SUBJECTS)
        for side, text in enumerate(pair)
    ]
    statements = statements_frame(rows)
    embeddings, vectors, conflicts = embedded(statements, model)

    def merged(config: ConsolidationConfig) -> set[str]:
        """Contacts (one pair each) whose two statements share a cluster."""
        summaries = consolidate(
            statements, no_interactions(), embeddings, conflicts, vectors, config
        ).summaries
        return set(summaries.filter(pl.col("n_members") > 1)["contact_id"].to_list())

    assert merged(CONFIG) == set()
    assert merged(ConsolidationConfig(statement_judgement=False)) == set()
    # Without the guard the rule merges several of them (those within its distance).
    assert len(merged(ConsolidationConfig(statement_judgement=False, value_guard=False))) >= 3
