"""The environment is read in one place (pipeline/settings.py), and documented from it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.config import Paths
from pipeline.errors import UserError
from pipeline.settings import Settings, variables_table

ROOT = Path(__file__).resolve().parents[1]
# A read of the environment: `os.environ.get(`, `os.getenv(`, `os.environ[…]` not assigned to.
READ = re.compile(r"os\.environ\.get\(|os\.getenv\(|os\.environ\[[^\]]*\](?!\s*=[^=])")


def test_no_environment_read_outside_the_settings_module() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("pipeline", "assets", "jobs")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "pipeline" / "settings.py"
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if READ.search(line)
    ]
    assert found == []


def test_values_types_and_defaults() -> None:
    settings = Settings.from_env(
        {"MEMORYPACK_HOME": "/h", "MEMORYPACK_WORKERS": "3", "MEMORYPACK_PACKS": ""}
    )
    assert (settings.home, settings.workers, settings.packs) == ("/h", 3, None)
    assert settings.first_date == "2026-01-01" and settings.nightly_cron == "0 2 * * *"
    assert settings.is_set("home") and not settings.is_set("packs")
    with pytest.raises(UserError, match=r"MEMORYPACK_WORKERS must be a whole number.*'two'"):
        Settings.from_env({"MEMORYPACK_WORKERS": "two"})


def test_read_when_used_not_when_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths = Paths(tmp_path)
    assert paths.packs == tmp_path / "packs"
    monkeypatch.setenv("MEMORYPACK_PACKS", str(tmp_path / "elsewhere"))
    assert paths.packs == tmp_path / "elsewhere"


def test_operations_table_matches_the_dataclass() -> None:
    text = (ROOT / "docs" / "OPERATIONS.md").read_text(encoding="utf-8")
    table = text.split("<!-- settings:begin -->\n")[1].split("\n<!-- settings:end -->")[0]
    assert table == variables_table()


def test_the_app_library_reads_the_environment_in_one_module() -> None:
    """The library cannot import `Settings`: its few variables are read in memorypack.environment."""
    library = ROOT / "lib" / "src" / "memorypack"
    readers = sorted(
        path.name for path in library.glob("*.py") if READ.search(path.read_text(encoding="utf-8"))
    )
    assert readers == ["environment.py"]
