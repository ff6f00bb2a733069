"""The contract's rules on the typed tables are generated from the contract's FIELDS (one
declaration): allowed values, ranges, lengths as stored, required fields, well-formed ids."""

from __future__ import annotations

import pandera.errors
import polars as pl
import pytest

from pipeline.ingest import contracts
from tests.test_conflicts import statement, statements_frame
from tests.test_consolidate import interaction


def fails(table: str, frame: pl.DataFrame) -> bool:
    try:
        contracts.contract_checks(table).validate(frame, lazy=True)
    except pandera.errors.SchemaErrors:
        return True
    return False


def interactions(**values: object) -> pl.DataFrame:
    row = interaction("i1", "Where is my order?")
    row.update(values)
    return pl.DataFrame([row], schema=contracts.INTERACTION_SCHEMA)


def test_valid_rows_pass_and_each_rule_of_the_contract_fails_a_row() -> None:
    assert not fails("interactions", interactions(importance=0.5, stage="draft", category="x"))
    assert fails("interactions", interactions(importance=1.5))  # range
    assert fails("interactions", interactions(stage="nope"))  # allowed values
    assert fails("interactions", interactions(system=None))  # required for interactions
    assert fails("interactions", interactions(tenant_id="Not A Tenant!"))  # tenant id
    assert fails("interactions", interactions(event_id="e" * 200))  # event id length
    assert fails("interactions", interactions(system="s" * 300))  # max_chars
    memories = statements_frame([statement("m1", "Prefers email")])
    assert not fails("memory_statements", memories)
    assert fails("memory_statements", memories.with_columns(category=pl.lit("x")))  # an enum here
    assert fails("memory_statements", memories.with_columns(confidence=pl.lit(2.0)))
    assert fails("memory_statements", memories.with_columns(content=pl.lit(None, pl.String)))


@pytest.mark.parametrize("table", sorted(contracts.TABLE_EVENT_TYPES))
def test_every_contract_rule_on_a_stored_column_is_checked(table: str) -> None:
    """Each field of FIELDS with a rule pandera can check on the stored table has a check."""
    declared = contracts.tables.schema(table)
    checked = contracts.contract_checks(table).columns
    for f in contracts.FIELDS:
        if f.name not in declared:
            continue
        rule = (
            f.allowed
            or f.low is not None
            or (f.kind is contracts.JsonKind.STRING and (f.max_chars or f.kept_chars))
        )
        if rule:
            assert checked[f.name].checks, f.name
