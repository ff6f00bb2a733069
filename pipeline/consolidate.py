"""Consolidation (SPEC §4.4): near-duplicate memories → one summary per cluster, and reinforcement."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from pipeline.clustering import MAX_BLOCK, assign_to_clusters, cluster_labels
from pipeline.conflicts import SOURCE_RANK, UNKNOWN_RANK, numbers, polarity, subject
from pipeline.contracts import MemoryType
from pipeline.decay import BASE_CONFIDENCE, CONFIDENCE_CAP
from pipeline.frames import changed_groups, codes, group_bounds, group_fingerprints, replace_groups
from pipeline.vectors import TextVectors

_TS = pl.Datetime("us", "UTC")
TYPE_COUNT_FIELDS = [*(str(t) for t in MemoryType), "interaction"]

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
    # would). Calibrated on paraphrases judged by people, not on the generator's own phrasings
    # (`python -m bench.run --only paraphrase`): 480 STS-B sentence pairs (score ≥ 4 of 5 = same
    # meaning), the largest threshold on a 0.05 grid whose merges, with the cannot-link rules, keep
    # precision ≥ 0.8 on both halves: 0.30 — precision 0.80 / 0.81, recall 0.93 / 0.88 (dev / test);
    # the earlier 0.45 merged pairs raters called "same topic, different facts" (precision 0.72 /
    # 0.65). Looser re-wordings such as "Prefers email over phone calls" / "Likes to be contacted by
    # email rather than by phone" (0.31) stay apart. Facts on unrelated subjects sit ≥ 0.9 apart,
    # but two facts on one subject about one named person can be closer than any paraphrase
    # ("X prefers meetings in the afternoon" / "X prefers morning meetings" 0.07): no threshold
    # separates those, only a cannot-link rule could.
    statement_distance: float = 0.30
    # Interaction inputs are many per system × kind and topically close (every request is about
    # orders or passwords), so only near-identical requests merge: re-worded repeats score
    # 0.94–0.96 ("Where is my order?" / "Where's my order?"), different requests ≤ 0.3. On the
    # STS-B pairs (no cannot-link rules for requests): precision 0.94 / 0.91, recall 0.65 / 0.68.
    interaction_distance: float = 0.15
    # Complete linkage needs the dense n × n distance matrix (O(n²) memory/time). Groups are first
    # cut into connected components of the radius graph at the same threshold — complete-linkage
    # clusters never cross them, so this is exact — and a component larger than this is clustered
    # in blocks of this size along its first principal axis (can split a near-duplicate pair
    # across blocks, never merges an unrelated one).
    max_block: int = MAX_BLOCK
    # §4.2: base confidence per type when a statement carries none, and the type caps.
    base_confidence: dict[str, float] = field(default_factory=lambda: dict(BASE_CONFIDENCE))
    confidence_cap: dict[str, float] = field(default_factory=lambda: dict(CONFIDENCE_CAP))
    # §4.2: each repeat adds +0.1 (capped at the type cap); interactions: importance or 0.5.
    reinforcement_step: float = 0.1
    interaction_default_confidence: float = 0.5


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
    units = units.sort(*keys, "memory_id", nulls_last=True)
    rows = vectors.rows(units["text_hash"])
    if not dedupe:
        polarity = units["polarity"].to_numpy()
        digits = codes(units["subject_numbers"])
        links = _cannot_links(units, conflicts).to_numpy().reshape(-1, 2)
    labels = np.empty(units.height, dtype=np.int64)
    next_label = 0
    for start, end in group_bounds(units, keys):
        if end - start == 1:
            labels[start] = next_label
            next_label += 1
            continue
        cannot = None if dedupe else _group_links(start, end, polarity, digits, links)
        sub = cluster_labels(vectors.matrix[rows[start:end]], threshold, cannot, config.max_block)
        labels[start:end] = sub + next_label
        next_label += int(sub.max()) + 1
    labelled = units.with_columns(pl.Series("cluster", labels))
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
    groups: pl.DataFrame  # fingerprints of the statement groups (frames.group_fingerprints)
    clusters_recomputed: int = 0  # clusters whose summary was (re)made by this call
    clusters_reused: int = 0  # clusters whose summary was carried over from `previous`


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


STATEMENT_KEYS = ["tenant_id", "contact_id"]
INTERACTION_KEYS = ["tenant_id", "system", "kind"]


def consolidate(
    statements: pl.DataFrame,
    interactions: pl.DataFrame,
    embeddings: pl.DataFrame,
    conflicts: pl.DataFrame,
    vectors: TextVectors,
    config: ConsolidationConfig | None = None,
    previous: Consolidation | None = None,
    salt: str = "",
) -> Consolidation:
    """Statements per tenant × contact (conflicting pairs split), interactions per tenant ×
    system × kind; `embeddings` is the memory_embeddings table (which text each memory has),
    `vectors` the vectors of those texts.

    With `previous` (last night's result, made with the same `salt`: model and config), the work
    is incremental: a contact whose statements did not change keeps its clusters; a new
    interaction text joins an existing cluster within the threshold of every member
    (`assign_to_clusters`) or a new one; only clusters whose members changed are summarised again.
    """
    config = config or ConsolidationConfig()
    previous = previous if previous is not None and _same_salt(previous, salt) else None
    statements_part, groups, reinforced = _statement_scope(
        statement_members(statements, embeddings, config),
        conflicts,
        vectors,
        config,
        previous,
        salt,
    )
    interactions_part = _interaction_scope(
        interaction_members(interactions, embeddings, config), vectors, config, previous
    )
    parts = [statements_part, interactions_part]
    return Consolidation(
        summaries=pl.concat([p.summaries for p in parts])
        .cast(pl.Schema(SUMMARY_SCHEMA))
        .sort("tenant_id", "scope", "cluster_id"),
        reinforcement=reinforced,
        groups=groups,
        clusters_recomputed=sum(p.recomputed for p in parts),
        clusters_reused=sum(p.reused for p in parts),
    )


@dataclass(frozen=True)
class _Scope:
    summaries: pl.DataFrame
    recomputed: int
    reused: int


def _same_salt(previous: Consolidation, salt: str) -> bool:
    return previous.groups.is_empty() or bool((previous.groups["salt"] == salt).all())


def _summarised(
    labelled: pl.DataFrame, scope: str, vectors: TextVectors, config: ConsolidationConfig
) -> pl.DataFrame:
    """Summaries (with the integer `cluster`) of labelled members."""
    if labelled.is_empty():
        return pl.DataFrame(schema={"cluster": pl.Int64, **SUMMARY_SCHEMA})
    return _summaries(labelled.with_columns(_centroid_similarity(labelled, vectors)), scope, config)


def _statement_scope(
    members: pl.DataFrame,
    conflicts: pl.DataFrame,
    vectors: TextVectors,
    config: ConsolidationConfig,
    previous: Consolidation | None,
    salt: str,
) -> tuple[_Scope, pl.DataFrame, pl.DataFrame]:
    keys = STATEMENT_KEYS
    groups = group_fingerprints(members, keys, "memory_id", salt)
    todo = changed_groups(groups, previous.groups if previous else None, keys)
    changed = members.join(todo, on=keys, how="semi", nulls_equal=True)
    labelled = (
        _label_groups(changed, keys, config.statement_distance, conflicts, config, False, vectors)
        if changed.height
        else changed.with_columns(pl.lit(None, pl.Int64).alias("cluster"))
    )
    summaries = _summarised(labelled, "statement", vectors, config)
    fresh = reinforcement(
        labelled.join(summaries.select("cluster", "cluster_id"), on="cluster"), conflicts
    )
    summaries = summaries.drop("cluster")
    reused = 0
    if previous is not None:
        before = previous.summaries.filter(pl.col("scope") == "statement")
        kept = replace_groups(before, summaries, todo, groups, keys)
        reused = kept.height - summaries.height
        summaries = kept
        fresh = pl.concat(
            [
                previous.reinforcement.join(
                    changed.select("tenant_id", "memory_id"),
                    on=["tenant_id", "memory_id"],
                    how="anti",
                ).join(
                    members.select("tenant_id", "memory_id"),
                    on=["tenant_id", "memory_id"],
                    how="semi",
                ),
                fresh,
            ]
        )
    return (
        _Scope(summaries, summaries.height - reused, reused),
        groups,
        fresh.sort("tenant_id", "memory_id"),
    )


def _interaction_scope(
    members: pl.DataFrame,
    vectors: TextVectors,
    config: ConsolidationConfig,
    previous: Consolidation | None,
) -> _Scope:
    keys = INTERACTION_KEYS
    threshold = config.interaction_distance
    before = (
        previous.summaries.filter(pl.col("scope") == "interaction")
        if previous is not None
        else pl.DataFrame(schema=SUMMARY_SCHEMA)
    )
    if before.is_empty():
        labelled = _label_groups(members, keys, threshold, pl.DataFrame(), config, True, vectors)
        summaries = _summarised(labelled, "interaction", vectors, config).drop("cluster")
        return _Scope(summaries, summaries.height, 0)
    # Last night's clusters as labels of distinct texts (identical texts share a cluster).
    old = (
        before.with_row_index("cluster")
        .select("cluster", "tenant_id", "n_members", pl.col("member_ids").alias("memory_id"))
        .explode("memory_id")
        .join(
            members.select("tenant_id", "memory_id", *keys[1:], "text_hash"),
            on=["tenant_id", "memory_id"],
        )
        .unique([*keys, "text_hash"], keep="first")
        .select(*keys, "text_hash", pl.col("cluster").cast(pl.Int64))
    )
    units = members.select(*keys, "text_hash").unique()
    new = units.join(old, on=[*keys, "text_hash"], how="anti", nulls_equal=True)
    next_label = len(before)
    assigned = []
    for key, fresh in new.partition_by(keys, as_dict=True, maintain_order=True).items():
        known = old.filter(
            pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in zip(keys, key, strict=True))
        )
        fresh_vectors = vectors.of(fresh["text_hash"])
        labels = assign_to_clusters(
            fresh_vectors, vectors.of(known["text_hash"]), known["cluster"].to_numpy(), threshold
        )
        left = np.flatnonzero(labels < 0)
        if len(left):
            sub = cluster_labels(fresh_vectors[left], threshold, None, config.max_block)
            labels[left] = sub + next_label
            next_label += int(sub.max()) + 1
        assigned.append(fresh.with_columns(pl.Series("cluster", labels, dtype=pl.Int64)))
    text_labels = pl.concat([old, *assigned], how="vertical_relaxed")
    labelled = members.join(text_labels, on=[*keys, "text_hash"], nulls_equal=True)
    sizes = labelled.group_by("cluster").agg(pl.len().cast(pl.Int64).alias("n"))
    unchanged = (
        before.with_row_index("cluster")
        .select(pl.col("cluster").cast(pl.Int64), "n_members")
        .join(sizes, on="cluster")
        .filter(pl.col("n") == pl.col("n_members"))
    )
    # Events never change: a cluster with exactly last night's number of members is last
    # night's cluster (it only ever gains members), so its summary stands.
    kept = (
        before.with_row_index("cluster")
        .with_columns(pl.col("cluster").cast(pl.Int64))
        .join(unchanged.select("cluster"), on="cluster", how="semi")
    )
    changed = labelled.join(unchanged.select("cluster"), on="cluster", how="anti")
    summaries = _summarised(changed, "interaction", vectors, config)
    return _Scope(
        pl.concat([kept.drop("cluster"), summaries.drop("cluster")]).cast(
            pl.Schema(SUMMARY_SCHEMA)
        ),
        summaries.height,
        kept.height,
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
