"""The layers (SPEC §1): `pipeline/` never imports dagster, `assets` or `jobs`; `assets/` never
imports `jobs`; the app library imports none of them, and its modules import in one direction (no
cycle); the command line sits on top, in `jobs/`."""

import ast
from pathlib import Path

import pytest

from assets.groups import STAGES

ROOT = Path(__file__).resolve().parents[1]
# folder → top-level packages its modules must never import (at the top or inside a function)
FORBIDDEN = {
    "pipeline": {"dagster", "assets", "jobs"},
    "assets": {"jobs"},
    "lib/src/memorypack": {"dagster", "pipeline", "assets", "jobs"},
}


def imported(path: Path) -> set[str]:
    """The top-level packages a module imports, also through `importlib.import_module("…")`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names.add(node.args[0].value.split(".")[0])
    return names


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_no_layer_imports_upward(folder: str) -> None:
    modules = sorted((ROOT / folder).rglob("*.py"))
    assert len(modules) > 10  # the scan sees the code
    upward = [
        f"{path.relative_to(ROOT).as_posix()} imports {name}"
        for path in modules
        for name in sorted(imported(path) & FORBIDDEN[folder])
    ]
    assert upward == []


def test_the_command_line_sits_above_the_runs() -> None:
    assert "jobs" in imported(ROOT / "jobs" / "cli.py")
    assert not list((ROOT / "pipeline").glob("cli*.py"))


# `pipeline/`'s packages from the bottom up: what every stage uses, then the stages in data order
# (the Dagster groups, in the order the UI shows them), then erasure (it reaches into every stage's
# output) and the sample-log generator. A module imports only from its own floor or below. The
# store backends sit with `config`, which picks the home's backend where it parses the home.
FLOORS = [
    {"errors", "settings", "config", "stores", "frames", "lifeline", "progress", "tables"},
    {"storage"},
    {"pii"},
    *({stage} for stage in STAGES),
    {"erasure"},
    {"generate"},
]


def floor_of(name: str) -> int:
    return next(i for i, floor in enumerate(FLOORS) if name in floor)


def pipeline_imports(path: Path) -> set[str]:
    """The `pipeline.<package or module>` names a module imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            parts = node.module.split(".")
            if parts[0] == "pipeline":
                names |= (
                    {parts[1]} if len(parts) > 1 else {a.name for a in node.names} - {"__version__"}
                )
        elif isinstance(node, ast.Import):
            names |= {a.name.split(".")[1] for a in node.names if a.name.startswith("pipeline.")}
    return names


def test_pipeline_packages_import_only_their_floor_or_below() -> None:
    assert [next(iter(f)) for f in FLOORS[3 : 3 + len(STAGES)]] == list(STAGES)
    packages = {p.stem if p.is_file() else p.name for p in (ROOT / "pipeline").iterdir()}
    packages -= {"__init__", "__pycache__"}
    assert packages == set().union(*FLOORS)  # every package has a floor
    upward = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        parts = path.relative_to(ROOT / "pipeline").with_suffix("").parts
        if parts == ("__init__",):
            continue
        own = floor_of(parts[0])
        for name in sorted(pipeline_imports(path)):
            if floor_of(name) > own:
                upward.append(f"pipeline/{'/'.join(parts)} imports pipeline.{name}")
    assert upward == []


def test_private_names_stay_in_their_module() -> None:
    """A `_name` another module needs is part of its module's interface, so it is named as one."""
    crossing = []
    for folder in ("pipeline", "assets", "jobs", "lib/src/memorypack", "deploy"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    crossing += [
                        f"{path.relative_to(ROOT).as_posix()}: {node.module}.{alias.name}"
                        for alias in node.names
                        if alias.name.startswith("_") and not alias.name.startswith("__")
                    ]
    assert crossing == []


def module_graph(folder: Path, package: str) -> dict[str, set[str]]:
    """Each module of `package` (in `folder`) → the modules of it that it imports, anywhere in
    its body (`from package import name` counts the module `name` when there is one, else the
    package's `__init__`)."""
    modules = {
        ".".join((package, *path.relative_to(folder).with_suffix("").parts)).removesuffix(
            ".__init__"
        ): path
        for path in sorted(folder.rglob("*.py"))
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names if alias.name in modules}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in modules:
                for alias in node.names:
                    inner = f"{node.module}.{alias.name}"
                    found.add(inner if inner in modules else node.module)
        graph[name] = found - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One import path back to its start per module that lies on a cycle (depth-first search)."""
    found, done = [], set()

    def visit(name: str, path: list[str]) -> None:
        for target in sorted(graph[name]):
            if target in path:
                found.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target, [*path, target])
        done.add(name)

    for name in sorted(graph):
        if name not in done:
            visit(name, [name])
    return found


def test_the_app_library_has_no_import_cycle() -> None:
    graph = module_graph(ROOT / "lib" / "src" / "memorypack", "memorypack")
    assert len(graph) > 10 and "memorypack.keyword" in graph["memorypack.text_queries"]
    assert cycles(graph) == []
    # the test sees one: a context that imported the loader calling it
    assert cycles({**graph, "memorypack.context": {"memorypack.loader"}}) != []
