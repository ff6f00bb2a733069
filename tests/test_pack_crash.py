"""Kill the publisher (SIGKILL) at every step: the previous pack stays live and loadable."""

import signal
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from memorypack import MemoryPack
from memorypack.format import is_version, read_latest, verify_pack
from pipeline.config import Paths
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.conftest import SOURCE_PATH
from tests.test_pack_support import AS_OF, make_lake

# A killed publisher at every step: the soak tier (`make test` runs it, `make test-fast` not).
pytestmark = pytest.mark.soak

ROOT = Path(__file__).resolve().parents[1]
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
BEFORE_SWAP = [
    "first_file_written",
    "files_written",
    "manifest_written",
    "verified",
    "renamed",
    "latest_tmp_written",
]
AFTER_SWAP = ["latest_swapped", "pruning", "pruned"]


def _new_content(paths: Paths) -> None:
    key = paths.for_tenant("acme").partition("decay_snapshots", "2026-11-07")
    pl.read_parquet(key).with_columns(pl.col("confidence") * 0.9).write_parquet(key)


def _run_publisher(paths: Paths, crash_at: str | None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": SOURCE_PATH}
    if crash_at:
        env["MEMORYPACK_CRASH_AT"] = crash_at
    return subprocess.run(
        [sys.executable, "-c", PUBLISHER, str(paths.home), AS_OF.isoformat()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,  # a hang guard only: a cold start on a busy machine takes minutes
        check=False,
    )


@pytest.mark.parametrize("step", BEFORE_SWAP + AFTER_SWAP)
def test_killed_publisher_leaves_a_live_valid_pack(tmp_path: Path, step: str) -> None:
    paths = make_lake(tmp_path / "home")
    old = publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF))).version
    _new_content(paths)

    killed = _run_publisher(paths, step)
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    tenant = paths.packs / "acme"
    live = read_latest(tenant)
    pack = MemoryPack.load(tenant)  # verifies every sha256
    assert pack.version == live
    if step in BEFORE_SWAP:
        assert live == old
    else:
        assert live != old
    # Whatever is visible as a version is complete and verifies; the rest hides behind a dot.
    for child in tenant.iterdir():
        if is_version(child.name):
            verify_pack(child)
        else:
            assert child.name.startswith(".") or child.name == "LATEST", child.name

    # The next publish cleans up after the dead one and makes the new content live.
    new = publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF)), keep=1).version
    assert read_latest(tenant) == new != old
    assert MemoryPack.load(tenant).version == new
    leftovers = [
        c.name for c in tenant.iterdir() if c.name.startswith((".tmp-", ".trash-", ".LATEST."))
    ]
    assert leftovers == []
    assert sorted(c.name for c in tenant.iterdir() if is_version(c.name)) == [new]  # keep=1
