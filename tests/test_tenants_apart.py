"""Tenants are the unit of work (issue 14): their runs in parallel processes publish what runs one
after the other publish, and a tenant's run reads no other tenant's files."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest

from jobs.runner import RunOutcome, _tenant_runs, run_nightly, run_tenant
from memorypack.format import read_latest
from tests.nights import END, KEY, NO_DPO, START, Night

# Pack tables compared row for row (vectors and the manifest's names and times differ by design).
TABLES = ("memories", "few_shot", "skills", "summaries", "conflicts", "templates")


def _tables(home: Path, tenant: str) -> dict[str, pl.DataFrame]:
    folder = home / "packs" / tenant
    live = folder / str(read_latest(folder))
    found = {}
    for name in TABLES:
        frame = pl.read_parquet(live / f"{name}.parquet")
        found[name] = frame.drop([c for c in frame.columns if c in ("version", "created_at")])
    return found


def _row_counts(home: Path) -> dict[str, int]:
    """Rows per table of the home's analytics.duckdb."""
    with duckdb.connect(str(home / "analytics.duckdb"), read_only=True) as con:
        names = [row[0] for row in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}  # type: ignore[index]


@pytest.mark.slow
def test_tenants_in_parallel_processes_publish_what_sequential_runs_publish(
    tmp_path: Path, two_tenant_night: Night, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared night (tests/nights.py) ran its tenants one after the other in this process."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # each home's own instance
    monkeypatch.setenv("MEMORYPACK_PII_KEY", KEY)
    night = two_tenant_night
    homes = {0: night.home, 2: tmp_path / "w2"}
    outcomes = {
        0: night.outcome,
        2: run_nightly(homes[2], night.landing, START, END, settings=NO_DPO, workers=2),
    }
    for workers, outcome in outcomes.items():
        assert outcome.success, (workers, outcome.failed_step, outcome.error)
        assert sorted(outcome.tenants) == ["acme", "globex"]
    # With workers=2 each tenant and the analytics build ran in its own process: their steps are
    # not in this one's results, their step times are.
    assert [r.run_id != "" for r in outcomes[2].results] == [True]  # ingest, here
    assert "analytics_snapshot" in outcomes[2].step_seconds
    assert _row_counts(homes[2]) == _row_counts(homes[0])
    for tenant in ("acme", "globex"):
        one_by_one, parallel = _tables(homes[0], tenant), _tables(homes[2], tenant)
        for name in TABLES:
            assert parallel[name].equals(one_by_one[name]), (tenant, name)


@pytest.mark.slow
def test_a_tenant_run_reads_no_other_tenants_files(
    tmp_path: Path, two_tenant_night: Night, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file of globex (its lake folders, caches and packs) turned to garbage: acme's run
    still succeeds and leaves them as they are, so it read none of them."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the home's own instance
    monkeypatch.setenv("MEMORYPACK_PII_KEY", KEY)
    night = two_tenant_night.outcome
    assert night.success, (night.failed_step, night.error)
    home = two_tenant_night.copy(tmp_path / "home")  # the shared night, changed only in a copy
    theirs = [
        p
        for p in [
            *(home / "lake").glob("*/tenant_id=globex/**/*"),
            *(home / "packs" / "globex").rglob("*"),
        ]
        if p.is_file()
    ]
    assert len(theirs) > 20
    for path in theirs:
        path.write_bytes(b"not globex's data: reading this fails")
    outcome = run_tenant(home, two_tenant_night.landing, "acme", [END], settings=NO_DPO)
    assert outcome.success, (outcome.failed_step, outcome.error)
    assert outcome.not_published == {}
    assert all(p.read_bytes() == b"not globex's data: reading this fails" for p in theirs)


def test_the_fork_server_loads_no_polars() -> None:
    """Tenant processes are forked from a server that imported jobs/forked.py: a fork keeps only
    the thread that forks, so nothing there may start polars (its allocator and spill threads)."""
    code = (
        "import sys, jobs.forked;"
        "print('polars' in sys.modules, 'pipeline.pii.engine' in sys.modules)"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.split() == ["False", "True"]


def _acme_is_killed(home: str, landing: Path, tenant: str, *rest: object) -> RunOutcome:
    """A tenant's run whose worker the kernel kills when the tenant is acme (as an OOM kill)."""
    if tenant == "acme":
        os.kill(os.getpid(), signal.SIGKILL)
    return RunOutcome(True, f"run-of-{tenant}")


def test_a_worker_that_dies_fails_only_its_tenant(tmp_path: Path) -> None:
    """One worker at a time, acme's first: the tenants queued behind its dead worker still run
    (a dead worker breaks the process pool it is in: each run has its own)."""
    calls = [
        (str(tmp_path), tmp_path, tenant, [END], "INFO", None, False)
        for tenant in ("acme", "globex", "hooli")
    ]
    outcomes = dict(_tenant_runs(calls, workers=1, instance=None, run=_acme_is_killed))
    assert {t: o.run_id for t, o in outcomes.items() if o.success} == {
        "globex": "run-of-globex",
        "hooli": "run-of-hooli",
    }
    why = outcomes["acme"].not_published["acme"]
    assert why.startswith("its run's process died") and why.endswith("previous pack stays")
