"""Merge decisions that do not move with the CPU: the texts near a merge are decided on fp32
vectors.

The int8 encoder's integer kernels differ between CPUs (with and without AVX-512 VNNI), and so
do its distances: against fp32, by a median 0.005 and at most 0.028 on the 943 STS-B sample
sentences. A pair that close to the threshold would merge on one machine and not on another.
fp32 distances agree across CPUs to ~1e-6. So every text with a neighbour in its group within
the threshold plus a margin larger than that difference gets its fp32 vector before clustering.
Every pair that could merge (and every pair of texts in one cluster) is then measured in fp32,
and every other pair stays beyond the threshold whichever kernel made it. The labels are those
the fp32 vectors alone give, at the cost of encoding only the texts near a merge a second time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import polars as pl

from pipeline.frames import group_bounds
from pipeline.semantic.consolidate.clusters import candidate_pairs
from pipeline.semantic.embed import (
    EmbedConfig,
    available_backend,
    embed_with_cache,
    memory_texts,
    model_name,
)
from pipeline.storage.vectors import EmbeddingCache, TextVectors

# The fp32 vectors of statements near a decision (rows: tenant_id, memory_id, text_hash, text =
# the statement's content), row i ↔ rows[i].
ExactVectors = Callable[[pl.DataFrame], np.ndarray]

# The texts the embedding stage encoded for statements (rows as above): text_hash, text.
EmbeddedTexts = Callable[[pl.DataFrame], pl.DataFrame]


def near_texts(
    members: pl.DataFrame, keys: list[str], vectors: TextVectors, reach: float
) -> pl.DataFrame:
    """tenant_id, memory_id, text_hash, text of the members with another member of their group
    within cosine distance `reach` (one row per text_hash)."""
    units = members.sort(*keys, "text_hash", nulls_last=True)
    i, j, _ = candidate_pairs(vectors.of(units["text_hash"]), group_bounds(units, keys), reach)
    near = np.unique(np.concatenate([i, j]))
    return (
        units[near]
        .select("tenant_id", "memory_id", "text_hash", "text")
        .unique("text_hash", maintain_order=True)
    )


def decision_vectors(
    members: pl.DataFrame,
    keys: list[str],
    vectors: TextVectors,
    reach: float,
    exact: ExactVectors,
) -> tuple[TextVectors, int]:
    """`vectors` with the fp32 vector of every text near a decision (see `near_texts`), and how
    many texts that is."""
    near = near_texts(members, keys, vectors, reach)
    if near.is_empty():
        return vectors, 0
    matrix = vectors.matrix.copy()
    matrix[vectors.rows(near["text_hash"])] = exact(near)
    return TextVectors(vectors.index, matrix), near.height


def statement_texts(rows: pl.DataFrame) -> pl.DataFrame:
    """The texts `memory_texts` embeds for these statements: text_hash, text."""
    statements = rows.select("tenant_id", event_id="memory_id", content="text")
    none = pl.DataFrame(schema=dict.fromkeys(("tenant_id", "event_id", "input"), pl.String))
    texts = memory_texts(none, statements)
    return rows.select("memory_id").join(
        texts.select("memory_id", "text_hash", "text"), on="memory_id", maintain_order="left"
    )


def fp32_vectors(
    cache: EmbeddingCache, config: EmbedConfig, texts_of: EmbeddedTexts = statement_texts
) -> ExactVectors | None:
    """The `exact` of a night whose vectors come from `config`: fp32 ONNX vectors of the texts
    the embedding stage encoded (`texts_of`), through the embedding cache under the fp32 model's
    own name (a text is encoded in fp32 once), or None when `config`'s backend is fp32 already."""
    if available_backend(config.backend) != "onnx-int8":
        return None
    fp32 = replace(config, backend="onnx")
    name = model_name(None, "onnx")

    def exact(rows: pl.DataFrame) -> np.ndarray:
        texts = texts_of(rows)
        if not texts["text_hash"].equals(rows["text_hash"]):
            raise ValueError("the texts to re-encode in fp32 are not the texts the night encoded")
        result = embed_with_cache(texts, cache.scan(name), name=name, config=fp32)
        cache.append(name, result.fresh)
        return cache.vectors(name, texts["text_hash"]).of(texts["text_hash"])

    return exact
