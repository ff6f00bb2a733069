"""The bench harness runs its smallest section end to end and writes well-formed results.

Functional only: nothing here asserts on a timing (only `make bench` measures).
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import pytest

from bench import run as bench_run
from bench.common import Figure, Sizes
from bench.compare import against, against_md
from bench.machine import comparable, describe


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench-results")
    code = bench_run.main(
        [
            "--quick",
            "--only",
            ",".join(bench_run.SMALLEST),
            "--reps",
            "1",
            "--ingest-lines",
            "3000",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    return out


def test_quick_smallest_section_writes_json_and_markdown(quick_result: Path) -> None:
    (json_path,) = quick_result.glob("*-quick.json")
    result = json.loads(json_path.read_text())
    assert result["mode"] == "quick"
    assert {"git", "machine", "versions"} <= set(result["environment"])
    assert result["environment"]["machine"]["cores_logical"] >= 1
    assert result["sizes"]["ingest_lines"] == 3000
    (section,) = result["sections"]
    assert section["name"] == "ingest"
    assert section["status"] == "ok", section.get("traceback") or section.get("reason")
    assert section["peak_rss_bytes"] > 0
    names = {f.name for f in fields(Figure)}
    assert section["figures"]
    for figure in section["figures"]:
        assert set(figure) == names
        assert figure["value"] > 0
        assert figure["goal_met"] in (True, False, None)
    main = section["figures"][0]
    assert main["baseline_value"] > 0 and main["ratio"] > 0
    assert main["details"]["lines"] > 0
    md = json_path.with_suffix(".md").read_text()
    assert "| section | figure | value | baseline |" in md
    assert "| ingest |" in md
    assert (quick_result / "LATEST-quick.md").read_text() == md


ELSEWHERE = {"cpu": "AMD EPYC", "cpu_simd": ["avx2"], "cores_usable": 2, "memory_gib": 23.5}


def test_only_merges_sections_of_the_same_day_and_cpu_type(
    quick_result: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in quick_result.glob("*-quick.json"):
        (tmp_path / path.name).write_text(path.read_text())
    (json_path,) = tmp_path.glob("*-quick.json")
    previous = json.loads(json_path.read_text())
    (ingest,) = previous["sections"]
    assert ingest["machine"]["cpu_simd"] == previous["environment"]["machine"]["cpu_simd"]
    assert set(ingest["load_avg_1min"]) == {"start", "end"}
    # a section measured on another CPU type: this run's figures may not join it unmarked
    previous["sections"].append({**ingest, "name": "pack", "figures": [], "machine": ELSEWHERE})
    json_path.write_text(json.dumps(previous))
    argv = ["--quick", "--only", "ingest", "--reps", "1", "--ingest-lines", "3000"]
    assert bench_run.main([*argv, "--out", str(tmp_path)]) == 2
    assert "pack on AMD EPYC (avx2), 2 cores" in capsys.readouterr().err
    assert json.loads(json_path.read_text()) == previous  # refused before running anything
    assert bench_run.main([*argv, "--out", str(tmp_path), "--mixed-cpus"]) == 0
    merged = json.loads(json_path.read_text())
    assert [s["name"] for s in merged["sections"]] == ["ingest", "pack"]
    assert merged["mixed_cpus"] is True and len(merged["cpu_types"]) == 2
    assert "**NOT COMPARABLE: the sections of this file ran on 2 CPU types**" in (
        json_path.with_suffix(".md").read_text()
    )


def test_a_comparison_with_a_result_of_another_cpu_type_is_refused(
    quick_result: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (json_path,) = quick_result.glob("*-quick.json")
    earlier = json.loads(json_path.read_text())
    for section in earlier["sections"]:
        section["machine"] = ELSEWHERE
    (tmp_path / "earlier.json").write_text(json.dumps(earlier))
    argv = ["--quick", "--only", "ingest", "--compare", str(tmp_path / "earlier.json")]
    assert bench_run.main([*argv, "--out", str(tmp_path / "out")]) == 2
    assert "earlier.json holds figures measured on another CPU type" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("*.json"))


def test_figures_side_by_side_are_marked_by_cpu_type() -> None:
    here = {"cpu": "Intel(R) Xeon(R) Processor", "cpu_simd": ["avx2", "avx512f"], "cores_usable": 2}
    figure = {"name": "rows/s", "unit": "lines/s", "value": 10.0}
    now = {"environment": {"machine": here}, "sections": [{"name": "ingest", "figures": [figure]}]}
    then = {
        "environment": {"machine": here, "git": {"commit": "abcdef1234567"}},
        "sections": [{"name": "ingest", "figures": [{**figure, "value": 20.0}]}],
    }
    same = against(now, then, "then.json")
    assert same["comparable"] and same["rows"][0]["now"] == 10.0 and same["rows"][0]["then"] == 20.0
    assert "not comparable" not in "\n".join(against_md(same, str))
    then["sections"][0]["machine"] = ELSEWHERE
    other = against(now, then, "then.json")
    assert not other["comparable"]
    assert "**NOT COMPARABLE" in "\n".join(against_md(other, str))
    # flags not recorded (results before 2026-11-23) match nothing, not even themselves
    unknown = {"cpu": "Intel(R) Xeon(R) Processor", "cpu_simd": None, "cores_usable": 2}
    assert not comparable(unknown, unknown)
    assert comparable(here, dict(here)) and not comparable(here, {**here, "cores_usable": 4})
    assert describe(unknown) == "Intel(R) Xeon(R) Processor (flags not recorded), 2 cores"


def test_a_section_whose_stage_is_missing_is_reported_not_crashed(tmp_path: Path) -> None:
    bench_run.SECTIONS["missing"] = bench_run.Section(
        "missing", "bench.no_such_stage_module:run", "a stage that has not landed", 10, 10
    )
    try:
        sizes_path = tmp_path / "sizes.json"
        sizes_path.write_text(json.dumps(Sizes.quick_sizes().as_dict()))
        bench_run.worker("missing", sizes_path, tmp_path / "result.json")
    finally:
        del bench_run.SECTIONS["missing"]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "not_available"
    assert "no_such_stage_module" in result["reason"]


def test_markdown_says_plainly_when_a_goal_is_missed() -> None:
    figure = Figure("ingest rows/s", 10.0, "lines/s", "bare read", 100.0, 10.0, "ratio ≤ 2", False)
    result = {
        "date": "2026-11-21",
        "mode": "quick",
        "json_name": "2026-11-21-quick.json",
        "sizes": Sizes.quick_sizes().as_dict(),
        "environment": {
            "git": {"commit": "abc", "dirty": False},
            "machine": {"cores_usable": 2, "cpu": "x", "memory_gib": 24, "python": "3.11"},
            "versions": {"polars": "2.1.0"},
        },
        "sections": [
            {
                "name": "ingest",
                "status": "ok",
                "figures": [figure.as_dict()],
                "seconds": 1.0,
                "peak_rss_mib": 10.0,
            },
            {"name": "dpo", "status": "not_available", "reason": "ImportError: x", "figures": []},
        ],
    }
    md = bench_run.markdown(result)
    assert "**NO — goal missed**" in md
    assert "Goals missed" in md and "ingest: ingest rows/s" in md
    assert "not available: ImportError: x" in md
