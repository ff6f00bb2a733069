"""The night's near-identical prompt index: yesterday's, searched only for the prompts it lacks."""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from pipeline.preference.pairs.neighbors import NeighborIndex, update_index
from pipeline.preference.pairs.same_prompt import PROMPT_KEYS, prompt_texts
from pipeline.preference.pairs.table import PairConfig
from pipeline.storage.vectors import TextVectors


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
    for the groups that hold a prompt `previous` has not searched, several groups a fetch."""
    return update_index(
        prompt_texts(interactions, embeddings),
        lambda hashes: vectors_of(model, hashes),
        previous,
        list(PROMPT_KEYS),
        config.similarity_threshold,
        model,
    )
