"""Every tenant id the contract accepts reads back as itself from the real writers and readers: the
lake's hive layout (polars), the warehouse's reader (DuckDB) and Dagster's dynamic partitions; the
names those systems treat specially are refused (issue 51: `__HIVE_DEFAULT_PARTITION__` passed
the contract, printed "published" and never got a pack)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import dagster as dg
import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from assets.partitions import TENANTS
from pipeline.config import Paths
from pipeline.ingest.lines import LINES_SCHEMA
from pipeline.ingest.rules import validate_lines
from pipeline.ingest.tenant_ids import TENANT_ID_PATTERN, is_tenant_id
from pipeline.storage.lake import Lake
from pipeline.stores.local import parquet_source
from tests.conftest import interaction

DAY = "2026-11-02"
# Ids each reader once typed by their looks: Int64 (leading zeros lost), Float64, Date, Boolean,
# hex; and the ones a reader turns into null.
LOOKALIKES = [
    "007", "-0", "00", "12", "1e5", "1E5", "inf", "NaN", "nan", "true", "null", "None",
    "2026-11-01", "2026-1-1", "20261101", "0x1F", "1_000", "-", "_", "99999999999999999999",
]  # fmt: skip
RESERVED = ["__HIVE_DEFAULT_PARTITION__", "__", "__x", "___"]
IDS = st.one_of(
    st.sampled_from(LOOKALIKES + RESERVED),
    st.from_regex(TENANT_ID_PATTERN, fullmatch=True),
)
FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as found:
        yield found


def _accepted_by_ingest(tenant: str) -> bool:
    line = {"file": "a.jsonl", "line_no": 1, "raw": json.dumps(interaction(tenant_id=tenant))}
    events, _ = validate_lines(pl.DataFrame([line], schema=LINES_SCHEMA), date.fromisoformat(DAY))
    return events.height == 1


@FAST
@given(IDS)
def test_ingest_and_the_cli_agree_on_what_a_tenant_id_is(tenant: str) -> None:
    assert _accepted_by_ingest(tenant) == is_tenant_id(tenant)
    assert not is_tenant_id(tenant) or not tenant.startswith("__")


def _write(home: Path, tenant: str) -> Path:
    """One interactions partition of `tenant`, as ingest lays it out (the folder carries the
    tenant: the file leaves the column out, so the reader must take the folder's text)."""
    frame = pl.DataFrame({"event_id": ["i1"]}).with_columns(
        pl.lit(DAY).str.to_date().alias("load_date")
    )
    path = Paths(home).for_tenant(tenant).partition("interactions", DAY)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.drop("load_date").write_parquet(path)
    return path


@FAST
@given(IDS)
def test_every_accepted_id_reads_back_as_itself_from_the_lake_and_the_warehouse(
    tenant: str,
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = _write(Path(folder), tenant)
        from_lake = Lake(Paths(Path(folder))).read("interactions").select("tenant_id").collect()
        with duckdb.connect() as con:
            query = f"SELECT tenant_id FROM {parquet_source([path], True)}"
            ((from_duckdb,),) = con.execute(query).fetchall()
    read = from_lake["tenant_id"].to_list()
    if is_tenant_id(tenant):
        assert read == [tenant] and from_duckdb == tenant
    else:  # why it is refused: a reader makes it null
        assert tenant.startswith("__")
        if tenant == "__HIVE_DEFAULT_PARTITION__":
            assert read == [None] and from_duckdb is None


@FAST
@given(IDS.filter(is_tenant_id))
def test_every_accepted_id_is_a_dagster_tenant_partition(
    instance: dg.DagsterInstance, tenant: str
) -> None:
    instance.add_dynamic_partitions(TENANTS.name, [tenant])
    assert instance.has_dynamic_partition(TENANTS.name, tenant)
    assert tenant in TENANTS.get_partition_keys(dynamic_partitions_store=instance)
