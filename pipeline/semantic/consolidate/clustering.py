"""Clustering unit vectors by cosine distance: complete linkage (dense, or in blocks for large sets)
and the incremental step that assigns new texts to existing clusters without breaking it."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import squareform

from pipeline.semantic.embed.exact import MAX_BLOCK_CELLS

log = logging.getLogger(__name__)

# A distance no threshold reaches: how a cannot-link pair enters complete linkage.
CANNOT_LINK = 4.0
# Complete linkage holds the dense n × n distance matrix: sets larger than this are clustered
# in blocks (see `cluster_labels`).
MAX_BLOCK = 2_000

# The distances of a block's members to each other (rows: indices into the clustered vectors), when
# they are judged rather than cosine distances (statements: 1 − P(same statement)).
Distances = Callable[[np.ndarray], np.ndarray]


def _principal_order(vectors: np.ndarray) -> np.ndarray:
    centred = vectors - vectors.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return np.argsort(centred @ vt[0], kind="stable")


def _complete_linkage(
    vectors: np.ndarray,
    threshold: float,
    cannot_link: np.ndarray | None,
    rows: np.ndarray,
    judged: Distances | None,
) -> np.ndarray:
    n = len(vectors)
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    distance = (
        judged(rows).astype(np.float64)
        if judged is not None
        else np.clip(1.0 - vectors @ vectors.T, 0.0, 2.0).astype(np.float64)
    )
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
    max_block: int = MAX_BLOCK,
    max_block_cells: int = MAX_BLOCK_CELLS,
    judged: Distances | None = None,
    candidate_distance: float | None = None,
) -> np.ndarray:
    """Cluster labels (0..k-1) of unit vectors: complete linkage at a cosine-distance threshold.

    `cannot_link` holds index pairs (m × 2) that must end in different clusters (conflicts).
    With `judged`, the linkage runs on its distances instead (`threshold` is then on those), and
    only vectors within `candidate_distance` of each other can share a cluster.
    """
    n = len(vectors)
    if n <= max_block:
        everyone = np.arange(n)
        return (
            _complete_linkage(vectors, threshold, cannot_link, everyone, judged)
            if n
            else np.zeros(0, np.int64)
        )
    linked = candidate_distance if judged is not None and candidate_distance else threshold
    component = _components(vectors, linked, max_block_cells)
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
            sub = _complete_linkage(vectors[block], threshold, local[inside], block, judged)
            labels[block] = sub + next_label
            next_label += int(sub.max()) + 1
    return labels


def assign_to_clusters(
    new: np.ndarray,
    old: np.ndarray,
    old_labels: np.ndarray,
    threshold: float,
    max_block_cells: int = MAX_BLOCK_CELLS,
) -> np.ndarray:
    """The existing cluster each `new` unit vector joins (label into `old_labels`), or -1.

    A new text may join a cluster only if it is within `threshold` of *every* member (the
    complete-linkage rule, so every cluster stays one); of those, the one it is closest to on
    average. Several new texts joining one cluster must also be within `threshold` of each other:
    the closest joins first, one that is too far from an earlier joiner stays out (-1). What
    stays out is clustered among itself by the caller.
    """
    if not len(new) or not len(old):
        return np.full(len(new), -1, dtype=np.int64)
    n_clusters = int(old_labels.max()) + 1
    sizes = np.bincount(old_labels, minlength=n_clusters)
    membership = csr_matrix(
        (np.ones(len(old), np.float32), (np.arange(len(old)), old_labels)),
        shape=(len(old), n_clusters),
    )
    choice = np.full(len(new), -1, dtype=np.int64)
    score = np.full(len(new), -np.inf)
    rows = max(1, max_block_cells // max(len(old), n_clusters))
    for start in range(0, len(new), rows):
        sims = new[start : start + rows] @ old.T
        within = (sims >= 1.0 - threshold).astype(np.float32)
        counts = np.asarray((membership.T @ within.T).T)  # (rows × clusters): members within
        sums = np.asarray((membership.T @ (sims * within).T).T)
        # A label none of `old` carries (the caller's labels are global: other tenants' and
        # groups' clusters) is no cluster: "every member within" must not hold for no member.
        eligible = (counts == sizes) & (sizes > 0)
        means = np.full(sums.shape, -np.inf)
        np.divide(sums, sizes, out=means, where=eligible)
        best = means.argmax(axis=1)
        found = eligible[np.arange(len(best)), best]
        choice[start : start + rows] = np.where(found, best, -1)
        score[start : start + rows] = np.where(found, means[np.arange(len(best)), best], -np.inf)
    for cluster in np.unique(choice[choice >= 0]):
        joiners = np.flatnonzero(choice == cluster)
        if len(joiners) < 2:
            continue
        order = joiners[np.argsort(-score[joiners], kind="stable")]
        close = new[order] @ new[order].T >= 1.0 - threshold
        accepted: list[int] = []
        for k in range(len(order)):
            if all(close[k, a] for a in accepted):
                accepted.append(k)
            else:
                choice[order[k]] = -1
    return choice
