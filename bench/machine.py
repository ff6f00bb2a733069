"""The machine a bench result was measured on, and whether two results may stand side by side.

Two figures are comparable only when they were measured on one CPU type: the same model name, the
same SIMD flags (they decide how fast the int8 encoder and the NER run: an AMD EPYC with AVX-512
VNNI embedded 1.5-2× faster than the same model name with AVX2 only) and the same number of
usable cores. A record without its flags (results before 2026-11-23) matches nothing.
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from bench.common import GIB, ROOT

# The CPU features that decide how fast int8 inference runs (the ONNX int8 encoder, spaCy's NER).
SIMD_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_int8")


def _cpu_info(key: str) -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_model() -> str | None:
    return _cpu_info("model name") or platform.processor() or None


def _simd() -> list[str]:
    flags = set((_cpu_info("flags") or "").split())
    return [f for f in SIMD_FLAGS if f in flags]


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def machine() -> dict[str, Any]:
    """This machine as a result records it: CPU model, SIMD flags, cores, memory, load average."""
    import psutil

    return {
        "cores_logical": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_gib": round(psutil.virtual_memory().total / GIB, 1),
        "cpu": _cpu_model(),
        "cpu_simd": _simd(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_avg_at_start": load_average(),
    }


def git(*args: str, root: Path = ROOT) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=root, capture_output=True, text=True, timeout=20, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def commit() -> dict[str, Any]:
    """The checkout's commit, and whether it had uncommitted changes."""
    status = git("status", "--porcelain")
    return {
        "commit": git("rev-parse", "HEAD"),
        "dirty": bool(status) if status is not None else None,
    }


def cpu_type(record: dict[str, Any]) -> dict[str, Any]:
    """What must be equal for two figures to be compared: model, SIMD flags (None: not recorded)
    and usable cores, from a `machine()` record."""
    simd = record.get("cpu_simd")
    return {
        "cpu": record.get("cpu"),
        "cpu_simd": sorted(simd) if simd is not None else None,
        "cores": record.get("cores_usable"),
    }


def comparable(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether figures measured on machines `a` and `b` (`machine()` or `cpu_type()` records) may
    stand side by side: one CPU type, its flags recorded."""
    x, y = cpu_type(a) if "cpu_simd" in a else a, cpu_type(b) if "cpu_simd" in b else b
    return x["cpu_simd"] is not None and x == y


def describe(record: dict[str, Any]) -> str:
    """One line: `AMD EPYC (avx2), 2 cores`."""
    kind = cpu_type(record) if "cores_usable" in record else record
    simd = kind["cpu_simd"]
    flags = "flags not recorded" if simd is None else ", ".join(simd) or "no AVX2"
    return f"{kind['cpu'] or 'unknown CPU'} ({flags}), {kind['cores']} cores"


def cpu_types(machines: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """The CPU types among labelled records (label → machine), each with its labels; more than one
    entry means the records must not be compared."""
    kinds: dict[str, list[str]] = {}
    for label, record in machines.items():
        kinds.setdefault(describe(record), []).append(label)
    return kinds


def mixed(machines: dict[str, dict[str, Any]]) -> bool:
    """Whether the labelled records were not all measured on one comparable CPU type."""
    records = list(machines.values())
    return any(not comparable(records[0], other) for other in records[1:])
