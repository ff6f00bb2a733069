"""The near-identical text index: exact blocked search, and an update that equals a fresh build."""

from collections.abc import Callable

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from pipeline.preference.pairs.neighbors import NeighborIndex, search, update_index
from pipeline.storage.vectors import TextVectors

KEYS = ["tenant_id", "skill_id"]


def unit_query(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def _world(n: int, seed: int = 0) -> tuple[pl.DataFrame, TextVectors]:
    """n texts in two groups; every 5th text has a near-copy (cosine ≈ 0.999) in its group."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 16))
    vectors = np.vstack([base, base[::5] + 0.01 * rng.normal(size=base[::5].shape)])
    hashes = [f"t{i:03d}" for i in range(len(vectors))]
    group = [i % 2 for i in range(n)] + [i % 2 for i in range(0, n, 5)]
    texts = pl.DataFrame(
        {"tenant_id": "acme", "skill_id": [f"s{g}" for g in group], "text_hash": hashes}
    )
    cache = pl.DataFrame(
        {"text_hash": hashes, "embedding": unit_query(vectors)},
        schema_overrides={"embedding": pl.Array(pl.Float32, 16)},
    )
    return texts, TextVectors.from_frame(cache)


def all_of(
    cache: TextVectors, asked: list[list[str]] | None = None
) -> Callable[[pl.Series], TextVectors]:
    """`vectors_of` over every vector of `cache`, noting the hashes each call asks for."""

    def vectors_of(hashes: pl.Series) -> TextVectors:
        if asked is not None:
            asked.append(hashes.to_list())
        return cache

    return vectors_of


def test_search_is_exact_whatever_the_block_size() -> None:
    _, cache = _world(50)
    m = cache.matrix
    sims = m @ m.T
    expected = sorted(zip(*np.nonzero(sims >= 0.9), strict=True))
    for cells in (7, 100, 10_000):
        q, b, s = search(m, m, 0.9, max_block_cells=cells)
        assert sorted(zip(q.tolist(), b.tolist(), strict=True)) == expected
        assert np.allclose(s, sims[q, b])


def test_an_update_equals_a_fresh_build_and_searches_only_new_texts() -> None:
    texts, cache = _world(60)
    fresh = update_index(texts, all_of(cache), None, KEYS, 0.95, "m")
    assert fresh.searched == texts.height
    assert fresh.edges.height == 12  # the 12 near-copies, each in its own group
    assert (fresh.edges["similarity"] > 0.99).all()
    assert (fresh.edges["text_hash_a"] < fresh.edges["text_hash_b"]).all()

    first = texts.filter(pl.col("skill_id") == "s0").head(20)
    first = pl.concat([first, texts.filter(pl.col("skill_id") == "s1")])
    earlier = update_index(first, all_of(cache), None, KEYS, 0.95, "m")
    asked: list[list[str]] = []
    grown = update_index(texts, all_of(cache, asked), earlier, KEYS, 0.95, "m")
    assert grown.searched == texts.height - first.height
    # Only the group with new texts is fetched, whole (its old texts are searched against).
    assert asked == [texts.filter(pl.col("skill_id") == "s0")["text_hash"].sort().to_list()]
    assert_frame_equal(grown.edges, fresh.edges, check_exact=False, rel_tol=1e-5)
    order = [*KEYS, "text_hash"]
    assert grown.texts.sort(order).equals(fresh.texts.sort(order))


def test_texts_that_leave_drop_their_edges_and_another_model_rebuilds() -> None:
    texts, cache = _world(60)
    full = update_index(texts, all_of(cache), None, KEYS, 0.95, "m")
    gone = full.edges["text_hash_b"][0]
    smaller = update_index(
        texts.filter(pl.col("text_hash") != gone), all_of(cache), full, KEYS, 0.95, "m"
    )
    assert smaller.searched == 0 and smaller.edges.height == full.edges.height - 1
    rebuilt = update_index(texts, all_of(cache), full, KEYS, 0.95, "other-model")
    assert rebuilt.searched == texts.height
    assert_frame_equal(rebuilt.edges, full.edges, check_exact=False, rel_tol=1e-5)
    assert set(rebuilt.texts["model"]) == {"other-model"}


def test_a_missing_vector_is_an_error_not_a_silent_gap() -> None:
    texts, cache = _world(10)
    few = TextVectors(cache.index.head(3), cache.matrix[:3])
    with pytest.raises(KeyError, match="no vector"):
        update_index(texts, all_of(few), NeighborIndex.empty(KEYS), KEYS, 0.95, "m")


def test_groups_share_a_fetch_while_they_fit_and_find_the_same_edges() -> None:
    texts, cache = _world(60)
    sizes = texts.group_by("skill_id").len().sort("skill_id")["len"].to_list()
    together: list[list[str]] = []
    one = update_index(texts, all_of(cache, together), None, KEYS, 0.95, "m")
    assert [len(hashes) for hashes in together] == [sum(sizes)]  # both groups, one fetch
    apart: list[list[str]] = []
    two = update_index(texts, all_of(cache, apart), None, KEYS, 0.95, "m", max_fetched=max(sizes))
    assert [len(hashes) for hashes in apart] == sizes  # one group a fetch: both would not fit
    assert_frame_equal(one.edges, two.edges)
