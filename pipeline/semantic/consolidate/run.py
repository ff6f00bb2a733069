"""One night of consolidation: statements per contact, interactions per system × kind, redone
only where last night's groups changed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.frames import changed_groups, group_fingerprints, replace_groups
from pipeline.semantic.consolidate.clustering import assign_to_clusters, cluster_labels
from pipeline.semantic.consolidate.clusters import (
    centroid_similarity,
    fp32_reach,
    label_groups,
    reinforcement,
    summarise,
)
from pipeline.semantic.consolidate.members import (
    INTERACTION_KEYS,
    STATEMENT_KEYS,
    SUMMARY_SCHEMA,
    ConsolidationConfig,
    interaction_members,
    statement_members,
)
from pipeline.semantic.embed.exact import (
    ExactVectors,
    decision_vectors,
    exact_rows,
    near_new,
    with_exact,
)
from pipeline.storage.vectors import TextVectors


@dataclass(frozen=True)
class Consolidation:
    summaries: pl.DataFrame  # SUMMARY_SCHEMA
    reinforcement: pl.DataFrame  # REINFORCEMENT_SCHEMA, one row per statement
    groups: pl.DataFrame  # fingerprints of the statement groups (frames.group_fingerprints)
    clusters_recomputed: int = 0  # clusters whose summary was (re)made by this call
    clusters_reused: int = 0  # clusters whose summary was carried over from `previous`
    exact_texts: int = 0  # statement texts near a merge, decided on their fp32 vectors
    exact_interaction_texts: int = 0  # the same of interaction texts (requests)


def consolidate(
    statements: pl.DataFrame,
    interactions: pl.DataFrame,
    embeddings: pl.DataFrame,
    conflicts: pl.DataFrame,
    vectors: TextVectors,
    config: ConsolidationConfig | None = None,
    previous: Consolidation | None = None,
    salt: str = "",
    exact: ExactVectors | None = None,
) -> Consolidation:
    """Statements per tenant × contact (conflicting pairs split), interactions per tenant ×
    system × kind; `embeddings` is the memory_embeddings table (which text each memory has),
    `vectors` the vectors of those texts.

    With `previous` (last night's result, made with the same `salt`: model and config), the work
    is incremental: a contact whose statements did not change keeps its clusters; a new
    interaction text joins an existing cluster within the threshold of every member
    (`assign_to_clusters`) or a new one; only clusters whose members changed are summarised again.

    With `exact` (the fp32 vectors of given texts, when `vectors` are the int8 encoder's), the
    statements and requests near a merge are clustered on their fp32 vectors
    (`embed.exact.decision_vectors`), so the same memories merge alike on every CPU.
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
        exact,
    )
    interactions_part = _interaction_scope(
        interaction_members(interactions, embeddings, config), vectors, config, previous, exact
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
        exact_texts=statements_part.exact_texts,
        exact_interaction_texts=interactions_part.exact_texts,
    )


@dataclass(frozen=True)
class _Scope:
    summaries: pl.DataFrame
    recomputed: int
    reused: int
    exact_texts: int = 0


def _same_salt(previous: Consolidation, salt: str) -> bool:
    return previous.groups.is_empty() or bool((previous.groups["salt"] == salt).all())


def _summarised(
    labelled: pl.DataFrame, scope: str, vectors: TextVectors, config: ConsolidationConfig
) -> pl.DataFrame:
    """Summaries (with the integer `cluster`) of labelled members."""
    if labelled.is_empty():
        return pl.DataFrame(schema={"cluster": pl.Int64, **SUMMARY_SCHEMA})
    return summarise(labelled.with_columns(centroid_similarity(labelled, vectors)), scope, config)


def _statement_scope(
    members: pl.DataFrame,
    conflicts: pl.DataFrame,
    vectors: TextVectors,
    config: ConsolidationConfig,
    previous: Consolidation | None,
    salt: str,
    exact: ExactVectors | None,
) -> tuple[_Scope, pl.DataFrame, pl.DataFrame]:
    keys = STATEMENT_KEYS
    groups = group_fingerprints(members, keys, "memory_id", salt)
    todo = changed_groups(groups, previous.groups if previous else None, keys)
    changed = members.join(todo, on=keys, how="semi", nulls_equal=True)
    exact_texts = 0
    if exact is not None and config.decision_margin > 0:
        # The changed statements' vectors alone: the copy decision_vectors changes stays small
        # (a night's interaction vectors beside them are not copied).
        mine = vectors.only(changed["text_hash"])
        reach, eligible = fp32_reach(config, mine)
        vectors, exact_texts = decision_vectors(changed, keys, mine, reach, exact, eligible)
    labelled = (
        label_groups(changed, keys, config.statement_distance, conflicts, config, False, vectors)
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
        _Scope(summaries, summaries.height - reused, reused, exact_texts),
        groups,
        fresh.sort("tenant_id", "memory_id"),
    )


def _interaction_scope(
    members: pl.DataFrame,
    vectors: TextVectors,
    config: ConsolidationConfig,
    previous: Consolidation | None,
    exact: ExactVectors | None,
) -> _Scope:
    keys = INTERACTION_KEYS
    threshold = config.interaction_distance
    reach = threshold + config.decision_margin
    before = (
        previous.summaries.filter(pl.col("scope") == "interaction")
        if previous is not None
        else pl.DataFrame(schema=SUMMARY_SCHEMA)
    )
    units = members.unique([*keys, "text_hash"], keep="first", maintain_order=True)
    if before.is_empty():
        exact_texts = 0
        if exact is not None and config.decision_margin > 0:
            mine = vectors.only(units["text_hash"])
            vectors, exact_texts = decision_vectors(units, keys, mine, reach, exact)
        labelled = label_groups(members, keys, threshold, pl.DataFrame(), config, True, vectors)
        summaries = _summarised(labelled, "interaction", vectors, config).drop("cluster")
        return _Scope(summaries, summaries.height, 0, exact_texts)
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
    new = units.join(old, on=[*keys, "text_hash"], how="anti", nulls_equal=True)
    by_group = [
        (
            fresh,
            old.filter(
                pl.all_horizontal(pl.col(k).eq_missing(v) for k, v in zip(keys, key, strict=True))
            ),
        )
        for key, fresh in new.partition_by(keys, as_dict=True, maintain_order=True).items()
    ]
    exact_texts = 0
    if exact is not None and config.decision_margin > 0:
        vectors, exact_texts = _joining_vectors(by_group, units, vectors, reach, exact)
    assigned = _assign_new(by_group, vectors, threshold, config.max_block, len(before))
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
        exact_texts,
    )


def _assign_new(
    by_group: list[tuple[pl.DataFrame, pl.DataFrame]],
    vectors: TextVectors,
    threshold: float,
    max_block: int,
    next_label: int,
) -> list[pl.DataFrame]:
    """Per group (new texts, last night's labelled texts): the cluster each new text joins
    (`assign_to_clusters`), else a new one (numbered from `next_label`) clustered among those
    left."""
    assigned = []
    for fresh, known in by_group:
        fresh_vectors = vectors.of(fresh["text_hash"])
        labels = assign_to_clusters(
            fresh_vectors, vectors.of(known["text_hash"]), known["cluster"].to_numpy(), threshold
        )
        left = np.flatnonzero(labels < 0)
        if len(left):
            sub = cluster_labels(fresh_vectors[left], threshold, None, max_block)
            labels[left] = sub + next_label
            next_label += int(sub.max()) + 1
        assigned.append(
            fresh.select(*INTERACTION_KEYS, "text_hash", pl.Series("cluster", labels, pl.Int64))
        )
    return assigned


def _joining_vectors(
    by_group: list[tuple[pl.DataFrame, pl.DataFrame]],
    units: pl.DataFrame,
    vectors: TextVectors,
    reach: float,
    exact: ExactVectors,
) -> tuple[TextVectors, int]:
    """The vectors of every request's text (`units`: one member row per text), fp32 for every new
    text within `reach` of another new text or of a known one and for those known texts, so that
    whether a request joins last night's cluster is decided alike on every CPU."""
    hashes = []
    for fresh, known in by_group:
        near_fresh, near_known = near_new(
            vectors.of(fresh["text_hash"]), vectors.of(known["text_hash"]), reach
        )
        hashes += [fresh["text_hash"][near_fresh], known["text_hash"][near_known]]
    if not sum(len(h) for h in hashes):
        return vectors, 0
    near = units.join(pl.concat(hashes).to_frame(), on="text_hash", how="semi")
    # Every request's vector, not only the groups with new texts': a cluster elsewhere that lost
    # a member (retention, erasure) is summarised again too.
    return with_exact(vectors.only(units["text_hash"]), exact_rows(near), exact)


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
