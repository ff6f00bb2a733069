"""A pack's memories file: statements and interactions with their decay, feedback scores,
conflicts, embeddings and promotions, one row a memory."""

from __future__ import annotations

import polars as pl

from pipeline import tables
from pipeline.feedback.scores import reputation, reputation_if_corrected
from pipeline.ingest.memory_types import BASE_CONFIDENCE, CONFIDENCE_CAP
from pipeline.memory.audit import promotion_candidates
from pipeline.publish.content import (
    DEFAULT_CONFIDENCE,
    MEMORY_SCHEMA,
    PACK_CONFLICT_SCHEMA,
    STRING,
    STRINGS,
    TIMESTAMP,
    PackInputs,
    ensure_columns,
)
from pipeline.usage import USAGE_CONFIG, boosts, demoted


def pack_memories(inputs: PackInputs) -> pl.DataFrame:
    """One row a memory the app may see: what it says, joined with its decay, feedback scores,
    conflicts, embedding and promotion (archived memories stay out)."""
    memories = _memory_rows(inputs)
    decay = _typed_rows(inputs, "decay_snapshots", DECAY_COLUMNS)
    scores = _typed_rows(inputs, "feedback_scores", SCORE_COLUMNS)
    conflicts = inputs.frame("memory_conflicts", PACK_CONFLICT_SCHEMA)
    promotions = _promotions(inputs, conflicts)
    in_conflict = pl.concat([conflicts["memory_id_a"], conflicts["memory_id_b"]]).drop_nulls()
    embedded = inputs.frame("memory_embeddings", {"memory_id": STRING})["memory_id"]
    return (
        memories.unique("memory_id", keep="last", maintain_order=True)
        .join(decay.unique("memory_id"), on="memory_id", how="left")
        .join(scores.unique("memory_id"), on="memory_id", how="left")
        .join(promotions, on="memory_id", how="left")
        .with_columns(
            # Without a decay snapshot yet, the stated confidence (or importance) stands.
            pl.coalesce("confidence", "base_confidence", pl.lit(DEFAULT_CONFIDENCE)).alias(
                "confidence"
            ),
            pl.col("status").fill_null("active"),
            pl.col("needs_reconfirmation").fill_null(False),
            pl.col("stale").fill_null(False),
            pl.coalesce("last_confirmed", "ts").alias("last_confirmed"),
            pl.col("quality_score").fill_null(0.0),
            pl.col("quality_lower").fill_null(0.0),
            pl.col("n_feedback").fill_null(0),
            pl.col("has_correction").fill_null(False),
            pl.col("memory_id").is_in(in_conflict.implode()).alias("has_conflict"),
            pl.col("memory_id").is_in(embedded.implode()).alias("has_embedding"),
            pl.col("tags").fill_null(pl.lit([], dtype=STRINGS)),
        )
        # Archived memories stay in the lake and warehouse (nothing is deleted); apps get the rest.
        .filter(pl.col("status") != "archived")
        .pipe(judged_in_use, inputs)
        .select([pl.col(c).cast(t) for c, t in MEMORY_SCHEMA.items()])
        .sort("memory_id")
        # Only packs with a memory the receipts judged carry the column: without receipts, the
        # pack is the one built before them, byte for byte.
        .pipe(lambda f: f.drop("usage_reason") if f["usage_reason"].null_count() == f.height else f)
    )


def judged_in_use(memories: pl.DataFrame, inputs: PackInputs) -> pl.DataFrame:
    """What the calls' receipts measured (SPEC §4.9): a memory confidently harmful in some skill
    has its confidence cut as if a person had corrected it (its reputation with one correction
    more, `reputation_if_corrected`); one confidently helpful gains at most
    `UsageConfig.memory_boost`, within its type's cap. `usage_reason` says which and why."""
    usage = inputs.frame("pack_usage", tables.schema("pack_usage"))
    harmful, helpful = demoted(usage), boosts(usage, USAGE_CONFIG.memory_boost)
    if harmful.is_empty() and helpful.is_empty():
        return memories.with_columns(usage_reason=pl.lit(None, STRING))
    masses = tables.schema("feedback_scores", ["memory_id", "positive_mass", "negative_mass"])
    votes = _typed_rows(inputs, "feedback_scores", masses).unique("memory_id")
    cap = pl.col("memory_type").replace_strict(CONFIDENCE_CAP, default=1.0, return_dtype=pl.Float64)
    return (
        memories.join(votes, on="memory_id", how="left")
        .join(
            harmful.rename({"item_id": "memory_id", "reason": "harm"}), on="memory_id", how="left"
        )
        .join(
            helpful.rename({"item_id": "memory_id", "reason": "help"}), on="memory_id", how="left"
        )
        .with_columns(
            pl.col("positive_mass").fill_null(0.0),
            pl.col("negative_mass").fill_null(0.0),
        )
        .with_columns(
            confidence=pl.when(pl.col("harm").is_not_null())
            .then(pl.col("confidence") * reputation_if_corrected() / reputation())
            .when(pl.col("help").is_not_null())
            .then(
                pl.min_horizontal(
                    pl.col("confidence") + pl.col("boost"),
                    pl.max_horizontal(cap, pl.col("confidence")),
                )
            )
            .otherwise(pl.col("confidence")),
            usage_reason=pl.when(pl.col("harm").is_not_null())
            .then(pl.lit("confidence cut as if corrected: ") + pl.col("harm"))
            .when(pl.col("help").is_not_null())
            .then(pl.format("confidence +{}: {}", pl.col("boost").round(2), pl.col("help"))),
        )
    )


def _memory_rows(inputs: PackInputs) -> pl.DataFrame:
    """The tenant's statements and interactions as one frame of memories, in their own words."""
    from pipeline.ingest import contracts

    statements = inputs.frame("memory_statements", contracts.MEMORY_SCHEMA)
    interactions = inputs.frame("interactions", {**contracts.INTERACTION_SCHEMA, "user_id": STRING})
    null_str = pl.lit(None, dtype=STRING)
    common = [pl.col("tenant_id"), pl.col("event_id").alias("memory_id"), pl.col("contact_id")]
    from_statements = statements.select(
        *common,
        pl.lit("statement").alias("memory_kind"),
        pl.col("memory_type"),
        null_str.alias("kind"),
        null_str.alias("system"),
        null_str.alias("skill_id"),
        null_str.alias("user_id"),
        pl.col("category"),
        pl.col("impact_level"),
        pl.col("content").alias("text"),
        null_str.alias("output"),
        pl.col("tags").cast(STRINGS),
        pl.coalesce(
            pl.col("confidence").cast(pl.Float64),
            pl.col("memory_type").replace_strict(
                BASE_CONFIDENCE, default=None, return_dtype=pl.Float64
            ),
        ).alias("base_confidence"),
        pl.col("ts").cast(TIMESTAMP),
    )
    from_interactions = interactions.select(
        *common,
        pl.lit("interaction").alias("memory_kind"),
        pl.lit("interaction").alias("memory_type"),
        pl.col("kind"),
        pl.col("system"),
        pl.col("skill_id"),
        pl.col("user_id"),
        pl.col("category"),
        null_str.alias("impact_level"),
        pl.col("input").alias("text"),
        pl.col("output"),
        pl.col("tags").cast(STRINGS),
        pl.col("importance").cast(pl.Float64).alias("base_confidence"),
        pl.col("ts").cast(TIMESTAMP),
    )
    return pl.concat([from_statements, from_interactions], how="vertical_relaxed")


# What a memory takes from the latest decay snapshot, and from its feedback scores.
DECAY_COLUMNS = tables.schema(
    "decay_snapshots",
    ["memory_id", "confidence", "status", "needs_reconfirmation", "stale", "last_confirmed"],
)
SCORE_COLUMNS = tables.schema(
    "feedback_scores",
    ["memory_id", "quality_score", "quality_lower", "n_feedback", "has_correction"],
)


def _typed_rows(inputs: PackInputs, name: str, columns: dict[str, pl.DataType]) -> pl.DataFrame:
    """The tenant's rows of `name`, just `columns`, of their types (missing ones null)."""
    return inputs.frame(name, columns).select(pl.col(c).cast(dtype) for c, dtype in columns.items())


def _promotions(inputs: PackInputs, conflicts: pl.DataFrame) -> pl.DataFrame:
    """(memory_id, promotion_to, promotion_reason) of the audit's promotion candidates, computed
    by the audit's own rule on the pack's decay snapshot (so the pack never waits for the audit
    asset); none when the snapshot predates the columns the rule reads."""
    empty = pl.DataFrame(
        schema={"memory_id": STRING, "promotion_to": STRING, "promotion_reason": STRING}
    )
    snapshot = inputs.rows("decay_snapshots")
    needed = {"reinforced_confidence", "reputation", "reinforcement_count", "memory_type"}
    if snapshot is None or not snapshot.height or not needed <= set(snapshot.columns):
        return empty
    snapshot = ensure_columns(
        snapshot, {"as_of": TIMESTAMP, "contact_id": STRING, "last_confirmed": TIMESTAMP}
    )
    found = promotion_candidates(
        snapshot, conflicts.select("tenant_id", "memory_id_a", "memory_id_b")
    )
    return found.select(
        "memory_id", promotion_to="proposed_type", promotion_reason="reason"
    ).unique("memory_id", keep="first", maintain_order=True)
