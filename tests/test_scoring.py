"""Feedback quality scores (SPEC §4.1) on tiny frames."""

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from pipeline.feedback.scores import ScoringConfig, compute_scores, orphan_feedback
from pipeline.ingest.contracts import FEEDBACK_SCHEMA, INTERACTION_SCHEMA, MEMORY_SCHEMA, Signal

T0 = datetime(2026, 10, 1, tzinfo=UTC)


def interactions(*ids: str, tenant: str = "acme") -> pl.DataFrame:
    return pl.DataFrame(
        [{"tenant_id": tenant, "event_id": i, "ts": T0, "skill_id": "s"} for i in ids],
        schema=INTERACTION_SCHEMA,
    )


def statements(*ids: str) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {"tenant_id": "acme", "event_id": i, "ts": T0, "memory_type": "inferred_pattern"}
            for i in ids
        ],
        schema=MEMORY_SCHEMA,
    )


_counter = iter(range(1_000_000))


def fb(target: str, signal: str, user: str | None = "u1", **fields: Any) -> dict[str, Any]:
    n = next(_counter)
    return {
        "tenant_id": "acme",
        "event_id": f"f{n}",
        "ts": T0 + timedelta(minutes=n),
        "target_id": target,
        "signal": signal,
        "user_id": user,
        **fields,
    }


def feedback(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=FEEDBACK_SCHEMA)


def votes(target: str, up: int, down: int) -> list[dict[str, Any]]:
    return [fb(target, "thumbs_up", f"up{k}") for k in range(up)] + [
        fb(target, "thumbs_down", f"down{k}") for k in range(down)
    ]


def by_id(scores: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {row["memory_id"]: row for row in scores.iter_rows(named=True)}


def test_one_up_vote_ranks_below_forty_up_two_down() -> None:
    scores = by_id(
        compute_scores(
            interactions("one", "many"),
            statements(),
            feedback(votes("one", 1, 0) + votes("many", 40, 2)),
        )
    )
    assert scores["one"]["quality_lower"] < scores["many"]["quality_lower"]
    assert scores["one"]["quality_score"] < scores["many"]["quality_score"]
    assert scores["one"]["quality_score"] == pytest.approx(0.2)  # (1 + 2) / (1 + 4) → 2·0.6 − 1
    assert scores["many"]["quality_score"] == pytest.approx(2 * 42 / 46 - 1)
    # The naive baseline would rank the single vote first: it is kept for comparison only.
    assert scores["one"]["naive_score"] == 1.0
    assert scores["many"]["naive_score"] == pytest.approx(38 / 42)


def test_every_memory_has_a_row_and_no_feedback_means_neutral() -> None:
    scores = compute_scores(
        interactions("i1", "i2"), statements("m1"), feedback([fb("i1", "thumbs_up")])
    )
    assert scores.height == 3
    rows = by_id(scores)
    assert rows["m1"]["memory_kind"] == "statement" and rows["i2"]["memory_kind"] == "interaction"
    for quiet in ("i2", "m1"):
        assert rows[quiet]["n_feedback"] == 0
        assert rows[quiet]["quality_score"] == 0.0
        assert rows[quiet]["reputation"] == 1.0  # exactly
        assert rows[quiet]["has_correction"] is False
        assert rows[quiet]["last_feedback_at"] is None
    # No feedback ranks between one up-vote and one down-vote.
    down = by_id(
        compute_scores(interactions("d"), statements(), feedback([fb("d", "thumbs_down")]))
    )["d"]
    assert down["quality_lower"] < rows["i2"]["quality_lower"] < rows["i1"]["quality_lower"]


def test_duplicate_votes_of_one_user_count_once_per_signal() -> None:
    rows = [fb("i1", "thumbs_up", "u1") for _ in range(5)] + [
        fb("i1", "copy", "u1"),
        fb("i1", "thumbs_up", "u2"),
    ]
    score = by_id(compute_scores(interactions("i1"), statements(), feedback(rows)))["i1"]
    assert score["n_thumbs_up"] == 2
    assert score["n_copy"] == 1
    assert score["n_feedback"] == 3


def test_anonymous_votes_each_count() -> None:
    rows = [fb("i1", "thumbs_up", None) for _ in range(3)]
    assert (
        by_id(compute_scores(interactions("i1"), statements(), feedback(rows)))["i1"]["n_thumbs_up"]
        == 3
    )


def test_signal_directions_weights_and_correction() -> None:
    rows = [fb("i1", "thumbs_down"), fb("i1", "correction", "u2", corrected_output="better")]
    score = by_id(compute_scores(interactions("i1"), statements(), feedback(rows)))["i1"]
    assert score["has_correction"] is True
    assert score["n_negative"] == 2 and score["n_positive"] == 0
    assert score["quality_score"] < 0 and score["reputation"] < 1.0
    config = ScoringConfig()
    # A weak positive (copy, 0.5) moves the score less than a thumbs up (1.0).
    weak = by_id(
        compute_scores(
            interactions("a", "b"),
            statements(),
            feedback([fb("a", "copy"), fb("b", "thumbs_up")]),
            config,
        )
    )
    assert 0 < weak["a"]["quality_score"] < weak["b"]["quality_score"]
    assert weak["b"]["reputation"] == pytest.approx(
        1 + config.reputation_weight * weak["b"]["quality_score"]
    )
    assert weak["b"]["reputation"] > 1.0


def test_every_signal_has_a_direction_except_validate() -> None:
    config = ScoringConfig()
    voting = set(config.positive_weights) | set(config.negative_weights)
    assert voting | {Signal.VALIDATE.value} == {s.value for s in Signal}
    assert not set(config.positive_weights) & set(config.negative_weights)


def test_validate_is_not_a_vote_but_a_rating_is() -> None:
    rows = [
        fb("i1", "validate"),
        fb("i2", "validate", rating=5),
        fb("i3", "validate", rating=1),
        fb("i4", "validate", rating=3),
    ]
    scores = by_id(
        compute_scores(interactions("i1", "i2", "i3", "i4"), statements(), feedback(rows))
    )
    assert scores["i1"]["n_feedback"] == 0 and scores["i1"]["n_validate"] == 1
    assert scores["i1"]["reputation"] == 1.0
    assert scores["i1"]["last_validated_at"] is not None
    assert scores["i2"]["quality_score"] == pytest.approx(0.2)  # rating 5 → +1, one full vote
    assert scores["i3"]["quality_score"] == pytest.approx(-0.2)  # rating 1 → −1
    assert scores["i4"]["quality_score"] == pytest.approx(
        0.0
    )  # rating 3 → 0: evidence of mediocrity
    assert scores["i4"]["n_feedback"] == 1
    assert scores["i4"]["rating_mean"] == 3.0


def test_rating_overrides_the_signal_direction() -> None:
    rows = [fb("i1", "thumbs_up", rating=2)]  # (2 − 3) / 2 = −0.5
    score = by_id(compute_scores(interactions("i1"), statements(), feedback(rows)))["i1"]
    assert score["positive_mass"] == pytest.approx(0.25) and score[
        "negative_mass"
    ] == pytest.approx(0.75)
    assert score["quality_score"] < 0


def test_feedback_on_unknown_or_foreign_memory_is_ignored_and_counted() -> None:
    rows = [
        fb("ghost", "thumbs_up"),
        {**fb("i1", "thumbs_up"), "tenant_id": "other"},
        fb("i1", "thumbs_down"),
    ]
    inter, stmts = interactions("i1"), statements()
    scores = by_id(compute_scores(inter, stmts, feedback(rows)))
    assert scores["i1"]["n_feedback"] == 1 and scores["i1"]["n_thumbs_down"] == 1
    assert orphan_feedback(inter, stmts, feedback(rows)).height == 2


def test_scores_stay_in_range() -> None:
    rows = votes("i1", 500, 0) + votes("i2", 0, 500) + votes("m1", 3, 3)
    scores = compute_scores(interactions("i1", "i2"), statements("m1"), feedback(rows))
    for column in ("quality_score", "quality_lower", "naive_score"):
        assert scores[column].is_between(-1.0, 1.0).all()
    assert scores["reputation"].is_between(0.8, 1.2).all()
    assert (scores["quality_lower"] <= scores["quality_score"]).all()
