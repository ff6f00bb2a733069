"""Decisions that do not move with the CPU: the texts near a merge (or a conflict) are decided on
fp32 vectors.

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
from pipeline.semantic.embed.backends import available_backend, model_name
from pipeline.semantic.embed.encoding import EmbedConfig, embed_with_cache
from pipeline.semantic.embed.texts import memory_texts
from pipeline.storage.vectors import EmbeddingCache, TextVectors

# The int8 encoder's distances against fp32 on the 943 STS-B sample sentences: median 0.005, at
# most 0.028; a decision within this of its threshold is taken on fp32 vectors.
DECISION_MARGIN = 0.05

# Similarities held at once by a blocked search (≈ 32 MB of float32).
MAX_BLOCK_CELLS = 8_000_000

# The fp32 vectors of memories near a decision (rows: `exact_rows`: tenant_id, memory_id,
# text_hash, text = the statement's content or the interaction's input, memory_kind), row i ↔
# rows[i]; a row of NaN for a text it cannot reproduce (which then keeps its vector).
ExactVectors = Callable[[pl.DataFrame], np.ndarray]

# Which row pairs (i, j) of a frame a decision is about (a boolean mask over the pairs).
Eligible = Callable[[pl.DataFrame, np.ndarray, np.ndarray], np.ndarray]

# The texts the embedding stage encoded for statements (rows as above): text_hash, text.
EmbeddedTexts = Callable[[pl.DataFrame], pl.DataFrame]


def candidate_pairs(
    matrix: np.ndarray, bounds: list[tuple[int, int]], distance: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row pairs i < j of one group within cosine `distance` of each other (the pairs the
    embedding proposes) and their cosines, over every group, a block of rows at a time."""
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for start, end in bounds:
        group = matrix[start:end]
        step = max(1, MAX_BLOCK_CELLS // len(group))
        for begin in range(0, len(group) - 1, step):
            similarity = group[begin : begin + step] @ group.T
            q, b = np.nonzero(similarity >= 1.0 - distance)
            later = b > q + begin
            q, b = q[later], b[later]
            found.append((q + begin + start, b + start, similarity[q, b]))
    if not found:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float32)
    i, j, cosine = (np.concatenate([f[k] for f in found]) for k in range(3))
    return i, j, cosine


def near_texts(
    members: pl.DataFrame,
    keys: list[str],
    vectors: TextVectors,
    reach: float,
    eligible: Eligible | None = None,
) -> pl.DataFrame:
    """tenant_id, memory_id, text_hash, text of the members with another member of their group
    within cosine distance `reach` (of a pair `eligible` keeps: the pairs the decision is about;
    all by default), one row per text_hash."""
    units = members.sort(*keys, "text_hash", nulls_last=True)
    i, j, _ = candidate_pairs(vectors.of(units["text_hash"]), group_bounds(units, keys), reach)
    if eligible is not None:
        kept = eligible(units, i, j)
        i, j = i[kept], j[kept]
    near = np.unique(np.concatenate([i, j]))
    return exact_rows(units[near])


def exact_rows(rows: pl.DataFrame) -> pl.DataFrame:
    """What an ExactVectors is asked about these rows: tenant_id, memory_id, text_hash, text and
    memory_kind (interaction for interaction members, else statement), one row per text_hash."""
    kind = (
        pl.when(pl.col("memory_type") == "interaction")
        .then(pl.lit("interaction"))
        .otherwise(pl.lit("statement"))
        if "memory_type" in rows.columns
        else pl.lit("statement")
    )
    return rows.select("tenant_id", "memory_id", "text_hash", "text", memory_kind=kind).unique(
        "text_hash", maintain_order=True
    )


def near_new(new: np.ndarray, old: np.ndarray, reach: float) -> tuple[np.ndarray, np.ndarray]:
    """(rows of `new`, rows of `old`) near a decision about the new rows: within cosine `reach`
    of another new row or of an old one (an incremental night's texts joining last night's
    clusters), a block of new rows at a time."""
    both = np.vstack([new, old]) if len(old) else new
    near_new_rows, near_old_rows = np.zeros(len(new), bool), np.zeros(len(old), bool)
    step = max(1, MAX_BLOCK_CELLS // max(len(both), 1))
    for begin in range(0, len(new), step):
        close = new[begin : begin + step] @ both.T >= 1.0 - reach
        close[np.arange(close.shape[0]), np.arange(begin, begin + close.shape[0])] = False
        near_new_rows[begin : begin + step] |= close.any(axis=1)
        near_new_rows |= close[:, : len(new)].any(axis=0)
        near_old_rows |= close[:, len(new) :].any(axis=0)
    return np.flatnonzero(near_new_rows), np.flatnonzero(near_old_rows)


def decision_vectors(
    members: pl.DataFrame,
    keys: list[str],
    vectors: TextVectors,
    reach: float,
    exact: ExactVectors,
    eligible: Eligible | None = None,
) -> tuple[TextVectors, int]:
    """`vectors` with the fp32 vector of every text near a decision (see `near_texts`), and how
    many texts that is."""
    return with_exact(vectors, near_texts(members, keys, vectors, reach, eligible), exact)


def with_exact(
    vectors: TextVectors, near: pl.DataFrame, exact: ExactVectors
) -> tuple[TextVectors, int]:
    """A copy of `vectors` with the fp32 vector of each text of `near` (`exact_rows`) that
    `exact` reproduces, and how many texts that is."""
    if near.is_empty():
        return vectors, 0
    fine = exact(near)
    found = ~np.isnan(fine).any(axis=1)
    matrix = vectors.matrix.copy()
    matrix[vectors.rows(near["text_hash"].filter(pl.Series(found)))] = fine[found]
    return TextVectors(vectors.index, matrix), int(found.sum())


def embedded_texts(rows: pl.DataFrame) -> pl.DataFrame:
    """The texts `memory_texts` embeds for these memories (statements, or interactions where
    `memory_kind` says so): text_hash, text."""
    interaction = (
        rows["memory_kind"] == "interaction"
        if "memory_kind" in rows.columns
        else pl.repeat(False, rows.height, eager=True)
    )
    events = rows.select("tenant_id", event_id="memory_id", raw="text")
    texts = memory_texts(
        events.filter(interaction).rename({"raw": "input"}),
        events.filter(~interaction).rename({"raw": "content"}),
    )
    return rows.select("tenant_id", "memory_id").join(
        texts.select("tenant_id", "memory_id", "text_hash", "text"),
        on=["tenant_id", "memory_id"],
        how="left",
        maintain_order="left",
    )


def redacted_texts(redact: Callable[[pl.DataFrame], pl.DataFrame]) -> EmbeddedTexts:
    """The texts `memory_texts(..., redact)` embeds for statements (`redact`: memory rows
    tenant_id, raw → the same rows, raw redacted)."""

    def texts_of(rows: pl.DataFrame) -> pl.DataFrame:
        redacted = redact(rows.select("tenant_id", raw="text"))["raw"]
        return embedded_texts(rows.with_columns(text=redacted))

    return texts_of


def fp32_vectors(
    cache: EmbeddingCache, config: EmbedConfig, texts_of: EmbeddedTexts = embedded_texts
) -> ExactVectors | None:
    """The `exact` of a night whose vectors come from `config`: fp32 ONNX vectors of the texts
    the embedding stage encoded (`texts_of`), through the embedding cache under the fp32 model's
    own name (a text is encoded in fp32 once), or None when `config`'s backend is fp32 already.

    A text `texts_of` no longer reproduces (its hash is not the row's: a statement embedded on a
    night before its tenant knew a name it holds) gets NaN and keeps its vector: it is decided on
    the int8 vector, as before, until it changes."""
    if available_backend(config.backend) != "onnx-int8":
        return None
    fp32 = replace(config, backend="onnx")
    name = model_name(None, "onnx")

    def exact(rows: pl.DataFrame) -> np.ndarray:
        texts = texts_of(rows)
        same = (texts["text_hash"] == rows["text_hash"]).fill_null(False)
        if not same.any():
            return np.full((rows.height, 1), np.nan, np.float32)
        texts = texts.filter(same)
        cache.append(name, embed_with_cache(texts, cache.scan(name), name=name, config=fp32).fresh)
        found = cache.vectors(name, texts["text_hash"]).of(texts["text_hash"])
        vectors = np.full((rows.height, found.shape[1]), np.nan, np.float32)
        vectors[same.to_numpy()] = found
        return vectors

    return exact
