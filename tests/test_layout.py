"""A home of the earlier layout (every tenant's rows in one file per table) moves into tenant
folders on the first ingest; what is shared stays; caches and typed tables are rebuilt."""

from pathlib import Path

import polars as pl

from pipeline.config import Paths
from pipeline.ingest.layout import migrate_layout
from pipeline.storage.lake import Lake, write_parquet_atomic


def test_an_earlier_home_moves_into_tenant_folders(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    two = pl.DataFrame({"tenant_id": ["acme", "globex"], "memory_id": ["a", "g"]})
    write_parquet_atomic(two, lake / "feedback_scores" / "data.parquet")
    write_parquet_atomic(
        two, lake / "decay_snapshots" / "snapshot_date=2026-11-01" / "data.parquet"
    )
    write_parquet_atomic(two, lake / "tombstones" / "data.parquet")  # the home's: stays
    write_parquet_atomic(two, lake / "interactions" / "load_date=2026-11-01" / "data.parquet")
    write_parquet_atomic(two, lake / "embedding_cache" / "model" / "part-1.parquet")

    assert migrate_layout(Paths(tmp_path)) == ["decay_snapshots", "feedback_scores"]

    acme = Lake(Paths(tmp_path).for_tenant("acme"))
    assert acme.read("feedback_scores").collect()["memory_id"].to_list() == ["a"]
    assert acme.partition_keys("decay_snapshots") == ["2026-11-01"]
    assert sorted(Lake(Paths(tmp_path)).read("feedback_scores").collect()["memory_id"]) == [
        "a",
        "g",
    ]
    assert (lake / "tombstones" / "data.parquet").exists()
    assert not (lake / "feedback_scores" / "data.parquet").exists()
    assert not (lake / "interactions" / "load_date=2026-11-01").exists()  # rebuilt from events
    assert not (lake / "embedding_cache" / "model").exists()  # recomputed per tenant
    assert migrate_layout(Paths(tmp_path)) == []  # once moved, nothing to do
    # … and the home's own caches outside tenant folders (the analytics snapshot's redactions)
    # are never taken for the earlier layout's again.
    snapshot_cache = lake / "pii_cache" / "detector-v1" / "part-1.parquet"
    write_parquet_atomic(two, snapshot_cache)
    assert migrate_layout(Paths(tmp_path)) == [] and snapshot_cache.exists()
