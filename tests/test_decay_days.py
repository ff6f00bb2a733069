"""A run's snapshots over a sparse range: quiet dates are the date before's snapshot aged, equal
row for row to a full snapshot; dates where something became known are full snapshots."""

from datetime import UTC, date, datetime, timedelta
from typing import Any

import polars as pl

from pipeline.ingest.contracts import FEEDBACK_SCHEMA, INTERACTION_SCHEMA, MEMORY_SCHEMA
from pipeline.memory.decay import as_of_for, snapshot
from pipeline.memory.decay_days import change_days, snapshot_plan, snapshots_over
from pipeline.tables import schema

START = date(2026, 3, 1)
REINFORCEMENT = schema("memory_reinforcement")


def day(n: int) -> date:
    return START + timedelta(days=n)


def at(n: float) -> datetime:
    return datetime.combine(START, datetime.min.time(), UTC) + timedelta(days=n)


def key(n: int) -> str:
    return day(n).isoformat()


def frames() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Data on days 0, 3 and 9 of 14; a statement dated day 5 that arrived on day 3 (future-dated),
    a validation of day 3 that arrived on day 9 (late), a repeat on day 12 (its statement is
    elsewhere): days 0, 3, 5, 9 and 12 see something new."""

    def row(schema: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return {"tenant_id": "acme", "contact_id": "c1", **fields}

    statements = pl.DataFrame(
        [
            row(
                MEMORY_SCHEMA,
                event_id=m,
                ts=at(t),
                load_date=day(load),
                memory_type=kind,
                content=m,
                impact_level="high",
            )
            for m, t, load, kind in [
                ("s_temp", 0.5, 0, "temporary"),
                ("s_single", 0.6, 0, "single_inference"),
                ("s_inferred", 3.2, 3, "inferred_pattern"),
                ("s_future", 5.5, 3, "correction"),
            ]
        ],
        schema=MEMORY_SCHEMA,
    )
    interactions = pl.DataFrame(
        [row(INTERACTION_SCHEMA, event_id="i1", ts=at(0.2), load_date=day(0), importance=0.9)],
        schema=INTERACTION_SCHEMA,
    )
    feedback = pl.DataFrame(
        [
            row(
                FEEDBACK_SCHEMA,
                event_id="f1",
                ts=at(3.5),
                load_date=day(3),
                target_id="i1",
                signal="thumbs_down",
                user_id="u1",
            ),
            row(
                FEEDBACK_SCHEMA,
                event_id="f2",
                ts=at(3.6),
                load_date=day(9),
                target_id="s_inferred",
                signal="validate",
                user_id="u2",
            ),
        ],
        schema=FEEDBACK_SCHEMA,
    )
    reinforcement = pl.DataFrame(
        [
            {
                "tenant_id": "acme",
                "memory_id": "s_single",
                "cluster_id": "k",
                "reinforcement_count": 1,
                "last_reinforced_at": at(12.4),
                "reinforced_at": [at(12.4)],
            }
        ],
        schema=REINFORCEMENT,
    )
    return interactions, statements, feedback, reinforcement


def test_change_days_are_when_each_row_is_first_known() -> None:
    assert change_days(*frames()) == {day(0), day(3), day(5), day(9), day(12)}
    aggregate = frames()[3].drop("reinforced_at")
    assert day(12) in change_days(*frames()[:3], aggregate)
    assert change_days(*frames()[:3], None) == {day(0), day(3), day(5), day(9)}


def test_plan_ages_a_date_only_when_nothing_changed_since_the_date_before() -> None:
    changes = {day(0), day(3), day(5)}
    plan = snapshot_plan([key(4), key(0), key(1), key(3), key(7), key(6)], changes)
    assert plan == {
        key(0): None,  # the first: nothing to age from
        key(1): key(0),
        key(3): None,
        key(4): key(3),
        key(6): None,  # day 5 changed, though not asked
        key(7): key(6),
    }
    assert snapshot_plan([key(2)], set()) == {key(2): None}


def test_snapshots_over_a_sparse_range_equal_full_snapshots_every_day() -> None:
    inputs = frames()
    keys = [key(n) for n in range(14)]
    over = list(snapshots_over(keys, *inputs))
    assert [d.key for d in over] == keys
    assert [d.key for d in over if d.aged_from is None] == [key(n) for n in (0, 3, 5, 9, 12)]
    for d in over:
        full = snapshot(*inputs, as_of_for(d.key))
        assert d.snapshot.equals(full), d.key
        assert d.memories == full.height
    # Quiet days still move: the temporary note expires, the single inference is archived later.
    status = {
        d.key: dict(zip(d.snapshot["memory_id"], d.snapshot["status"], strict=True)) for d in over
    }
    assert status[key(1)]["s_temp"] == "active" and status[key(2)]["s_temp"] == "archived"
    assert over[4].aged_from == key(3) and over[4].snapshot["as_of"][0] == at(5)
