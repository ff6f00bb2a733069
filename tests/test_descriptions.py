"""Everything the catalog and the analyst snapshot show is described (issue 54 item 3): every asset
check, every declared column of the registry, every column of an asset's column schema. (Every
column of the snapshot has a DuckDB comment: tests/test_analytics.py.)"""

from __future__ import annotations

import polars as pl

from assets.metadata import schema_columns
from jobs.definitions import defs
from pipeline import tables


def test_every_asset_check_has_a_description() -> None:
    graph = defs.resolve_asset_graph()
    keys = sorted(graph.asset_check_keys, key=lambda k: k.to_user_string())
    undescribed = [k.to_user_string() for k in keys if not graph.get_check_spec(k).description]
    assert len(keys) >= 29 and undescribed == []
    # A blocking check says what its failure does.
    for key in keys:
        spec = graph.get_check_spec(key)
        if spec.blocking:
            assert "Blocking: a failure stops the steps after it" in (spec.description or ""), key


def test_every_declared_column_is_described() -> None:
    undescribed = [
        f"{table.name}.{column}"
        for table in tables.TABLES.values()
        for column in table.columns
        if not table.description(column)
    ]
    assert sum(len(t.columns) for t in tables.TABLES.values()) > 380 and undescribed == []


def test_every_column_of_the_catalog_is_described() -> None:
    graph = defs.resolve_asset_graph()
    counted, undescribed = 0, []
    for key in graph.get_all_asset_keys():
        schema = graph.get(key).metadata.get("dagster/column_schema")
        if schema is None:
            continue
        for column in schema.schema.columns:
            counted += 1
            if not column.description:
                undescribed.append(f"{key.to_user_string()}.{column.name}")
    assert counted > 370 and undescribed == []
    # A step's frame that is no lake table (dpo_policy's runs, memory_pack's summary) is
    # described column by column as well once it is materialized.
    from pipeline.preference.dpo import DPO_RUNS_SCHEMA

    for schema in (DPO_RUNS_SCHEMA, tables.PACK_SUMMARY, {"table": pl.String, "rows": pl.Int64}):
        assert all(c.description for c in schema_columns(schema).columns), schema


def test_a_number_that_is_no_probability_states_its_range() -> None:
    scores = tables.table("feedback_scores")
    lower = scores.description("quality_lower") or ""
    assert "−1 to 1" in lower and "no probability" in lower and "−0.70 without votes" in lower
    assert "−1 to 1" in (scores.description("quality_score") or "")
    assert "0.8 to 1.2" in (scores.description("reputation") or "")
    assert "0–2" in (tables.table("preference_pairs").description("margin") or "")


def test_the_quality_lower_figures_quoted_are_the_rules() -> None:
    from pipeline.feedback.scores import DEFAULT_SCORING, wilson_lower

    prior = (DEFAULT_SCORING.prior_positive, DEFAULT_SCORING.prior_negative)
    frame = pl.DataFrame({"a": [prior[0], prior[0] + 1], "b": [prior[1], prior[1]]})
    lower = frame.select(
        2 * wilson_lower(pl.col("a"), pl.col("b"), DEFAULT_SCORING.wilson_z) - 1
    ).to_series()
    assert [round(v, 2) for v in lower] == [-0.70, -0.54]  # no votes, one up-vote
