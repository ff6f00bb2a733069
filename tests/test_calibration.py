"""The threshold rule: the largest distance whose precision's lower bound clears the floor (or
the best-established precision), among thresholds that merge enough."""

import numpy as np
import pytest

from pipeline.semantic.calibration import choose_threshold, merge_scores, wilson_interval

GRID = (0.1, 0.2, 0.3)


def test_wilson_interval_matches_the_closed_form() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(9, 10)
    assert low == pytest.approx(0.5958, abs=1e-4) and high == pytest.approx(0.9821, abs=1e-4)
    assert wilson_interval(10, 10)[1] == pytest.approx(1.0) and wilson_interval(0, 10)[0] == 0.0


def test_scores_count_merges_and_respect_cannot_links() -> None:
    distance = np.array([0.05, 0.15, 0.15, 0.25])
    positive = np.array([True, True, False, True])
    cannot = np.array([False, False, False, True])
    s = merge_scores(distance, cannot, positive, 0.3)
    assert (s.merged, s.true_merges, s.positives) == (3, 2, 3)
    assert s.precision == pytest.approx(2 / 3) and s.recall == pytest.approx(2 / 3)


def test_a_point_precision_that_just_clears_the_floor_is_not_enough() -> None:
    # 9 of 10 merges right at 0.1 (point 0.90), 18 of 20 at 0.2 (0.90), 19 of 25 at 0.3 (0.76).
    distance = np.array([0.1] * 10 + [0.2] * 10 + [0.3] * 5)
    positive = np.array([True] * 9 + [False] + [True] * 9 + [False] + [True] + [False] * 4)
    cannot = np.zeros(25, dtype=bool)
    # Lower bounds 0.60, 0.70, 0.57: a floor of 0.65 stops at 0.2, though both point precisions
    # at 0.1 and 0.2 clear 0.85.
    assert choose_threshold(distance, cannot, positive, GRID, 0.65) == 0.2
    assert choose_threshold(distance, cannot, positive, GRID, 0.85) is None
    # Best established: 0.2 (more merges at the same point precision).
    assert choose_threshold(distance, cannot, positive, GRID, None) == 0.2


def test_ties_take_the_larger_threshold_and_a_gap_does_not_stop_the_search() -> None:
    distance = np.array([0.1] * 30 + [0.3] * 30)
    positive = np.ones(60, dtype=bool)
    cannot = np.zeros(60, dtype=bool)
    # 0.1 and 0.2 merge the same 30 pairs (equal bounds): the larger wins; 0.3 adds 30 more.
    assert choose_threshold(distance, cannot, positive, GRID, None) == 0.3
    assert choose_threshold(distance[:30], cannot[:30], positive[:30], GRID, None) == 0.3
    # A dip below the floor in the middle does not hide a larger threshold that clears it.
    positive = np.array([True] * 30 + [False] * 5 + [True] * 25)
    distance = np.array([0.1] * 30 + [0.2] * 5 + [0.3] * 25)
    assert choose_threshold(distance, cannot, positive, GRID, 0.8) == 0.3


def test_a_recall_floor_keeps_a_precise_threshold_that_merges_too_little_out() -> None:
    # 10 of 10 merges right at 0.1, 19 of 20 at 0.2, 26 of 30 at 0.3; 36 paraphrases in all.
    distance = np.array([0.1] * 10 + [0.2] * 10 + [0.3] * 10 + [0.9] * 10)
    positive = np.array([True] * 19 + [False] + [True] * 7 + [False] * 3 + [True] * 10)
    cannot = np.zeros(40, dtype=bool)
    # Lower bounds 0.72, 0.76, 0.70: the best established is 0.2 (recall 19 / 36 = 0.53).
    assert choose_threshold(distance, cannot, positive, GRID, None) == 0.2
    # Merging at least 60 % of the paraphrases leaves only 0.3 (recall 26 / 36 = 0.72).
    assert choose_threshold(distance, cannot, positive, GRID, None, min_recall=0.6) == 0.3
    assert choose_threshold(distance, cannot, positive, GRID, None, min_recall=0.75) is None
