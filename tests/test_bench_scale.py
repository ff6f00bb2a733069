"""The scale section's arithmetic (the projection) and its one-tenant landing day.

Functional only: nothing here runs a night or asserts on a timing (`python -m bench.run --only
scale` measures).
"""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from bench import data
from bench.sections_scale import _fit, _makespan, _tenant_times


def test_makespan_puts_the_longest_first_on_the_first_free_worker() -> None:
    times = [5.0, 4.0, 3.0, 3.0, 3.0]
    assert _makespan(times, 1) == 18.0
    # 5 | 4 → 4+3=7 | 5+3=8 → 7+3=10 | 8
    assert _makespan(times, 2) == 10.0
    assert _makespan(times, 5) == 5.0
    assert _makespan(times, 50) == 5.0


def test_fit_recovers_a_line_and_its_r2() -> None:
    fit = _fit([1000.0, 2000.0, 4000.0], [12.0, 14.0, 18.0])
    assert fit["a"] == pytest.approx(10.0)
    assert fit["b"] == pytest.approx(0.002)
    assert fit["r2"] == pytest.approx(1.0)
    noisy = _fit([1.0, 2.0, 3.0, 4.0], [1.0, 3.0, 2.0, 4.0])
    assert 0 < noisy["r2"] < 1


def test_one_worker_tenant_time_is_the_gap_between_endings() -> None:
    night = {
        "workers": 1,
        "runs": {
            "ingest": {"start": 100.0, "end": 110.0},
            "tenants": {
                "acme": {"start": 115.0, "end": 140.0},
                "globex": {"start": 146.0, "end": 160.0},
            },
        },
        "tenant_ended": {"acme": 141.0, "globex": 161.0},
        "step_seconds": {"acme/a": 10.0, "acme/b": 12.5, "globex/a": 9.0, "ingest_step": 3.0},
        "tenant_peak_rss": {"acme": 2 * 1024**2},
    }
    per = _tenant_times(night)
    assert per["acme"]["process_seconds"] == 31.0  # ingest ended at 110, acme's worker at 141
    assert per["globex"]["process_seconds"] == 20.0
    assert per["acme"]["run_seconds"] == 25.0
    assert per["acme"]["step_seconds"] == 22.5
    assert per["globex"]["steps"] == {"a": 9.0}
    assert per["acme"]["peak_rss_mib"] == 2.0
    assert per["globex"]["peak_rss_mib"] == 0.0


def test_add_day_for_one_tenant_copies_only_its_files(tmp_path: Path) -> None:
    day = date(2026, 11, 20)
    folder, _ = data.add_day(
        tmp_path / "landing",
        day,
        60,
        seed=7,
        cache=tmp_path / "cache",
        tenants=4,
        only_tenant="globex",
    )
    names = sorted(p.name for p in folder.iterdir())
    assert names and all(name.startswith("globex-") for name in names)
    everyone, _ = data.add_day(
        tmp_path / "all", day, 60, seed=7, cache=tmp_path / "cache", tenants=4
    )
    tenants = {p.name.split("-")[0] for p in everyone.iterdir() if not p.name.startswith("_")}
    assert tenants == {"acme", "globex", "initech", "umbrella"}
