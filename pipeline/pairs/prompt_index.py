"""The night's near-identical prompt index: yesterday's, searched only for the prompts it lacks."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from pipeline.neighbors import NeighborIndex, texts_to_vectorize, update_index
from pipeline.pairs.same_prompt import PROMPT_KEYS, prompt_texts
from pipeline.pairs.table import PairConfig
from pipeline.vectors import TextVectors


def embedding_model(embeddings: pl.DataFrame) -> str | None:
    """The model the interactions were embedded with (the first by name); None before any was."""
    models = embeddings["model"].drop_nulls().unique().sort()
    return None if models.is_empty() else str(models[0])


def refresh_prompt_index(
    interactions: pl.DataFrame,
    embeddings: pl.DataFrame,
    previous: NeighborIndex | None,
    vectors_of: Callable[[str, pl.Series], TextVectors],
    model: str,
    config: PairConfig,
) -> NeighborIndex:
    """The index over every prompt with a skill, fetching vectors (`vectors_of(model, hashes)`)
    only for the groups that hold a prompt `previous` has not searched."""
    keys = list(PROMPT_KEYS)
    texts = prompt_texts(interactions, embeddings)
    needed = texts_to_vectorize(texts, previous, keys, model)
    vectors = vectors_of(model, needed)
    return update_index(texts, vectors, previous, keys, config.similarity_threshold, model)
