"""A run's decay snapshots over many load dates: a full snapshot where something became known, the
one before it aged where nothing did, so a long sparse range costs what its data costs."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date

import polars as pl

from pipeline.feedback.scores import DEFAULT_SCORING, ScoringConfig
from pipeline.memory.decay import (
    DEFAULT_DECAY,
    DecayConfig,
    aged,
    as_of_for,
    known_memory_count,
    snapshot,
)


def _first_known(frame: pl.DataFrame | pl.LazyFrame) -> pl.LazyFrame:
    """The load date whose snapshot first holds each row: a row is known as of midnight M when it
    happened before M and arrived (its load date) before M's day (`pipeline.memory.decay._known_by`), so
    from the snapshot of the later of its event day and its load date."""
    lazy = frame.lazy()
    day = pl.col("ts").dt.date()
    if "load_date" in lazy.collect_schema().names():
        day = pl.max_horizontal(day, pl.col("load_date").cast(pl.Date))
    return lazy.select(key=day)


def _reinforced_days(reinforcement: pl.DataFrame | pl.LazyFrame | None) -> pl.LazyFrame:
    """The days of each repeat (dated repeats) or of the last one (aggregate rows): a repeat
    counts in a snapshot once it happened before the snapshot's instant."""
    if reinforcement is None:
        return pl.LazyFrame(schema={"key": pl.Date})
    lazy = reinforcement.lazy()
    if "reinforced_at" in lazy.collect_schema().names():
        return lazy.select(key=pl.col("reinforced_at").explode().dt.date()).drop_nulls()
    return lazy.select(key=pl.col("last_reinforced_at").dt.date()).drop_nulls()


def change_days(
    interactions: pl.DataFrame | pl.LazyFrame,
    statements: pl.DataFrame | pl.LazyFrame,
    feedback: pl.DataFrame | pl.LazyFrame,
    reinforcement: pl.DataFrame | pl.LazyFrame | None,
) -> set[date]:
    """The load dates whose snapshot knows something the day before's did not."""
    days = pl.concat(
        [
            *(_first_known(f) for f in (interactions, statements, feedback)),
            _reinforced_days(reinforcement),
        ]
    )
    return set(days.unique().collect()["key"].to_list())


def snapshot_plan(keys: Iterable[str], changes: Iterable[date]) -> dict[str, str | None]:
    """Each load date → the earlier one of `keys` its snapshot ages from, or None (a full snapshot):
    the first date, and every date with a change since the date before it in `keys`."""
    changed = sorted(changes)
    plan: dict[str, str | None] = {}
    previous: str | None = None
    for key in sorted(set(keys)):
        if previous is not None:
            since, until = date.fromisoformat(previous), date.fromisoformat(key)
            quiet = bisect_right(changed, since) == bisect_right(changed, until)
            plan[key] = previous if quiet else None
        else:
            plan[key] = None
        previous = key
    return plan


# What a snapshot reads (`pipeline.memory.decay._memories`, `_known_by`, `pipeline.feedback.scores`).
_READ = {
    "interactions": [
        "tenant_id",
        "event_id",
        "ts",
        "load_date",
        "contact_id",
        "category",
        "importance",
    ],
    "statements": [
        "tenant_id",
        "event_id",
        "ts",
        "load_date",
        "contact_id",
        "memory_type",
        "category",
        "impact_level",
        "confidence",
    ],
    "feedback": [
        "tenant_id",
        "event_id",
        "ts",
        "load_date",
        "target_id",
        "signal",
        "rating",
        "user_id",
    ],
}


def _read_once(frame: pl.DataFrame | pl.LazyFrame, columns: list[str] | None) -> pl.DataFrame:
    """The rows a run's snapshots read, in memory: each full snapshot would scan the lake again."""
    lazy = frame.lazy()
    if columns is not None:
        names = lazy.collect_schema().names()
        lazy = lazy.select(c for c in columns if c in names)
    return lazy.collect()


@dataclass(frozen=True)
class DaySnapshot:
    key: str
    snapshot: pl.DataFrame
    memories: int  # how many it must hold (the conservation check's other side)
    aged_from: str | None  # the load date it was aged from; None: computed from the events


def snapshots_over(
    keys: Iterable[str],
    interactions: pl.DataFrame | pl.LazyFrame,
    statements: pl.DataFrame | pl.LazyFrame,
    feedback: pl.DataFrame | pl.LazyFrame,
    reinforcement: pl.DataFrame | pl.LazyFrame | None,
    config: DecayConfig = DEFAULT_DECAY,
    scoring: ScoringConfig = DEFAULT_SCORING,
) -> Iterator[DaySnapshot]:
    """The snapshot of each load date, in date order: from the events on a date where something
    became known, else the previous date's aged (equal, row for row: tests/test_decay_days.py)."""
    keys = sorted(set(keys))
    # One date (a usual night) is one full snapshot: no need to read when rows became known.
    changes = change_days(interactions, statements, feedback, reinforcement) if keys[1:] else ()
    plan = snapshot_plan(keys, changes)
    if sum(source is None for source in plan.values()) > 1:
        interactions = _read_once(interactions, _READ["interactions"])
        statements = _read_once(statements, _READ["statements"])
        feedback = _read_once(feedback, _READ["feedback"])
        reinforcement = None if reinforcement is None else _read_once(reinforcement, None)
    previous: DaySnapshot | None = None
    for key, source in plan.items():
        as_of = as_of_for(key)
        if source is None or previous is None:
            args = (interactions, statements, feedback, reinforcement)
            current = DaySnapshot(
                key,
                snapshot(*args, as_of, config, scoring),
                known_memory_count(interactions, statements, as_of),
                None,
            )
        else:
            current = DaySnapshot(
                key, aged(previous.snapshot, as_of, config), previous.memories, source
            )
        yield current
        previous = current
