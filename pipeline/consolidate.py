"""Consolidation (SPEC §4.4): near-duplicate memories → one summary per cluster, and reinforcement."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import squareform

from pipeline.conflicts import SOURCE_RANK, UNKNOWN_RANK, numbers, polarity, subject
from pipeline.contracts import MemoryType
from pipeline.decay import BASE_CONFIDENCE, CONFIDENCE_CAP
from pipeline.vectors import TextVectors

log = logging.getLogger(__name__)

_TS = pl.Datetime("us", "UTC")
TYPE_COUNT_FIELDS = [*(str(t) for t in MemoryType), "interaction"]
# A distance no threshold reaches: how a cannot-link pair enters complete linkage.
CANNOT_LINK = 4.0

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "scope": pl.String(),
    "contact_id": pl.String(),
    "system": pl.String(),
    "kind": pl.String(),
    "cluster_id": pl.String(),
    "summary": pl.String(),
    "representative_id": pl.String(),
    "member_ids": pl.List(pl.String()),
    "n_members": pl.Int64(),
    "n_by_type": pl.Struct({name: pl.Int64() for name in TYPE_COUNT_FIELDS}),
    "confidence": pl.Float64(),
    "tags": pl.List(pl.String()),
    "first_seen": _TS,
    "last_seen": _TS,
}
REINFORCEMENT_SCHEMA: dict[str, pl.DataType] = {
    "tenant_id": pl.String(),
    "memory_id": pl.String(),
    "cluster_id": pl.String(),
    "reinforcement_count": pl.Int64(),
    "last_reinforced_at": _TS,
    # Every repeat dated, so decay as of an earlier day counts only the repeats known by then.
    "reinforced_at": pl.List(_TS),
}


@dataclass(frozen=True)
class ConsolidationConfig:
    # Complete linkage on cosine distance: a cluster is kept only if EVERY pair of its members is
    # within the threshold, so a chain of "a bit similar" memories never merges (single linkage
    # would). MiniLM on statements: paraphrases 0.61–0.88 ("Prefers email over phone calls" /
    # "Would rather get an email than a phone call" 0.81; "likes to schedule calls after lunch" /
    # "Afternoon slots work best for meetings" 0.61), unrelated statements about one person
    # ≤ 0.47 — a distance of 0.45 (similarity ≥ 0.55) sits in the middle of the gap.
    statement_distance: float = 0.45
    # Interaction inputs are many per system × kind and topically close (every request is about
    # orders or passwords), so only near-identical requests merge: re-worded repeats score
    # 0.94–0.96 ("Where is my order?" / "Where's my order?"), different requests ≤ 0.3.
    interaction_distance: float = 0.15
    # Complete linkage needs the dense n × n distance matrix (O(n²) memory/time). Groups are first
    # cut into connected components of the radius graph at the same threshold — complete-linkage
    # clusters never cross them, so this is exact — and a component larger than this is clustered
    # in blocks of this size along its first principal axis (can split a near-duplicate pair
    # across blocks, never merges an unrelated one).
    max_block: int = 2_000
    # §4.2: base confidence per type when a statement carries none, and the type caps.
    base_confidence: dict[str, float] = field(default_factory=lambda: dict(BASE_CONFIDENCE))
    confidence_cap: dict[str, float] = field(default_factory=lambda: dict(CONFIDENCE_CAP))
    # §4.2: each repeat adds +0.1 (capped at the type cap); interactions: importance or 0.5.
    reinforcement_step: float = 0.1
    interaction_default_confidence: float = 0.5


def _principal_order(vectors: np.ndarray) -> np.ndarray:
    centred = vectors - vectors.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return np.argsort(centred @ vt[0], kind="stable")


def _complete_linkage(
    vectors: np.ndarray, threshold: float, cannot_link: np.ndarray | None
) -> np.ndarray:
    n = len(vectors)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    distance = np.clip(1.0 - vectors @ vectors.T, 0.0, 2.0).astype(np.float64)
    if cannot_link is not None and len(cannot_link):
        distance[cannot_link[:, 0], cannot_link[:, 1]] = CANNOT_LINK
        distance[cannot_link[:, 1], cannot_link[:, 0]] = CANNOT_LINK
    np.fill_diagonal(distance, 0.0)
    if n == 2:
        return np.array([0, 0 if distance[0, 1] <= threshold else 1], dtype=np.int64)
    flat = fcluster(linkage(squareform(distance, checks=False), "complete"), threshold, "distance")
    _, labels = np.unique(flat, return_inverse=True)
    return labels.astype(np.int64)


def _components(vectors: np.ndarray, threshold: float, max_block_cells: int) -> np.ndarray:
    """Connected components of the graph "cosine distance ≤ threshold", one block of rows at a
    time (a group of 56k texts at 0.15 has 172M such pairs: never held at once)."""
    n = len(vectors)
    component = np.arange(n)
    rows = max(1, max_block_cells // n)
    for start in range(0, n, rows):
        q, b = np.nonzero(vectors[start : start + rows] @ vectors.T >= 1.0 - threshold)
        graph = csr_matrix(
            (np.ones(len(q), dtype=np.int8), (component[q + start], component[b])), shape=(n, n)
        )
        _, merged = connected_components(graph, directed=False)
        component = merged[component]
    return np.unique(component, return_inverse=True)[1]


def cluster_labels(
    vectors: np.ndarray,
    threshold: float,
    cannot_link: np.ndarray | None = None,
    max_block: int = ConsolidationConfig.max_block,
    max_block_cells: int = 8_000_000,
) -> np.ndarray:
    """Cluster labels (0..k-1) of unit vectors: complete linkage at a cosine-distance threshold.

    `cannot_link` holds index pairs (m × 2) that must end in different clusters (conflicts).
    """
    n = len(vectors)
    if n <= max_block:
        return _complete_linkage(vectors, threshold, cannot_link) if n else np.zeros(0, np.int64)
    component = _components(vectors, threshold, max_block_cells)
    labels = np.full(n, -1, dtype=np.int64)
    next_label = 0
    links = cannot_link if cannot_link is not None else np.zeros((0, 2), dtype=np.int64)
    for members in np.split(
        np.argsort(component, kind="stable"), np.flatnonzero(np.diff(np.sort(component))) + 1
    ):
        order = (
            members if len(members) <= max_block else members[_principal_order(vectors[members])]
        )
        if len(members) > max_block:
            log.info("component of %d texts clustered in blocks of %d", len(members), max_block)
        for begin in range(0, len(order), max_block):
            block = order[begin : begin + max_block]
            local = np.full(n, -1, dtype=np.int64)
            local[block] = np.arange(len(block))
            inside = links[(local[links[:, 0]] >= 0) & (local[links[:, 1]] >= 0)]
            sub = _complete_linkage(vectors[block], threshold, local[inside])
            labels[block] = sub + next_label
            next_label += int(sub.max()) + 1
    return labels


def _cannot_links(units: pl.DataFrame, conflicts: pl.DataFrame) -> pl.DataFrame:
    """Global (i, j) index pairs of `units` rows that may not share a cluster, by a conflict."""
    index = units.select("tenant_id", "memory_id", pl.int_range(pl.len()).alias("i"))
    if conflicts.is_empty():
        return pl.DataFrame(schema={"i": pl.Int64, "j": pl.Int64})
    return (
        conflicts.join(index.rename({"memory_id": "memory_id_a"}), on=["tenant_id", "memory_id_a"])
        .join(index.rename({"memory_id": "memory_id_b", "i": "j"}), on=["tenant_id", "memory_id_b"])
        .select(
            pl.min_horizontal("i", "j").cast(pl.Int64).alias("i"),
            pl.max_horizontal("i", "j").cast(pl.Int64).alias("j"),
        )
        .sort("i")
    )


def _group_links(
    start: int, end: int, polarity: np.ndarray, digits: np.ndarray, conflicts: np.ndarray
) -> np.ndarray:
    """Local index pairs of rows start..end that cannot be repeats of each other even when their
    vectors are close: opposite polarity ("Don't schedule meetings after 5pm" / "Schedule meetings
    before 9am" ≈ 0.7), different numbers ("after 5pm" / "after 6pm"), or a conflict."""
    pol, dig = polarity[start:end], digits[start:end]
    mask = (pol[:, None] != pol[None, :]) | (dig[:, None] != dig[None, :])
    lo, hi = np.searchsorted(conflicts[:, 0], [start, end])
    mask[conflicts[lo:hi, 0] - start, conflicts[lo:hi, 1] - start] = True
    i, j = np.nonzero(np.triu(mask | mask.T, k=1))
    return np.stack([i, j], axis=1).astype(np.int64)


def _label_groups(
    members: pl.DataFrame,
    keys: list[str],
    threshold: float,
    conflicts: pl.DataFrame,
    config: ConsolidationConfig,
    dedupe: bool,
    vectors: TextVectors,
) -> pl.DataFrame:
    """Adds `cluster` (a global integer) to members, clustering within each group of `keys`.

    With `dedupe`, identical texts are trivially one cluster: only distinct texts are clustered.
    Otherwise (statements) the cannot-link rules of `_group_links` apply.
    """
    units = members.unique([*keys, "text_hash"], keep="first") if dedupe else members
    units = units.sort(*keys, "memory_id", nulls_last=True).with_columns(
        pl.struct(keys).rle_id().alias("_group")
    )
    rows = vectors.rows(units["text_hash"])
    group = units["_group"].to_numpy()
    ends = np.append(np.flatnonzero(np.diff(group)) + 1, len(group))
    starts = np.concatenate([[0], ends[:-1]]).astype(np.int64)
    if not dedupe:
        polarity = units["polarity"].to_numpy()
        digits = units["subject_numbers"].cast(pl.Categorical).to_physical().to_numpy()
        links = _cannot_links(units, conflicts).to_numpy().reshape(-1, 2)
    labels = np.empty(len(group), dtype=np.int64)
    next_label = 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        if end - start == 1:
            labels[start] = next_label
            next_label += 1
            continue
        cannot = None if dedupe else _group_links(start, end, polarity, digits, links)
        sub = cluster_labels(vectors.matrix[rows[start:end]], threshold, cannot, config.max_block)
        labels[start:end] = sub + next_label
        next_label += int(sub.max()) + 1
    labelled = units.drop("_group").with_columns(pl.Series("cluster", labels))
    if not dedupe:
        return labelled
    return members.join(
        labelled.select(*keys, "text_hash", "cluster"),
        on=[*keys, "text_hash"],
        how="left",
        nulls_equal=True,
    )


def _centroid_similarity(members: pl.DataFrame, vectors: TextVectors) -> pl.Series:
    """e_i · Σ_cluster e_j: the member with the largest value is the cluster's medoid.

    Computed once per distinct (cluster, text), weighting each text by its number of members, so
    a cluster of 10,000 identical requests costs one vector.
    """
    texts = members.group_by("cluster", "text_hash").agg(pl.len().alias("n"))
    vectors_of = vectors.of(texts["text_hash"])
    _, inverse = np.unique(texts["cluster"].to_numpy(), return_inverse=True)
    sums = np.zeros((int(inverse.max()) + 1 if len(inverse) else 0, vectors.dim), np.float32)
    np.add.at(sums, inverse, vectors_of * texts["n"].to_numpy()[:, None].astype(np.float32))
    centrality = texts.select(
        "cluster",
        "text_hash",
        pl.Series("centrality", np.einsum("ij,ij->i", vectors_of, sums[inverse])),
    )
    return members.join(centrality, on=["cluster", "text_hash"], how="left", maintain_order="left")[
        "centrality"
    ]


def _summaries(members: pl.DataFrame, scope: str, config: ConsolidationConfig) -> pl.DataFrame:
    """One row per cluster; members are ordered best-first so the first one represents."""
    prefix = "s" if scope == "statement" else "i"
    counts = [
        (pl.col("memory_type") == name).sum().cast(pl.Int64).alias(name)
        for name in TYPE_COUNT_FIELDS
    ]
    grouped = (
        members.sort(
            "cluster",
            "priority",
            "centrality",
            "ts",
            "memory_id",
            descending=[False, False, True, True, False],
        )
        .group_by("cluster", maintain_order=True)
        .agg(
            pl.col("tenant_id").first(),
            pl.when(pl.col("contact_id").n_unique() == 1)
            .then(pl.col("contact_id").first())
            .alias("contact_id"),
            pl.col("system").first(),
            pl.col("kind").first(),
            pl.col("text").first().alias("summary"),
            pl.col("memory_id").first().alias("representative_id"),
            pl.col("memory_type").first().alias("representative_type"),
            pl.col("memory_id").sort().alias("member_ids"),
            pl.len().cast(pl.Int64).alias("n_members"),
            pl.struct(counts).alias("n_by_type"),
            pl.col("confidence").max().alias("max_confidence"),
            pl.col("tags").explode().drop_nulls().unique().sort().alias("tags"),
            pl.col("ts").min().alias("first_seen"),
            pl.col("ts").max().alias("last_seen"),
        )
    )
    if scope == "statement":
        cap = pl.col("representative_type").replace_strict(
            config.confidence_cap, default=1.0, return_dtype=pl.Float64
        )
        combined = pl.min_horizontal(
            cap, pl.col("max_confidence") + config.reinforcement_step * (pl.col("n_members") - 1)
        )
    else:
        combined = pl.col("max_confidence")
    return grouped.with_columns(
        pl.lit(scope).alias("scope"),
        (pl.lit(f"{prefix}-") + pl.col("representative_id")).alias("cluster_id"),
        combined.alias("confidence"),
    ).select("cluster", *SUMMARY_SCHEMA)


def statement_members(
    statements: pl.DataFrame, embeddings: pl.DataFrame, config: ConsolidationConfig
) -> pl.DataFrame:
    rank = pl.col("memory_type").replace_strict(
        SOURCE_RANK, default=UNKNOWN_RANK, return_dtype=pl.Int32
    )
    base = pl.col("memory_type").replace_strict(
        config.base_confidence, default=0.5, return_dtype=pl.Float64
    )
    return statements.select(
        "tenant_id",
        pl.col("event_id").alias("memory_id"),
        "contact_id",
        pl.lit(None, pl.String).alias("system"),
        pl.lit(None, pl.String).alias("kind"),
        "memory_type",
        pl.col("content").alias("text"),
        "ts",
        pl.col("confidence").fill_null(base).alias("confidence"),
        pl.col("tags"),
        rank.alias("priority"),
        polarity(pl.col("content")).alias("polarity"),
        numbers(subject(pl.col("content"))).alias("subject_numbers"),
    ).join(
        embeddings.select("tenant_id", "memory_id", "text_hash"),
        on=["tenant_id", "memory_id"],
        how="inner",
    )


def interaction_members(
    interactions: pl.DataFrame, embeddings: pl.DataFrame, config: ConsolidationConfig
) -> pl.DataFrame:
    return interactions.select(
        "tenant_id",
        pl.col("event_id").alias("memory_id"),
        "contact_id",
        "system",
        "kind",
        pl.lit("interaction").alias("memory_type"),
        pl.col("input").alias("text"),
        "ts",
        pl.col("importance").fill_null(config.interaction_default_confidence).alias("confidence"),
        pl.col("tags"),
        pl.lit(0, pl.Int32).alias("priority"),
    ).join(
        embeddings.select("tenant_id", "memory_id", "text_hash"),
        on=["tenant_id", "memory_id"],
        how="inner",
    )


@dataclass(frozen=True)
class Consolidation:
    summaries: pl.DataFrame  # SUMMARY_SCHEMA
    reinforcement: pl.DataFrame  # REINFORCEMENT_SCHEMA, one row per statement
    members: pl.DataFrame  # tenant_id, memory_id, scope, cluster_id


def reinforcement(members: pl.DataFrame, conflicts: pl.DataFrame) -> pl.DataFrame:
    """Per statement: how many OTHER members of its cluster repeat it (conflicting ones never do)."""
    keyed = members.select("tenant_id", "memory_id", "cluster_id", "ts")
    pairs = keyed.join(
        keyed.rename({"memory_id": "other_id", "ts": "other_ts"}),
        on=["tenant_id", "cluster_id"],
    ).filter(pl.col("memory_id") != pl.col("other_id"))
    if conflicts.height:
        against = conflicts.select("tenant_id", "memory_id_a", "memory_id_b")
        both_ways = pl.concat(
            [
                against.rename({"memory_id_a": "memory_id", "memory_id_b": "other_id"}),
                against.select(
                    "tenant_id",
                    pl.col("memory_id_b").alias("memory_id"),
                    pl.col("memory_id_a").alias("other_id"),
                ),
            ]
        )
        pairs = pairs.join(both_ways, on=["tenant_id", "memory_id", "other_id"], how="anti")
    counted = pairs.group_by("tenant_id", "memory_id").agg(
        pl.len().cast(pl.Int64).alias("reinforcement_count"),
        pl.col("other_ts").max().alias("last_reinforced_at"),
        pl.col("other_ts").sort().alias("reinforced_at"),
    )
    return (
        keyed.join(counted, on=["tenant_id", "memory_id"], how="left")
        .with_columns(
            pl.col("reinforcement_count").fill_null(0),
            pl.col("reinforced_at").fill_null(pl.lit([], pl.List(_TS))),
        )
        .select(list(REINFORCEMENT_SCHEMA))
        .cast(pl.Schema(REINFORCEMENT_SCHEMA))
        .sort("tenant_id", "memory_id")
    )


def consolidate(
    statements: pl.DataFrame,
    interactions: pl.DataFrame,
    embeddings: pl.DataFrame,
    conflicts: pl.DataFrame,
    vectors: TextVectors,
    config: ConsolidationConfig | None = None,
) -> Consolidation:
    """Statements per tenant × contact (conflicting pairs split), interactions per tenant ×
    system × kind; `embeddings` is the memory_embeddings table (which text each memory has),
    `vectors` the vectors of those texts."""
    config = config or ConsolidationConfig()
    parts = []
    member_frames = []
    offset = 0
    for scope, members, keys, threshold, dedupe in (
        (
            "statement",
            statement_members(statements, embeddings, config),
            ["tenant_id", "contact_id"],
            config.statement_distance,
            False,
        ),
        (
            "interaction",
            interaction_members(interactions, embeddings, config),
            ["tenant_id", "system", "kind"],
            config.interaction_distance,
            True,
        ),
    ):
        if members.is_empty():
            continue
        labelled = _label_groups(members, keys, threshold, conflicts, config, dedupe, vectors)
        labelled = labelled.with_columns(pl.col("cluster") + offset)
        offset = int(labelled["cluster"].max()) + 1  # type: ignore[arg-type]
        labelled = labelled.with_columns(_centroid_similarity(labelled, vectors))
        summaries = _summaries(labelled, scope, config)
        member_frames.append(
            labelled.join(summaries.select("cluster", "cluster_id"), on="cluster").select(
                "tenant_id", "memory_id", pl.lit(scope).alias("scope"), "cluster_id", "ts"
            )
        )
        parts.append(summaries.drop("cluster"))
    summaries = pl.concat(parts) if parts else pl.DataFrame(schema=SUMMARY_SCHEMA)
    members = (
        pl.concat(member_frames)
        if member_frames
        else pl.DataFrame(
            schema={
                "tenant_id": pl.String,
                "memory_id": pl.String,
                "scope": pl.String,
                "cluster_id": pl.String,
                "ts": _TS,
            }
        )
    )
    statement_rows = members.filter(pl.col("scope") == "statement")
    return Consolidation(
        summaries=summaries.cast(pl.Schema(SUMMARY_SCHEMA)).sort(
            "tenant_id", "scope", "cluster_id"
        ),
        reinforcement=reinforcement(statement_rows, conflicts),
        members=members.drop("ts"),
    )


def membership_problems(summaries: pl.DataFrame, statements: pl.DataFrame) -> pl.DataFrame:
    """Statements that are in no statement cluster or in more than one (should be empty)."""
    placed = (
        summaries.filter(pl.col("scope") == "statement")
        .select("tenant_id", pl.col("member_ids").alias("memory_id"))
        .explode("memory_id")
        .group_by("tenant_id", "memory_id")
        .agg(pl.len().alias("n_clusters"))
    )
    return (
        statements.select("tenant_id", pl.col("event_id").alias("memory_id"))
        .join(placed, on=["tenant_id", "memory_id"], how="full", coalesce=True)
        .with_columns(pl.col("n_clusters").fill_null(0))
        .filter(pl.col("n_clusters") != 1)
    )
