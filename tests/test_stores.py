"""One store interface, two backends: the same calls give the same answers on a local folder and
on a real S3-compatible store (SeaweedFS on 127.0.0.1), and `store_of` picks the backend from the
location alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from memorypack.fs import Location, location
from pipeline.stores import LOCAL, OBJECTS, store_of, store_of_all
from pipeline.stores.base import below, hive_values


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    """An empty folder of each backend."""
    if request.param == "local":
        (tmp_path / "root").mkdir()
        return tmp_path / "root"
    seaweedfs: Any = request.getfixturevalue("seaweedfs")
    monkeypatch = request.getfixturevalue("monkeypatch")
    for name, value in seaweedfs.environment().items():
        monkeypatch.setenv(name, value)
    where = location(f"{seaweedfs.new_prefix()}/root")
    where.mkdir(parents=True, exist_ok=True)
    return where


def test_the_backend_follows_the_location(tmp_path: Path) -> None:
    assert store_of(tmp_path) is LOCAL
    assert store_of(location("s3://bucket/prefix")) is OBJECTS
    assert store_of_all([]) is LOCAL
    assert store_of_all([location("s3://bucket/a"), location("s3://bucket/b")]) is OBJECTS


def test_keys_below_a_root_and_hive_values() -> None:
    base = location("s3://bucket/lake/t")
    assert below(base / "tenant_id=a" / "data.parquet", base) == "tenant_id=a/data.parquet"
    assert below(Path("/x/lake"), Path("/x/lake")) == ""
    with pytest.raises(ValueError, match="not below"):
        below(Path("/x/lakehouse/a"), Path("/x/lake"))
    assert hive_values("t/tenant_id=007/load_date=2026-11-01") == {
        "tenant_id": "007",
        "load_date": "2026-11-01",
    }


def test_files_are_written_whole_listed_identified_and_removed(root: Location) -> None:
    store = store_of(root)
    frame = pl.DataFrame({"tenant_id": ["a", "b"], "n": [1, 2]})
    store.write_parquet(frame, root / "t" / "tenant_id=a" / "data.parquet")
    store.write_parquet(frame.lazy(), root / "t" / "tenant_id=b" / "data.parquet")
    store.write_bytes(root / "t" / "marker", b"one")
    assert (root / "t" / "marker").read_text() == "one"

    found = store.files(root / "t", "data.parquet")
    assert [below(p, root / "t") for p in found] == [
        "tenant_id=a/data.parquet",
        "tenant_id=b/data.parquet",
    ]
    assert [below(p, root) for p in store.files(root)] == [
        "t/marker",
        "t/tenant_id=a/data.parquet",
        "t/tenant_id=b/data.parquet",
    ]
    assert store.folders(root / "t") == ["tenant_id=a", "tenant_id=b"]
    assert store.folders(root / "missing") == []
    assert store.read_parquet(found[0], columns=["n"])["n"].to_list() == [1, 2]
    assert store.scan_parquet_files(found, ["n"]).collect()["n"].to_list() == [1, 2, 1, 2]

    before = store.identity(root / "t" / "marker")
    store.write_bytes(root / "t" / "marker", b"two")
    assert store.identity(root / "t" / "marker") != before

    store.remove(root / "t" / "tenant_id=a")
    store.remove(root / "t" / "marker")
    store.remove(root / "t" / "never-there")
    assert [below(p, root) for p in store.files(root)] == ["t/tenant_id=b/data.parquet"]


def test_a_file_written_once_keeps_its_first_bytes(root: Location) -> None:
    store = store_of(root)
    store.write_once(root / "secrets" / "key", b"first\n")
    store.write_once(root / "secrets" / "key", b"second\n")
    assert (root / "secrets" / "key").read_text() == "first\n"


def test_a_small_file_is_swapped_only_if_unchanged(root: Location) -> None:
    store, path = store_of(root), root / "LATEST"
    assert store.read_tagged(path, 16) == (None, None)
    assert store.write_if(path, b"v1\n", None)
    text, tag = store.read_tagged(path, 16)
    assert text == "v1"
    calls: list[str] = []
    assert store.write_if(path, b"v2\n", tag, lambda: calls.append("ready"))
    assert calls == ["ready"] and store.read_tagged(path, 16)[0] == "v2"
    store.write_bytes(path, b"x" * 17)
    assert store.read_tagged(path, 16)[0] is None  # longer than the limit: names nothing


def test_a_folder_goes_live_whole_and_goes_away_marker_first(
    root: Location, tmp_path: Path
) -> None:
    store = store_of(root)
    staged = tmp_path / "staged"
    staged.mkdir()
    for name in ("data", "seal"):
        (staged / name).write_text(name)
    checked: list[str] = []
    store.put_folder(staged, root / "v1", ("seal",), lambda f: checked.append(f.name))
    assert sorted(p.name for p in (root / "v1").iterdir()) == ["data", "seal"]
    assert store.is_whole(root / "v1", "seal") and not staged.exists()
    assert checked in ([], ["v1"])  # a rename moves the files checked before it; an upload re-reads

    with store.local_copy(root / "v1") as copy:
        assert (copy / "data").read_text() == "data" and copy.parts[-2:] == (root.name, "v1")

    store.remove_folder(root / "v1", ("seal",))
    assert not (root / "v1").exists()
