"""The learning assets materialized on a tiny lake: values in the tables, checks, history kept."""

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import polars as pl
import pytest

from assets import examples, feedback, memory
from pipeline.config import Paths
from pipeline.ingest.contracts import FEEDBACK_SCHEMA, INTERACTION_SCHEMA, MEMORY_SCHEMA
from pipeline.storage.lake import Lake
from tests.tenant_runs import build_analytics, materialize_tenant, tenant_lake

DAY1, DAY2 = "2026-11-02", "2026-11-05"
AS_OF1 = datetime(2026, 11, 3, tzinfo=UTC)

# The stages between the typed tables and the examples (few_shot_sets: tests/test_semantic_assets.py).
ASSETS = [*feedback.ASSETS, *memory.ASSETS, examples.skill_stats]
CHECKS = [*feedback.CHECKS, *memory.CHECKS, *examples.CHECKS]


def at(day: str, hour: int = 10) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, tzinfo=UTC)


def common(event_id: str, ts: datetime, load: str, **fields: Any) -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "event_id": event_id,
        "ts": ts,
        "load_date": date.fromisoformat(load),
        "contact_id": "c1",
        **fields,
    }


def write_lake(lake: Lake, late_feedback: bool) -> None:
    interactions = [
        common(
            "i1",
            at("2026-10-20"),
            "2026-10-20",
            system="support",
            kind="reply",
            skill_id="concise",
            input="q1",
            output="a1",
            user_id="u1",
        ),
        common(
            "i2",
            at("2026-10-21"),
            "2026-10-21",
            system="support",
            kind="reply",
            skill_id="detailed",
            input="q2",
            output="a2",
            user_id="u1",
            importance=0.9,
        ),
    ]
    statements = [
        common(
            "m_rule",
            at("2026-09-01"),
            "2026-09-01",
            memory_type="explicit_instruction",
            content="Never book United",
            impact_level="high",
        ),
        common(
            "m_single",
            at("2026-09-20"),
            "2026-09-20",
            memory_type="single_inference",
            content="Seemed tired",
        ),
        common("m_temp", at(DAY1, 1), DAY1, memory_type="temporary", content="Maybe try X"),
    ]
    feedback = [common("f1", at(DAY1, 12), DAY1, target_id="i1", signal="thumbs_up", user_id="u1")]
    feedback += [
        common(f"f{k}", at(DAY1, 13), DAY1, target_id="i1", signal="thumbs_up", user_id="u1")
        for k in (2, 3)
    ]
    feedback.append(
        common("f4", at(DAY1, 12), DAY1, target_id="ghost", signal="thumbs_up", user_id="u1")
    )
    if late_feedback:
        # About day 1 (ts), but it only landed on day 2.
        feedback.append(
            common("f5", at(DAY1, 15), DAY2, target_id="i2", signal="thumbs_down", user_id="u2")
        )
    lake.write("interactions", pl.DataFrame(interactions, schema=INTERACTION_SCHEMA))
    lake.write("memory_statements", pl.DataFrame(statements, schema=MEMORY_SCHEMA))
    lake.write("feedback", pl.DataFrame(feedback, schema=FEEDBACK_SCHEMA))


def materialize(home: Path, key: str, instance: dg.DagsterInstance) -> dg.ExecuteInProcessResult:
    """acme's run for the night of load date `key` (what ingest found changed)."""
    return materialize_tenant([*ASSETS, *CHECKS], home, instance, load_dates=[key])


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("home")
    lake = tenant_lake(home)  # every row is acme's
    with dg.instance_for_test() as instance:
        write_lake(lake, late_feedback=False)
        first = materialize(home, DAY1, instance)
        day1 = pl.read_parquet(lake.paths.partition("decay_snapshots", DAY1, "snapshot_date"))
        write_lake(lake, late_feedback=True)
        second = materialize(home, DAY2, instance)
        build_analytics(home, instance)  # the warehouse is loaded after the tenants' runs
    return {"home": home, "lake": lake, "first": first, "second": second, "day1": day1}


def test_runs_succeed_and_checks_pass(runs: dict[str, Any]) -> None:
    for result in (runs["first"], runs["second"]):
        assert result.success
        evaluations = result.get_asset_check_evaluations()
        assert len(evaluations) == 3 + len(CHECKS)
        assert all(e.passed for e in evaluations), [
            (e.check_name, e.metadata) for e in evaluations if not e.passed
        ]


def test_feedback_scores_table(runs: dict[str, Any]) -> None:
    scores = {
        r["memory_id"]: r
        for r in runs["lake"].read("feedback_scores").collect().iter_rows(named=True)
    }
    assert set(scores) == {"i1", "i2", "m_rule", "m_single", "m_temp"}
    assert scores["i1"]["n_thumbs_up"] == 1  # the same user's three clicks count once
    assert scores["i2"]["n_thumbs_down"] == 1  # the late feedback is in today's scores
    assert scores["m_rule"]["reputation"] == 1.0
    materialization = runs["first"].asset_materializations_for_node("feedback_scores")[0]
    assert materialization.metadata["orphan_feedback"].value == 1
    assert materialization.metadata["duplicate_votes_ignored"].value == 2


def test_decay_snapshots_keep_history(runs: dict[str, Any]) -> None:
    lake: Lake = runs["lake"]
    assert lake.partition_keys("decay_snapshots") == [DAY1, DAY2]
    day1 = {r["memory_id"]: r for r in runs["day1"].iter_rows(named=True)}
    assert day1["m_rule"]["as_of"] == AS_OF1
    assert day1["m_rule"]["confidence"] == 1.0 and day1["m_rule"]["status"] == "active"
    assert day1["m_single"]["status"] == "archived"  # 43.6 days old: past 30 days, still a row
    assert day1["m_temp"]["status"] == "active"  # 23 h old
    assert day1["i2"]["reputation"] == 1.0
    # Day 1's partition was written once and never rewritten by the day-2 run.
    stored1 = pl.read_parquet(lake.paths.partition("decay_snapshots", DAY1, "snapshot_date"))
    assert stored1.equals(runs["day1"])
    day2 = {
        r["memory_id"]: r
        for r in pl.read_parquet(
            lake.paths.partition("decay_snapshots", DAY2, "snapshot_date")
        ).iter_rows(named=True)
    }
    assert day2["m_temp"]["status"] == "archived"  # past 48 h
    assert day2["i2"]["reputation"] < 1.0  # the late thumbs-down counts from the next snapshot on
    assert day2["i2"]["as_of"] == AS_OF1 + timedelta(days=3)
    # The warehouse holds both days: a point-in-time query for an analyst.
    with duckdb.connect(str(Paths.from_env(runs["home"]).warehouse), read_only=True) as con:
        rows = con.execute(
            "SELECT snapshot_date, status FROM decay_snapshots WHERE memory_id = 'm_temp' ORDER BY snapshot_date"
        ).fetchall()
    assert [status for _, status in rows] == ["active", "archived"]


def test_audit_and_skill_tables(runs: dict[str, Any]) -> None:
    lake: Lake = runs["lake"]
    findings = lake.read("memory_audit").collect()
    assert set(findings.filter(pl.col("check") == "high_confidence_review")["memory_id"]) == {
        "m_rule"
    }
    archived = findings.filter(pl.col("check") == "archived_inference")["memory_id"].to_list()
    assert archived == ["m_single"]
    assert lake.read("promotion_candidates").collect().is_empty()
    stats = {r["skill_id"]: r for r in lake.read("skill_stats").collect().iter_rows(named=True)}
    assert stats["concise"]["usage"] == 1 and stats["concise"]["n_positive"] == 1
    assert stats["detailed"]["n_negative"] == 1
    vectors = lake.read("skill_vectors").collect()
    assert set(vectors["vector_source"]) == {"one_hot"}  # no memory_embeddings in this lake
    prefs = lake.read("user_preferences").collect()
    assert prefs.filter(pl.col("user_id") == "u1")["n_updates"].item() == 2
    meta = runs["second"].asset_materializations_for_node("skill_stats")[0].metadata
    assert meta["positive_share_by_skill"].value == {"acme/concise": 1.0, "acme/detailed": 0.0}
