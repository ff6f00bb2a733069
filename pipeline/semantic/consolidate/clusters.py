"""Members into clusters (conflicting statements never share one), one summary per cluster, and
how many others repeat each statement."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline import tables
from pipeline.frames import codes, group_bounds
from pipeline.semantic.consolidate.clustering import (
    Distances,
    cluster_labels,
)
from pipeline.semantic.consolidate.members import (
    REINFORCEMENT_SCHEMA,
    SUMMARY_SCHEMA,
    ConsolidationConfig,
)
from pipeline.semantic.embed.exact import Eligible, candidate_pairs
from pipeline.semantic.judgement import MergeRule, PairTexts, pair_probabilities, shipped
from pipeline.storage.vectors import TextVectors


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
    start: int,
    end: int,
    polarity: np.ndarray,
    digits: np.ndarray,
    speakers: np.ndarray,
    conflicts: np.ndarray,
) -> np.ndarray:
    """Local index pairs of rows start..end that cannot be repeats of each other even when their
    vectors are close: opposite polarity ("Don't schedule meetings after 5pm" / "Schedule meetings
    before 9am" ≈ 0.7), different numbers ("after 5pm" / "after 6pm"), two speakers (one person's
    line never reinforces another's: "Hey Tim!" / "Hey John!"), or a conflict."""
    pol, dig, who = polarity[start:end], digits[start:end], speakers[start:end]
    mask = (
        (pol[:, None] != pol[None, :])
        | (dig[:, None] != dig[None, :])
        | (who[:, None] != who[None, :])
    )
    lo, hi = np.searchsorted(conflicts[:, 0], [start, end])
    mask[conflicts[lo:hi, 0] - start, conflicts[lo:hi, 1] - start] = True
    i, j = np.nonzero(np.triu(mask | mask.T, k=1))
    return np.stack([i, j], axis=1).astype(np.int64)


def _value_links(
    texts: pl.Series, matrix: np.ndarray, bounds: list[tuple[int, int]], distance: float
) -> np.ndarray:
    """Global (i, j) row pairs of one group within cosine `distance` (those the distance rule
    could merge) that name another value of one subject (the value guard): words and values are
    read only for the rows of such pairs."""
    i, j, _ = candidate_pairs(matrix, bounds, distance)
    if not len(i):
        return np.zeros((0, 2), np.int64)
    involved, inverse = np.unique(np.concatenate([i, j]), return_inverse=True)
    pairs = PairTexts(texts.gather(involved), matrix[involved])
    other = pairs.other_value(inverse[: len(i)], inverse[len(i) :])
    return np.stack([i[other], j[other]], axis=1).astype(np.int64)


def merge_rule(config: ConsolidationConfig) -> MergeRule:
    """The judgement's cut and, for pairs with several sentences on a side, the distance rule."""
    return MergeRule(config.merge_probability, config.statement_distance)


def could_merge(config: ConsolidationConfig, vectors: TextVectors) -> Eligible:
    """The statement pairs (rows of a frame with `text` and `text_hash`) that the judgement could
    merge on some CPU: P(same) reaches the cut with their cosine raised by `decision_margin`, more
    than the int8 encoder's cosines move between CPUs. P grows with the cosine, so every other pair
    stays below the cut whatever kernel measured it; these are decided on fp32 vectors."""

    def eligible(units: pl.DataFrame, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        if not len(i):
            return np.zeros(0, bool)
        involved, inverse = np.unique(np.concatenate([i, j]), return_inverse=True)
        texts = PairTexts(
            units["text"].gather(involved), vectors.of(units["text_hash"].gather(involved))
        )
        a, b = inverse[: len(i)], inverse[len(i) :]
        raised = np.minimum(texts.cosines(a, b) + config.decision_margin, 1.0)
        same = pair_probabilities(texts, shipped(), merge_rule(config), a, b, raised)
        return same >= config.merge_probability

    return eligible


def fp32_reach(config: ConsolidationConfig, vectors: TextVectors) -> tuple[float, Eligible | None]:
    """How near a decision a statement is clustered on its fp32 vector (`decision_vectors`): the
    judgement proposes pairs within `candidate_distance` and re-encodes those that could merge
    (`could_merge`); the distance rule, every pair within `statement_distance`. Both widened by
    `decision_margin`."""
    if config.statement_judgement:
        return config.candidate_distance + config.decision_margin, could_merge(config, vectors)
    return config.statement_distance + config.decision_margin, None


@dataclass(frozen=True)
class JudgedPairs:
    """Every pair i < j the embedding proposes (global unit rows, in group order) and its
    P(same statement), judged in one call for all groups: one feature computation, not one per
    contact (per contact, 200 contacts cost 15-20 times the distance rule; at once, 6-9 times)."""

    i: np.ndarray
    j: np.ndarray
    same: np.ndarray

    @classmethod
    def of(
        cls, texts: PairTexts, bounds: list[tuple[int, int]], config: ConsolidationConfig
    ) -> JudgedPairs:
        i, j, cosine = candidate_pairs(texts.vectors, bounds, config.candidate_distance)
        return cls(i, j, pair_probabilities(texts, shipped(), merge_rule(config), i, j, cosine))

    def distances(self, start: int, end: int) -> Distances:
        """1 − P(same statement) between rows of the group start..end (local indices); 1 for
        a pair not proposed."""
        lo, hi = np.searchsorted(self.i, [start, end])
        i, j, same = self.i[lo:hi] - start, self.j[lo:hi] - start, self.same[lo:hi]

        def distances(local: np.ndarray) -> np.ndarray:
            position = np.full(end - start, -1)
            position[local] = np.arange(len(local))
            a, b = position[i], position[j]
            inside = (a >= 0) & (b >= 0)
            distance = np.ones((len(local), len(local)))
            distance[a[inside], b[inside]] = distance[b[inside], a[inside]] = 1.0 - same[inside]
            np.fill_diagonal(distance, 0.0)
            return distance

        return distances


def label_groups(
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
    Otherwise (statements) the cannot-link rules of `_group_links` apply, with
    `config.value_guard` one subject with another value never merges, and with
    `config.statement_judgement` pairs merge by the judgement (`threshold` is then unused).
    """
    units = members.unique([*keys, "text_hash"], keep="first") if dedupe else members
    units = units.sort(*keys, "memory_id", nulls_last=True)
    rows = vectors.rows(units["text_hash"])
    bounds = group_bounds(units, keys)
    judged = None
    if not dedupe and config.statement_judgement:
        threshold = 1.0 - config.merge_probability
        judged = JudgedPairs.of(PairTexts(units["text"], vectors.matrix[rows]), bounds, config)
    if not dedupe:
        polarity = units["polarity"].to_numpy()
        # The judgement weighs numbers itself (a number on one side only may be one statement,
        # two numbers never are): the digits rule is the distance rule's.
        digits = (
            np.zeros(units.height, np.int64)
            if judged is not None
            else codes(units["subject_numbers"])
        )
        speakers = codes(units["speaker"].fill_null(""))
        links = _cannot_links(units, conflicts).to_numpy().reshape(-1, 2)
        if judged is None and config.value_guard:
            # A hair beyond the threshold: a pair the linkage's own rounding puts at it is guarded
            # too (guarding a pair the rule would not merge changes nothing).
            guard = _value_links(units["text"], vectors.matrix[rows], bounds, threshold + 1e-6)
            links = np.concatenate([links, guard])
            links = links[np.argsort(links[:, 0], kind="stable")]
    labels = np.empty(units.height, dtype=np.int64)
    next_label = 0
    for start, end in bounds:
        if end - start == 1:
            labels[start] = next_label
            next_label += 1
            continue
        cannot = None if dedupe else _group_links(start, end, polarity, digits, speakers, links)
        sub = cluster_labels(
            vectors.matrix[rows[start:end]],
            threshold,
            cannot,
            config.max_block,
            judged=judged.distances(start, end) if judged is not None else None,
            candidate_distance=config.candidate_distance,
        )
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


def centroid_similarity(members: pl.DataFrame, vectors: TextVectors) -> pl.Series:
    """e_i · Σ_cluster e_j: the member with the largest value is the cluster's medoid.

    Computed once per distinct (cluster, text), weighting each text by its number of members, so
    a cluster of 10,000 identical requests costs one vector.
    """
    texts = members.group_by("cluster", "text_hash").agg(pl.len().alias("n"))
    vectors_of = vectors.of(texts["text_hash"])
    _, inverse = np.unique(texts["cluster"].to_numpy(), return_inverse=True)
    sums = np.zeros((int(inverse.max()) + 1 if len(inverse) else 0, vectors.dim), np.float32)
    counts = texts["n"].to_numpy()
    np.add.at(sums, inverse, vectors_of * counts[:, None].astype(np.float32))
    dots = np.einsum("ij,ij->i", vectors_of, sums[inverse])
    # Two texts are each other's only neighbour: e_a·S − e_b·S = (n_a − n_b)(1 − cos), so the
    # text with more members is the medoid and equal counts tie. The dot products would break
    # that tie by the rounding of the vectors' norms, which differs from CPU to CPU (the int8
    # kernels): the counts decide, and a tie falls to summarise's next keys, on every CPU.
    two = texts.select(pl.len().over("cluster") == 2).to_series().to_numpy()
    centrality = texts.select(
        "cluster",
        "text_hash",
        pl.Series("centrality", np.where(two, counts.astype(np.float32), dots)),
    )
    return members.join(centrality, on=["cluster", "text_hash"], how="left", maintain_order="left")[
        "centrality"
    ]


def summarise(members: pl.DataFrame, scope: str, config: ConsolidationConfig) -> pl.DataFrame:
    """One row per cluster; members are ordered best-first so the first one represents."""
    prefix = "s" if scope == "statement" else "i"
    counts = [
        (pl.col("memory_type") == name).sum().cast(pl.Int64).alias(name)
        for name in tables.TYPE_COUNT_FIELDS
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
            pl.col("reinforced_at").fill_null(
                pl.lit([], pl.List(REINFORCEMENT_SCHEMA["last_reinforced_at"]))
            ),
        )
        .select(list(REINFORCEMENT_SCHEMA))
        .cast(pl.Schema(REINFORCEMENT_SCHEMA))
        .sort("tenant_id", "memory_id")
    )
