"""Packs on object storage, against a real SeaweedFS S3 server: publish, load, retention, crashes."""

import argparse
import signal
import subprocess
import sys
import threading
from datetime import timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow.fs as pafs
import pytest

from memorypack import MemoryPack, PackError
from memorypack.format import LATEST, MANIFEST, SEAL, read_latest, version_time
from memorypack.fs import ObjectPath, location
from pipeline.config import Paths
from pipeline.errors import UserError
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.commands import register
from pipeline.publish.store import list_versions, rollback, tenants, write_latest
from pipeline.publish.writer import PublishResult, publish
from pipeline.storage.lake import Lake
from pipeline.stores import OBJECTS
from tests.conftest import SOURCE_PATH
from tests.seaweedfs import subprocess_environment
from tests.tenant_runs import build_analytics, materialize_tenant
from tests.test_pack_crash import AFTER_SWAP, BEFORE_SWAP
from tests.test_pack_support import AS_OF, make_lake
from tests.test_pack_writer import _change_lake

ROOT = Path(__file__).resolve().parents[1]
CONCURRENT_PUBLISHES = 20


def _publish(paths: Paths, tenant: str = "acme", keep: int = 7, days: int = 0) -> PublishResult:
    inputs = load_inputs(Lake(paths), tenant, AS_OF + timedelta(days=days))
    return publish(paths.packs, build_pack(inputs), run_id="s3-test", keep=keep)


def _objects(tenant_dir: ObjectPath) -> list[str]:
    """Every object key under a tenant's prefix, relative to it."""
    selector = pafs.FileSelector(tenant_dir.key, recursive=True, allow_not_found=True)
    infos = tenant_dir.filesystem.get_file_info(selector)
    return sorted(i.path[len(tenant_dir.key) + 1 :] for i in infos if i.type == pafs.FileType.File)


@pytest.fixture
def paths(tmp_path: Path, s3_packs: str) -> Paths:
    """A small generated lake at a local home whose packs go to S3 (MEMORYPACK_PACKS)."""
    paths = make_lake(tmp_path / "home")
    assert str(paths.packs) == s3_packs
    return paths


def test_publish_to_s3_then_load_and_verify(paths: Paths, s3_packs: str, tmp_path: Path) -> None:
    result = _publish(paths)
    assert result.published and str(result.path) == f"{s3_packs}/acme/{result.version}"
    tenant = location(f"{s3_packs}/acme")
    assert isinstance(tenant, ObjectPath)
    assert read_latest(tenant) == result.version
    files = result.manifest["files"]
    assert _objects(tenant) == sorted(
        [LATEST] + [f"{result.version}/{name}" for name in [*files, MANIFEST, SEAL]]
    )
    for name, entry in files.items():  # every object is the size its manifest says
        assert (tenant / result.version / name).stat().st_size == entry["bytes"]

    pack = MemoryPack.load(f"{s3_packs}/acme")
    assert (pack.version, pack.tenant_id, len(pack)) == (result.version, "acme", 6)
    assert str(pack.path) == f"{s3_packs}/acme/{result.version}"
    assert pack.embeddings.shape[0] == files["embeddings.npy"]["rows"] == 6
    # The same content published to a local folder is byte for byte the same pack.
    local = publish(tmp_path / "local", build_pack(load_inputs(Lake(paths), "acme", AS_OF)))
    assert local.manifest["content_hash"] == result.manifest["content_hash"]
    local_pack = MemoryPack.load(tmp_path / "local" / "acme")
    assert local_pack.memories.equals(pack.memories)
    assert (local_pack.embeddings == pack.embeddings).all()
    assert [e.memory_id for e in pack.few_shot("support", k=3)] == [
        e.memory_id for e in local_pack.few_shot("support", k=3)
    ]
    assert tenants(paths.packs) == ["acme"]


def test_second_publish_moves_latest_forward_and_refreshed_follows(paths: Paths) -> None:
    first = _publish(paths)
    pack = MemoryPack.load(paths.packs / "acme")
    same = _publish(paths)
    assert not same.published and same.version == first.version
    assert pack.refreshed() is pack

    _change_lake(paths, 0.5)
    second = _publish(paths, days=1)
    assert second.published and version_time(second.version) > version_time(first.version)
    assert read_latest(paths.packs / "acme") == second.version
    fresh = pack.refreshed()
    assert fresh.version == second.version and pack.refresh_error is None
    assert fresh.memory("a-m0")["confidence"] == 0.5
    # A live pack never moves back in time: an older as_of publishes nothing.
    _change_lake(paths, 0.4)
    older = _publish(paths, days=-1)
    assert not older.published and "older than the live pack" in older.reason
    assert read_latest(paths.packs / "acme") == second.version


def test_latest_is_swapped_by_compare_and_swap_and_never_back(paths: Paths) -> None:
    """LATEST moves by a conditional PUT: a writer holding a stale ETag (another publisher moved
    LATEST after it read) is refused by the store itself, and a publisher that then finds a newer
    version live refuses to move it back; an operator's rollback may."""
    first = _publish(paths)
    _change_lake(paths, 0.5)
    second = _publish(paths, days=1)
    tenant = paths.packs / "acme"
    assert isinstance(tenant, ObjectPath)
    latest = tenant / LATEST
    live, etag = OBJECTS.read_tagged(latest, 256)
    assert live == second.version and etag

    # Another publisher moves LATEST between our read and our write: the store answers 412.
    assert OBJECTS.write_if(latest, f"{second.version}\n".encode(), etag)  # the other writer
    _, newer_etag = OBJECTS.read_tagged(latest, 256)
    assert not OBJECTS.write_if(latest, f"{first.version}\n".encode(), '"0123456789abcdef"')
    assert OBJECTS.write_if(latest, f"{second.version}\n".encode(), newer_etag)
    assert not OBJECTS.write_if(latest, b"x\n", None)  # "create only": LATEST exists
    assert read_latest(tenant) == second.version

    # Re-read and re-checked: an older version is refused in one line; LATEST is unchanged.
    with pytest.raises(UserError, match="not moving it back in time"):
        write_latest(tenant, first.version)
    assert read_latest(tenant) == second.version
    assert rollback(tenant) == first.version  # the operator's rollback moves it back on purpose
    assert MemoryPack.load(tenant).version == first.version


def test_a_fresh_load_from_s3_refuses_a_rolled_back_latest(paths: Paths, tmp_path: Path) -> None:
    """The app's seen-versions file is local; the packs are on S3: a restart after LATEST was
    pointed back refuses the older pack, an operator's rollback is accepted with allow_older."""
    first = _publish(paths)
    _change_lake(paths, 0.5)
    second = _publish(paths, days=1)
    tenant = paths.packs / "acme"
    seen = tmp_path / "app" / "packs-seen.json"
    assert MemoryPack.load(tenant, seen=seen).version == second.version
    assert rollback(tenant, first.version) == first.version
    with pytest.raises(PackError, match="published before") as caught:
        MemoryPack.load(tenant, seen=seen)
    assert "\n" not in str(caught.value) and "allow_older=True" in str(caught.value)
    assert MemoryPack.load(tenant, seen=seen, allow_older=True).version == first.version
    assert MemoryPack.load(tenant, seen=seen).version == first.version  # the new floor


def test_retention_removes_old_versions_from_the_store(paths: Paths) -> None:
    published = []
    for day, confidence in enumerate((0.9, 0.8, 0.7)):
        _change_lake(paths, confidence)
        published.append(_publish(paths, keep=2, days=day))
    kept = [v.version for v in list_versions(paths.packs / "acme")]
    assert kept == [published[1].version, published[2].version]
    assert published[2].removed == [published[0].version]
    tenant = paths.packs / "acme"
    assert isinstance(tenant, ObjectPath)
    assert {key.split("/")[0] for key in _objects(tenant)} == {LATEST, *kept}
    assert MemoryPack.load(tenant).version == published[2].version


def test_a_tampered_object_is_refused(paths: Paths, s3_packs: str) -> None:
    result = _publish(paths)
    victim = location(f"{s3_packs}/acme/{result.version}/memories.parquet")
    assert isinstance(victim, ObjectPath)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    victim.write_bytes(bytes(data))
    with pytest.raises(PackError, match="does not match its sha256"):
        MemoryPack.load(f"{s3_packs}/acme")
    with pytest.raises(PackError, match="no published pack"):
        MemoryPack.load(f"{s3_packs}/nobody")


def test_pack_commands_read_the_url(
    paths: Paths, s3_packs: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    first = _publish(paths)
    _change_lake(paths, 0.5)
    second = _publish(paths, days=1)
    monkeypatch.delenv("MEMORYPACK_PACKS")  # the URL comes from --packs
    parser = argparse.ArgumentParser(prog="memorypack")
    register(parser.add_subparsers(dest="command", required=True))

    def run(*argv: str) -> str:
        args = parser.parse_args(list(argv))
        assert args.func(args) == 0
        return capsys.readouterr().out

    assert f"acme  (2 kept, live = {second.version})" in run("pack", "list", "--packs", s3_packs)
    assert "ok      acme" in run("pack", "verify", "--all", "--packs", s3_packs)
    out = run("pack", "rollback", "--tenant", "acme", "--packs", s3_packs)
    assert f"LATEST {second.version} -> {first.version}" in out
    assert MemoryPack.load(f"{s3_packs}/acme").version == first.version


def test_publish_assets_in_dagster_publish_to_s3(tmp_path: Path, s3_packs: str) -> None:
    """Each tenant's run publishes its pack to S3; the analytics build lists both."""
    from assets.publish import memory_pack

    paths = make_lake(tmp_path / "home")
    with dg.instance_for_test() as instance:
        results = {
            tenant: materialize_tenant([memory_pack], paths.home, instance, tenant=tenant)
            for tenant in ("acme", "globex")
        }
        assert all(result.success for result in results.values())
        build_analytics(paths.home, instance)
    for tenant, result in results.items():
        meta = result.asset_materializations_for_node("memory_pack")[0].metadata
        assert meta["new_versions"].value == 1 and meta["packs_folder"].value == s3_packs
        pack = MemoryPack.load(f"{s3_packs}/{tenant}")
        assert pack.manifest["producer"]["dagster_run_id"] == result.run_id
    assert not (paths.home / "packs").exists()  # nothing local
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        rows = con.execute("SELECT tenant_id, is_latest FROM pack_versions ORDER BY 1").fetchall()
    assert rows == [("acme", True), ("globex", True)]


PUBLISHER = """
import sys
from datetime import datetime
from pipeline.config import Paths
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.crash_hook import install
install()
paths = Paths.from_env(sys.argv[1])
inputs = load_inputs(Lake(paths), "acme", datetime.fromisoformat(sys.argv[2]))
print(publish(paths.packs, build_pack(inputs), keep=1).version)
"""


@pytest.mark.parametrize("step", ["first_object_uploaded", *BEFORE_SWAP, *AFTER_SWAP])
def test_killed_s3_publisher_leaves_the_old_pack_live(
    paths: Paths, seaweedfs: object, step: str
) -> None:
    old = _publish(paths, keep=1).version
    _change_lake(paths, 0.5)
    env = {**subprocess_environment(seaweedfs), "PYTHONPATH": SOURCE_PATH}  # type: ignore[arg-type]
    env["MEMORYPACK_CRASH_AT"] = step
    env["TMPDIR"] = str(paths.home)  # the local staging a killed publisher leaves stays here
    killed = subprocess.run(
        [sys.executable, "-c", PUBLISHER, str(paths.home), AS_OF.isoformat()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard only: a cold start on a busy machine takes minutes
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    tenant = paths.packs / "acme"
    live = read_latest(tenant)
    assert MemoryPack.load(tenant).version == live  # verifies every sha256 read from S3
    assert (live == old) == (step in BEFORE_SWAP or step == "first_object_uploaded")
    # Listed versions are complete; an unfinished upload is not listed and the next publish
    # deletes it.
    for info in list_versions(tenant):
        MemoryPack.load(tenant, version=info.version)
    new = _publish(paths, keep=1).version
    assert read_latest(tenant) == new != old
    assert isinstance(tenant, ObjectPath)
    assert {key.split("/")[0] for key in _objects(tenant)} == {LATEST, new}


def test_readers_during_publishes_only_ever_see_complete_packs(paths: Paths) -> None:
    """A reader loading (and verifying every sha256 of) the live pack in a loop, and refreshing
    it, while CONCURRENT_PUBLISHES publishes run: every load succeeds, versions never go back.

    Retention is off here (keep > publishes): pruning a version a slow reader is still reading
    is retention's business (test_retention_…), not a half-published version."""
    keep = CONCURRENT_PUBLISHES + 1
    first = _publish(paths, keep=keep).version
    tenant = paths.packs / "acme"
    seen: list[str] = []
    failures: list[str] = []
    done = threading.Event()

    def reader() -> None:
        pack = MemoryPack.load(tenant)
        while not done.is_set():
            try:
                loaded = MemoryPack.load(tenant)
                refreshed = pack.refreshed()
            except Exception as error:  # collected: an assertion in a thread fails nothing
                failures.append(f"{type(error).__name__}: {error}")
                continue
            if pack.refresh_error is not None:
                failures.append(f"refresh kept {pack.version}: {pack.refresh_error}")
            if refreshed.version < pack.version or loaded.version < pack.version:
                failures.append(f"went back from {pack.version}")
            seen.extend([loaded.version, refreshed.version])
            pack = max(loaded, refreshed, key=lambda p: p.version)

    thread = threading.Thread(target=reader)
    thread.start()
    published = []
    try:
        for day in range(CONCURRENT_PUBLISHES):
            _change_lake(paths, 0.9 - day * 0.01)
            published.append(_publish(paths, keep=keep, days=day).version)
    finally:
        done.set()
        thread.join(120)
    assert failures == []
    assert len(set(published)) == CONCURRENT_PUBLISHES
    assert seen and set(seen) <= {first, *published}
    assert MemoryPack.load(tenant).version == published[-1]
    assert len(list_versions(tenant)) == CONCURRENT_PUBLISHES + 1
