"""A fresh process refuses a rolled-back LATEST when the app keeps a seen-versions file
(`MemoryPack.load(..., seen=…)`): the defence `refreshed()` gives a running app, across restarts."""

import json
import shutil
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memorypack import MemoryPack, PackError
from memorypack.seen import accept, read_seen
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.store import rollback
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.test_pack_support import AS_OF, make_lake
from tests.test_pack_trust import _edit_manifest
from tests.test_pack_writer import _change_lake


def _two_nights(home: Path) -> tuple[Path, str, str]:
    """A tenant folder with two published versions (the second a day later); LATEST at the second."""
    paths = make_lake(home, tenants=("acme",))
    first = publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF)))
    _change_lake(paths, 0.9)
    inputs = load_inputs(Lake(paths), "acme", AS_OF + timedelta(days=1))
    second = publish(paths.packs, build_pack(inputs))
    return paths.packs / "acme", first.version, second.version


def _refused(tenant: Path, seen: Path, match: str) -> str:
    with pytest.raises(PackError) as caught:
        MemoryPack.load(tenant, seen=seen)
    message = str(caught.value)
    assert match in message and "\n" not in message, message
    return message


def test_a_fresh_load_refuses_a_rolled_back_latest(tmp_path: Path) -> None:
    tenant, first, second = _two_nights(tmp_path / "home")
    seen = tmp_path / "app" / "packs-seen.json"
    assert MemoryPack.load(tenant, seen=seen).version == second
    assert read_seen(seen)["acme"]["version"] == second
    # Someone who can write LATEST points it at the older, genuine version; the app restarts.
    (tenant / "LATEST").write_text(first + "\n")
    message = _refused(tenant, seen, "published before")
    assert first in message and str(seen) in message and "allow_older=True" in message
    assert MemoryPack.load(tenant).version == first  # without the file: nothing to compare with
    # A newer name on the older pack (renamed, manifest edited and resealed): refused by as_of.
    forged = tenant / "20991231T000000000000Z-00000000"
    shutil.copytree(tenant / first, forged)
    _edit_manifest(forged, lambda m: m.update(version=forged.name))
    (tenant / "LATEST").write_text(forged.name + "\n")
    _refused(tenant, seen, "older than")
    assert read_seen(seen)["acme"]["version"] == second  # refusals record nothing
    shutil.rmtree(forged)
    # An operator's rollback, on purpose: accepted once with allow_older, it is the new floor.
    assert rollback(tenant, first) == first
    assert MemoryPack.load(tenant, seen=seen, allow_older=True).version == first
    assert MemoryPack.load(tenant, seen=seen).version == first
    (tenant / "LATEST").write_text(second + "\n")
    app = MemoryPack.load(tenant, seen=seen)
    assert app.version == second and read_seen(seen)["acme"]["version"] == second


def test_refreshed_records_what_it_follows(tmp_path: Path) -> None:
    tenant, first, second = _two_nights(tmp_path / "home")
    seen = tmp_path / "packs-seen.json"
    app = MemoryPack.load(tenant, version=first, seen=seen)
    assert read_seen(seen)["acme"]["version"] == first
    fresh = app.refreshed()
    assert fresh.version == second and app.refresh_error is None
    assert read_seen(seen)["acme"]["version"] == second
    # A process that started on the older version before the refresh cannot record it back.
    with pytest.raises(PackError, match="published before"):
        MemoryPack.load(tenant, version=first, seen=seen)


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"{", "not one this library wrote"),
        (b"\xff", "not one this library wrote"),
        (b'{"acme": {"version": "v1", "as_of": "2026-11-08T00:00:00+00:00"}}', "not one this"),
        (b'{"acme": {"version": "20261108T000000Z-00000000", "as_of": "someday"}}', "not one"),
        (b"[]", "not one this library wrote"),
    ],
)
def test_a_damaged_seen_file_is_one_line(tmp_path: Path, content: bytes, match: str) -> None:
    seen = tmp_path / "packs-seen.json"
    seen.write_bytes(content)
    with pytest.raises(PackError, match=match) as caught:
        accept(seen, "acme", "20261108T000000Z-00000000", datetime(2026, 11, 8, tzinfo=UTC), False)
    assert "\n" not in str(caught.value)


def _version(day: int) -> str:
    return f"202611{day:02d}T000000000000Z-0000000{day % 10}"


def _accept_day(seen: str, day: int) -> str:
    """One app worker accepting the pack of `day`: 'ok' or 'refused'."""
    try:
        accept(seen, "acme", _version(day), datetime(2026, 11, day, tzinfo=UTC), False)
    except PackError as error:
        assert "published before" in str(error)
        return "refused"
    return "ok"


def test_workers_starting_together_keep_the_newest(tmp_path: Path) -> None:
    """Eight processes record eight versions at once, 20 times: the file always ends at the newest
    (no lost update), each worker either recorded its version or was refused as older."""
    with ProcessPoolExecutor(8) as pool:
        for round_ in range(20):
            seen = str(tmp_path / f"seen-{round_}.json")
            days = [1 + (round_ + i * 3) % 8 for i in range(8)]
            outcomes = list(pool.map(_accept_day, [seen] * 8, days))
            assert set(outcomes) <= {"ok", "refused"} and "ok" in outcomes
            assert read_seen(seen)["acme"]["version"] == _version(max(days))
            assert json.loads(Path(seen).read_text()).keys() == {"acme"}
