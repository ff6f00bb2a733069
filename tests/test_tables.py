"""The table registry: one declaration per lake table, and the pandera checks generated from it."""

from __future__ import annotations

from datetime import UTC, datetime

import pandera.errors
import polars as pl
import pytest

from pipeline import tables
from pipeline.ingest.contracts import MemoryType, Signal


def test_the_count_columns_follow_the_signals_and_memory_types() -> None:
    assert tuple(Signal) == tables.SIGNALS
    assert (*MemoryType, "interaction") == tables.TYPE_COUNT_FIELDS


def test_every_declaration_is_whole() -> None:
    for table in tables.TABLES.values():
        assert set(table.primary_key) <= set(table.columns), table.name
        assert set(table.descriptions) <= set(table.columns), table.name
        assert set(table.hive_columns) <= set(table.columns), table.name
        assert table.comment, table.name
    assert tables.table("events").hive_columns == ("load_date",)
    assert tables.table("decay_snapshots").hive_columns == ("tenant_id", "snapshot_date")
    assert (
        tables.asset_name("events") == "raw_events" and tables.table_name("raw_events") == "events"
    )
    with pytest.raises(
        KeyError, match=r"'scores' is not a lake table declared in pipeline\.tables"
    ):
        tables.schema("scores")


def _pairs(ids: list[str | None]) -> pl.DataFrame:
    rows = pl.DataFrame(
        {"tenant_id": ["acme"] * len(ids), "pair_id": ids}, schema_overrides={"pair_id": pl.String}
    )
    return pl.concat([tables.empty("preference_pairs"), rows], how="diagonal")


def test_the_generated_checks_catch_a_duplicate_or_missing_key() -> None:
    checks = tables.checks("preference_pairs")
    checks.validate(_pairs(["p1", "p2"]))
    with pytest.raises(pandera.errors.SchemaError, match="pair_id"):
        checks.validate(_pairs(["p1", "p1"]))
    with pytest.raises(pandera.errors.SchemaErrors, match="not_nullable"):
        checks.validate(_pairs(["p1", None]), lazy=True)
    with pytest.raises(pandera.errors.SchemaError, match="margin"):
        checks.validate(_pairs(["p1"]).with_columns(pl.col("margin").cast(pl.Float32)))


def test_a_key_over_several_columns_is_unique_together() -> None:
    at = datetime(2026, 11, 1, tzinfo=UTC)
    runs = pl.concat(
        [
            tables.empty("dpo_runs"),
            pl.DataFrame(
                {"tenant_id": ["acme", "acme", "globex"], "run_at": [at, at, at]},
                schema={"tenant_id": pl.String, "run_at": pl.Datetime("us", "UTC")},
            ),
        ],
        how="diagonal",
    )
    with pytest.raises(pandera.errors.SchemaError, match="tenant_id"):
        tables.checks("dpo_runs").validate(runs)
    tables.checks("dpo_runs").validate(runs.slice(1))


def test_every_key_column_is_described() -> None:
    for table in tables.TABLES.values():
        for column in table.primary_key:
            assert table.description(column), (table.name, column)
    # A table's own description wins over the common one.
    examples, scores = tables.table("few_shot_sets"), tables.table("feedback_scores")
    assert examples.description("quality_lower").startswith("feedback_scores.quality_lower")
    assert scores.description("quality_lower").startswith("95 % lower bound of quality_score")


def test_the_architecture_table_is_the_registry() -> None:
    """docs/ARCHITECTURE.md's table is generated: `python -m pipeline.tables.docs` rewrites it."""
    from pipeline.tables import docs

    text = docs.DOC.read_text()
    assert docs.rewrite(text) == text, "regenerate with: python -m pipeline.tables.docs"
    for name in tables.TABLES:
        assert f"| **{name}**: " in text
