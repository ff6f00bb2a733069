"""The vectors conflicts are decided on: the statements and subjects near a similarity bar of
`ConflictConfig` again in fp32 (`embed.exact`), so the same conflicts are found on every CPU."""

from __future__ import annotations

import numpy as np
import polars as pl

from pipeline.ingest.contracts import MemoryType
from pipeline.semantic.conflicts import PATTERN_TYPES, ConflictConfig
from pipeline.semantic.embed import ExactVectors, decision_vectors, normalise_text
from pipeline.storage.vectors import TextVectors

CONTACT = ["tenant_id", "contact_id"]


def conflict_vectors(
    hashed: pl.DataFrame,
    vectors: TextVectors,
    config: ConflictConfig,
    contents: ExactVectors,
    subjects: ExactVectors,
) -> tuple[TextVectors, int]:
    """`vectors` with the fp32 vector of every content and subject within `config.decision_margin`
    of one of the conflict bars from another statement of the contact, for the pairs that bar is
    about, and how many texts that is. `hashed`: `with_hashes`' frame; `contents` re-encodes
    statements (tenant_id, memory_id, text_hash, text = content), `subjects` texts as given."""
    keys = (
        "tenant_id",
        "contact_id",
        pl.col("event_id").alias("memory_id"),
        "polarity",
        (pl.col("memory_type") == MemoryType.CORRECTION).alias("correction"),
        pl.col("memory_type").is_in([str(t) for t in PATTERN_TYPES]).alias("pattern"),
    )
    content_rows = hashed.select(*keys, "text_hash", text="content")
    subject_rows = hashed.select(
        *keys, text_hash="subject_hash", text=normalise_text(pl.col("subject"))
    )
    decisions = (  # rows, bar, how they are re-encoded, the pairs the bar is about
        (content_rows, config.agreement_similarity, contents, _corrections),
        (subject_rows, config.subject_similarity, subjects, _opposites),
        (subject_rows, config.correction_subject_similarity, subjects, _corrections),
    )
    decided = 0
    for rows, bar, exact, eligible in decisions:
        reach = 1.0 - bar + config.decision_margin
        vectors, near = decision_vectors(rows, CONTACT, vectors, reach, exact, eligible)
        decided += near
    return vectors, decided


def _opposites(rows: pl.DataFrame, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Pairs of opposite polarity (the subject bar's)."""
    polarity = rows["polarity"].to_numpy()
    return np.asarray(polarity[i] != polarity[j])


def _corrections(rows: pl.DataFrame, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """A correction and a pattern (the correction bars')."""
    correction, pattern = rows["correction"].to_numpy(), rows["pattern"].to_numpy()
    return np.asarray((correction[i] & pattern[j]) | (correction[j] & pattern[i]))
