"""The layers (SPEC §1): `pipeline/` never imports dagster, `assets` or `jobs`; `assets/` never
imports `jobs`; the app library imports none of them; the command line sits on top, in `jobs/`."""

import ast
from pathlib import Path

import pytest

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
