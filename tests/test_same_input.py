"""Identical input publishes nothing new (SPEC §5): re-running a night or backfilling the same range
leaves every pack, LATEST, dpo_runs and pack_versions as they were; one more line does publish."""

import hashlib
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from memorypack.format import read_latest
from pipeline.config import Paths
from pipeline.generate import generate
from pipeline.storage.lake import Lake
from tests.conftest import interaction, write_landing

START, END = "2026-11-01", "2026-11-02"
# Small enough for the tiny generated set (9 train pairs per tenant) to train a policy in seconds,
# so the nights below reuse a trained policy rather than skip one.
DPO = {"dpo": {"min_pairs": 5, "num_train_epochs": 1.0, "sft_num_train_epochs": 1.0}}


def _night(home: Path, landing: Path, start: str, end: str | None = None) -> None:
    from jobs.runner import run_nightly

    outcome = run_nightly(home, landing, start, end or start, settings=DPO)
    assert outcome.success, f"{outcome.failed_step}: {outcome.error}"


def _packs(paths: Paths) -> dict[str, tuple[str | None, list[str], dict[str, str]]]:
    """tenant → (LATEST, kept versions, sha256 of every file of the live version)."""
    state = {}
    for tenant_dir in sorted(p for p in paths.packs.iterdir() if p.is_dir()):
        latest = read_latest(tenant_dir)
        versions = sorted(p.name for p in tenant_dir.iterdir() if p.is_dir())
        files = {
            f.name: hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted((tenant_dir / str(latest)).iterdir())
        }
        state[tenant_dir.name] = (latest, versions, files)
    return state


def _rows(paths: Paths, table: str) -> int:
    return Lake(paths).read(table).collect().height


@pytest.mark.slow
def test_identical_input_publishes_nothing_and_one_more_line_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))  # restored after the test
    landing, home = tmp_path / "landing", tmp_path / "home"
    generate(landing, days=2, interactions=60, tenants=2, seed=0, start=date.fromisoformat(START))
    paths = Paths(home)

    # Night by night, as the schedule runs them: the second night is incremental (its new texts
    # join the first night's clusters).
    _night(home, landing, START)
    _night(home, landing, END)
    packs = _packs(paths)
    runs = Lake(paths).read("dpo_runs").collect()
    # The re-runs below reuse these policies.
    assert runs.filter(pl.col("is_latest"))["status"].to_list() == ["trained", "trained"]
    versions_rows = _rows(paths, "pack_versions")

    # The last night re-run twice, then the whole range backfilled: nothing new anywhere.
    for start, end in ((END, END), (END, END), (START, END)):
        _night(home, landing, start, end)
        assert _packs(paths) == packs, (start, end)
        assert Lake(paths).read("dpo_runs").collect().equals(runs), (start, end)
        assert _rows(paths, "pack_versions") == versions_rows, (start, end)

    # One more line (acme, no feedback: the same pairs) is a new acme pack; globex's input did
    # not change, nor does its pack. acme's run ships the policy that trained after its END night
    # published (a policy trains after the publish; its tenant's next run ships it): one row.
    write_landing(
        landing / END,
        [interaction("i_late", input="Can I change my delivery address?")],
        "late.jsonl",
    )
    _night(home, landing, END)
    after = _packs(paths)
    acme_latest, acme_versions, acme_files = after["acme"]
    assert acme_versions == sorted([*packs["acme"][1], acme_latest])
    assert acme_latest != packs["acme"][0] and acme_files != packs["acme"][2]
    assert after["globex"] == packs["globex"]
    now = Lake(paths).read("dpo_runs").collect()
    assert now.height == runs.height + 1
    (shipped,) = now.filter(pl.col("is_latest") & (pl.col("tenant_id") == "acme")).iter_rows(
        named=True
    )
    assert shipped["status"] == "trained" and shipped["n_sft"] > 0  # the configured policy
    assert now.filter(pl.col("tenant_id") == "globex").equals(
        runs.filter(pl.col("tenant_id") == "globex")
    )
    assert _rows(paths, "pack_versions") == versions_rows + 1
