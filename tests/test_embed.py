"""Embeddings: normalised text keys, unit float32 vectors, the cache makes a re-run embed nothing."""

import logging
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline.semantic import embed
from pipeline.semantic.embed import (
    Backend,
    EmbedConfig,
    embed_with_cache,
    encode,
    encoding,
    load_model,
    memory_texts,
    normalise_text,
    onnx_backend,
)
from pipeline.storage.vectors import EmbeddingCache, TextVectors
from tests.test_conflicts import no_interactions, statement, statements_frame

# Two paraphrase pairs, then unrelated texts; lengths differ so that batches pad.
PARAPHRASES = [
    "prefers email over phone calls",
    "would rather get an email than a phone call",
    "how do i reset my password?",
    "i forgot my password, how can i reset it?",
]
UNRELATED = ["has a dog named rex", "always cc legal on vendor contracts", ""]


@pytest.fixture(scope="module")
def model() -> Any:
    return load_model()


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ONNX export folder for the module: each backend is exported once and then reused."""
    return tmp_path_factory.mktemp("onnx")


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


@pytest.mark.parametrize("backend", ["torch", "onnx-int8"])
def test_second_run_embeds_nothing_and_never_loads_the_model(
    backend: Backend, export_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = EmbedConfig(backend=backend, export_dir=export_dir)
    now = datetime(2026, 11, 3, tzinfo=UTC)
    statements = statements_frame(
        [
            statement("a", "Prefers email"),
            statement("b", "prefers EMAIL"),
            statement("c", "Has a dog named Rex"),
        ]
    )
    texts = memory_texts(no_interactions(), statements)
    first = embed_with_cache(texts, None, now=now, config=config)
    name = "all-MiniLM-L6-v2" + ("+onnx-int8.v3" if backend == "onnx-int8" else "")
    assert (first.n_new, first.n_cached, first.dim, first.model) == (2, 0, 384, name)
    assert first.embeddings.columns == [
        "tenant_id",
        "memory_id",
        "memory_kind",
        "text_hash",
        "model",
    ]
    assert first.fresh.columns == ["text_hash", "embedding", "model", "dim", "embedded_at"]
    assert first.fresh.schema["embedding"] == pl.Array(pl.Float32, 384)
    cache = EmbeddingCache(tmp_path / "cache")
    cache.append(name, first.fresh)

    def refuse(*_: Any) -> Any:
        raise AssertionError("model loaded although every text is cached")

    monkeypatch.setattr(encoding, "load_model", refuse)
    second = embed_with_cache(texts, cache.scan(name), now=now, config=config)
    assert (second.n_new, second.n_cached, second.fresh.height) == (0, 2, 0)
    assert second.embeddings.equals(first.embeddings)
    # "Prefers email" and "prefers EMAIL" share one cached vector.
    assert second.embeddings["text_hash"].n_unique() == 2 == cache.hashes(name).len()

    monkeypatch.undo()
    more = statements_frame([*statements.to_dicts(), statement("d", "Birthday is in March")])
    third = embed_with_cache(
        memory_texts(no_interactions(), more), cache.scan(name), now=now, config=config
    )
    assert (third.n_new, third.n_cached, third.fresh.height) == (1, 2, 1)
    cache.append(name, third.fresh)
    vectors = cache.vectors(name)
    assert len(vectors) == 3 and vectors.dim == 384
    assert np.allclose(np.linalg.norm(vectors.matrix, axis=1), 1.0, atol=1e-3)


def test_model_path_is_configurable(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv(embed.MODEL_ENV, str(tmp_path / "my-model"))
    assert embed.resolve_model_path() == tmp_path / "my-model"
    assert embed.model_name() == "my-model"
    monkeypatch.delenv(embed.MODEL_ENV)
    assert embed.model_name() == "all-MiniLM-L6-v2"


def test_no_statements_at_all_embeds_nothing(export_dir: Path) -> None:
    """An imported tenant may have interactions only (OASST): empty subjects must not break."""
    from pipeline.ingest.contracts import MEMORY_SCHEMA
    from pipeline.semantic.conflicts import subject_texts

    result = embed_with_cache(
        subject_texts(pl.DataFrame(schema=MEMORY_SCHEMA)),
        None,
        config=EmbedConfig(export_dir=export_dir),
    )
    assert result.n_new == 0
    assert result.embeddings.height == 0


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_onnx_vectors_agree_with_torch_fp32(model: Any, backend: Backend, export_dir: Path) -> None:
    texts = PARAPHRASES + UNRELATED
    reference = encode(texts, model=model)
    onnx = load_model(backend=backend, export_dir=export_dir)
    vectors = encode(texts, model=onnx, batch_size=4)
    cosine = np.sum(vectors * reference, axis=1)
    assert vectors.dtype == np.float32 and vectors.shape == reference.shape
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert cosine.mean() >= 0.99
    if backend == "onnx":  # why fp32 ONNX may share the torch model name (see model_name)
        assert np.abs(vectors - reference).max() < 1e-5
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 4:].max() and similarity[2, 3] > similarity[2, 4:].max()
    # int8: `_cores()` runs of one text at a time, one thread each; fp32: one batch on every core.
    threads = 1 if backend == "onnx-int8" else onnx_backend._cores()
    assert onnx.session.get_session_options().intra_op_num_threads == threads


def _mirror(source: Path, target: Path) -> Path:
    """`source` as a folder of symlinks (no 90 MB copy)."""
    for file in source.rglob("*"):
        if file.is_file():
            link = target / file.relative_to(source)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(file)
    return target


def test_export_is_reused_and_keyed_by_the_source_model(
    export_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = embed.resolve_model_path()
    made = embed.export_onnx(source, "onnx-int8", export_dir)
    stamp = made.stat().st_mtime_ns
    exports: list[Path] = []

    def fake_export(_from: Path, target: Path) -> None:
        exports.append(target)
        target.write_bytes(b"stub")

    monkeypatch.setattr(onnx_backend, "_export_fp32", fake_export)
    monkeypatch.setattr(onnx_backend, "_export_int8", fake_export)
    assert embed.export_onnx(source, "onnx-int8", export_dir) == made
    assert exports == [] and made.stat().st_mtime_ns == stamp

    # Two model folders of the same name, one file apart: the second never reuses the first.
    first = _mirror(source, tmp_path / "a" / "model")
    second = _mirror(source, tmp_path / "b" / "model")
    (second / "config.json").unlink()
    (second / "config.json").write_text((source / "config.json").read_text() + "\n")
    one = embed.export_onnx(first, "onnx", export_dir)
    other = embed.export_onnx(second, "onnx", export_dir)
    assert one.parent != other.parent and exports == [one, other]
    assert embed.export_onnx(first, "onnx", export_dir) == one and len(exports) == 2


def test_falls_back_to_torch_without_onnxruntime(
    model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime → ImportError
    texts = memory_texts(no_interactions(), statements_frame([statement("a", "Has a dog")]))
    onnx_dir = tmp_path / "onnx"
    config = EmbedConfig(backend="onnx-int8", export_dir=onnx_dir)
    with caplog.at_level(logging.WARNING, logger="pipeline.semantic.embed"):
        result = embed_with_cache(texts, None, config=config)
    assert (result.model, result.n_new) == ("all-MiniLM-L6-v2", 1)
    assert "using torch instead" in caplog.text
    assert not onnx_dir.exists()
    assert np.allclose(
        TextVectors.from_frame(result.fresh).matrix, encode(["has a dog"], model=model), atol=1e-6
    )


def test_known_memories_are_not_normalised_or_hashed_again() -> None:
    statements = statements_frame([statement("a", "Prefers email"), statement("b", "Has a dog")])
    first = memory_texts(no_interactions(), statements)
    known = first.with_columns(pl.lit("stale").alias("model"))
    grown = statements_frame([*statements.to_dicts(), statement("c", "Likes  TEA")])
    again = memory_texts(no_interactions(), grown.filter(pl.col("event_id") != "b"), known)
    assert again["memory_id"].to_list() == ["a", "c"]  # b is gone, c is new
    assert again["text"].to_list() == [None, "likes tea"]  # a's text is not recomputed
    assert again["text_hash"][0] == first["text_hash"][0]


def test_the_cache_is_append_only_per_model_and_compacts(tmp_path: Path) -> None:
    from pipeline.storage import vectors as vectors_module

    def rows(hashes: list[str], dim: int) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "text_hash": hashes,
                "embedding": np.eye(len(hashes), dim, dtype=np.float32),
                "model": "m",
                "dim": dim,
            },
            schema_overrides={"embedding": pl.Array(pl.Float32, dim), "dim": pl.Int32},
        )

    cache = EmbeddingCache(tmp_path)
    for k in range(vectors_module.MAX_PARTS + 1):
        cache.append("m", rows([f"h{k}"], 4))
    cache.append("other/model", rows(["x"], 8))  # another dimension, its own folder
    assert len(list((tmp_path / "m").glob("part-*"))) == 1  # compacted
    assert sorted(cache.hashes("m").to_list()) == sorted(f"h{k}" for k in range(33))
    assert cache.vectors("other/model").dim == 8
    picked = cache.vectors("m", pl.Series(["h3", "h1"]))
    assert len(picked) == 2 and picked.of(pl.Series(["h1", "h3", "h1"])).shape == (3, 4)
    with pytest.raises(KeyError, match="no vector"):
        picked.of(pl.Series(["h2"]))
    assert cache.scan("never") is None and len(cache.vectors("never")) == 0
