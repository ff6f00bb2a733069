"""The scale section's arithmetic (the projection) and its one-tenant landing day.

Functional only: nothing here runs a night or asserts on a timing (`python -m bench.run --only
scale` measures).
"""

from __future__ import annotations

import gzip
import json
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


def _events(folder: Path) -> list[dict[str, object]]:
    """The well-formed events of a landing day (the generator plants malformed lines too)."""
    events = []
    for path in folder.iterdir():
        text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                events.append(event)
    return events


def test_add_day_with_receipts_writes_a_day_whose_calls_carry_them(tmp_path: Path) -> None:
    """The generator writes receipts from a generation's second day: the added day is that day."""
    day = date(2026, 11, 20)

    def calls(share: float) -> tuple[int, int]:
        folder, _ = data.add_day(
            tmp_path / f"landing-{share}", day, 200, seed=3, cache=tmp_path / "cache",
            tenants=2, receipts=share,
        )  # fmt: skip
        assert folder.name == day.isoformat()
        interactions = [e for e in _events(folder) if e.get("event_type") == "interaction"]
        return len(interactions), sum(1 for e in interactions if e.get("context") is not None)

    n, with_receipt = calls(0.9)
    # 0.9 of the base calls; regenerations and planted cases carry none (182 of 241 here)
    assert n > 150 and 0.7 * n < with_receipt < n
    assert calls(0.0)[1] == 0
