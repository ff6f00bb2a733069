"""Shared test helpers: contract-valid events and landing folders written from Python objects."""

import json
import os
import shutil
import signal
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.nights import Night

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

LOAD_DATE = "2026-11-02"
# PYTHONPATH for a subprocess that must run this checkout's code (the pipeline and, in lib/src,
# the app library), whatever an installed copy elsewhere says.
ROOT = Path(__file__).resolve().parents[1]
SOURCE_PATH = os.pathsep.join([str(ROOT), str(ROOT / "lib" / "src")])


def pytest_configure(config: pytest.Config) -> None:
    """`make test` runs the suite in two worker processes (pytest-xdist). Each worker gets its own
    temp folder, inherited by what it starts: a test that checks a night left nothing in the
    system's temp folder sees its own worker's files, never the other worker's night. (A hook, not
    module code: a test's subprocess that imports this module must not make one of its own.)"""
    if worker := os.environ.get("PYTEST_XDIST_WORKER"):
        tempfile.tempdir = tempfile.mkdtemp(prefix=f"pytest-temp-{worker}-")
        os.environ["TMPDIR"] = tempfile.tempdir


def pytest_unconfigure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") and tempfile.tempdir:
        shutil.rmtree(tempfile.tempdir, ignore_errors=True)


def interaction(event_id: str = "i1", **fields: Any) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "event_type": "interaction",
        "ts": "2026-11-02T10:00:00Z",
        "tenant_id": "acme",
        "contact_id": "c1",
        "system": "support",
        "kind": "support_reply",
        "skill_id": "concise_response",
        "input": "Where is my order?",
        "output": "It ships tomorrow.",
        **fields,
    }


def feedback(event_id: str = "f1", target_id: str = "i1", **fields: Any) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "event_type": "feedback",
        "ts": "2026-11-02T11:00:00+01:00",
        "tenant_id": "acme",
        "target_id": target_id,
        "signal": "thumbs_up",
        "user_id": "u1",
        **fields,
    }


def memory(event_id: str = "m1", **fields: Any) -> dict[str, Any]:
    return {
        "event_id": event_id,
        "event_type": "memory",
        "ts": "2026-10-02T09:00:00Z",
        "tenant_id": "acme",
        "contact_id": "c1",
        "memory_type": "inferred_pattern",
        "content": "Prefers email over phone calls",
        "category": "communication",
        **fields,
    }


def write_landing(
    folder: Path, lines: Iterable[str | bytes | dict[str, Any]], name: str = "events.jsonl"
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    chunks = []
    for line in lines:
        if isinstance(line, dict):
            line = json.dumps(line)
        chunks.append(line if isinstance(line, bytes) else line.encode())
    path = folder / name
    path.write_bytes(b"\n".join(chunks) + b"\n")
    return path


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    return tmp_path / "landing"


SHARED_NIGHT = "two_tenant_night"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under `-n` (`--dist loadgroup`), a module's tests run in one worker, so its module fixtures
    are built once, and every module that reads the shared night runs in the same worker, so that
    night is run once. Runs before xdist reads the groups."""
    sharing = {item.path for item in items if SHARED_NIGHT in getattr(item, "fixturenames", ())}
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            group = SHARED_NIGHT if item.path in sharing else item.path.stem
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real S3 server (SeaweedFS on 127.0.0.1, free ports) for the whole session."""
    from tests.seaweedfs import start

    server = start(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def two_tenant_night(tmp_path_factory: pytest.TempPathFactory) -> Iterator["Night"]:
    """tests/nights.py's two-tenant night, run once for every module that reads it."""
    from tests.nights import two_tenant_night

    night = two_tenant_night(tmp_path_factory.mktemp("two-tenant-night"))
    yield night
    assert night.changed() == [], "a test changed the shared night's home, not a copy of it"


@pytest.fixture
def s3_packs(seaweedfs: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """`s3://<bucket>/<fresh prefix>/packs`, set as MEMORYPACK_PACKS with the server's AWS
    variables."""
    for name, value in seaweedfs.environment().items():
        monkeypatch.setenv(name, value)
    url = f"{seaweedfs.new_prefix()}/packs"
    monkeypatch.setenv("MEMORYPACK_PACKS", url)
    return url


@pytest.fixture(autouse=True, scope="module")
def no_dagster_instance_left_current() -> Iterator[None]:
    """Dagster instances are left in the order they were entered. A context built on an instance
    (`build_schedule_context(instance=...)`) opens a second one; left open, the garbage collector
    closes it later and makes the first instance's state storage current again, so a later test
    that loads definitions fails by chance. Collecting after each module makes that failure the
    leaking module's (after each test would cost ~0.3 s a test)."""
    yield
    import gc

    from dagster._core.storage.defs_state.base import DefsStateStorage

    gc.collect()
    assert DefsStateStorage.get() is None, "a Dagster instance was left current"


HANG_SECONDS = 60  # far above what a read of a hostile file takes


@pytest.fixture
def no_hang() -> Iterator[None]:
    """A read that blocks (a FIFO opened for reading, a device) ends the test with an error after
    HANG_SECONDS instead of hanging the suite."""

    def hung(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for {HANG_SECONDS}s")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG_SECONDS)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
