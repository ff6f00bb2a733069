"""Choosing a merge threshold from pairs labelled by people: by the lower confidence bound of its
precision, so that a few pairs more or less in a sample do not move the choice past the floor."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

Z95 = 1.959963984540054  # two-sided 95 %: the lower bound is exceeded with 97.5 % confidence


def wilson_interval(successes: int, trials: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion; (0, 1) when nothing was tried."""
    if trials == 0:
        return 0.0, 1.0
    p = successes / trials
    centre = p + z * z / (2 * trials)
    spread = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials))
    scale = 1 + z * z / trials
    return max(0.0, (centre - spread) / scale), min(1.0, (centre + spread) / scale)


@dataclass(frozen=True)
class MergeScores:
    """What "merge when distance ≤ threshold (and no cannot-link holds)" does on labelled pairs."""

    threshold: float
    merged: int
    true_merges: int
    positives: int

    @property
    def precision(self) -> float:
        return self.true_merges / self.merged if self.merged else 1.0

    @property
    def recall(self) -> float:
        return self.true_merges / self.positives if self.positives else 1.0

    def precision_interval(self, z: float = Z95) -> tuple[float, float]:
        return wilson_interval(self.true_merges, self.merged, z)

    def recall_interval(self, z: float = Z95) -> tuple[float, float]:
        return wilson_interval(self.true_merges, self.positives, z)


def merge_scores(
    distance: np.ndarray, cannot: np.ndarray, positive: np.ndarray, threshold: float
) -> MergeScores:
    merged = (distance <= threshold) & ~cannot
    return MergeScores(
        threshold=threshold,
        merged=int(merged.sum()),
        true_merges=int((merged & positive).sum()),
        positives=int(positive.sum()),
    )


def choose_threshold(
    distance: np.ndarray,
    cannot: np.ndarray,
    positive: np.ndarray,
    grid: Sequence[float],
    floor: float | None,
    z: float = Z95,
    min_recall: float = 0.0,
) -> float | None:
    """The largest grid threshold (the most recall) whose precision's lower bound is ≥ `floor`;
    None when none is. `floor` None: the threshold whose precision is best established (the
    highest lower bound; the larger on a tie), for merges where a wrong one costs more than a
    missed one. Only thresholds whose recall is ≥ `min_recall` are candidates (a threshold that
    merges almost nothing is precise and useless). A point estimate that just clears a floor on a
    few hundred pairs is a coin toss on the next sample; its lower bound clears it on most
    samples."""
    lower = {
        t: s.precision_interval(z)[0]
        for t in sorted(grid)
        for s in [merge_scores(distance, cannot, positive, t)]
        if s.recall >= min_recall
    }
    if floor is None:
        best = max(lower.values(), default=None)
        return max((t for t, b in lower.items() if b == best), default=None)
    return max((t for t, b in lower.items() if b >= floor), default=None)
