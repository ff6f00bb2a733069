"""The monthly memory audit of seed 004 (review mode) and the promotion candidates it lists, never applies.

`memory_audit` has one row per finding: as_of, tenant_id, contact_id, check, memory_id, memory_type,
confidence, status, age_days, detail. `check` is one of `AuditCheck`; the
`archived_inferences_summary` rows carry no memory_id but a count and a one-line summary per
tenant × contact. `promotion_candidates`: as_of, tenant_id, contact_id, memory_id, memory_type,
proposed_type, evidence_confidence, confidence, repeats, last_confirmed, content, reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

import polars as pl

from pipeline import tables
from pipeline.frames import fmt
from pipeline.ingest.contracts import MemoryType
from pipeline.memory.decay import DEFAULT_DECAY, DecayConfig

TIMESTAMP = pl.Datetime("us", "UTC")


class AuditCheck(StrEnum):
    HIGH_CONFIDENCE_REVIEW = "high_confidence_review"
    STALE_PATTERN = "stale_pattern"
    NEEDS_RECONFIRMATION = "needs_reconfirmation"
    CONFLICT = "conflict"
    ARCHIVED_INFERENCE = "archived_inference"
    ARCHIVED_INFERENCES_SUMMARY = "archived_inferences_summary"
    PROMOTION_CANDIDATE = "promotion_candidate"


@dataclass(frozen=True)
class AuditConfig:
    """Thresholds of the seed's monthly review checklist, with the reason for each."""

    # "List all memories with confidence > 0.8 — still accurate?": the ones the app acts on most.
    high_confidence_above: float = 0.8
    # "Find patterns not reinforced in 60+ days": about two decay periods of a pattern.
    stale_pattern_days: float = 60.0
    # The review is monthly: "archived this period" = within the 30 days before as_of.
    period_days: float = 30.0
    # Promotion inferred → confirmed (seed 004 "Temporary → Preference"): repetition 2–3 times (the
    # low end: it is only a *suggestion* for a person to confirm), no contradiction, confidence ≥ 0.7.
    # The inferred cap is 0.7, so the *decayed* confidence reaches 0.7 only at the instant of a
    # reinforcement; the rule therefore reads the confidence the evidence supports (base +
    # reinforcement, × reputation, capped: `evidence_confidence`) and leaves time to the status: the
    # memory must still be active.
    promotion_min_repeats: int = 2
    promotion_min_confidence: float = 0.7
    # Comparing a capped confidence (exactly 0.7 for a reinforced inferred pattern) with ≥ 0.7 must
    # not depend on the last bit of a float sum.
    tolerance: float = 1e-9


PATTERN_TYPES = (MemoryType.CONFIRMED_PATTERN.value, MemoryType.INFERRED_PATTERN.value)
PROMOTIONS = {MemoryType.INFERRED_PATTERN.value: MemoryType.CONFIRMED_PATTERN.value}


def conflicted_ids(conflicts: pl.DataFrame | pl.LazyFrame | None) -> pl.LazyFrame:
    """(tenant_id, memory_id, conflicts_with) for both sides of every conflict."""
    lazy = (conflicts if conflicts is not None else tables.empty("memory_conflicts")).lazy()
    return pl.concat(
        [
            lazy.select("tenant_id", memory_id="memory_id_a", conflicts_with="memory_id_b"),
            lazy.select("tenant_id", memory_id="memory_id_b", conflicts_with="memory_id_a"),
        ]
    )


def promotion_candidates(
    snapshot: pl.DataFrame | pl.LazyFrame,
    conflicts: pl.DataFrame | pl.LazyFrame | None = None,
    statements: pl.DataFrame | pl.LazyFrame | None = None,
    config: AuditConfig = AuditConfig(),
    decay: DecayConfig = DEFAULT_DECAY,
) -> pl.DataFrame:
    """Inferred patterns that could become confirmed ones — listed for a person to confirm, never applied."""
    conflicted = conflicted_ids(conflicts).select("tenant_id", "memory_id").unique()
    cap = pl.col("memory_type").replace_strict(
        {name: rule.cap for name, rule in decay.rules.items()}, default=1.0, return_dtype=pl.Float64
    )
    evidence = (pl.col("reinforced_confidence") * pl.col("reputation")).clip(0.0, cap)
    candidates = (
        snapshot.lazy()
        .with_columns(evidence_confidence=evidence)
        .filter(
            pl.col("memory_type").is_in(list(PROMOTIONS))
            & (pl.col("status") == "active")
            & (pl.col("reinforcement_count") >= config.promotion_min_repeats)
            & (pl.col("evidence_confidence") >= config.promotion_min_confidence - config.tolerance)
        )
        .join(conflicted, on=["tenant_id", "memory_id"], how="anti")
        .with_columns(
            proposed_type=pl.col("memory_type").replace_strict(PROMOTIONS, return_dtype=pl.String),
            repeats=pl.col("reinforcement_count"),
            reason=fmt(
                "seen {} more times, no conflict, confidence {} (today {}): ask whether to treat it as a preference",
                pl.col("reinforcement_count"),
                pl.col("evidence_confidence").round(2),
                pl.col("confidence").round(2),
            ),
        )
    )
    if statements is not None:
        content = statements.lazy().select("tenant_id", memory_id="event_id", content="content")
        candidates = candidates.join(content, on=["tenant_id", "memory_id"], how="left")
    else:
        candidates = candidates.with_columns(content=pl.lit(None, dtype=pl.String))
    return (
        candidates.select(
            "as_of",
            "tenant_id",
            "contact_id",
            "memory_id",
            "memory_type",
            "proposed_type",
            "evidence_confidence",
            "confidence",
            "repeats",
            "last_confirmed",
            "content",
            "reason",
        )
        .sort("tenant_id", "contact_id", "memory_id", nulls_last=True)
        .collect()
    )


def _finding(frame: pl.LazyFrame, check: AuditCheck, detail: pl.Expr) -> pl.LazyFrame:
    return frame.with_columns(
        check=pl.lit(check.value), n_memories=pl.lit(1, dtype=pl.Int64), detail=detail
    ).select(tables.columns("memory_audit"))


def _archive_findings(
    memories: pl.LazyFrame, config: AuditConfig, decay: DecayConfig
) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The single inferences archived this period, one finding each, and one summary row per
    contact saying how many went."""
    # A single inference is archived the moment its age passes the limit: this period's archive is
    # the ones whose moment fell within the last `period_days`.
    archive_age = decay.single_inference_archive_days
    archived_now = memories.filter(
        (pl.col("memory_type") == MemoryType.SINGLE_INFERENCE.value)
        & (pl.col("status") == "archived")
        & (pl.col("age_days") <= archive_age + config.period_days)
    )
    archived_rows = _finding(
        archived_now,
        AuditCheck.ARCHIVED_INFERENCE,
        fmt(
            "archived on {} (single inference older than {} days)",
            (pl.col("last_confirmed") + timedelta(days=archive_age)).dt.date(),
            pl.lit(int(archive_age)),
        ),
    )
    summary = (
        archived_now.group_by("as_of", "tenant_id", "contact_id")
        .agg(
            n_memories=pl.len().cast(pl.Int64),
            confidence=pl.col("confidence").max(),
            categories=pl.col("category").fill_null("other").unique().sort().str.join(", "),
        )
        .with_columns(
            check=pl.lit(AuditCheck.ARCHIVED_INFERENCES_SUMMARY.value),
            memory_id=pl.lit(None, dtype=pl.String),
            memory_type=pl.lit(MemoryType.SINGLE_INFERENCE.value),
            status=pl.lit("archived"),
            age_days=pl.lit(None, dtype=pl.Float64),
            detail=fmt(
                "Archived {} old observations ({}); highest remaining confidence {}",
                pl.col("n_memories"),
                pl.col("categories"),
                pl.col("confidence").round(2),
            ),
        )
        .select(tables.columns("memory_audit"))
    )
    return archived_rows, summary


def audit(
    snapshot: pl.DataFrame | pl.LazyFrame,
    conflicts: pl.DataFrame | pl.LazyFrame | None = None,
    statements: pl.DataFrame | pl.LazyFrame | None = None,
    config: AuditConfig = AuditConfig(),
    decay: DecayConfig = DEFAULT_DECAY,
) -> pl.DataFrame:
    """Findings of the monthly review for one snapshot (statements about people; interactions are logs)."""
    memories = snapshot.lazy().filter(pl.col("memory_kind") == "statement")
    live = memories.filter(pl.col("status") != "archived")
    high = _finding(
        live.filter(pl.col("confidence") > config.high_confidence_above),
        AuditCheck.HIGH_CONFIDENCE_REVIEW,
        fmt("confidence {}: still accurate?", pl.col("confidence").round(2)),
    )
    stale_patterns = _finding(
        live.filter(
            pl.col("memory_type").is_in(PATTERN_TYPES)
            & (pl.col("age_days") >= config.stale_pattern_days)
        ),
        AuditCheck.STALE_PATTERN,
        fmt("not reinforced or confirmed for {} days: still relevant?", pl.col("age_days").floor()),
    )
    reconfirm = _finding(
        live.filter(pl.col("needs_reconfirmation")),
        AuditCheck.NEEDS_RECONFIRMATION,
        fmt("high impact, confidence {}: ask before acting", pl.col("confidence").round(2)),
    )
    conflict_rows = _finding(
        memories.join(conflicted_ids(conflicts), on=["tenant_id", "memory_id"], how="inner"),
        AuditCheck.CONFLICT,
        fmt("conflicts with {}: which should win?", pl.col("conflicts_with")),
    )
    archived_rows, summary = _archive_findings(memories, config, decay)
    promotions = promotion_candidates(snapshot, conflicts, statements, config, decay).lazy()
    promotion_rows = _finding(
        snapshot.lazy().join(
            promotions.select("tenant_id", "memory_id", "reason"), on=["tenant_id", "memory_id"]
        ),
        AuditCheck.PROMOTION_CANDIDATE,
        pl.col("reason"),
    )
    return (
        pl.concat(
            [high, stale_patterns, reconfirm, conflict_rows, archived_rows, summary, promotion_rows]
        )
        .with_columns(pl.col("as_of").cast(TIMESTAMP))
        .sort("tenant_id", "check", "contact_id", "memory_id", nulls_last=True)
        .collect()
    )


def audit_figures(findings: pl.DataFrame) -> dict[str, int]:
    """Counts per check (the summary rows count the archived memories they stand for)."""
    counts = findings.group_by("check").agg(pl.col("n_memories").sum()).sort("check")
    return {str(check): int(n) for check, n in counts.iter_rows()}
