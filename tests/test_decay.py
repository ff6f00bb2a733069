"""Decay snapshots (SPEC §4.2): every memory type on both sides of its thresholds, resets, caps, history."""

from datetime import UTC, date, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from pipeline.ingest.contracts import FEEDBACK_SCHEMA, INTERACTION_SCHEMA, MEMORY_SCHEMA
from pipeline.memory.decay import (
    REINFORCEMENT_SCHEMA,
    as_of_for,
    confidence_history,
    point_in_time,
    snapshot,
)

AS_OF = datetime(2026, 11, 3, tzinfo=UTC)


# One second before as_of, "just now": a memory created exactly at as_of is not yet known.
FRESH = 1 / 86_400


def ago(days: float) -> datetime:
    return AS_OF - timedelta(days=days)


def stmt(memory_id: str, memory_type: str, age_days: float, **fields: Any) -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "event_id": memory_id,
        "ts": ago(age_days),
        "contact_id": "c1",
        "memory_type": memory_type,
        "content": f"{memory_type} {memory_id}",
        **fields,
    }


def inter(memory_id: str, age_days: float, **fields: Any) -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "event_id": memory_id,
        "ts": ago(age_days),
        "input": "q",
        "output": "a",
        **fields,
    }


def fb(
    target: str, signal: str, age_days: float, user: str = "u1", **fields: Any
) -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "event_id": f"{target}-{signal}-{age_days}-{user}",
        "ts": ago(age_days),
        "target_id": target,
        "signal": signal,
        "user_id": user,
        **fields,
    }


def run(
    statements: list[dict[str, Any]] = (),  # type: ignore[assignment]
    interactions: list[dict[str, Any]] = (),  # type: ignore[assignment]
    feedback: list[dict[str, Any]] = (),  # type: ignore[assignment]
    reinforcement: pl.DataFrame | None = None,
    as_of: datetime = AS_OF,
) -> dict[str, dict[str, Any]]:
    frame = snapshot(
        pl.DataFrame(list(interactions), schema=INTERACTION_SCHEMA),
        pl.DataFrame(list(statements), schema=MEMORY_SCHEMA),
        pl.DataFrame(list(feedback), schema=FEEDBACK_SCHEMA),
        reinforcement,
        as_of,
    )
    return {row["memory_id"]: row for row in frame.iter_rows(named=True)}


# (memory type, age in days, expected status) on both sides of each threshold; the crossing ages are
# worked out by hand from SPEC §4.2: base × factor^(age / period) = inactive threshold.
CASES = [
    # explicit: never decays, never inactive
    ("explicit_instruction", FRESH, "active", 1.0),
    ("explicit_instruction", 1000, "active", 1.0),
    # correction: 0.9 · 0.95^(a/30) = 0.5 at a ≈ 343.8 days
    ("correction", 340, "active", 0.9 * 0.95 ** (340 / 30)),
    ("correction", 348, "inactive", 0.9 * 0.95 ** (348 / 30)),
    # confirmed: 0.8 · 0.9^(a/30) = 0.5 at a ≈ 133.8 days
    ("confirmed_pattern", 130, "active", 0.8 * 0.9 ** (130 / 30)),
    ("confirmed_pattern", 137, "inactive", 0.8 * 0.9 ** (137 / 30)),
    # inferred: 0.6 · 0.8^(a/30) = 0.4 at a ≈ 54.5 days
    ("inferred_pattern", 53, "active", 0.6 * 0.8 ** (53 / 30)),
    ("inferred_pattern", 56, "inactive", 0.6 * 0.8 ** (56 / 30)),
    # single: 0.4 · 0.5^(a/7) = 0.3 at a ≈ 2.9 days; archived when older than 30 days
    ("single_inference", 2.5, "active", 0.4 * 0.5 ** (2.5 / 7)),
    ("single_inference", 3.5, "inactive", 0.4 * 0.5 ** (3.5 / 7)),
    ("single_inference", 29.9, "inactive", 0.4 * 0.5 ** (29.9 / 7)),
    ("single_inference", 30.1, "archived", 0.4 * 0.5 ** (30.1 / 7)),
    # temporary: 50 % per day, expires after 48 h, never "inactive" before
    ("temporary", 47 / 24, "active", 0.5 * 0.5 ** (47 / 24)),
    ("temporary", 49 / 24, "archived", 0.5 * 0.5 ** (49 / 24)),
]


@pytest.mark.parametrize(("memory_type", "age", "status", "confidence"), CASES)
def test_type_thresholds(memory_type: str, age: float, status: str, confidence: float) -> None:
    row = run([stmt("m", memory_type, age)])["m"]
    assert row["status"] == status
    assert row["confidence"] == pytest.approx(confidence)
    assert row["age_days"] == pytest.approx(age)
    assert row["memory_kind"] == "statement"


@pytest.mark.parametrize(
    ("importance", "age", "status"),
    [
        (None, 39, "active"),  # 0.5 · 0.5^(a/30) = 0.2 at a ≈ 39.7 days
        (None, 40.5, "inactive"),
        (0.9, 64, "active"),  # 0.9 · 0.5^(a/30) = 0.2 at a ≈ 65.1 days
        (0.9, 66, "inactive"),
    ],
)
def test_interaction_memories(importance: float | None, age: float, status: str) -> None:
    row = run(interactions=[inter("i", age, importance=importance)])["i"]
    assert row["memory_type"] == "interaction" and row["memory_kind"] == "interaction"
    assert row["base_confidence"] == (importance or 0.5)
    assert row["confidence"] == pytest.approx((importance or 0.5) * 0.5 ** (age / 30))
    assert row["status"] == status


def test_an_age_does_not_depend_on_the_rows_around_it() -> None:
    # 1 d 18:44:38 ago: true division and a multiplication by the reciprocal differ in the last bit.
    age = 153_878 / 86_400
    alone = run(interactions=[inter("i1", age)])["i1"]["age_days"]
    among = run(interactions=[inter("i1", age), inter("i2", 3.0), inter("i3", 5.0)])["i1"]
    assert alone == among["age_days"] == 153_878e6 * (1 / 86_400e6)


def test_thirty_day_half_life_of_interactions() -> None:
    assert run(interactions=[inter("i", 30)])["i"]["confidence"] == pytest.approx(0.25)


def test_stated_confidence_is_the_base_but_never_above_the_cap() -> None:
    rows = run(
        [
            stmt("low", "correction", FRESH, confidence=0.7),
            stmt("high", "correction", FRESH, confidence=1.0),
        ]
    )
    assert rows["low"]["confidence"] == pytest.approx(0.7)
    assert rows["high"]["confidence"] == pytest.approx(0.95)


def test_validation_resets_the_clock() -> None:
    statements = [stmt("m", "correction", 400), stmt("n", "correction", 400)]
    rows = run(statements, feedback=[fb("m", "validate", 10)])
    assert rows["m"]["age_days"] == pytest.approx(10)
    assert rows["m"]["last_confirmed"] == ago(10)
    assert rows["m"]["status"] == "active"
    assert rows["m"]["confidence"] == pytest.approx(0.9 * 0.95 ** (10 / 30))
    assert rows["m"]["reputation"] == 1.0  # a validation is not a quality vote
    assert rows["n"]["status"] == "inactive"
    # A validated single inference comes back from the archive: the clock restarted.
    single = run([stmt("s", "single_inference", 40)], feedback=[fb("s", "validate", 1)])["s"]
    assert single["status"] == "active"


def test_reinforcement_adds_a_tenth_up_to_the_cap_and_restarts_the_clock() -> None:
    reinforcement = pl.DataFrame(
        [
            {
                "tenant_id": "acme",
                "memory_id": "one",
                "reinforcement_count": 1,
                "last_reinforced_at": ago(FRESH),
            },
            {
                "tenant_id": "acme",
                "memory_id": "many",
                "reinforcement_count": 5,
                "last_reinforced_at": ago(FRESH),
            },
            {
                "tenant_id": "acme",
                "memory_id": "old",
                "reinforcement_count": 1,
                "last_reinforced_at": ago(20),
            },
        ],
        schema=REINFORCEMENT_SCHEMA,
    )
    statements = [stmt(m, "inferred_pattern", 100) for m in ("one", "many", "old", "none")]
    rows = run(statements, reinforcement=reinforcement)
    assert rows["one"]["confidence"] == pytest.approx(0.7)  # 0.6 + 0.1, age 0
    assert rows["many"]["confidence"] == pytest.approx(0.7)  # capped at the inferred cap 0.7
    assert rows["many"]["reinforcement_count"] == 5
    assert rows["old"]["age_days"] == pytest.approx(20)
    assert rows["old"]["confidence"] == pytest.approx(0.7 * 0.8 ** (20 / 30))
    assert rows["none"]["reinforcement_count"] == 0
    assert rows["none"]["age_days"] == pytest.approx(100)


def test_reinforcement_after_as_of_is_not_counted() -> None:
    aggregate = pl.DataFrame(
        [
            {
                "tenant_id": "acme",
                "memory_id": "m",
                "reinforcement_count": 2,
                "last_reinforced_at": AS_OF + timedelta(days=1),
            }
        ],
        schema=REINFORCEMENT_SCHEMA,
    )
    assert (
        run([stmt("m", "confirmed_pattern", 10)], reinforcement=aggregate)["m"][
            "reinforcement_count"
        ]
        == 0
    )
    dated = pl.DataFrame(
        {
            "tenant_id": ["acme"],
            "memory_id": ["m"],
            "reinforcement_count": [2],
            "last_reinforced_at": [AS_OF + timedelta(days=1)],
            "reinforced_at": [[ago(5), AS_OF + timedelta(days=1)]],
        }
    )
    row = run([stmt("m", "confirmed_pattern", 10)], reinforcement=dated)["m"]
    assert row["reinforcement_count"] == 1
    assert row["last_reinforced_at"] == ago(5)


def test_reputation_is_one_without_feedback_and_moves_with_it() -> None:
    interactions = [inter(i, FRESH) for i in ("quiet", "liked", "disliked")]
    feedback = [fb("liked", "thumbs_up", 0.5, f"u{k}") for k in range(5)] + [
        fb("disliked", "thumbs_down", 0.5, f"u{k}") for k in range(5)
    ]
    rows = run(interactions=interactions, feedback=feedback)
    assert rows["quiet"]["reputation"] == 1.0
    quiet = rows["quiet"]["confidence"]
    assert quiet == pytest.approx(0.5)
    assert rows["liked"]["reputation"] > 1.0 and rows["liked"]["confidence"] > quiet
    assert rows["disliked"]["reputation"] < 1.0 and rows["disliked"]["confidence"] < quiet
    # The cap still applies: an explicit instruction cannot exceed 1.0.
    explicit = run([stmt("e", "explicit_instruction", 1)], feedback=[fb("e", "thumbs_up", 0.5)])[
        "e"
    ]
    assert explicit["reputation"] > 1.0 and explicit["confidence"] == 1.0


def test_flags_needs_reconfirmation_and_stale() -> None:
    rows = run(
        [
            stmt("high_low", "inferred_pattern", 30, impact_level="high"),  # 0.48
            stmt("medium_low", "inferred_pattern", 30, impact_level="medium"),
            stmt("high_sure", "explicit_instruction", 30, impact_level="high"),
            stmt("young", "explicit_instruction", 179),
            stmt("old", "explicit_instruction", 181),
        ]
    )
    assert rows["high_low"]["needs_reconfirmation"] is True
    assert rows["medium_low"]["needs_reconfirmation"] is False
    assert rows["high_sure"]["needs_reconfirmation"] is False
    assert rows["young"]["stale"] is False and rows["old"]["stale"] is True


def test_only_memories_known_before_as_of_and_nothing_deleted() -> None:
    rows = run(
        [stmt("past", "single_inference", 400), stmt("future", "explicit_instruction", -1)],
        interactions=[inter("i", 500)],
    )
    assert set(rows) == {"past", "i"}
    assert rows["past"]["status"] == "archived"  # archived, still a row
    assert rows["past"]["as_of"] == AS_OF


def test_late_feedback_changes_the_next_snapshot_not_history() -> None:
    load_day = (AS_OF - timedelta(days=1)).date()
    statements = [{**stmt("m", "correction", 100), "load_date": load_day}]
    on_time = [{**fb("m", "thumbs_up", 3), "load_date": load_day}]
    # Feedback about three days ago that only lands two days after the snapshot was taken.
    late = [{**fb("m", "thumbs_down", 3, "u9"), "load_date": AS_OF.date() + timedelta(days=1)}]
    history = run(statements, feedback=on_time)
    recomputed = run(statements, feedback=on_time + late)  # a re-run of the old partition
    next_day = run(statements, feedback=on_time + late, as_of=AS_OF + timedelta(days=2))
    assert recomputed["m"]["confidence"] == history["m"]["confidence"]
    assert recomputed["m"]["n_feedback"] == 1
    assert next_day["m"]["n_feedback"] == 2
    assert next_day["m"]["reputation"] < history["m"]["reputation"]
    # Validations after as_of do not reset the clock of an earlier snapshot.
    validated_later = run(statements, feedback=[fb("m", "validate", -1)])
    assert validated_later["m"]["age_days"] == pytest.approx(100)


def test_point_in_time_and_history() -> None:
    statements = pl.DataFrame([stmt("m", "inferred_pattern", 10)], schema=MEMORY_SCHEMA)
    empty_i = pl.DataFrame(schema=INTERACTION_SCHEMA)
    empty_f = pl.DataFrame(schema=FEEDBACK_SCHEMA)
    snaps = pl.concat(
        [
            snapshot(empty_i, statements, empty_f, None, AS_OF + timedelta(days=d))
            for d in (0, 10, 20)
        ]
    )
    believed = point_in_time(snaps, AS_OF + timedelta(days=15)).collect()
    assert believed["as_of"].to_list() == [AS_OF + timedelta(days=10)]
    history = confidence_history(snaps, "m")
    assert history["confidence"].is_sorted(descending=True)
    assert history["confidence"][0] == pytest.approx(0.6 * 0.8 ** (10 / 30))


def test_as_of_is_midnight_after_the_load_date() -> None:
    assert as_of_for("2026-11-02") == datetime(2026, 11, 3, tzinfo=UTC)
    assert as_of_for("2026-12-31").date() == date(2027, 1, 1)
