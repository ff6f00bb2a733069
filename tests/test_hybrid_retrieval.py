"""Hybrid retrieval (issue 16 item 3): BM25 keyword channel, score fusion with the vector channel,
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
    KEYWORD_WEIGHT,
    KeywordIndex,
    fuse,
    query_tokens,
    scaled,
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
    bm25 = np.array([4.0, 2.0, 0.0])
    keyword = scaled(bm25, bm25 > 0, min_max=False)
    assert keyword.tolist() == [1.0, 0.5, 0.0]
    cosine = np.array([0.2, 0.6, 0.4])
    dense = scaled(cosine, cosine != 0, min_max=True)
    assert dense.tolist() == pytest.approx([0.0, 1.0, 0.5])
    w = KEYWORD_WEIGHT
    assert fuse(keyword, dense).tolist() == pytest.approx([w, 0.5 * w + 1 - w, 0.5 * (1 - w)])
    assert fuse(keyword, None) is keyword


@pytest.fixture(scope="module")
def small_pack(tmp_path_factory: pytest.TempPathFactory) -> MemoryPack:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(TEXTS), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return MemoryPack.load(write_pack(tmp_path_factory.mktemp("packs"), TEXTS, vectors))


def test_search_by_keyword_and_without_an_encoder(small_pack: MemoryPack) -> None:
    found = small_pack.search("arrived", retrieval="keyword")
    # Every row of the filter, those sharing a term first (k rows whenever the pack holds k).
    assert [m.memory_id for m in found] == ["m000000", "m000001", "m000002", "m000003"]
    assert found[0].parts["keyword_rank"] == 1.0 and found[0].parts["relevance"] == 1.0
    assert found[2].parts["keyword_rank"] == 0.0 and found[2].score == 0.0
    assert [m.memory_id for m in small_pack.search("ORD-48213", k=2, retrieval="keyword")] == [
        "m000000",
        "m000001",
    ]
    # The pack ships no model: hybrid runs the keyword channel alone and says why.
    hybrid = small_pack.search("arrived", k=2)
    assert [m.memory_id for m in hybrid] == ["m000000", "m000001"]
    assert "ships no embedding model" in (small_pack.encoder_error or "")
    with pytest.raises(EncoderUnavailable, match="ships no embedding model"):
        small_pack.search("ORD-48213", retrieval="vector")
    with pytest.raises(ValueError, match="retrieval must be one of"):
        small_pack.search("x", retrieval="fuzzy")
    # With a vector, the vector channel runs too.
    vector = np.asarray(small_pack.embeddings[2])
    both = small_pack.search("ORD-48213", query_vector=vector, k=2)
    # The keyword hit and the vector's own row (weighted KEYWORD_WEIGHT and the rest).
    assert [m.memory_id for m in both] == ["m000002", "m000000"]
    assert "vector_rank" in both[0].parts
    assert small_pack.search("   ", query_vector=vector)[0].memory_id == "m000002"
    # memories_for: the relevance multiplies the confidence.
    ranked = small_pack.memories_for(None, k=1, query="damaged order")
    assert ranked[0].memory_id == "m000000"
    # The best by relevance counts 1.0 (k / (k + place)) times the confidence.
    assert ranked[0].parts["relevance_by_place"] == 1.0
    assert ranked[0].parts["semantic"] == pytest.approx(0.8)


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


def test_search_finds_what_decay_hid_below_the_active(tmp_path) -> None:
    """SPEC §4.2 round 3: an inactive or archived memory that answers a query is found, below an
    equally relevant active one and with its status and age; `memories_for` injects the active
    set; a list holds k rows whenever the filter holds k."""
    texts = ["Prefers tea over coffee", "Prefers tea over coffee", *TEXTS[:3]]
    statuses = ["inactive", "active", "active", "archived", "active"]
    vectors = np.random.default_rng(1).normal(size=(len(texts), 8)).astype(np.float32)
    vectors[0] = vectors[1]  # equally relevant by both channels
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pack = MemoryPack.load(write_pack(tmp_path, texts, vectors, statuses=statuses))
    found = pack.search("tea", query_vector=vectors[1])
    assert [m.memory_id for m in found[:2]] == ["m000001", "m000000"]
    active, inactive = found[:2]
    assert (active.status, inactive.status) == ("active", "inactive")
    assert inactive.score == pytest.approx(0.95 * active.score) and inactive.score > found[2].score
    assert inactive.parts["status_factor"] == 0.95 and inactive.parts["age_days"] == 1.0
    assert len(found) == 5 and "archived" in {m.status for m in found}  # k = 10 > 5 rows: all
    assert len(pack.search("tea", k=4, query_vector=vectors[1])) == 4
    assert len(pack.search("no such word", k=3, retrieval="keyword")) == 3
    only_active = pack.search("tea", query_vector=vectors[1], include_inactive=False)
    assert {m.status for m in only_active} == {"active"} and len(only_active) == 3
    injected = pack.memories_for(None, query="tea", query_vector=vectors[1])
    assert injected[0].memory_id == "m000001"
    assert "m000000" not in {m.memory_id for m in injected}


def test_a_memory_shares_the_relevance_of_its_neighbours_in_time(tmp_path) -> None:
    """The turn after the one that matches (same contact, next in time) outranks an equally
    unrelated memory with no matching neighbour."""
    texts = ["We adopted a dog last week", "Her name is Luna", "The weather is nice", "Good luck"]
    vectors = np.eye(4, 8, dtype=np.float32)
    pack = MemoryPack.load(write_pack(tmp_path, texts, vectors, contacts=1))
    # write_pack: row i is i + 1 days old, so rows 0 and 1 are neighbours in time.
    found = pack.search("adopted dog", k=4, contact_id="c0", retrieval="keyword")
    assert [m.memory_id for m in found[:2]] == ["m000000", "m000001"]
    assert found[1].parts["neighbours"] > 0 == found[1].parts["keyword"]
    assert found[2].parts["neighbours"] == 0.0 < found[1].score


def test_the_stemmer_joins_inflections_only() -> None:
    from memorypack.stem import stem

    groups = [
        ("refund", "refunds", "refunded", "refunding"),
        ("charge", "charged", "charges", "charging"),
        ("cancel", "cancelled", "cancelling"),
        ("bill", "billed", "billing", "bills"),
        ("reply", "replies", "replied"),
        ("hop", "hopping", "hops"),
    ]
    for words in groups:
        assert len({stem(w) for w in words}) == 1, words
    # Derivations stay apart; ids, numbers, other scripts and short words are left as they are.
    assert stem("general") != stem("generous")
    assert [stem(t) for t in ("ord", "48213", "café", "is", "x2")] == [
        "ord",
        "48213",
        "café",
        "is",
        "x2",
    ]


def test_a_keyword_query_finds_its_inflections_and_flags_what_it_does_not_match(
    tmp_path,
) -> None:
    texts = [
        "Customer wants refunds paid to the card",
        "Refunded the double charge on Monday",
        "Prefers email over phone calls",
        "Works from Lisbon this week",
        "Asked us to uses the old address",  # "us" is a stop word; "uses" is not dropped with it
    ]
    vectors = np.eye(len(texts), 8, dtype=np.float32)
    pack = MemoryPack.load(write_pack(tmp_path, texts, vectors))
    found = pack.search("refund", k=3, retrieval="keyword")
    # Both inflections match; the third row only fills k (SPEC §7) and says so.
    assert {m.memory_id for m in found[:2]} == {"m000000", "m000001"}
    assert [m.matched for m in found] == [True, True, False]
    assert found[2].score == 0.0 and found[2].parts["keyword"] == 0.0
    assert pack.search("charging", k=1, retrieval="keyword")[0].memory_id == "m000001"
    assert pack.search("use", k=1, retrieval="keyword")[0].memory_id == "m000004"
    # Nothing matches: k rows still, none of them matched.
    assert [m.matched for m in pack.search("xylophone", k=2, retrieval="keyword")] == [
        False,
        False,
    ]
    # No query: nothing to match.
    assert pack.memories_for(None, k=1)[0].matched is None
