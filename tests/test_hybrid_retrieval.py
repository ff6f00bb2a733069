"""Hybrid retrieval (issue 16 item 3): BM25 keyword channel, RRF fusion with the vector channel,
and recall@10 on a planted set with known answers, embedded by the real model."""

import math

import numpy as np
import pyarrow as pa
import pytest

from bench.retrieval_set import labelled_set, recall_at, write_pack
from memorypack import EncoderUnavailable, MemoryPack
from memorypack.keyword import (
    BM25_B,
    BM25_K1,
    KeywordIndex,
    fuse,
    query_tokens,
    tokenize,
    top_ranks,
)

TEXTS = [
    "Order ORD-48213 arrived damaged",
    "Order ORD-48214 arrived on time",
    "Prefers email over phone calls",
    "",
]


def test_tokens_are_runs_of_letters_and_digits() -> None:
    assert tokenize(pa.array(["Order ORD-48213, É-mail  café!", None])).to_pylist() == [
        ["order", "ord", "48213", "é", "mail", "café"],
        [],
    ]


def test_query_tokens_are_the_index_tokens() -> None:
    samples = [
        "Order ORD-48213, É-mail  café!",
        "Straße ÖL über naïve fiancée — ½ price, ＡＢＣ１２３ (full width)",
        "İstanbul ΣΟΦΊΑ Москва 東京タワー 123_456 x²",
        "  tabs\tand\nnewlines  ",
        "",
    ]
    assert [query_tokens(t) for t in samples] == tokenize(pa.array(samples)).to_pylist()


def test_bm25_scores_are_okapi_bm25() -> None:
    index = KeywordIndex(pa.array(TEXTS))
    scores = index.scores("ord-48213")
    lengths = [5, 6, 5, 0]
    average = sum(lengths) / 4

    def term(df: int, tf: int, length: int) -> float:
        idf = math.log(1 + (4 - df + 0.5) / (df + 0.5))
        return idf * tf * (BM25_K1 + 1) / (tf + BM25_K1 * (1 - BM25_B + BM25_B * length / average))

    assert scores[0] == pytest.approx(term(2, 1, 5) + term(1, 1, 5), rel=1e-6)  # ord + 48213
    assert scores[1] == pytest.approx(term(2, 1, 6), rel=1e-6)  # ord only
    assert scores[2] == scores[3] == 0.0
    assert index.scores("nothing matches").sum() == 0.0
    assert KeywordIndex(pa.array([], pa.string())).scores("x").size == 0


def test_rank_fusion() -> None:
    ranks = top_ranks(np.array([0.2, 0.9, 0.9, 0.1]), np.array([True, True, True, False]), depth=2)
    assert ranks.tolist() == [0, 1, 2, 0]  # ties: pack order; beyond the depth: unranked
    fused = fuse([np.array([1, 2, 0]), np.array([2, 0, 1])])
    assert fused.tolist() == pytest.approx(
        [(1 / 61 + 1 / 62) / (2 / 61), (1 / 62) / (2 / 61), (1 / 61) / (2 / 61)]
    )


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> MemoryPack:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(TEXTS), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return MemoryPack.load(write_pack(tmp_path_factory.mktemp("packs"), TEXTS, vectors))


def test_search_by_keyword_and_without_an_encoder(small_pack: MemoryPack) -> None:
    found = small_pack.search("arrived", retrieval="keyword")
    assert [m.memory_id for m in found] == ["m000000", "m000001"]  # only rows sharing a term
    assert found[0].parts["keyword_rank"] == 1.0 and found[0].parts["relevance"] == 1.0
    # A row scoring under half the best one is not ranked (m000001 shares only "ord").
    assert [m.memory_id for m in small_pack.search("ORD-48213", retrieval="keyword")] == ["m000000"]
    # The pack ships no model: hybrid runs the keyword channel alone and says why.
    hybrid = small_pack.search("arrived")
    assert [m.memory_id for m in hybrid] == ["m000000", "m000001"]
    assert "ships no embedding model" in (small_pack.encoder_error or "")
    with pytest.raises(EncoderUnavailable, match="ships no embedding model"):
        small_pack.search("ORD-48213", retrieval="vector")
    with pytest.raises(ValueError, match="retrieval must be one of"):
        small_pack.search("x", retrieval="fuzzy")
    # With a vector, the vector channel runs too.
    vector = np.asarray(small_pack.embeddings[2])
    both = small_pack.search("ORD-48213", query_vector=vector, k=2)
    assert both[0].memory_id == "m000000" and "vector_rank" in both[0].parts
    assert small_pack.search("   ", query_vector=vector)[0].memory_id == "m000002"
    # memories_for: the relevance multiplies the confidence.
    ranked = small_pack.memories_for(None, k=1, query="damaged order")
    assert ranked[0].memory_id == "m000000"
    assert ranked[0].parts["semantic"] == pytest.approx(ranked[0].parts["relevance"] * 0.8)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[MemoryPack, list, np.ndarray]:
    from pipeline.semantic.embed import encode, load_model

    texts, queries = labelled_set(n_identifiers=400, n_filler=200, seed=3)
    model = load_model(None, "torch")  # the real model (the pipeline's default, fp32)
    vectors = encode([" ".join(t.lower().split()) for t in texts], model=model)
    query_vectors = encode([" ".join(q.text.lower().split()) for q in queries], model=model)
    pack = MemoryPack.load(write_pack(tmp_path_factory.mktemp("planted"), texts, vectors))
    return pack, queries, query_vectors


def test_hybrid_recall_is_at_least_the_best_channels(planted) -> None:
    pack, queries, query_vectors = planted
    ids = pack.memories.column("memory_id").to_pylist()
    recall = {
        mode: recall_at(
            [
                [m.memory_id for m in pack.search(q.text, k=10, retrieval=mode, query_vector=v)]
                for q, v in zip(queries, query_vectors, strict=True)
            ],
            queries,
            ids,
        )
        for mode in ("vector", "keyword", "hybrid")
    }
    # Each channel does its own job: the keyword channel finds every identifier, the vector
    # channel the paraphrases the keyword channel misses.
    assert recall["keyword"]["identifier"] == 1.0
    assert recall["vector"]["paraphrase"] >= recall["keyword"]["paraphrase"] + 0.4
    assert recall["vector"]["identifier"] < 1.0
    for measure in ("all", "macro", "identifier", "paraphrase"):
        best = max(recall["vector"][measure], recall["keyword"][measure])
        assert recall["hybrid"][measure] >= best, (measure, recall)
