"""pack_usage and pack_uplift materialized for one tenant (issue 42 item 3): values in the
tables, the warning check when the pack hurts, and one note when no call carries a receipt."""

from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
import polars as pl

from assets import feedback, usage
from pipeline.ingest.contracts import FEEDBACK_SCHEMA, INTERACTION_SCHEMA
from tests.tenant_runs import materialize_tenant, tenant_lake

DAY = "2026-11-02"
TS = datetime(2026, 11, 2, 10, tzinfo=UTC)
VERSION = "20261101T020000123456Z-0123abcd"


def _write(home: Path, receipts: bool) -> None:
    """30 pack calls that people disliked (2 in 3) and 10 holdout calls they liked."""
    interactions, votes = [], []
    for i in range(40):
        holdout = i >= 30
        receipt = {
            "context_pack_version": VERSION,
            "context_items": [] if holdout else ["concise@1", "m_rule", "ghost"],
            "context_holdout": holdout,
        }
        interactions.append(
            {
                "tenant_id": "acme",
                "event_id": f"i{i}",
                "ts": TS,
                "load_date": date.fromisoformat(DAY),
                "system": "support",
                "kind": "reply",
                "skill_id": "concise",
                "input": f"q{i}",
                "output": f"a{i}",
                **(receipt if receipts else {}),
            }
        )
        liked = holdout or i % 3 == 0
        votes.append(
            {
                "tenant_id": "acme",
                "event_id": f"f{i}",
                "ts": TS,
                "load_date": date.fromisoformat(DAY),
                "target_id": f"i{i}",
                "signal": "thumbs_up" if liked else "thumbs_down",
            }
        )
    lake = tenant_lake(home)
    lake.write("interactions", pl.DataFrame(interactions, schema=INTERACTION_SCHEMA))
    lake.write("feedback", pl.DataFrame(votes, schema=FEEDBACK_SCHEMA))
    lake.write(
        "memory_statements",
        pl.DataFrame(schema=tenant_lake(home).read_or_empty("memory_statements").collect_schema()),
    )


def _run(home: Path) -> dg.ExecuteInProcessResult:
    with dg.instance_for_test() as instance:
        return materialize_tenant([*feedback.ASSETS, *usage.ASSETS, *usage.CHECKS], home, instance)


def test_a_hurting_pack_is_measured_and_warned_about(tmp_path: Path) -> None:
    _write(tmp_path, receipts=True)
    result = _run(tmp_path)
    assert result.success  # a warning never blocks
    (check,) = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "pack_not_hurting"
    ]
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["hurting"].value == f"{VERSION} × concise"
    lake = tenant_lake(tmp_path)
    uplift = lake.read("pack_uplift").collect().row(0, named=True)
    assert (uplift["n_pack_calls"], uplift["n_holdout_calls"]) == (30, 10)
    assert uplift["uplift"] < 0 and uplift["uplift_upper"] < 0
    items = lake.read("pack_usage").collect().sort("item_id")
    assert items.select("item_id", "item_kind", "uses").rows() == [
        ("concise@1", "template", 30),
        ("ghost", "unknown", 30),
        ("m_rule", "unknown", 30),
    ]
    # Every item was in every pack call: the holdout alone is what they are compared with.
    assert items["n_compared"].to_list() == [10, 10, 10]
    assert (items["effect"] < 0).all() and (items["effect"] > items["raw_effect"]).all()


def test_without_receipts_the_stage_says_so_once_and_writes_empty_tables(tmp_path: Path) -> None:
    _write(tmp_path, receipts=False)
    result = _run(tmp_path)
    assert result.success
    materialized = [
        m
        for node in ("pack_usage", "pack_uplift")
        for m in result.asset_materializations_for_node(node)
    ]
    notes = [m.metadata["note"].value for m in materialized if "note" in m.metadata]
    assert notes == ["no interaction carries a receipt (context): nothing to measure, empty tables"]
    lake = tenant_lake(tmp_path)
    assert lake.read("pack_usage").collect().is_empty()
    assert lake.read("pack_uplift").collect().is_empty()
    (check,) = [
        e for e in result.get_asset_check_evaluations() if e.check_name == "pack_not_hurting"
    ]
    assert check.passed
