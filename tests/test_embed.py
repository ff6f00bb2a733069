"""Embeddings: normalised text keys, unit float32 vectors, the cache makes a re-run embed nothing."""

from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline import embed
from pipeline.embed import (
    embed_with_cache,
    encode,
    load_model,
    matrix,
    memory_texts,
    normalise_text,
)
from tests.test_conflicts import no_interactions, statement, statements_frame


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model()


def test_normalised_texts_share_one_hash() -> None:
    statements = statements_frame(
        [
            statement("a", "  Prefers   EMAIL over phone "),
            statement("b", "prefers email over phone"),
            statement("c", "Has a dog"),
        ]
    )
    texts = memory_texts(no_interactions(), statements)
    assert texts.columns == ["tenant_id", "memory_id", "memory_kind", "text", "text_hash"]
    assert texts["text"].to_list()[:2] == ["prefers email over phone"] * 2
    assert texts["text_hash"][0] == texts["text_hash"][1] != texts["text_hash"][2]
    assert len(texts["text_hash"][0]) == 64
    assert pl.select(normalise_text(pl.lit("Ａ\tb"))).item() == "a b"


def test_encode_returns_unit_float32_rows_in_input_order(model: Any) -> None:
    vectors = encode(["b text", "a longer text here", "b text"], model=model, batch_size=2)
    assert vectors.dtype == np.float32 and vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors[0], vectors[2]) and not np.array_equal(vectors[0], vectors[1])


def test_second_run_embeds_nothing_and_never_loads_the_model(
    model: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime(2026, 11, 3, tzinfo=UTC)
    statements = statements_frame(
        [
            statement("a", "Prefers email"),
            statement("b", "prefers EMAIL"),
            statement("c", "Has a dog named Rex"),
        ]
    )
    texts = memory_texts(no_interactions(), statements)
    first = embed_with_cache(texts, None, model, now=now)
    assert (first.n_new, first.n_cached, first.dim, first.model) == (2, 0, 384, "all-MiniLM-L6-v2")
    assert first.embeddings.schema["embedding"] == pl.Array(pl.Float32, 384)
    assert first.cache.columns == ["text_hash", "embedding", "model", "dim", "embedded_at"]

    def refuse(*_: Any) -> Any:
        raise AssertionError("model loaded although every text is cached")

    monkeypatch.setattr(embed, "load_model", refuse)
    second = embed_with_cache(texts, first.cache, now=now)
    assert (second.n_new, second.n_cached) == (0, 2)
    assert np.array_equal(matrix(second.embeddings), matrix(first.embeddings))
    assert second.cache.height == 2

    monkeypatch.undo()
    more = statements_frame([*statements.to_dicts(), statement("d", "Birthday is in March")])
    third = embed_with_cache(memory_texts(no_interactions(), more), second.cache, model, now=now)
    assert (third.n_new, third.n_cached, third.cache.height) == (1, 2, 3)


def test_model_path_is_configurable(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv(embed.MODEL_ENV, str(tmp_path / "my-model"))
    assert embed.resolve_model_path() == tmp_path / "my-model"
    assert embed.model_name() == "my-model"
    monkeypatch.delenv(embed.MODEL_ENV)
    assert embed.model_name() == "all-MiniLM-L6-v2"


def test_no_statements_at_all_embeds_nothing() -> None:
    """An imported tenant may have interactions only (OASST): empty subjects must not break."""
    from pipeline.conflicts import subject_texts
    from pipeline.contracts import MEMORY_SCHEMA

    result = embed_with_cache(subject_texts(pl.DataFrame(schema=MEMORY_SCHEMA)), None)
    assert result.n_new == 0
    assert result.embeddings.height == 0
