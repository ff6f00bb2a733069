"""Run the performance suite: each section in its own process, figures side by side with baselines.

    python -m bench.run                 # full sizes (the issue's), long
    python -m bench.run --quick         # small sizes, a smoke run (< 5 min)
    python -m bench.run --only ingest,pack --reps 5 --ingest-lines 200000

Writes `<out>/<date>.json` + `<out>/<date>.md` + `<out>/LATEST.md` (quick runs: `<date>-quick.*`
and `LATEST-quick.md`). A run with `--only` merges its sections into that day's file of the
same mode, so a long full run can be done section by section.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import (
    MIB,
    ROOT,
    Figure,
    NotAvailable,
    Sizes,
    offline_env,
    python_child,
    run_child,
    write_json,
)
from bench.compare import against, against_md, mixed_cpus_md, refusal, section_machines
from bench.machine import commit, cpu_types, describe, load_average, machine, mixed


@dataclass(frozen=True)
class Section:
    name: str
    target: str  # "module:function", the function takes Sizes and returns list[Figure]
    what: str
    timeout_quick: float
    timeout_full: float


SECTIONS: dict[str, Section] = {
    s.name: s
    for s in [
        Section(
            "ingest",
            "bench.sections_ingest:run",
            "ingest rows/s vs bare DuckDB / polars reads",
            240,
            3 * 3600,
        ),
        Section(
            "embed",
            "bench.sections_embed:run",
            "embedding texts/s vs plain SentenceTransformer.encode",
            600,
            4 * 3600,
        ),
        Section(
            "pack",
            "bench.sections_pack:run",
            "pack load with verification; few_shot / memories_for latency",
            240,
            3600,
        ),
        Section(
            "retrieval",
            "bench.sections_retrieval:run",
            "recall@10 of vector, keyword (BM25) and hybrid (score fusion) retrieval on a labelled set",
            300,
            3600,
        ),
        Section(
            "text_query",
            "bench.sections_retrieval:run_text_query",
            "text query → top 10 with the pack's own encoder; loader vs pipeline vectors",
            300,
            3600,
        ),
        Section(
            "pii",
            "bench.sections_pii:run",
            "PII precision/recall per kind; redaction ms per 1k texts, first vs cached",
            300,
            3 * 3600,
        ),
        Section(
            "pii_per_kb",
            "bench.sections_pii_per_kb:run",
            "PII detector ms per KB of one long text, 1k to 64k characters (linear: windows)",
            600,
            1800,
        ),
        Section(
            "pii_pack",
            "bench.sections_pii_pack:run",
            "pack stage with PII redaction vs redaction skipped, first and incremental night",
            300,
            3 * 3600,
        ),
        Section(
            "dpo",
            "bench.sections_dpo:run",
            "DPO stage wall time and eval accuracy beside its baselines",
            300,
            3 * 3600,
        ),
        Section(
            "dpo_real",
            "bench.sections_dpo:run_real",
            "DPO on real human preferences (OASST, tree split) vs reference model and length rule",
            420,
            2 * 3600,  # the default policy on 551 real pairs: 15 CPU-min, 60 min on a busy host
        ),
        Section(
            "dpo_losses",
            "bench.sections_dpo:run_losses",
            "DPO losses (sigmoid, sigmoid_norm, ipo, simpo), SFT or none, policy size on the "
            "OASST sample vs the length rule and the reference model",
            900,
            4 * 3600,
        ),
        Section(
            "dpo_losses_planted",
            "bench.sections_dpo:run_losses_planted",
            "the same DPO variants on planted pairs (a known answer)",
            600,
            2 * 3600,
        ),
        Section(
            "dpo_base",
            "bench.sections_dpo:run_base",
            "a pretrained base (SmolLM2-135M GGUF + LoRA) on the OASST sample at the nightly cap",
            900,
            4 * 3600,
        ),
        Section(
            "paraphrase",
            "bench.sections_paraphrase:run",
            "merge thresholds vs paraphrases scored by people (STS-B sample) and the generator's",
            300,
            1800,
        ),
        Section(
            "merges",
            "bench.sections_merges:run",
            "statement merges: the default (the learned judgement), the distance rule with the value "
            "guard and the rule alone (STS-B sample, the generator's paraphrases) and consolidation's "
            "time with each",
            300,
            1800,
        ),
        Section(
            "conversations",
            "bench.sections_conversations:run",
            "evidence recall on LoCoMo conversations (search, memories_for, prompt_context) vs "
            "BM25 and dense retrieval over the raw turns; latency; evidence hidden by the pack",
            900,
            3600,  # ~5 min on an idle 2-core host; 25 min when seven jobs share it
        ),
        Section(
            "scale",
            "bench.sections_scale:run",
            "a night over several tenants, --workers 1 vs 2; incremental and one-tenant nights; "
            "per-tenant times and a projection for 1, 2, N workers",
            600,
            2 * 3600,
        ),
        Section(
            "scale_goal",
            "bench.sections_scale_goal:run",
            "the issue's size, measured: 10 tenants × 1,000,000 interactions, a full night with "
            "--workers 2 and an incremental night (+30,000); or one tenant with 1,000,000",
            600,
            4 * 3600,
        ),
        Section(
            "usage",
            "bench.sections_usage:run",
            "the usage stages' own work over 1,000,000 calls with receipts vs without "
            "(in-process, the lake's file shapes)",
            300,
            1800,
        ),
        Section(
            "usage_effects",
            "bench.sections_usage_effects:run",
            "item effects when the pack's top k makes items substitutes: false demotions and "
            "missed harmful, joint model vs difference in means; the usage stages' time with each",
            300,
            3600,
        ),
        Section(
            "usage_cost",
            "bench.sections_usage_cost:run",
            "what receipts cost: the scale_goal nights without receipts and with 90 % of calls "
            "carrying one, the incremental nights side by side (issue 42)",
            1200,
            8 * 3600,
        ),
        Section(
            "nightly",
            "bench.sections_nightly:run",
            "nightly full vs incremental run, peak memory",
            300,
            12 * 3600,
        ),
    ]
}
QUICK_ORDER = [
    "ingest",
    "embed",
    "paraphrase",
    "merges",
    "conversations",
    "pack",
    "usage",
    "usage_effects",
    "retrieval",
    "pii",
    "pii_per_kb",
    "pii_pack",
    "dpo",
    "dpo_real",
    "dpo_losses",
    "dpo_losses_planted",
    "nightly",
    "scale",
]
# Run only when asked (`--only dpo_base`): it needs the optional `pretrained` extra, and at the
# nightly cap a 135 M model takes hours and ~12 GiB on 2 cores; `scale_goal` takes 1-2 hours and
# `usage_cost` (its nights twice) twice that.
ON_REQUEST = ["dpo_base", "scale_goal", "usage_cost"]
# What the quick smoke test runs (tests/test_bench.py): the smallest, fastest section.
SMALLEST = ["ingest"]


# ---- the child side ----------------------------------------------------------------------------
def worker(name: str, sizes_path: Path, result_path: Path) -> int:
    """Run one section in this process and write its figures (or why not) to `result_path`."""
    offline_env()
    sizes = Sizes(**json.loads(sizes_path.read_text()))
    section = SECTIONS[name]
    module_name, func_name = section.target.split(":")
    out: dict[str, Any]
    try:
        module = importlib.import_module(module_name)
        func: Callable[[Sizes], list[Figure]] = getattr(module, func_name)
        figures = func(sizes)
        out = {"status": "ok", "figures": [f.as_dict() for f in figures]}
    except (ImportError, NotAvailable) as error:
        out = {"status": "not_available", "reason": f"{type(error).__name__}: {error}"}
    except Exception as error:
        out = {
            "status": "error",
            "reason": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc()[-4000:],
        }
    write_json(result_path, out)
    return 0


# ---- the parent side ---------------------------------------------------------------------------
def run_section(section: Section, sizes: Sizes, log_dir: Path) -> dict[str, Any]:
    timeout = section.timeout_quick if sizes.quick else section.timeout_full
    with tempfile.TemporaryDirectory(prefix=f"bench-{section.name}-") as tmp:
        sizes_path = Path(tmp) / "sizes.json"
        result_path = Path(tmp) / "result.json"
        sizes_path.write_text(json.dumps(sizes.as_dict()))
        log_path = log_dir / f"{section.name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as log:
            child = run_child(
                python_child(
                    "bench.run",
                    "--worker",
                    section.name,
                    "--sizes-file",
                    str(sizes_path),
                    "--result-file",
                    str(result_path),
                ),
                timeout=timeout,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if result_path.exists():
            outcome = json.loads(result_path.read_text())
        elif child.timed_out:
            outcome = {"status": "timeout", "reason": f"killed after {timeout:.0f} s"}
        else:
            tail = log_path.read_text(errors="replace")[-2000:]
            outcome = {
                "status": "error",
                "reason": f"section process exited with {child.returncode} (crash or killed)",
                "traceback": tail,
            }
    return {
        "name": section.name,
        "what": section.what,
        **outcome,
        "figures": outcome.get("figures", []),
        "seconds": round(child.seconds, 1),
        "peak_rss_bytes": child.peak_rss_bytes,
        "peak_rss_mib": round(child.peak_rss_bytes / MIB, 1),
        "exit_code": child.returncode,
        "log": str(log_path),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _version(package: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return None


def versions() -> dict[str, str | None]:
    return {
        p: _version(p)
        for p in (
            "memorypack",
            "polars",
            "duckdb",
            "pyarrow",
            "numpy",
            "torch",
            "sentence-transformers",
            "transformers",
            "trl",
            "dagster",
            "onnxruntime",
        )
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if value != value:  # NaN
            return "—"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _met(figure: dict[str, Any]) -> str:
    met = figure.get("goal_met")
    if met is True:
        return "yes"
    if met is False:
        return "**NO — goal missed**"
    here = figure.get("details", {}).get("goal_met_at_this_size")
    if here is not None:
        return f"— (goal is for a larger size; {'met' if here else 'missed'} at this size)"
    return "—"


def markdown(result: dict[str, Any]) -> str:
    env = result["environment"]
    m = env["machine"]
    git = env["git"]
    lines = [
        f"# Benchmark results — {result['date']} ({result['mode']})",
        "",
        *mixed_cpus_md(result),
        f"Commit `{(git.get('commit') or 'unknown')[:12]}`"
        f"{' (with uncommitted changes)' if git.get('dirty') else ''}; {describe(m)}, "
        f"{m['memory_gib']} GiB; Python {m['python']}; "
        + ", ".join(f"{k} {v}" for k, v in env["versions"].items() if v and k != "memorypack")
        + ".",
        "",
        "Every figure is the median of "
        f"{result['sizes']['reps']} repetitions, measured side by side with its baseline in the "
        "same run (the machine is shared and noisy). `ratio` is stated in the direction of the goal.",
        "",
        "| section | figure | value | baseline | baseline value | ratio | goal | goal met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for section in result["sections"]:
        if section["status"] != "ok":
            status = section["status"].replace("_", " ")
            lines.append(
                f"| {section['name']} | — | {status}: {section.get('reason', '')} | | | | | "
                f"{'**NO — not measured**' if section['status'] != 'not_available' else '—'} |"
            )
            continue
        for f in section["figures"]:
            value = f"{_fmt(f['value'])} {f['unit']}" if f["value"] is not None else "—"
            lines.append(
                f"| {section['name']} | {f['name']} | {value} | {f.get('baseline_name') or '—'} | "
                f"{_fmt(f.get('baseline_value'))} | "
                f"{_fmt(f.get('ratio'))}{'×' if f.get('ratio') is not None else ''} | "
                f"{f.get('goal', '')} | {_met(f)} |"
            )
        ran_on = section.get("machine") or m
        load = section.get("load_avg_1min") or {}
        notes.append(
            f"- **{section['name']}**: {section['seconds']} s wall, peak RSS "
            f"{section['peak_rss_mib']:,} MiB (commit {(section.get('commit') or '')[:12]}, "
            f"{section.get('finished_at', '')}; {describe(ran_on)}"
            + (f"; load average {load['start']} → {load['end']}" if load else "")
            + ")"
        )
    missed = [
        f"{s['name']}: {f['name']}"
        for s in result["sections"]
        for f in s["figures"]
        if f.get("goal_met") is False
    ]
    # A section's own tables (e.g. scale's per-tenant times and projection), after the main one.
    extra = [
        f["details"]["table_md"]
        for s in result["sections"]
        for f in s["figures"]
        if isinstance(f.get("details", {}).get("table_md"), str)
    ]
    lines += ["", *extra] if extra else []
    lines += ["", "Sections:", *notes, ""]
    if result.get("compared_with"):
        lines += against_md(result["compared_with"], _fmt)
    sizes = result["sizes"]
    lines.append(
        "Sizes: " + ", ".join(f"{k}={_fmt(v)}" for k, v in sizes.items() if k not in ("quick",))
    )
    lines.append("")
    unmeasured = [
        f"{s['name']} ({s['status'].replace('_', ' ')})"
        for s in result["sections"]
        if s["status"] != "ok"
    ]
    if missed:
        lines.append("**Goals missed**: " + "; ".join(missed) + ".")
    if unmeasured:
        lines.append("**Not measured**: " + "; ".join(unmeasured) + ".")
    if not missed and not unmeasured:
        lines.append("Every goal measured in this run was met.")
    lines.append("")
    lines.append(f"Details (every repetition, data sizes, versions): `{result['json_name']}`.")
    return "\n".join(lines) + "\n"


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run (< 5 min)")
    parser.add_argument(
        "--only", default=None, help=f"comma-separated sections: {','.join(SECTIONS)}"
    )
    parser.add_argument("--reps", type=int, default=None, help="repetitions per figure (median)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--seed", type=int, default=None)
    for f in fields(Sizes):
        if f.name in ("reps", "seed", "quick"):
            continue
        kind = float if f.type in (float, "float") else int
        parser.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=None)
    parser.add_argument("--no-merge", action="store_true", help="with --only: replace, not merge")
    parser.add_argument(
        "--compare",
        type=Path,
        default=None,
        help="an earlier result (.json) to put beside this run",
    )
    parser.add_argument(
        "--mixed-cpus",
        action="store_true",
        help="merge or compare with figures of another CPU type, marked as not comparable",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--sizes-file", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _sizes(args: argparse.Namespace) -> Sizes:
    sizes = Sizes.quick_sizes() if args.quick else Sizes()
    for f in fields(Sizes):
        value = getattr(args, f.name, None)
        if value is not None and f.name != "quick":
            setattr(sizes, f.name, value)
    return sizes


def _kept(args: argparse.Namespace, json_path: Path, names: list[str]) -> dict[str, Any] | None:
    """The day's earlier result this run's sections merge into (`--only`), if any."""
    if not (args.only and not args.no_merge and json_path.exists()):
        return None
    previous = json.loads(json_path.read_text())
    previous["sections"] = [s for s in previous.get("sections", []) if s["name"] not in names]
    return previous


def _refused(
    args: argparse.Namespace, here: dict[str, Any], kept: dict[str, Any] | None, json_path: Path
) -> str | None:
    """Why this run may not start: it would put its figures beside another CPU type's (checked
    before any section runs, so no hour of measuring is lost to it)."""
    if args.mixed_cpus:
        return None
    if kept is not None:
        why = refusal(section_machines(kept), here, str(json_path), "Write elsewhere (--out) or "
                      "replace the day's file (--no-merge)")  # fmt: skip
        if why:
            return why
    if args.compare is not None:
        earlier = section_machines(json.loads(args.compare.read_text()))
        return refusal(earlier, here, str(args.compare), "Compare with a result of this CPU type")
    return None


def _run_sections(
    names: list[str], sizes: Sizes, out: Path, env: dict[str, Any]
) -> list[dict[str, Any]]:
    """Each section in its own process; each records the commit, sizes, CPU type and the load
    average before and after it."""
    sections = []
    for name in names:
        print(f"  {name}: {SECTIONS[name].what} …", flush=True)
        before = load_average()
        section = run_section(SECTIONS[name], sizes, out / ".logs")
        section["commit"] = env["git"]["commit"]
        section["sizes"] = sizes.as_dict()
        section["machine"] = {
            k: env["machine"][k] for k in ("cpu", "cpu_simd", "cores_usable", "memory_gib")
        }
        section["load_avg_1min"] = {"start": before[0], "end": load_average()[0]}
        sections.append(section)
        mark = (
            "ok"
            if section["status"] == "ok"
            else f"{section['status']}: {section.get('reason', '')}"
        )
        print(
            f"    {mark} ({section['seconds']} s, peak RSS {section['peak_rss_mib']} MiB)",
            flush=True,
        )
        for f in section["figures"]:
            print(
                f"    - {f['name']}: {_fmt(f['value'])} {f['unit']} | {f.get('baseline_name')}: "
                f"{_fmt(f.get('baseline_value'))} | ratio {_fmt(f.get('ratio'))} | "
                f"goal met: {f.get('goal_met')}",
                flush=True,
            )
    return sections


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.worker:
        return worker(args.worker, args.sizes_file, args.result_file)
    offline_env()
    sizes = _sizes(args)
    names = QUICK_ORDER if not args.only else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        print(f"bench: unknown section(s) {unknown}; known: {list(SECTIONS)}", file=sys.stderr)
        return 2
    mode = "quick" if sizes.quick else "full"
    stamp = datetime.now(UTC)
    day = stamp.date().isoformat()
    suffix = "-quick" if sizes.quick else ""
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{day}{suffix}.json"
    env = {"git": commit(), "machine": machine(), "versions": versions()}
    kept = _kept(args, json_path, names)
    why = _refused(args, env["machine"], kept, json_path)
    if why:
        print(why, file=sys.stderr)
        return 2
    print(
        f"bench ({mode}): sections {names}; sizes {sizes.as_dict()}; commit "
        f"{str(env['git']['commit'])[:12]}; {describe(env['machine'])}",
        flush=True,
    )
    started = time.perf_counter()
    sections = _run_sections(names, sizes, out, env)
    if kept is not None:
        order = {n: i for i, n in enumerate(QUICK_ORDER + ON_REQUEST)}
        sections = sorted(kept["sections"] + sections, key=lambda s: order.get(s["name"], 99))
    result = {
        "date": day,
        "mode": mode,
        "started_at": stamp.isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - started, 1),
        "argv": list(argv) if argv is not None else sys.argv[1:],
        "sizes": sizes.as_dict(),
        "environment": env,
        "json_name": json_path.name,
        "sections": sections,
        "goals_missed": [
            f"{s['name']}: {f['name']}"
            for s in sections
            for f in s["figures"]
            if f.get("goal_met") is False
        ],
    }
    machines = section_machines({"environment": env, "sections": sections})
    result["cpu_types"] = cpu_types(machines)
    result["mixed_cpus"] = mixed(machines)
    if args.compare is not None:
        earlier = json.loads(args.compare.read_text())
        result["compared_with"] = against(result, earlier, args.compare.name)
    write_json(json_path, result)
    md = markdown(result)
    md_path = json_path.with_suffix(".md")
    md_path.write_text(md, encoding="utf-8")
    shutil.copyfile(md_path, out / f"LATEST{suffix}.md")
    print(f"bench: wrote {json_path} and {md_path} ({result['seconds']} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
