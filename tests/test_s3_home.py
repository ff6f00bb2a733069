"""A whole night with the home on S3 (issue 14, item 5), against a real SeaweedFS on 127.0.0.1:
`memorypack run --home s3://…` ingests, runs each tenant and builds analytics; the packs it
publishes load and verify from their S3 URL; every lake table on S3 equals the same night's on a
local home, row for row; and nothing of the home is written to local disk but the local work
folder (DuckDB files, locks, model working copies, the Dagster instance, scratch)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pytest

import jobs.runner
from jobs.cli import main
from jobs.runner import run_nightly
from memorypack import MemoryPack
from memorypack.format import read_latest, verify_pack
from memorypack.fs import ObjectPath, location
from pipeline.config import Paths
from pipeline.erasure.person import export
from pipeline.stores.objects import LOCKS_FOLDER
from tests.nights import END, KEY, NO_DPO, START, Night

TENANTS = ["acme", "globex"]
# Columns that hold the wall-clock time of the run (or a name made of it): they differ between
# any two nights, wherever the home is.
CLOCK_COLUMNS = (
    "embedded_at",
    "created_at",
    "run_at",
    "scored_at",
    "withdrawn_at",
    "version",
    "dagster_run_id",
)


def _local_lake(home: Path) -> dict[str, pl.DataFrame]:
    lake = home / "lake"
    return {
        f.relative_to(lake).as_posix(): pl.read_parquet(f, hive_partitioning=False)
        for f in sorted(lake.rglob("*.parquet"))
    }


def _s3_lake(home: ObjectPath) -> dict[str, pl.DataFrame]:
    lake = home / "lake"
    return {
        obj.relative_to(lake): pl.read_parquet(pa.BufferReader(obj.read_bytes()))
        for obj in lake.walk_files()
        if obj.name.endswith(".parquet")
    }


def _comparable(files: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """Table files by key; a cache's parts (named by the time they were written) by folder,
    their rows together; clock columns dropped, rows sorted."""
    tables: dict[str, list[pl.DataFrame]] = {}
    for key, frame in files.items():
        folder, name = key.rsplit("/", 1)
        tables.setdefault(key if name == "data.parquet" else folder, []).append(frame)
    out = {}
    for key, frames in tables.items():
        frame = pl.concat(frames, how="diagonal_relaxed")
        frame = frame.drop([c for c in frame.columns if c in CLOCK_COLUMNS])
        sortable = [c for c, t in frame.schema.items() if not isinstance(t, pl.List | pl.Array)]
        out[key] = frame.sort(sortable) if sortable else frame
    return out


def _files(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file()} if folder.exists() else set()


@pytest.mark.slow
def test_a_night_on_an_s3_home_matches_a_local_home_and_writes_only_the_work_folder(
    tmp_path: Path,
    seaweedfs: Any,
    two_tenant_night: Night,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The local home is the shared night (tests/nights.py): the same landing, DPO off, its
    tenants in this process, the same pseudonym key."""
    for name, value in seaweedfs.environment().items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("MEMORYPACK_PACKS", raising=False)
    monkeypatch.delenv("MEMORYPACK_LANDING", raising=False)
    monkeypatch.setenv("MEMORYPACK_PII_KEY", KEY)  # the local night's pseudonyms
    # The S3 night points this process's temp folder at the work folder: undone after the test.
    monkeypatch.setenv("TMPDIR", tempfile.gettempdir())
    monkeypatch.setattr(tempfile, "tempdir", tempfile.gettempdir())
    landing, local_home = two_tenant_night.landing, two_tenant_night.home
    night = two_tenant_night.outcome
    assert night.success, (night.failed_step, night.error)

    work, cwd = tmp_path / "work", tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MEMORYPACK_LOCAL_DIR", str(work))
    url = f"{seaweedfs.new_prefix()}/home"
    before = _files(tmp_path) - _files(work)
    inputs = _files(landing)  # the shared night's, outside tmp_path
    # The system's temp folder (the night points `tempfile` at the work folder's `tmp/`).
    system_temp = Path(tempfile.gettempdir())
    temp_before = {p.name for p in system_temp.glob("memorypack*")}
    # The command a user runs; its tenants run in this process with DPO off, as the local night.
    monkeypatch.setattr(jobs.runner, "run_nightly", partial(_in_process_night, run_nightly))
    code = main(["run", "--home", url, "--landing", str(landing), "--start", START, "--end", END])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"home {url}" in out and "2 of 2 changed tenant(s) published" in out

    # Nothing of the home outside the work folder; the landing (the input) as it was.
    assert _files(tmp_path) - _files(work) == before and _files(landing) == inputs
    assert not any(cwd.iterdir())
    assert {p.name for p in system_temp.glob("memorypack*")} <= temp_before
    assert (work / "warehouse.duckdb").is_file() and (work / "analytics.duckdb").is_file()
    assert (work / "dagster" / "dagster.yaml").is_file()
    # Pack staging cleaned up; what stays is the publish locks (local files, one host).
    assert [p.name for p in (work / "tmp").iterdir()] == [LOCKS_FOLDER]

    home = location(url)
    assert isinstance(home, ObjectPath)
    # The lake on S3 equals the local night's, table by table, row for row.
    s3_tables, local_tables = _comparable(_s3_lake(home)), _comparable(_local_lake(local_home))
    assert sorted(s3_tables) == sorted(local_tables)
    assert {k.split("/", 1)[0] for k in s3_tables} >= {
        "events", "interactions", "feedback_scores", "memory_embeddings", "embedding_cache",
        "pii_cache", "decay_snapshots", "few_shot_sets", "pack_versions",
    }  # fmt: skip
    # The analytics snapshot's own redaction cache (not a tenant's) holds the same texts: the ones
    # that differ by night, pack versions and run ids, are kept as made, never analysed.
    only: dict[str, set[str]] = {"s3": set(), "local": set()}
    for key in [k for k in local_tables if k.startswith("pii_cache/") and "tenant_id=" not in k]:
        theirs, mine = local_tables.pop(key), s3_tables.pop(key)
        shared = mine.join(theirs, on="text_hash", suffix="_local")
        assert shared.height > 0
        assert shared["redacted"].eq_missing(shared["redacted_local"]).all()
        assert shared["kinds"].eq_missing(shared["kinds_local"]).all()
        only["s3"] |= set(mine["text_hash"]) - set(shared["text_hash"])
        only["local"] |= set(theirs["text_hash"]) - set(shared["text_hash"])
    assert only == {"s3": set(), "local": set()}
    differ = {
        key: [c for c in frame.columns if not s3_tables[key][c].equals(frame[c])]
        for key, frame in local_tables.items()
        if not s3_tables[key].equals(frame)
    }
    assert differ == {}

    # Packs published on S3 load and verify from their URL, with what the local night published.
    for tenant in TENANTS:
        tenant_url = f"{url}/packs/{tenant}"
        version = read_latest(location(tenant_url))
        assert version is not None
        verify_pack(location(tenant_url) / version)
        pack = MemoryPack.load(tenant_url)
        local_pack = MemoryPack.load(local_home / "packs" / tenant)
        assert pack.manifest["tenant_id"] == tenant
        assert pack.manifest["files"].keys() == local_pack.manifest["files"].keys()
        contact = _contact(pack)
        found = [(m.memory_id, m.text) for m in pack.memories_for(contact_id=contact, k=5)]
        same = [(m.memory_id, m.text) for m in local_pack.memories_for(contact_id=contact, k=5)]
        assert found and found == same

    # The analyst snapshot was built from the S3 lake, in the work folder.
    with duckdb.connect(str(work / "analytics.duckdb"), read_only=True) as con:
        s3_counts = con.execute(
            "SELECT tenant_id, count(*) FROM interactions GROUP BY 1 ORDER BY 1"
        ).fetchall()
    with duckdb.connect(str(local_home / "analytics.duckdb"), read_only=True) as con:
        assert (
            con.execute(
                "SELECT tenant_id, count(*) FROM interactions GROUP BY 1 ORDER BY 1"
            ).fetchall()
            == s3_counts
        )
    assert [t for t, _ in s3_counts] == TENANTS
    # forget changes the home: the shared night's, only in a copy.
    _export_and_forget_match(url, two_tenant_night.copy(tmp_path / "local-home"), capsys)


def _export_and_forget_match(
    url: str, local_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memorypack export` and `forget` of one person on the S3 home find and remove what they do
    on the local home, and leave nothing of them in the S3 lake."""
    interactions = pl.read_parquet(next((local_home / "lake" / "interactions").rglob("*.parquet")))
    tenant = str(interactions["tenant_id"][0])
    person = str(interactions["contact_id"].drop_nulls().sort()[0])
    found = {}
    for home in (url, str(local_home)):
        paths = Paths.from_env(home)
        document = export(paths, tenant, person)
        found[home] = (
            len(document["events"]),
            {table: len(rows) for table, rows in document["derived"].items()},
        )
    assert found[url] == found[str(local_home)] and found[url][0] > 0
    removed = {}
    for home in (url, str(local_home)):
        assert main(["forget", "--home", home, "--tenant", tenant, "--contact", person]) == 0
        lines = capsys.readouterr().out.splitlines()
        removed[home] = [line for line in lines if "lake rows removed" in line]
        assert not any("pack versions rewritten: none" in line for line in lines)
    assert removed[url] == removed[str(local_home)] and removed[url]
    home = location(url)
    assert isinstance(home, ObjectPath)
    for key, frame in _s3_lake(home).items():
        if "tenant_id" in frame.columns:  # contact ids are per tenant: another's may be the same
            frame = frame.filter(pl.col("tenant_id") == tenant)
        elif "tenant_id=" in key and f"tenant_id={tenant}/" not in key:
            continue
        for column, dtype in frame.schema.items():
            assert dtype != pl.String or not frame[column].eq(person).any(), (key, column)


def _contact(pack: MemoryPack) -> str:
    """A contact the pack holds memories of."""
    contacts = pl.from_arrow(pack.memories.select(["contact_id"]))
    assert isinstance(contacts, pl.DataFrame)
    return str(contacts["contact_id"].drop_nulls().sort()[0])


def _in_process_night(real: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`memorypack run`'s night with the tenants in this process (workers=0) and DPO off."""
    return real(*args, **{**kwargs, "workers": 0, "settings": NO_DPO})
