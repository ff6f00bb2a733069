"""`memorypack pack list|show|verify|rollback` through its own argparse registration."""

import argparse
from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from memorypack.format import read_latest
from pipeline.errors import UserError
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.commands import register
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.test_pack_support import AS_OF, make_lake


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memorypack")
    register(parser.add_subparsers(dest="command", required=True))
    return parser


def _run(*argv: str) -> int:
    args = _parser().parse_args(list(argv))
    return int(args.func(args))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    paths = make_lake(tmp_path / "home")
    versions = []
    for day in range(2):
        for tenant in ("acme", "globex"):
            key = paths.for_tenant(tenant).partition("decay_snapshots", "2026-11-07")
            pl.read_parquet(key).with_columns(pl.col("confidence") * 0.9).write_parquet(key)
            inputs = load_inputs(Lake(paths), tenant, AS_OF + timedelta(days=day))
            result = publish(paths.packs, build_pack(inputs), run_id=f"run-{day}")
            if tenant == "acme":
                versions.append(result.version)
    (paths.home / "acme_versions").write_text("\n".join(versions))
    return paths.home


def test_list_marks_the_live_version(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = (home / "acme_versions").read_text().split()
    assert _run("pack", "list", "--home", str(home)) == 0
    out = capsys.readouterr().out
    assert "acme  (2 kept, live = " + new in out and "globex" in out
    assert f"* {new}" in out and f"  {old}" in out
    assert "6 memories" in out


def test_show_prints_the_manifest(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, new = (home / "acme_versions").read_text().split()
    assert _run("pack", "show", "--home", str(home), "--tenant", "acme") == 0
    out = capsys.readouterr().out
    assert f"pack acme {new}  (format 1)" in out
    assert "Dagster run run-1" in out
    assert "memories.parquet" in out and "sha256" in out
    assert "'email': 3" in out
    assert "  learning    learning beats the length rule: eval accuracy 0.75" in out
    assert _run("pack", "show", "--home", str(home), "--tenant", "acme", "--json") == 0
    assert '"pack_format": 1' in capsys.readouterr().out


def test_verify_reports_tampering(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run("pack", "verify", "--home", str(home), "--all") == 0
    assert capsys.readouterr().out.count("ok ") == 4
    live = home / "packs" / "acme" / read_latest(home / "packs" / "acme")
    data = bytearray((live / "skills.parquet").read_bytes())
    data[10] ^= 0x01
    (live / "skills.parquet").write_bytes(bytes(data))
    with pytest.raises(UserError, match="1 pack version"):
        _run("pack", "verify", "--home", str(home))
    out = capsys.readouterr().out
    assert (
        "FAILED  acme" in out and "skills.parquet does not match" in out and "ok      globex" in out
    )


def test_rollback_and_its_errors(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = (home / "acme_versions").read_text().split()
    assert _run("pack", "rollback", "--home", str(home), "--tenant", "acme") == 0
    assert f"acme LATEST {new} -> {old} (verified)" in capsys.readouterr().out
    assert read_latest(home / "packs" / "acme") == old
    assert _run("pack", "rollback", "--home", str(home), "--tenant", "acme", "--to", new) == 0
    assert read_latest(home / "packs" / "acme") == new
    with pytest.raises(UserError, match="no version 'nope'"):
        _run("pack", "rollback", "--home", str(home), "--tenant", "acme", "--to", "nope")
    with pytest.raises(UserError, match=r"no packs for tenant 'initech'.*acme, globex"):
        _run("pack", "list", "--home", str(home), "--tenant", "initech")
    with pytest.raises(UserError, match="no published packs"):
        _run("pack", "list", "--home", str(home / "empty"))
    with pytest.raises(SystemExit):
        _run("pack", "rollback", "--home", str(home))  # --tenant is required
