"""Merges and conflicts that do not move with the CPU (issue 52 item 4): the statements near a merge
(or a conflict's bar) are decided on fp32 vectors, so two CPUs whose int8 kernels put a pair on
either side of the threshold still decide alike, as the fp32 vectors alone decide."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from pipeline.ingest import contracts
from pipeline.semantic.conflict_vectors import conflict_vectors
from pipeline.semantic.conflicts import ConflictConfig, find_conflicts, subject_texts, with_hashes
from pipeline.semantic.consolidate import Consolidation, ConsolidationConfig, consolidate
from pipeline.semantic.embed import EmbedConfig, embed_with_cache, load_model, memory_texts
from pipeline.semantic.embed.exact import decision_vectors, fp32_vectors
from pipeline.storage.vectors import EmbeddingCache, TextVectors
from tests.test_conflicts import no_interactions, statement, statements_frame

THRESHOLD = ConsolidationConfig().statement_distance
# The distance rule for every pair (the judgement, the default, is tested on its own below).
RULE = ConsolidationConfig(value_guard=False, statement_judgement=False)
WORDS = [
    "tea",
    "coffee",
    "jam",
    "bread",
    "cheese",
    "soup",
    "rice",
    "beans",
    "apples",
    "pears",
    "plums",
    "figs",
    "olives",
    "honey",
]


def night(contents: dict[str, list[str]]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Statements of each contact and their memory_embeddings rows."""
    rows = [
        statement(f"{contact}-{k}", text, contact=contact)
        for contact, texts in contents.items()
        for k, text in enumerate(texts)
    ]
    statements = statements_frame(rows)
    texts = memory_texts(no_interactions(), statements)
    embeddings = texts.select("tenant_id", "memory_id", "memory_kind", "text_hash").with_columns(
        model=pl.lit("test")
    )
    return statements, texts.join(embeddings.select("memory_id"), on="memory_id")


def vectors_of(texts: pl.DataFrame, matrix: np.ndarray) -> TextVectors:
    return TextVectors(texts.select("text_hash").with_row_index("row"), matrix.astype(np.float32))


def clusters(
    statements: pl.DataFrame,
    texts: pl.DataFrame,
    vectors: TextVectors,
    exact: TextVectors | None,
    asked: list[int] | None = None,
    config: ConsolidationConfig = RULE,
) -> set[tuple[str, ...]]:
    """The statement clusters (member ids) of one night, with `exact` as the fp32 vectors."""

    def fp32(near: pl.DataFrame) -> np.ndarray:
        assert exact is not None
        if asked is not None:
            asked.append(near.height)
        return exact.of(near["text_hash"])

    embeddings = texts.select(
        "tenant_id", "memory_id", "memory_kind", "text_hash", model=pl.lit("test")
    )
    result = consolidate(
        statements,
        no_interactions(),
        embeddings,
        pl.DataFrame(),
        vectors,
        config,
        exact=fp32 if exact is not None else None,
    )
    summaries = result.summaries.filter(pl.col("scope") == "statement")
    return {tuple(sorted(ids)) for ids in summaries["member_ids"].to_list()}


def at_distance(distance: float, dim: int = 8) -> np.ndarray:
    """Two unit vectors `distance` (cosine) apart."""
    angle = np.arccos(1.0 - distance)
    return np.array([[1.0] + [0.0] * (dim - 1), [np.cos(angle), np.sin(angle)] + [0.0] * (dim - 2)])


def test_a_pair_on_the_knife_edge_merges_as_fp32_says_on_both_cpus() -> None:
    statements, texts = night({"c1": ["Likes green tea", "Enjoys green tea"]})
    for fp32_distance, merged in ((0.151, False), (0.149, True)):
        truth = vectors_of(texts, at_distance(fp32_distance))
        made = [
            clusters(statements, texts, vectors_of(texts, at_distance(d)), exact)
            for d in (0.146, 0.154)  # the int8 distance on two CPUs
            for exact in (None, truth)
        ]
        apart, together = {("c1-0",), ("c1-1",)}, {("c1-0", "c1-1")}
        # int8 alone: the CPU decides
        assert made[0] == together and made[2] == apart
        # fp32 near a merge: both CPUs, as fp32 says
        assert made[1] == made[3] == (together if merged else apart)


def test_a_pair_on_the_judgements_knife_edge_merges_as_fp32_says_on_both_cpus() -> None:
    """The judgement (the default): P(same) grows with the cosine; at the distance where it meets
    the cut ± 0.001 in fp32, two CPUs whose int8 distances sit 0.004 either side decide as fp32."""
    from pipeline.semantic.consolidate.clusters import merge_rule
    from pipeline.semantic.judgement import PairTexts, pair_probabilities, shipped

    config = ConsolidationConfig(value_guard=False)
    assert config.statement_judgement
    texts_ = ["Likes green tea", "Enjoys green tea"]

    def same(distance: float) -> float:
        pair = PairTexts(pl.Series(texts_), at_distance(distance))
        one, two = np.array([0]), np.array([1])
        return float(pair_probabilities(pair, shipped(), merge_rule(config), one, two)[0])

    low, high = 0.0, config.candidate_distance  # P falls from above the cut to below it
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if same(middle) >= config.merge_probability else (low, middle)
    edge = low
    assert THRESHOLD + 0.01 < edge < config.candidate_distance  # beyond the rule's reach
    statements, texts = night({"c1": texts_})
    apart, together = {("c1-0",), ("c1-1",)}, {("c1-0", "c1-1")}
    for fp32_distance, merged in ((edge + 0.001, False), (edge - 0.001, True)):
        truth = vectors_of(texts, at_distance(fp32_distance))
        made = [
            clusters(statements, texts, vectors_of(texts, at_distance(d)), exact, config=config)
            for d in (edge - 0.004, edge + 0.004)  # the int8 distance on two CPUs
            for exact in (None, truth)
        ]
        assert made[0] == together and made[2] == apart
        assert made[1] == made[3] == (together if merged else apart)


def test_a_text_far_from_every_other_keeps_its_int8_vector() -> None:
    statements, texts = night({"c1": ["Likes green tea", "Enjoys green tea", "Owns a boat"]})
    int8 = np.vstack([at_distance(0.17), [[0, 0, 1.0, 0, 0, 0, 0, 0]]])
    truth = np.vstack([at_distance(0.149), [[0, 0, 0, 1.0, 0, 0, 0, 0]]])
    vectors, decided = decision_vectors(
        statements.join(texts, left_on="event_id", right_on="memory_id").select(
            "tenant_id", "contact_id", "text_hash", "text", memory_id="event_id"
        ),
        ["tenant_id", "contact_id"],
        vectors_of(texts, int8),
        THRESHOLD + ConsolidationConfig().decision_margin,
        lambda near: vectors_of(texts, truth).of(near["text_hash"]),
    )
    assert decided == 2
    np.testing.assert_array_equal(vectors.matrix[:2], truth[:2].astype(np.float32))
    np.testing.assert_array_equal(vectors.matrix[2], int8[2].astype(np.float32))


def test_clusters_equal_fp32_ones_whatever_the_int8_noise() -> None:
    """Seeded: 8 contacts × 10 statements around 3 centres each, spread across the threshold;
    two draws of int8-like noise (|Δdistance| well under the margin) give other clusters alone
    and the fp32 clusters with the decision path."""
    rng = np.random.default_rng(2)
    contents = {
        f"c{c}": [f"Likes {WORDS[k]} with {WORDS[(k + c + 1) % len(WORDS)]}" for k in range(10)]
        for c in range(8)
    }
    statements, texts = night(contents)
    centres = rng.normal(size=(8 * 3, 64))
    truth = centres[np.arange(80) // 10 * 3 + rng.integers(0, 3, 80)]
    truth = truth / np.linalg.norm(truth, axis=1, keepdims=True) + rng.normal(0, 0.045, (80, 64))
    truth /= np.linalg.norm(truth, axis=1, keepdims=True)
    same_contact = np.arange(80)[:, None] // 10 == np.arange(80)[None, :] // 10
    same_contact &= ~np.eye(80, dtype=bool)
    distances = 1.0 - truth @ truth.T
    # What fp32 decides holds on any CPU: no pair within 1e-3 of the threshold.
    assert np.abs(distances[same_contact] - THRESHOLD).min() > 1e-3
    assert (distances[same_contact] < THRESHOLD).sum() // 2 > 100  # pairs that could merge
    draws = []
    for _ in range(2):
        noisy = truth + rng.normal(0, 0.0035, truth.shape)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        change = np.abs((1.0 - noisy @ noisy.T) - distances)[same_contact]
        assert change.max() < ConsolidationConfig().decision_margin / 2
        draws.append(vectors_of(texts, noisy))
    fp32 = clusters(statements, texts, vectors_of(texts, truth), None)
    asked: list[int] = []
    exact = [clusters(statements, texts, v, vectors_of(texts, truth), asked) for v in draws]
    alone = [clusters(statements, texts, v, None) for v in draws]
    assert exact[0] == exact[1] == fp32
    assert alone[0] != alone[1]  # the noise alone moves merges
    assert 0 < max(asked) < 80  # only the texts near a merge are encoded again


def test_fp32_vectors_encode_the_texts_the_night_encoded_once(tmp_path: Path) -> None:
    statements, texts = night({"c1": ["  Likes GREEN tea ", "Enjoys green tea", "Owns a boat"]})
    cache = EmbeddingCache(tmp_path / "cache")
    exact = fp32_vectors(cache, EmbedConfig())
    assert exact is not None
    rows = texts.select("tenant_id", "memory_id", "text_hash", text=statements["content"])
    first = exact(rows)
    int8 = embed_with_cache(texts, None, load_model(None, "onnx-int8")).fresh
    fp32 = embed_with_cache(texts, None, load_model(None, "onnx")).fresh
    # the fp32 encoder's vectors of the normalised texts, not of the raw content
    np.testing.assert_allclose(
        first, TextVectors.from_frame(fp32).of(texts["text_hash"]), atol=1e-5
    )
    assert (
        np.sum(first * TextVectors.from_frame(int8).of(texts["text_hash"]), axis=1) > 0.95
    ).all()
    parts = sorted(cache.root.rglob("*.parquet"))
    np.testing.assert_array_equal(exact(rows), first)
    assert sorted(cache.root.rglob("*.parquet")) == parts  # cached: nothing encoded again
    assert fp32_vectors(cache, EmbedConfig(backend="onnx")) is None  # fp32 already
    # A text it cannot reproduce (a statement embedded before its tenant knew a name in it) keeps
    # its vector: NaN for it, the others decided in fp32.
    wrong = rows.with_columns(text=pl.Series(["something else", *rows["text"][1:]]))
    again = exact(wrong)
    assert np.isnan(again[0]).all()
    np.testing.assert_array_equal(again[1:], first[1:])
    vectors, decided = decision_vectors(
        wrong.with_columns(contact_id=pl.lit("c1")),
        ["tenant_id", "contact_id"],
        TextVectors.from_frame(int8),
        1.0,
        exact,
    )
    assert decided == 2
    np.testing.assert_array_equal(
        vectors.of(rows["text_hash"][:1]), TextVectors.from_frame(int8).of(rows["text_hash"][:1])
    )


def test_a_conflict_on_the_knife_edge_is_found_as_fp32_says_on_both_cpus() -> None:
    statements = statements_frame(
        [
            statement("a", "Likes morning meetings"),
            statement("b", "Doesn't like the morning meetings", day=3),
        ]
    )
    texts, subjects = memory_texts(no_interactions(), statements), subject_texts(statements)
    hashed = with_hashes(statements, texts, subjects)
    hashes = pl.concat([texts["text_hash"], subjects["text_hash"]]).to_frame("text_hash")
    config = ConflictConfig()

    def vectors(similarity: float) -> TextVectors:
        # contents far apart (e3, e4), subjects `similarity` apart (e1, e2 plane)
        contents = np.eye(8)[[2, 3]]
        return vectors_of(hashes, np.vstack([contents, at_distance(1.0 - similarity)]))

    def found(similarity: float, truth: float | None) -> int:
        used = vectors(similarity)
        if truth is not None:
            fp32 = vectors(truth)
            used, _ = conflict_vectors(
                hashed,
                used,
                config,
                lambda rows: fp32.of(rows["text_hash"]),
                lambda rows: fp32.of(rows["text_hash"]),
            )
        return find_conflicts(hashed, config, used).height

    bar = config.subject_similarity
    assert (found(bar + 0.01, None), found(bar - 0.01, None)) == (1, 0)  # int8 alone: the CPU
    for truth, conflicts in ((bar + 0.002, 1), (bar - 0.002, 0)):
        assert found(bar + 0.01, truth) == found(bar - 0.01, truth) == conflicts


def requests(texts: list[str]) -> pl.DataFrame:
    from tests.test_consolidate import interaction

    rows = [interaction(f"i{k}", text, minutes=k) for k, text in enumerate(texts)]
    return pl.DataFrame(rows, schema=contracts.INTERACTION_SCHEMA)


def request_clusters(
    interactions: pl.DataFrame,
    vectors: np.ndarray,
    exact: np.ndarray | None,
    previous: Consolidation | None = None,
) -> tuple[Consolidation, set[tuple[str, ...]]]:
    """The interaction clusters (member ids) of one night, `exact` the fp32 vectors by row."""
    texts = memory_texts(interactions, statements_frame([]))
    embeddings = texts.select(
        "tenant_id", "memory_id", "memory_kind", "text_hash", model=pl.lit("test")
    )
    truth = vectors_of(texts, exact) if exact is not None else None

    def fp32(near: pl.DataFrame) -> np.ndarray:
        assert truth is not None and set(near["memory_kind"]) == {"interaction"}
        return truth.of(near["text_hash"])

    result = consolidate(
        statements_frame([]),
        interactions,
        embeddings,
        pl.DataFrame(),
        vectors_of(texts, vectors),
        previous=previous,
        salt="m",
        exact=fp32 if truth is not None else None,
    )
    summaries = result.summaries.filter(pl.col("scope") == "interaction")
    return result, {tuple(sorted(ids)) for ids in summaries["member_ids"].to_list()}


def test_requests_on_the_knife_edge_cluster_as_fp32_says_first_and_later_nights() -> None:
    """The few-shot examples' clusters: two requests at the interaction threshold ± 0.001 in
    fp32 are decided as fp32 says on both "CPUs", on the first night (clustering) and on a later
    night (a new request joining last night's cluster)."""
    threshold = ConsolidationConfig().interaction_distance
    far = [[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]]
    first = requests(["Where is my order?", "Reset my password"])
    later = requests(["Where is my order?", "Reset my password", "Where's my order?"])
    for fp32_distance, merged in ((threshold + 0.001, False), (threshold - 0.001, True)):
        truth = np.vstack([at_distance(fp32_distance)[:1], far, at_distance(fp32_distance)[1:]])
        for int8_distance in (threshold - 0.004, threshold + 0.004):  # two CPUs
            int8 = np.vstack([at_distance(int8_distance)[:1], far, at_distance(int8_distance)[1:]])
            # first night: the two near requests in one night
            pair = requests(["Where is my order?", "Where's my order?"])
            _, alone = request_clusters(pair, int8[[0, 2]], None)
            result, decided = request_clusters(pair, int8[[0, 2]], truth[[0, 2]])
            together = {("i0", "i1")}
            assert (alone == together) == (int8_distance <= threshold)
            assert (decided == together) == merged and result.exact_interaction_texts == 2
            # a later night: the second request joins (or not) last night's cluster
            night1, _ = request_clusters(first, int8[:2], truth[:2])
            assert night1.exact_interaction_texts == 0  # nothing near on its own
            night2, clusters2 = request_clusters(later, int8, truth, previous=night1)
            assert (("i0", "i2") in clusters2) == merged
            assert night2.exact_interaction_texts == 2  # the new request and its neighbour


def test_a_later_night_with_requests_near_a_decision_also_summarises_a_shrunk_cluster() -> None:
    """Night 2 brings a request near last night's cluster in one group, and another group's
    cluster lost a member (retention, erasure): both are summarised again with the fp32 path on
    (the copy of the vectors holds every request's, not only the groups with new texts')."""
    from tests.test_consolidate import interaction

    threshold = ConsolidationConfig().interaction_distance
    rows = [
        interaction("a0", "Where is my order?"),
        interaction("b0", "Reset my password", kind="report"),
        interaction("b1", "Please reset my password", kind="report", minutes=1),
        interaction("a1", "Where's my order?", minutes=2),
    ]
    night1 = pl.DataFrame(rows[:3], schema=contracts.INTERACTION_SCHEMA)
    night2 = pl.DataFrame([rows[0], rows[1], rows[3]], schema=contracts.INTERACTION_SCHEMA)
    pair = at_distance(threshold - 0.01)
    far = np.zeros((1, 8))
    far[0, 3] = 1.0
    # rows of memory_texts' order (by memory id): a0 b0 b1, then a0 a1 b0
    vectors1, vectors2 = np.vstack([pair[:1], far, far]), np.vstack([pair, far])
    first, clusters1 = request_clusters(night1, vectors1, vectors1)
    assert ("b0", "b1") in clusters1
    second, clusters2 = request_clusters(night2, vectors2, vectors2, first)
    assert clusters2 == {("a0", "a1"), ("b0",)}
    assert second.exact_interaction_texts == 2
