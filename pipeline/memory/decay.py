"""Point-in-time confidence of every memory (SPEC §4.2): base × decay(age) × reputation, with status and flags."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta

import polars as pl

from memorypack.questions import STALE_AFTER_DAYS
from pipeline import tables
from pipeline.feedback.scores import DEFAULT_SCORING, ScoringConfig, compute_scores, distinct
from pipeline.ingest.contracts import MemoryType, Signal
from pipeline.ingest.memory_types import INTERACTION_TYPE, REINFORCEMENT_STEP, TYPE_RULES, TypeRule

TIMESTAMP = pl.Datetime("us", "UTC")


@dataclass(frozen=True)
class DecayConfig:
    """Every constant of SPEC §4.2 in one place, with the reason for each value."""

    rules: dict[str, TypeRule] = field(default_factory=lambda: dict(TYPE_RULES))
    # +0.1 per repeat, never beyond the type cap (the table's module says why)
    reinforcement_step: float = REINFORCEMENT_STEP
    # Temporaries are not actionable beyond 48 h (seed 004 "Lifetime: 48 hours unless promoted").
    temporary_lifetime_hours: float = 48.0
    # Single inferences older than 30 days are archived (seed 004 monthly audit, step 4).
    single_inference_archive_days: float = 30.0
    # Below 0.6, a high-impact memory must not drive action without asking (seed 004 hygiene rule 2).
    reconfirm_below: float = 0.6
    reconfirm_impact: str = "high"
    # Older than 6 months: the app must mention the age before acting (seed 004 hygiene rule 4).
    stale_after_days: float = STALE_AFTER_DAYS  # the app library warns by the same rule


DEFAULT_DECAY = DecayConfig()
REINFORCEMENT_SCHEMA = tables.schema(
    "memory_reinforcement", ["tenant_id", "memory_id", "reinforcement_count", "last_reinforced_at"]
)


def _known_by(frame: pl.LazyFrame, as_of: datetime) -> pl.LazyFrame:
    """Rows that had happened *and* had arrived before `as_of`: what the pipeline could know then.

    Filtering on the load date too makes a re-run of an old partition reproduce the belief of that
    day: feedback that arrived late changes the next snapshot, never history.
    """
    known = frame.filter(pl.col("ts") < as_of)
    if "load_date" in frame.collect_schema().names():
        known = known.filter(pl.col("load_date").is_null() | (pl.col("load_date") < as_of.date()))
    return known


def _reinforcement_as_of(
    reinforcement: pl.DataFrame | pl.LazyFrame | None, as_of: datetime
) -> pl.LazyFrame:
    """Reinforcement known before `as_of`.

    With a `reinforced_at` list column every repeat is dated and counted exactly; with only the
    aggregate columns, a row last reinforced after `as_of` cannot be split in time and is left out
    (no credit for reinforcement we cannot date).
    """
    if reinforcement is None:
        return pl.LazyFrame(schema=REINFORCEMENT_SCHEMA)
    lazy = reinforcement.lazy()
    if "reinforced_at" in lazy.collect_schema().names():
        dated = pl.col("reinforced_at").list.eval(pl.element().filter(pl.element() < as_of))
        return (
            lazy.with_columns(_dated=dated)
            .select(
                "tenant_id",
                "memory_id",
                reinforcement_count=pl.col("_dated").list.len().cast(pl.Int64),
                last_reinforced_at=pl.col("_dated").list.max().cast(TIMESTAMP),
            )
            .filter(pl.col("reinforcement_count") > 0)
        )
    return lazy.filter(pl.col("last_reinforced_at") < as_of).select(
        "tenant_id",
        "memory_id",
        pl.col("reinforcement_count").cast(pl.Int64),
        pl.col("last_reinforced_at").cast(TIMESTAMP),
    )


def _memories(interactions: pl.LazyFrame, statements: pl.LazyFrame) -> pl.LazyFrame:
    columns = [
        "tenant_id",
        "memory_id",
        "memory_kind",
        "memory_type",
        "contact_id",
        "impact_level",
        "category",
        "stated_confidence",
        "created_at",
    ]
    stmt = statements.select(
        "tenant_id",
        pl.col("event_id").alias("memory_id"),
        memory_kind=pl.lit("statement"),
        memory_type=pl.col("memory_type"),
        contact_id=pl.col("contact_id"),
        impact_level=pl.col("impact_level"),
        category=pl.col("category"),
        stated_confidence=pl.col("confidence").cast(pl.Float64),
        created_at=pl.col("ts").cast(TIMESTAMP),
    )
    inter = interactions.select(
        "tenant_id",
        pl.col("event_id").alias("memory_id"),
        memory_kind=pl.lit("interaction"),
        memory_type=pl.lit(INTERACTION_TYPE),
        contact_id=pl.col("contact_id"),
        impact_level=pl.lit(None, dtype=pl.String),
        category=pl.col("category"),
        stated_confidence=pl.col("importance").cast(pl.Float64),
        created_at=pl.col("ts").cast(TIMESTAMP),
    )
    return pl.concat([inter.select(columns), stmt.select(columns)])


def _rule_expr(config: DecayConfig, attribute: str) -> pl.Expr:
    mapping = {name: getattr(rule, attribute) for name, rule in config.rules.items()}
    return pl.col("memory_type").replace_strict(mapping, default=None, return_dtype=pl.Float64)


DAYS_PER_US = 1 / 86_400e6


# The snapshot's columns, in order (the memory, each step of its confidence, the verdicts): the
# registry's, but for the partition column its folder names.
SNAPSHOT_COLUMNS = tables.columns("decay_snapshots", without=("snapshot_date",))


def _last_validations(feedback_known: pl.LazyFrame) -> pl.LazyFrame:
    """(tenant_id, memory_id, last_validated_at): the newest `validate` signal on each memory."""
    return (
        feedback_known.filter(pl.col("signal") == Signal.VALIDATE.value)
        .group_by("tenant_id", "target_id")
        .agg(last_validated_at=pl.col("ts").max().cast(TIMESTAMP))
        .rename({"target_id": "memory_id"})
    )


def _status(config: DecayConfig) -> pl.Expr:
    """archived (a single inference or temporary memory past its life), inactive (confidence
    under its type's floor) or active."""
    inactive_below = _rule_expr(config, "inactive_below")
    archived = (
        (pl.col("memory_type") == MemoryType.SINGLE_INFERENCE.value)
        & (pl.col("age_days") > config.single_inference_archive_days)
    ) | (
        (pl.col("memory_type") == MemoryType.TEMPORARY.value)
        & (pl.col("age_days") * 24 > config.temporary_lifetime_hours)
    )
    inactive = inactive_below.is_not_null() & (pl.col("confidence") < inactive_below)
    return (
        pl.when(archived)
        .then(pl.lit("archived"))
        .when(inactive)
        .then(pl.lit("inactive"))
        .otherwise(pl.lit("active"))
    )


def _decayed(memories: pl.LazyFrame, config: DecayConfig, as_of: datetime) -> pl.LazyFrame:
    """Each memory's confidence as of `as_of`: base (stated, or its type's), plus reinforcement,
    times decay over its age and the reputation of its feedback; then its status and flags."""
    cap = _rule_expr(config, "cap")
    base = pl.coalesce(pl.col("stated_confidence"), _rule_expr(config, "base")).clip(0.0, cap)
    known = memories.with_columns(
        pl.col("reinforcement_count").fill_null(0),
        pl.col("reputation").fill_null(1.0),
        base_confidence=base,
        last_confirmed=pl.max_horizontal("created_at", "last_validated_at", "last_reinforced_at"),
    ).with_columns(
        reinforced_confidence=(
            pl.col("base_confidence") + config.reinforcement_step * pl.col("reinforcement_count")
        ).clip(0.0, cap)
    )
    return _aged(known, config, as_of)


def _aged(known: pl.LazyFrame, config: DecayConfig, as_of: datetime) -> pl.LazyFrame:
    """What of a snapshot depends on its instant alone: age, decay, confidence, status and flags
    of memories whose reinforced confidence, last confirmation and reputation are known."""
    cap = _rule_expr(config, "cap")
    # Times a constant, not divided by one: polars divides a column by a scalar as a multiplication
    # by its reciprocal, but a one-row chunk (or the streaming engine) by true division, so a
    # memory's age could differ by an ulp from one run to the next; one multiplication is the same
    # in every path (identical input → identical snapshot and pack, SPEC §5).
    age_days = (pl.lit(as_of) - pl.col("last_confirmed")).dt.total_microseconds() * DAYS_PER_US
    decay = _rule_expr(config, "factor").pow(pl.col("age_days") / _rule_expr(config, "period_days"))
    return (
        known.with_columns(age_days=age_days)
        .with_columns(decay_factor=decay)
        .with_columns(
            confidence=(
                pl.col("reinforced_confidence") * pl.col("decay_factor") * pl.col("reputation")
            ).clip(0.0, cap)
        )
        .with_columns(
            status=_status(config),
            needs_reconfirmation=(
                (pl.col("impact_level") == config.reconfirm_impact)
                & (pl.col("confidence") < config.reconfirm_below)
            ).fill_null(False),
            stale=pl.col("age_days") > config.stale_after_days,
            as_of=pl.lit(as_of).cast(TIMESTAMP),
        )
    )


def aged(
    previous: pl.DataFrame, as_of: datetime, config: DecayConfig = DEFAULT_DECAY
) -> pl.DataFrame:
    """The snapshot as of `as_of` from an earlier one, when nothing became known in between (no
    event, feedback or reinforcement: `pipeline.memory.decay_days`): the same memories, reputations and
    reinforcement, only older. Equal to `snapshot` at `as_of` then, at the cost of its rows."""
    as_of = as_of.replace(tzinfo=UTC) if as_of.tzinfo is None else as_of.astimezone(UTC)
    return _aged(previous.lazy(), config, as_of).select(SNAPSHOT_COLUMNS).collect()


def snapshot(
    interactions: pl.DataFrame | pl.LazyFrame,
    statements: pl.DataFrame | pl.LazyFrame,
    feedback: pl.DataFrame | pl.LazyFrame,
    reinforcement: pl.DataFrame | pl.LazyFrame | None,
    as_of: datetime,
    config: DecayConfig = DecayConfig(),
    scoring: ScoringConfig = DEFAULT_SCORING,
) -> pl.DataFrame:
    """Every memory created before `as_of`, with its confidence, status and flags as of that instant.

    Only what was known before `as_of` counts (memories, feedback, validations, reinforcement), so
    the reputation is recomputed from that feedback rather than taken from today's scores.
    """
    as_of = as_of.replace(tzinfo=UTC) if as_of.tzinfo is None else as_of.astimezone(UTC)
    interactions_known = _known_by(interactions.lazy(), as_of)
    statements_known = _known_by(statements.lazy(), as_of)
    feedback_known = _known_by(feedback.lazy(), as_of)
    scores = compute_scores(interactions_known, statements_known, feedback_known, scoring).lazy()
    keys = ["tenant_id", "memory_id"]
    memories = (
        _memories(interactions_known, statements_known)
        .pipe(distinct, keys)
        .join(
            scores.select(*keys, "reputation", "quality_score", "n_feedback"), on=keys, how="left"
        )
        .join(_last_validations(feedback_known), on=keys, how="left")
        .join(_reinforcement_as_of(reinforcement, as_of), on=keys, how="left")
    )
    return (
        _decayed(memories, config, as_of)
        .select(SNAPSHOT_COLUMNS)
        .sort("tenant_id", "memory_id")
        .collect()
    )


def as_of_for(load_date: str) -> datetime:
    """The instant a daily partition describes: 00:00 UTC the day after its load date."""
    day = date.fromisoformat(load_date)
    return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)


def point_in_time(snapshots: pl.DataFrame | pl.LazyFrame, when: datetime) -> pl.LazyFrame:
    """What we believed at `when`: the rows of the latest snapshot taken at or before it."""
    lazy = snapshots.lazy().filter(pl.col("as_of") <= when)
    return lazy.filter(pl.col("as_of") == pl.col("as_of").max())


def confidence_history(snapshots: pl.DataFrame | pl.LazyFrame, memory_id: str) -> pl.DataFrame:
    """How one memory's confidence and status evolved, one row per snapshot."""
    return (
        snapshots.lazy()
        .filter(pl.col("memory_id") == memory_id)
        .select("as_of", "tenant_id", "memory_id", "confidence", "status", "age_days", "reputation")
        .sort("as_of")
        .collect()
    )


def known_memory_count(
    interactions: pl.DataFrame | pl.LazyFrame,
    statements: pl.DataFrame | pl.LazyFrame,
    as_of: datetime,
) -> int:
    """How many memories a snapshot as of `as_of` must hold (the conservation check's other side)."""
    keys = pl.concat(
        [
            _known_by(frame.lazy(), as_of).select("tenant_id", "event_id")
            for frame in (interactions, statements)
        ]
    )
    return int(keys.unique().select(pl.len()).collect().item())


def snapshot_problems(snap: pl.DataFrame, config: DecayConfig = DEFAULT_DECAY) -> dict[str, int]:
    """Rows breaking a rule of §4.2 (all 0 for a sound snapshot): ranges, status vs thresholds, keys."""
    cap = _rule_expr(config, "cap")
    inactive_below = _rule_expr(config, "inactive_below")
    single = pl.col("memory_type") == MemoryType.SINGLE_INFERENCE.value
    temporary = pl.col("memory_type") == MemoryType.TEMPORARY.value
    should_archive = (single & (pl.col("age_days") > config.single_inference_archive_days)) | (
        temporary & (pl.col("age_days") * 24 > config.temporary_lifetime_hours)
    )
    below = inactive_below.is_not_null() & (pl.col("confidence") < inactive_below)
    expected = (
        pl.when(should_archive)
        .then(pl.lit("archived"))
        .when(below)
        .then(pl.lit("inactive"))
        .otherwise(pl.lit("active"))
    )
    counts = snap.select(
        confidence_out_of_range=(
            pl.col("confidence").is_null()
            | (pl.col("confidence") < 0)
            | (pl.col("confidence") > cap + 1e-12)
        ).sum(),
        unknown_memory_type=cap.is_null().sum(),
        status_inconsistent=(pl.col("status") != expected).fill_null(True).sum(),
        negative_age=(pl.col("age_days") < 0).sum(),
        duplicate_memories=pl.struct("tenant_id", "memory_id").is_duplicated().sum(),
    )
    return {name: int(value) for name, value in counts.row(0, named=True).items()}
