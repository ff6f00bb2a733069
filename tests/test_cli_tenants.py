"""Every command checks its tenant id by the contract's rule and refuses a tenant the home holds
nothing of, in one line, changing nothing; no argument gives a traceback (a property test)."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jobs.runner
from jobs.cli import main
from memorypack.format import read_latest
from pipeline.config import Paths
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.test_pack_support import AS_OF, make_lake


def _home(root: Path) -> Path:
    """acme and globex: lake tables and two published versions each (no Dagster run)."""
    paths = make_lake(root / "home")
    for day in range(2):
        for tenant in ("acme", "globex"):
            inputs = load_inputs(Lake(paths), tenant, AS_OF + timedelta(days=day))
            publish(paths.packs, build_pack(inputs), run_id=f"run-{day}")
    return paths.home


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _home(tmp_path_factory.mktemp("tenants"))


@pytest.fixture(autouse=True)
def _own_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMORYPACK_HOME", "MEMORYPACK_PACKS", "MEMORYPACK_LANDING", "DAGSTER_HOME"):
        monkeypatch.delenv(name, raising=False)


def _files(home: Path) -> dict[str, str]:
    return {
        str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.rglob("*"))
        if p.is_file()
    }


def _code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as stop:  # argparse's usage errors
        assert isinstance(stop.code, int)
        return stop.code


def one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memorypack: "), err
    return lines[0]


@pytest.mark.parametrize("command", ["forget", "export"])
def test_a_tenant_the_home_holds_nothing_of_is_refused_and_nothing_changes(
    home: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """Before: `--tenant nosuch` exported acme's quarantined lines; forget deleted rows of them."""
    before = _files(home)
    argv = [command, "--home", str(home), "--tenant", "nosuch", "--contact", "c00001"]
    assert _code(argv) == 2
    line = one_line(capsys)
    assert line == f"memorypack: no data for tenant 'nosuch' under {home} (tenants: acme, globex)"
    assert _files(home) == before


def test_a_tenant_id_that_is_a_path_never_reaches_another_tenant(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `pack rollback --tenant acme/../globex` rolled back globex."""
    globex = home / "packs" / "globex"
    live = read_latest(globex)
    assert live is not None
    before = _files(home)
    for argv in (
        ["pack", "rollback", "--tenant", "acme/../globex"],
        ["pack", "show", "--tenant", "../packs/globex"],
        ["pack", "verify", "--tenant", "acme", "--version", f"../globex/{live}"],
    ):
        assert _code([*argv[:2], "--home", str(home), *argv[2:]]) == 2
        assert "is not a" in one_line(capsys)
    assert read_latest(globex) == live and _files(home) == before


@pytest.mark.parametrize("tenant", ["", "a" * 300, "acme\n", "../etc", "ａｃｍｅ"])
@pytest.mark.parametrize(
    "command",
    [["pack", "show"], ["pack", "rollback"], ["pack", "list"], ["pack", "verify"], ["forget"]],
)
def test_every_command_checks_the_tenant_id_in_one_line(
    home: Path, capsys: pytest.CaptureFixture[str], command: list[str], tenant: str
) -> None:
    extra = ["--contact", "c00001"] if command == ["forget"] else []
    assert _code([*command, "--home", str(home), "--tenant", tenant, *extra]) == 2
    assert " is not a tenant id (1 to 64 letters, digits, _ or -, not starting with __)" in (
        one_line(capsys)
    )


def test_a_contact_of_bytes_no_utf8_decodes_is_one_line(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--contact $'\\xff'` reaches Python as a surrogate: it hashed into a traceback."""
    assert _code(["export", "--home", str(home), "--tenant", "acme", "--contact", "\udcff"]) == 2
    assert one_line(capsys) == "memorypack: --contact '\\udcff' is not UTF-8 text"


@pytest.mark.parametrize(
    "argv",
    [
        ["run"],
        ["run", "--landing", "."],
        ["demo"],
        ["forget", "--tenant", "acme", "--contact", "x"],
        ["pack", "list"],
    ],
)
def test_a_home_that_is_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Before: `memorypack run --home <a file>` gave a FileExistsError traceback."""
    file = tmp_path / "afile"
    file.write_text("x")
    assert _code([*argv, "--home", str(file)]) == 2
    assert one_line(capsys) == f"memorypack: home {file} is not a folder"


NASTY = [
    "",
    " ",
    "-",
    "--",
    "-x",
    "--tenant",
    ".",
    "..",
    "/",
    "acme",
    "globex",
    "nosuch",
    "acme/../globex",
    "../../etc/passwd",
    "acme\n",
    "ac\x00me",
    "\ud800",
    "\udcff",
    "ａｃｍｅ",
    "a" * 65,
    "a" * 300,
    "2026-11-01",
    "2026-02-30",
    "0001-01-01",
    "9999-12-31",
    "20261101T000000Z-0000000g",
    "20261301T000000Z-00000000",
    "%s%n",
    "$(reboot)",
]
TEXT = st.one_of(st.sampled_from(NASTY), st.text(max_size=40))


def _no_night(*args: object, **kwargs: object) -> None:
    raise AssertionError("the property test must not start a night")


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    command=st.sampled_from(
        [
            ["pack", "list"],
            ["pack", "show"],
            ["pack", "verify"],
            ["pack", "rollback"],
            ["export"],
            ["forget"],
            ["run"],
        ]
    ),
    tenant=TEXT,
    home_choice=st.one_of(st.just(None), TEXT),
    date=TEXT,
    version=st.one_of(st.just("live"), TEXT),
)
def test_no_argument_gives_a_traceback(
    command: list[str],
    tenant: str,
    home_choice: str | None,
    date: str,
    version: str,
    prepared: tuple[Path, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    home, live = prepared
    where = str(home) if home_choice is None or "://" in home_choice else home_choice
    argv = [*command, "--home", where]
    if command[0] == "run":
        argv += ["--date", date] if len(date) % 2 else ["--start", date, "--end", version]
    else:
        argv += ["--tenant", tenant]
        argv += ["--contact", version] if command[0] in ("export", "forget") else []
        option = {"rollback": "--to"}.get(command[-1], "--version")
        if command[-1] != "list":
            argv += [option, live if version == "live" else version]
    code = _code(argv)
    err = capsys.readouterr().err
    assert isinstance(code, int)
    assert "Traceback" not in err, (argv, err)
    if code != 0:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("memorypack: "), (argv, err)


@pytest.fixture(scope="module")
def _prepared_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    home = _home(tmp_path_factory.mktemp("property"))
    live = read_latest(home / "packs" / "acme")
    assert live is not None
    return home, live


@pytest.fixture
def prepared(
    _prepared_home: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str]:
    """The property test's home; relative homes land in a scratch folder; no night can start."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(jobs.runner, "run_nightly", _no_night)
    assert Paths(_prepared_home[0]).landing.exists() is False  # `run` always stops before a night
    return _prepared_home
