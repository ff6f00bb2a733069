"""Results side by side only on one CPU type: the check `bench.run` makes before it merges
sections into a day's file or puts an earlier result beside this run (`--compare`), and the loud
mark it writes when told to go on (`--mixed-cpus`)."""

from __future__ import annotations

from typing import Any

from bench.machine import comparable, cpu_types, describe, mixed


def section_machines(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Section name → the machine it ran on: its own record, or (a result written before sections
    recorded theirs) the file's, which is the machine of the run that last wrote the file."""
    default = result.get("environment", {}).get("machine", {})
    return {s["name"]: s.get("machine") or default for s in result.get("sections", [])}


def refusal(
    others: dict[str, dict[str, Any]], here: dict[str, Any], where: str, how: str
) -> str | None:
    """One line for a person when `others` (label → machine) were not all measured on this run's
    CPU type (`here`), else None. `how`: what to do instead."""
    if not others or not mixed({**others, "this run": here}):
        return None
    theirs = "; ".join(
        f"{', '.join(labels)} on {kind}" for kind, labels in cpu_types(others).items()
    )
    return (
        f"bench: {where} holds figures measured on another CPU type ({theirs}); this run is on "
        f"{describe(here)}: they are not comparable. {how}, or pass --mixed-cpus to put them "
        "side by side marked as not comparable"
    )


def mixed_cpus_md(result: dict[str, Any]) -> list[str]:
    """The loud first lines of a result whose sections ran on more than one CPU type."""
    kinds = result.get("cpu_types", {})
    if len(kinds) < 2 and not result.get("mixed_cpus"):
        return []
    listed = "; ".join(f"{', '.join(names)}: {kind}" for kind, names in kinds.items())
    return [
        f"**NOT COMPARABLE: the sections of this file ran on {len(kinds)} CPU types** ({listed}). "
        "Compare a figure only with figures of its own CPU type.",
        "",
    ]


def against(result: dict[str, Any], earlier: dict[str, Any], name: str) -> dict[str, Any]:
    """This run's figures beside the same figures (same section, same name) of an `earlier`
    result, each pair marked comparable or not by the CPU types they were measured on."""
    then_machines, now_machines = section_machines(earlier), section_machines(result)
    then = {
        (s["name"], f["name"]): f for s in earlier.get("sections", []) for f in s.get("figures", [])
    }
    rows = []
    for section in result["sections"]:
        for figure in section.get("figures", []):
            old = then.get((section["name"], figure["name"]))
            if old is None:
                continue
            ok = comparable(now_machines[section["name"]], then_machines[section["name"]])
            rows.append(
                {
                    "section": section["name"],
                    "figure": figure["name"],
                    "unit": figure["unit"],
                    "now": figure["value"],
                    "then": old["value"],
                    "comparable": ok,
                    "then_cpu": describe(then_machines[section["name"]]),
                }
            )
    return {
        "file": name,
        "commit": (earlier.get("environment", {}).get("git", {}).get("commit") or "")[:12],
        "comparable": all(r["comparable"] for r in rows),
        "rows": rows,
    }


def against_md(comparison: dict[str, Any], fmt: Any) -> list[str]:
    """The `--compare` table: a pair measured on two CPU types says so in every row."""
    lines = [
        f"### Against `{comparison['file']}` (commit `{comparison['commit']}`)",
        "",
    ]
    if not comparison["comparable"]:
        lines += ["**NOT COMPARABLE: some rows were measured on another CPU type.**", ""]
    lines += [
        "| section | figure | this run | earlier | this ÷ earlier | |",
        "|---|---|---|---|---|---|",
    ]
    for r in comparison["rows"]:
        share = r["now"] / r["then"] if r["now"] is not None and r["then"] else None
        mark = "" if r["comparable"] else f"**not comparable**: earlier on {r['then_cpu']}"
        lines.append(
            f"| {r['section']} | {r['figure']} | {fmt(r['now'])} {r['unit']} | "
            f"{fmt(r['then'])} {r['unit']} | {fmt(share)} | {mark} |"
        )
    return [*lines, ""]
