"""Erasure of packs published on S3 (MEMORYPACK_PACKS=s3://…), against a real SeaweedFS server:
`forget` rewrites every retained version on the object store, no object under the packs prefix
keeps a byte of the person, LATEST points at a verified version, and apps load it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from jobs.cli import main
from memorypack import MemoryPack
from memorypack.format import read_latest, read_manifest, verify_pack
from memorypack.fs import ObjectPath, location
from pipeline.config import Paths
from pipeline.erasure.person import export
from pipeline.generate import generate
from pipeline.pii import pii_key, pseudonym
from pipeline.publish.store import list_versions
from tests.test_erasure_end_to_end import START, TENANT, ZELDA, _needles, _plant, _run


def _objects(root: ObjectPath) -> dict[str, bytes]:
    """Every object under a prefix, by key relative to it, with its bytes."""
    selector = pafs.FileSelector(root.key, recursive=True, allow_not_found=True)
    infos = root.filesystem.get_file_info(selector)
    return {
        info.path[len(root.key) + 1 :]: (root / info.path[len(root.key) + 1 :]).read_bytes()
        for info in infos
        if info.type == pafs.FileType.File
    }


def _cells(data: bytes) -> str:
    """Every value of a Parquet object, as text (its pages are compressed)."""
    frame = pl.read_parquet(pa.BufferReader(data))
    cells = []
    for column in frame.columns:
        series = frame[column]
        while isinstance(series.dtype, pl.List | pl.Array):
            series = series.explode()
        cells += [str(v) for v in series.drop_nulls().to_list()]
    return "\n".join(cells)


def find_in_objects(root: ObjectPath, needles: list[str]) -> list[str]:
    hits = []
    for key, data in sorted(_objects(root).items()):
        hits += [f"{key} (bytes): {n}" for n in needles if n.encode() in data]
        if key.endswith(".parquet"):
            text = _cells(data)
            hits += [f"{key} (decoded): {n}" for n in needles if n in text]
    return hits


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, seaweedfs: Any) -> Iterator[dict[str, Any]]:
    """Two nights published to S3 (two retained versions per tenant hold the person), then
    `memorypack forget` for them."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in seaweedfs.environment().items():
            patch.setenv(name, value)
        s3_packs = f"{seaweedfs.new_prefix()}/packs"
        patch.setenv("MEMORYPACK_PACKS", s3_packs)
        yield _world(tmp_path_factory.mktemp("erasure-s3"), s3_packs)


def _world(tmp_path: Path, s3_packs: str) -> dict[str, Any]:
    home, landing = tmp_path / "home", tmp_path / "landing"
    generate(landing, days=2, interactions=60, tenants=2, seed=5, start=START)
    _plant(landing, [ZELDA])
    facts: dict[str, Any] = {}
    facts["runs"] = [
        _run(home, landing, "2026-11-01", "2026-11-01").success,
        _run(home, landing, "2026-11-02", "2026-11-02").success,
    ]
    paths = Paths(home)
    packs = location(s3_packs)
    assert isinstance(packs, ObjectPath) and paths.packs == packs
    facts["needles"] = _needles(home, ZELDA)
    facts["hits_before"] = find_in_objects(packs, facts["needles"])
    facts["versions_before"] = {
        t: [v.version for v in list_versions(packs / t)] for t in ("acme", "globex")
    }
    facts["latest_before"] = {t: read_latest(packs / t) for t in ("acme", "globex")}
    facts["export_before"] = export(paths, TENANT, ZELDA.contact)
    facts["exit"] = main(
        ["forget", "--home", str(home), "--tenant", TENANT, "--contact", ZELDA.contact]
    )
    facts["hits_after"] = find_in_objects(packs, facts["needles"])
    facts["local_after"] = [
        str(p) for p in home.rglob("*") if p.is_file() and ZELDA.words[0].encode() in p.read_bytes()
    ]
    facts["versions_after"] = {
        t: [v.version for v in list_versions(packs / t)] for t in ("acme", "globex")
    }
    facts["latest_after"] = {t: read_latest(packs / t) for t in ("acme", "globex")}
    facts["export_after"] = export(paths, TENANT, ZELDA.contact)
    facts["packs"] = packs
    facts["home"] = home
    return facts


def test_forget_rewrites_every_version_on_s3(world: dict[str, Any]) -> None:
    assert world["runs"] == [True, True]
    before = "\n".join(world["hits_before"])
    # Their words in both retained versions of acme; their ids as pseudonyms.
    assert len(world["versions_before"]["acme"]) == 2
    for version in world["versions_before"]["acme"]:
        assert f"acme/{version}/memories.parquet (decoded): {ZELDA.words[0]}" in before
    assert pseudonym(pii_key(world["home"]), TENANT, ZELDA.contact) in before
    assert json.dumps(world["export_before"]["packs"], default=str).count(ZELDA.words[0]) >= 2

    assert world["exit"] == 0
    assert world["hits_after"] == []  # no object under the packs prefix holds a byte of them
    assert world["local_after"] == []  # and no local leftover of the download either
    assert world["export_after"]["packs"] == {}


def test_latest_points_at_a_verified_rewritten_version(world: dict[str, Any]) -> None:
    packs: ObjectPath = world["packs"]
    before, after = world["versions_before"], world["versions_after"]
    assert after["globex"] == before["globex"]  # another tenant: untouched
    assert world["latest_after"]["globex"] == world["latest_before"]["globex"]
    # Each acme version rewritten under a new name with its publish time; as many kept as before.
    assert len(after["acme"]) == len(before["acme"]) and not set(after["acme"]) & set(
        before["acme"]
    )
    assert [v.split("-")[0] for v in after["acme"]] == [v.split("-")[0] for v in before["acme"]]
    latest = world["latest_after"]["acme"]
    assert latest == after["acme"][-1]
    manifest = verify_pack(packs / "acme" / latest)
    assert manifest["erasures"]["rewrites"][-1]["from_version"] == world["latest_before"]["acme"]
    for version in after["acme"]:
        verify_pack(packs / "acme" / version)
        assert read_manifest(packs / "acme" / version)["version"] == version
    pack = MemoryPack.load(f"{packs}/acme")
    assert pack.version == latest and len(pack) == manifest["counts"]["memories"] > 0


def test_forget_refuses_before_changing_anything_when_the_store_is_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.seaweedfs import _free_ports
    from tests.test_pack_support import make_lake

    (port,) = _free_ports(1)  # nothing listens there
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_EC2_METADATA_DISABLED": "true",
        "MEMORYPACK_PACKS": "s3://memorypack-tests/unreachable/packs",
    }.items():
        monkeypatch.setenv(name, value)
    home = tmp_path / "home"
    make_lake(home)

    def files() -> dict[Path, bytes]:  # but the (empty) locks the command takes
        return {
            p: p.read_bytes()
            for p in home.rglob("*")
            if p.is_file() and p.name[0] != "." and p.parent.name != "locks"
        }

    before = files()
    code = main(["forget", "--home", str(home), "--tenant", "acme", "--contact", "c1"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "unreachable" in err and "nothing was changed" in err
    assert files() == before
