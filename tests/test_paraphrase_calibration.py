"""The merge thresholds in the configs are the ones the rule (pipeline/semantic/calibration.py) picks on
paraphrases scored by people, with the held-out figures quoted beside them (the STS-B sample in
../shared/data/paraphrase/, see bench/sections_paraphrase.py): a new sample that moves a threshold
fails here."""

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from bench.sections_paraphrase import (
    HELD_OUT,
    MERGE_FLOOR,
    PREVIOUS,
    RECALL_GOAL,
    SAME_PROMPT_FLOOR,
    STATEMENT_MIN_RECALL,
    by_split,
    calibrate,
    load_sample,
    pair_distances,
)
from pipeline.preference.pairs import PairConfig
from pipeline.semantic.consolidate import ConsolidationConfig
from pipeline.semantic.embed import EmbedConfig, load_model

# Beside the checkout, never in it.
SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "paraphrase" / "stsb_sample.tsv"
needs_sample = pytest.mark.skipif(not SAMPLE.exists(), reason=f"no STS-B sample at {SAMPLE}")

Measured = tuple[pl.DataFrame, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return load_model(None, EmbedConfig.backend, tmp_path_factory.mktemp("onnx"))


@pytest.fixture(scope="module")
def measured(model: Any) -> Measured:
    sample = load_sample(SAMPLE)
    statement = pair_distances(sample["sentence1"], sample["sentence2"], model, guard=True)
    request = pair_distances(sample["sentence1"], sample["sentence2"], model, guard=False)
    return sample, *statement, *request


@needs_sample
def test_sample_is_balanced_per_split() -> None:
    sample = load_sample(SAMPLE)
    counts = sample.group_by("split", pl.col("score") >= 4).len()["len"].to_list()
    assert sample.height == 480 and counts == [120] * 4


def held_out(s: dict[str, Any]) -> tuple[float, ...]:
    return s["precision"], *s["precision_95"], s["recall"], *s["recall_95"]


@needs_sample
def test_statement_threshold_is_the_rules_pick(measured: Measured) -> None:
    sample, distance, cannot, _, _ = measured
    chosen = ConsolidationConfig().statement_distance
    assert calibrate(sample, distance, cannot, None, STATEMENT_MIN_RECALL) == chosen == 0.15
    held = by_split(sample, distance, cannot, chosen)[HELD_OUT]
    assert held["precision"] >= MERGE_FLOOR and held["recall"] >= RECALL_GOAL
    assert held_out(held) == pytest.approx(
        (0.9481, 0.8739, 0.9796, 0.6083, 0.5189, 0.691), abs=1e-4
    )
    # The floor rule's pick (0.20) and the constant before it merged more pairs raters called
    # "same topic, different facts".
    for looser in (calibrate(sample, distance, cannot, MERGE_FLOOR), PREVIOUS["statement"]):
        previous = by_split(sample, distance, cannot, looser)[HELD_OUT]
        assert looser > chosen and previous["precision"] < held["precision"] - 0.04, previous


@needs_sample
def test_same_prompt_threshold_is_the_rules_pick(measured: Measured) -> None:
    sample, _, _, distance, cannot = measured
    chosen = round(1.0 - PairConfig().similarity_threshold, 2)
    assert calibrate(sample, distance, cannot, SAME_PROMPT_FLOOR) == chosen == 0.10
    held = by_split(sample, distance, cannot, chosen)[HELD_OUT]
    assert held_out(held) == pytest.approx((0.9815, 0.9023, 0.9967, 0.4417, 0.356, 0.531), abs=1e-4)


@needs_sample
def test_interaction_threshold_is_the_rules_pick(measured: Measured) -> None:
    sample, _, _, distance, cannot = measured
    chosen = ConsolidationConfig().interaction_distance
    assert calibrate(sample, distance, cannot, MERGE_FLOOR) == chosen == 0.15
    held = by_split(sample, distance, cannot, chosen)[HELD_OUT]
    assert held_out(held) == pytest.approx(
        (0.9302, 0.856, 0.9676, 0.6667, 0.5783, 0.7447), abs=1e-4
    )


def test_contradictions_never_merge_whatever_the_distance(model: Any) -> None:
    """A planted polarity conflict sits closer than the planted paraphrases; the cannot-link rule
    keeps it apart at any threshold."""
    a, b = (
        pl.Series(["Always call Ana Diaz before 9am."]),
        pl.Series(["Never call Ana Diaz before 9am."]),
    )
    distance, cannot = pair_distances(a, b, model, guard=True)
    assert distance[0] < ConsolidationConfig().statement_distance and cannot.all()
