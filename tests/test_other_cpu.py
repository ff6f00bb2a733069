"""The same pack on a CPU without AVX-512 (issue 52 item 4). The night runs twice on one landing:
as this machine is, and with the AVX-512 and VNNI feature bits hidden from CPUID
(tests/cpu/no_avx512.c), so numpy, onnxruntime and torch pick the AVX2 kernels an AVX2-only CPU
runs. The int8 encoder's vectors then differ; the decisions a pack ships (statement and request
clusters, conflicts, few-shot sets) must not.

Runs only where there is something to hide and a way to hide it: a CPU with AVX-512 VNNI, CPUID
faulting (Linux, `cpuid_fault`) and a C compiler. On an AVX2-only CPU this suite already runs as
the "other" CPU."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from pipeline.config import Paths
from pipeline.generate import generate
from pipeline.storage.lake import Lake
from tests.conftest import ROOT, SOURCE_PATH

SHIM = Path(__file__).parent / "cpu" / "no_avx512.c"
START, END = "2026-11-01", "2026-11-02"
NIGHT = f"""
import sys
from pathlib import Path
from jobs.runner import run_nightly

outcome = run_nightly(sys.argv[1], Path(sys.argv[2]), {START!r}, {END!r},
                      settings={{"dpo": {{"min_pairs": 10_000}}}}, fast=True)
assert outcome.success, (outcome.failed_step, outcome.error)
"""
SIMD = "from numpy._core._multiarray_umath import __cpu_features__ as f; print(f['AVX512F'])"


def _cpu_flags() -> set[str]:
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else []:
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


@pytest.fixture(scope="module")
def without_avx512(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment that hides AVX-512 from a process and its children (LD_PRELOAD)."""
    flags, cc = _cpu_flags(), shutil.which("cc")
    if "avx512_vnni" not in flags:
        pytest.skip("this CPU has no AVX-512 VNNI: it is the other CPU already")
    if "cpuid_fault" not in flags or cc is None:
        pytest.skip("hiding CPU features needs CPUID faulting and a C compiler")
    from numpy._core._multiarray_umath import __cpu_features__

    if not __cpu_features__["AVX512F"]:
        pytest.skip("AVX-512 is hidden from this process already: the suite runs as the other CPU")
    shim = tmp_path_factory.mktemp("cpu") / "no_avx512.so"
    # Compiled as this CPU (a compiler's own SIGSEGV handler would take a masked CPUID's fault).
    native = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    built = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", shim, SHIM], env=native)
    if built.returncode != 0:
        pytest.skip("the CPUID shim did not compile here (no libc headers?)")
    masked = {"LD_PRELOAD": str(shim)}
    hidden = subprocess.run([sys.executable, "-c", SIMD], env=_env(masked), capture_output=True)
    if hidden.stdout.split() != [b"False"]:  # e.g. a container whose seccomp refuses arch_prctl
        pytest.skip(f"CPUID faulting refused here: {hidden.stderr.decode()[-200:]}")
    return masked


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": SOURCE_PATH, **extra}
    env.pop("DAGSTER_HOME", None)  # the home's own instance
    return env


def _night(home: Path, landing: Path, extra: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", NIGHT, str(home), str(landing)],
        cwd=ROOT,
        env=_env(extra),
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def _decisions(home: Path) -> dict[str, set[tuple[object, ...]]]:
    """What the pack is made of, as sets of rows: clusters by their members, conflicts, examples."""
    lake = Lake(Paths(home))
    summaries = lake.read("consolidated_summaries").collect()
    clusters = {
        (r["scope"], r["representative_id"], *sorted(r["member_ids"]))
        for r in summaries.iter_rows(named=True)
    }
    conflicts = lake.read("memory_conflicts").select(
        "memory_id_a", "memory_id_b", "preferred_id", "reason"
    )
    examples = lake.read("few_shot_sets").select("skill_id", "rank", "input", "output")
    return {
        "clusters": clusters,
        "conflicts": set(conflicts.collect().iter_rows()),
        "few_shot_sets": set(examples.collect().iter_rows()),
    }


def _int8_vectors(home: Path) -> pl.DataFrame:
    """The night's int8 vectors (the model memory_embeddings names), by text."""
    models = Lake(Paths(home)).read("memory_embeddings").select("model").unique().collect()
    (model,) = models["model"].to_list()
    parts = sorted(home.glob(f"lake/embedding_cache/tenant_id=*/{model}/*.parquet"))
    return pl.concat([pl.read_parquet(p) for p in parts]).sort("text_hash")


@pytest.mark.slow
def test_a_cpu_without_avx512_makes_the_same_decisions(
    tmp_path: Path, without_avx512: dict[str, str]
) -> None:
    landing = tmp_path / "landing"
    # Without fp32 examples, this landing's few-shot sets differ between the two; without the
    # two-text medoid rule, some request clusters' representatives do (measured when added).
    generate(landing, days=2, interactions=400, tenants=2, seed=7, start=date.fromisoformat(START))
    homes = {"this CPU": tmp_path / "native", "AVX2 only": tmp_path / "avx2"}
    _night(homes["this CPU"], landing, {})
    _night(homes["AVX2 only"], landing, without_avx512)

    native, avx2 = (_int8_vectors(home) for home in homes.values())
    # The two really encoded differently: the int8 kernels' rounding moved the vectors.
    assert native["text_hash"].equals(avx2["text_hash"]) and native.height > 100
    assert not native["embedding"].equals(avx2["embedding"])
    decisions = {name: _decisions(home) for name, home in homes.items()}
    assert decisions["this CPU"]["clusters"], "the night clustered nothing to compare"
    assert decisions["this CPU"] == decisions["AVX2 only"]
