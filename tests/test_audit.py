"""The monthly audit and promotion candidates (seed 004 review mode) on one tiny snapshot."""

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from pipeline.ingest.contracts import FEEDBACK_SCHEMA, INTERACTION_SCHEMA, MEMORY_SCHEMA
from pipeline.memory.audit import AuditCheck, audit, audit_figures, promotion_candidates
from pipeline.memory.decay import REINFORCEMENT_SCHEMA, snapshot

AS_OF = datetime(2026, 11, 3, tzinfo=UTC)


def ago(days: float) -> datetime:
    return AS_OF - timedelta(days=days)


def stmt(memory_id: str, memory_type: str, age_days: float, **fields: Any) -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "event_id": memory_id,
        "ts": ago(age_days),
        "contact_id": "c1",
        "memory_type": memory_type,
        "content": f"content of {memory_id}",
        "category": "scheduling",
        **fields,
    }


STATEMENTS = pl.DataFrame(
    [
        stmt("rule", "explicit_instruction", 10),  # confidence 1.0 → high-confidence review
        stmt("fresh_pattern", "confirmed_pattern", 5),  # 0.8·0.9^(5/30) ≈ 0.786: not > 0.8
        stmt("old_pattern", "confirmed_pattern", 70),  # not reinforced for 70 days → stale pattern
        stmt("promo", "inferred_pattern", 100),  # reinforced twice today → 0.7, candidate
        stmt("promo_conflicted", "inferred_pattern", 100),  # same, but in a conflict
        stmt("promo_once", "inferred_pattern", 100),  # only one repeat
        stmt("archived_now", "single_inference", 40),  # archived 10 days ago: this period
        stmt("archived_long_ago", "single_inference", 90),  # archived 60 days ago: earlier period
        stmt("risky", "inferred_pattern", 30, impact_level="high"),  # 0.48 < 0.6
    ],
    schema=MEMORY_SCHEMA,
)
REINFORCEMENT = pl.DataFrame(
    [
        {
            "tenant_id": "acme",
            "memory_id": m,
            "reinforcement_count": n,
            "last_reinforced_at": ago(0.01),
        }
        for m, n in (("promo", 2), ("promo_conflicted", 3), ("promo_once", 1))
    ],
    schema=REINFORCEMENT_SCHEMA,
)
CONFLICTS = pl.DataFrame(
    {"tenant_id": ["acme"], "memory_id_a": ["promo_conflicted"], "memory_id_b": ["rule"]}
)


@pytest.fixture(scope="module")
def snap() -> pl.DataFrame:
    return snapshot(
        pl.DataFrame(schema=INTERACTION_SCHEMA),
        STATEMENTS,
        pl.DataFrame(schema=FEEDBACK_SCHEMA),
        REINFORCEMENT,
        AS_OF,
    )


def ids(findings: pl.DataFrame, check: AuditCheck) -> set[str]:
    return set(findings.filter(pl.col("check") == check.value)["memory_id"].drop_nulls())


def test_promotion_candidates_are_listed_not_applied(snap: pl.DataFrame) -> None:
    candidates = promotion_candidates(snap, CONFLICTS, STATEMENTS)
    assert candidates["memory_id"].to_list() == ["promo"]
    row = candidates.row(0, named=True)
    assert row["proposed_type"] == "confirmed_pattern"
    assert row["memory_type"] == "inferred_pattern"
    assert row["repeats"] == 2
    assert row["evidence_confidence"] == pytest.approx(0.7)
    assert row["confidence"] == pytest.approx(0.7, abs=1e-3)  # decayed a little since this morning
    assert row["content"] == "content of promo"
    # Nothing changes type in the snapshot itself.
    assert snap.filter(pl.col("memory_id") == "promo")["memory_type"].item() == "inferred_pattern"
    # Without the conflicts table, the conflicted one qualifies too.
    assert set(promotion_candidates(snap)["memory_id"]) == {"promo", "promo_conflicted"}


def test_audit_findings(snap: pl.DataFrame) -> None:
    findings = audit(snap, CONFLICTS, STATEMENTS)
    assert ids(findings, AuditCheck.HIGH_CONFIDENCE_REVIEW) == {"rule"}
    assert ids(findings, AuditCheck.STALE_PATTERN) == {"old_pattern"}
    assert ids(findings, AuditCheck.NEEDS_RECONFIRMATION) == {"risky"}
    assert ids(findings, AuditCheck.CONFLICT) == {"promo_conflicted", "rule"}
    assert ids(findings, AuditCheck.ARCHIVED_INFERENCE) == {"archived_now"}
    assert ids(findings, AuditCheck.PROMOTION_CANDIDATE) == {"promo"}
    summary = findings.filter(pl.col("check") == AuditCheck.ARCHIVED_INFERENCES_SUMMARY.value).row(
        0, named=True
    )
    assert summary["n_memories"] == 1
    assert summary["detail"].startswith("Archived 1 old observations (scheduling)")
    assert (findings["as_of"] == AS_OF).all()
    figures = audit_figures(findings)
    assert figures["archived_inferences_summary"] == 1
    assert figures["high_confidence_review"] == 1


def test_archived_memories_stay_in_the_snapshot(snap: pl.DataFrame) -> None:
    archived = snap.filter(pl.col("status") == "archived")["memory_id"].to_list()
    assert sorted(archived) == ["archived_long_ago", "archived_now"]
