"""Near-identical texts: an incremental index of the distinct texts of each group whose vectors have
cosine ≥ a threshold. A night searches only the texts it has not seen, against their whole group."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline import tables
from pipeline.storage.vectors import TextVectors

# Similarities held in memory at once by a search (≈ 32 MB of float32), whatever the group size.
MAX_BLOCK_CELLS = 8_000_000
# Vectors fetched at once for the groups searched together (≈ 150 MB at 384 dimensions): each
# fetch reads the tenant's whole embedding cache, so groups share one while they fit in it.
MAX_FETCHED_VECTORS = 100_000


def index_schema(keys: Sequence[str]) -> dict[str, pl.DataType]:
    """The texts already searched, per group, and the model their vectors came from (the
    columns of lake table prompt_index beside the group keys)."""
    return {
        **{k: pl.String() for k in keys},
        **tables.schema("prompt_index", ["text_hash", "model"]),
    }


def edge_schema(keys: Sequence[str]) -> dict[str, pl.DataType]:
    """One row per pair of near-identical texts of a group (text_hash_a < text_hash_b)."""
    pair = tables.schema("prompt_neighbors", ["text_hash_a", "text_hash_b", "similarity"])
    return {**{k: pl.String() for k in keys}, **pair}


@dataclass(frozen=True)
class NeighborIndex:
    texts: pl.DataFrame  # index_schema(keys)
    edges: pl.DataFrame  # edge_schema(keys)
    searched: int = 0  # texts searched by the call that made this index

    @classmethod
    def empty(cls, keys: Sequence[str]) -> NeighborIndex:
        return cls(pl.DataFrame(schema=index_schema(keys)), pl.DataFrame(schema=edge_schema(keys)))


def search(
    query: np.ndarray, base: np.ndarray, threshold: float, max_block_cells: int = MAX_BLOCK_CELLS
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query row, base row, cosine) of every pair of unit rows with cosine ≥ threshold.

    Exact: blocked matrix products, each block at most `max_block_cells` similarities.
    """
    rows_per_block = max(1, max_block_cells // max(len(base), 1))
    found_q, found_b, found_s = [], [], []
    for start in range(0, len(query), rows_per_block):
        sims = query[start : start + rows_per_block] @ base.T
        q, b = np.nonzero(sims >= threshold)
        found_q.append(q + start)
        found_b.append(b)
        found_s.append(sims[q, b])
    if not found_q:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.float32)
    return (
        np.concatenate(found_q).astype(np.int64),
        np.concatenate(found_b).astype(np.int64),
        np.concatenate(found_s).astype(np.float32),
    )


def update_index(
    texts: pl.DataFrame,
    vectors_of: Callable[[pl.Series], TextVectors],
    previous: NeighborIndex | None,
    keys: Sequence[str],
    threshold: float,
    model: str,
    max_fetched: int = MAX_FETCHED_VECTORS,
) -> NeighborIndex:
    """The index over `texts` (keys + text_hash), reusing `previous` for the texts it has searched.

    Only texts new to their group are searched, against every text of the group, so edges between
    two old texts are never recomputed. `vectors_of(hashes)` gives the vectors of groups with a
    new text, asked for consecutive groups together up to `max_fetched` vectors (a larger group
    alone), so one fetch serves several groups and the vectors held at once stay bounded. An
    index made with another model's vectors is discarded. Texts that left a group drop out with
    their edges.
    """
    keys = list(keys)
    texts = texts.select(*keys, "text_hash").unique().sort(*keys, "text_hash")
    if previous is None or (previous.texts["model"] != model).any():
        previous = NeighborIndex.empty(keys)
    new = texts.join(previous.texts, on=[*keys, "text_hash"], how="anti")
    found = []
    for batch in _batches(_groups(new, texts, keys), max_fetched):
        vectors = vectors_of(pl.concat([group["text_hash"] for group in batch]))
        found += [_group_edges(group, new, vectors, keys, threshold) for group in batch]
    kept = previous.edges
    for side in ("a", "b"):  # edges whose texts are all still there
        kept = kept.join(
            texts.rename({"text_hash": f"text_hash_{side}"}), on=[*keys, f"text_hash_{side}"]
        ).select(list(edge_schema(keys)))
    # Disjoint: a kept edge joins two old texts, a found one has a new text.
    edges = pl.concat([kept, *found]).sort(*keys, "text_hash_a", "text_hash_b")
    return NeighborIndex(
        texts=texts.with_columns(model=pl.lit(model, pl.String)),
        edges=edges,
        searched=new.height,
    )


def _groups(new: pl.DataFrame, texts: pl.DataFrame, keys: list[str]) -> list[pl.DataFrame]:
    """Every text of each group that has a new text."""
    touched = new.select(keys).unique()
    return texts.join(touched, on=keys, how="semi").partition_by(keys, maintain_order=True)


def _batches(groups: list[pl.DataFrame], max_rows: int) -> list[list[pl.DataFrame]]:
    """Consecutive groups together while their rows fit in `max_rows` (a larger group alone)."""
    batches: list[list[pl.DataFrame]] = []
    rows = 0
    for group in groups:
        if not batches or rows + group.height > max_rows:
            batches.append([])
            rows = 0
        batches[-1].append(group)
        rows += group.height
    return batches


def _group_edges(
    group: pl.DataFrame,
    new: pl.DataFrame,
    vectors: TextVectors,
    keys: list[str],
    threshold: float,
) -> pl.DataFrame:
    """The group's edges with a new text, each once."""
    hashes = group["text_hash"]
    base = vectors.of(hashes)
    is_new = hashes.is_in(
        group.join(new, on=[*keys, "text_hash"], how="semi")["text_hash"].implode()
    )
    new_rows = is_new.to_numpy()
    query_rows = np.flatnonzero(new_rows)
    q, b, sims = search(base[query_rows], base, threshold)
    q = query_rows[q]
    keep = (q != b) & ~(new_rows[b] & (q > b))  # two new texts: found from both sides
    edge = pl.DataFrame(
        {"x": hashes.gather(q[keep]), "y": hashes.gather(b[keep]), "similarity": sims[keep]}
    )
    return edge.select(
        *[pl.lit(group[k][0], pl.String).alias(k) for k in keys],
        pl.min_horizontal("x", "y").alias("text_hash_a"),
        pl.max_horizontal("x", "y").alias("text_hash_b"),
        pl.col("similarity").cast(pl.Float32),
    )
