"""A loader that cannot be fooled: foreign, edited, unlisted, malformed or oversized packs are
refused with one PackError line, never loaded and never another exception (issue 17)."""

import hashlib
import io
import json
import shutil
import tempfile
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.cli import main
from memorypack import MemoryPack, PackError
from memorypack.format import (
    DATA_FILES,
    KEY_ENV,
    MANIFEST,
    MAX_FIELD_CHARS,
    SEAL,
    TRUNCATION_MARK,
    seal_text,
    verify_pack,
)
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.redaction import cut_long_texts
from pipeline.publish.store import list_versions
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.test_pack_support import AS_OF, make_lake

KEY = "a-long-enough-pack-key-for-tests"
PARQUET_FILES = sorted(name for name in DATA_FILES if name.endswith(".parquet"))


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    paths = make_lake(tmp_path_factory.mktemp("home"))
    for tenant in ("acme", "globex"):
        publish(paths.packs, build_pack(load_inputs(Lake(paths), tenant, AS_OF)))
    return paths.packs


def _copy(packs: Path, into: Path, tenant: str = "acme", as_tenant: str = "acme") -> Path:
    """A copy of `tenant`'s packs as `into/<as_tenant>`; returns its live version folder."""
    target = into / as_tenant
    shutil.copytree(packs / tenant, target)
    return target / (target / "LATEST").read_text().strip()


def _reseal(version_dir: Path, key: str | None = None) -> None:
    """What someone who can write the folder does after an edit: recompute the manifest's seal."""
    data = (version_dir / MANIFEST).read_bytes()
    (version_dir / SEAL).write_text(seal_text(data, key.encode() if key else None))


def _edit_manifest(version_dir: Path, edit: Callable[[dict[str, Any]], Any]) -> None:
    manifest = json.loads((version_dir / MANIFEST).read_text())
    edit(manifest)
    (version_dir / MANIFEST).write_text(json.dumps(manifest))
    _reseal(version_dir)


def _rehash(version_dir: Path) -> None:
    """List every data file's current sha256 and size (a forger's edit of the data), reseal."""

    def update(manifest: dict[str, Any]) -> None:
        for name, entry in manifest["files"].items():
            if (version_dir / name).is_file():
                entry["sha256"] = hashlib.sha256((version_dir / name).read_bytes()).hexdigest()
                entry["bytes"] = (version_dir / name).stat().st_size

    _edit_manifest(version_dir, update)


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at % len(data)] ^= 0xFF
    path.write_bytes(bytes(data))


def _refused(folder: Path, match: str, key: str | None = None) -> str:
    with pytest.raises(PackError, match=match) as caught:
        MemoryPack.load(folder, key=key)
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# ---- the attacks of issue 17 ------------------------------------------------------------------
def test_a_pack_copied_into_another_tenants_folder_is_refused(packs: Path, tmp_path: Path) -> None:
    version_dir = _copy(packs, tmp_path, tenant="globex", as_tenant="acme")
    _refused(version_dir.parent, "belongs to tenant 'globex', not to 'acme'")
    _refused(version_dir, "belongs to tenant 'globex'")  # the version folder itself too


def test_a_version_folder_must_carry_the_manifests_version(packs: Path, tmp_path: Path) -> None:
    version_dir = _copy(packs, tmp_path)
    renamed = version_dir.with_name("20991231T000000000000Z-00000000")
    version_dir.rename(renamed)
    (renamed.parent / "LATEST").write_text(renamed.name + "\n")
    _refused(renamed.parent, f"says it is version '{version_dir.name}', not '{renamed.name}'")


def test_every_file_in_the_folder_is_listed_and_verified(packs: Path, tmp_path: Path) -> None:
    version_dir = _copy(packs, tmp_path)
    _flip(version_dir / "embeddings.npy", -1)
    _edit_manifest(version_dir, lambda m: m["files"].pop("embeddings.npy"))
    _refused(version_dir, "does not list embeddings.npy")

    version_dir = _copy(packs, tmp_path / "2")
    _edit_manifest(version_dir, lambda m: m["files"].pop("few_shot.parquet"))
    _refused(version_dir, r"files its manifest does not list: \['few_shot.parquet'\]")

    version_dir = _copy(packs, tmp_path / "3")
    (version_dir / "notes.txt").write_text("hello")
    _refused(version_dir, r"does not list: \['notes.txt'\]")

    version_dir = _copy(packs, tmp_path / "4")
    (version_dir / "conflicts.parquet").unlink()
    _refused(version_dir, "conflicts.parquet is missing")


def test_the_manifest_is_sealed(packs: Path, tmp_path: Path) -> None:
    version_dir = _copy(packs, tmp_path)
    manifest_path = version_dir / MANIFEST
    edited = manifest_path.read_text().replace('"as_of": "2026-11-08', '"as_of": "2027-11-08')
    assert edited != manifest_path.read_text()
    manifest_path.write_text(edited)  # moves every memory's age, hence its ranking
    _refused(version_dir, "manifest.json does not match its seal")
    (version_dir / SEAL).unlink()
    _refused(version_dir, "has no manifest.seal")
    (version_dir / SEAL).write_bytes(b"\xff\xfe garbage")
    _refused(version_dir, "seal .* is malformed")


def test_a_pack_key_refuses_packs_signed_by_anyone_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = make_lake(tmp_path / "home", tenants=("acme",))
    unsigned = publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF)))
    _refused(unsigned.path, "not signed with this app's pack key", key=KEY)
    monkeypatch.setenv(KEY_ENV, KEY)
    _refused(unsigned.path, "not signed with this app's pack key")  # the key from the environment

    # Signing with the key republishes identical content (apps with the key refuse the old one).
    signed = publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF)))
    assert signed.published and signed.version != unsigned.version
    assert MemoryPack.load(paths.packs / "acme").version == signed.version
    assert "hmac-sha256 " in (signed.path / SEAL).read_text()
    _refused(signed.path, "not signed", key=KEY + "-other")
    monkeypatch.delenv(KEY_ENV)
    assert MemoryPack.load(signed.path).version == signed.version  # no key: the sha256 still holds

    # A forger without the key edits as_of and recomputes the sha256: refused where a key is set.
    _edit_manifest(signed.path, lambda m: m.update(as_of="2027-01-01T00:00:00Z"))
    assert MemoryPack.load(signed.path).as_of.year == 2027
    _refused(signed.path, "not signed with this app's pack key", key=KEY)
    _refused(signed.path, "at least 16 bytes", key="short")


def test_an_unsealed_live_pack_is_republished(tmp_path: Path) -> None:
    paths = make_lake(tmp_path / "home", tenants=("acme",))
    first = publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF)))
    (first.path / SEAL).unlink()  # as an older memorypack left it
    again = publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF)))
    assert again.published and again.version != first.version
    assert MemoryPack.load(paths.packs / "acme").version == again.version


@pytest.mark.parametrize("found", [True, 1.0, "1", 2, None])
def test_pack_format_is_exactly_the_integer_one(
    packs: Path, tmp_path: Path, found: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    version_dir = _copy(packs, tmp_path / "packs")
    _edit_manifest(version_dir, lambda m: m.update(pack_format=found))
    message = f"pack_format {found!r}; this loader reads format 1 only"
    with pytest.raises(PackError, match=message):
        MemoryPack.load(version_dir)
    # The pipeline's CLI prints the app library's PackError as one line too.
    assert main(["pack", "show", "--home", str(tmp_path), "--tenant", "acme"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("memorypack: pack ") and message in line


def _set_column(version_dir: Path, name: str, column: str, values: pa.Array) -> None:
    table = pq.read_table(version_dir / name)
    index = table.column_names.index(column)
    pq.write_table(table.set_column(index, column, values), version_dir / name)
    _rehash(version_dir)


def _drop_column(version_dir: Path, name: str, column: str) -> None:
    pq.write_table(pq.read_table(version_dir / name).drop_columns([column]), version_dir / name)
    _rehash(version_dir)


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _write_and_rehash(name: str, data: bytes) -> Callable[[Path], None]:
    def mutate(version_dir: Path) -> None:
        (version_dir / name).write_bytes(data)
        _rehash(version_dir)

    return mutate


def _replace_manifest(data: bytes) -> Callable[[Path], None]:
    def mutate(version_dir: Path) -> None:
        (version_dir / MANIFEST).write_bytes(data)
        _reseal(version_dir)

    return mutate


def _make_dir(name: str) -> Callable[[Path], None]:
    def mutate(version_dir: Path) -> None:
        target = version_dir / name
        target.unlink() if target.is_file() else shutil.rmtree(target)
        target.mkdir()

    return mutate


# Inputs that raised KeyError, ValueError, IsADirectoryError, UnicodeDecodeError, RecursionError,
# ArrowInvalid (or EOFError, TypeError) from the old loader.
MALFORMED: dict[str, tuple[Callable[[Path], None], str]] = {
    "manifest without tenant_id": (
        lambda d: _edit_manifest(d, lambda m: m.pop("tenant_id")),
        "belongs to tenant None",
    ),
    "as_of not a time": (
        lambda d: _edit_manifest(d, lambda m: m.update(as_of="yesterday")),
        "not an ISO time",
    ),
    "files entry bytes as text": (
        lambda d: _edit_manifest(d, lambda m: m["files"]["memories.parquet"].update(bytes="12")),
        "bytes and rows",
    ),
    "manifest a directory": (_make_dir(MANIFEST), "is not a file"),
    "manifest not UTF-8": (_replace_manifest(b'{"tenant_id": "\xff"}'), "not valid UTF-8 JSON"),
    "manifest nested 100000 deep": (_replace_manifest(b"[" * 100_000), "not valid UTF-8 JSON"),
    "manifest a list": (_replace_manifest(b"[1, 2]"), "not a JSON object"),
    "memories.parquet garbage": (
        _write_and_rehash("memories.parquet", b"PAR1 not parquet PAR1"),
        "memories.parquet is not a readable Parquet file",
    ),
    "memories.parquet a directory": (_make_dir("memories.parquet"), "is not a file"),
    "confidence as text": (
        lambda d: _set_column(d, "memories.parquet", "confidence", pa.array(["x"] * 6)),
        "column confidence has type string",
    ),
    "memories without tenant_id": (  # else rows of any tenant would pass the tenant check
        lambda d: _drop_column(d, "memories.parquet", "tenant_id"),
        r"memories.parquet lacks columns \['tenant_id'\]",
    ),
    "embeddings.npy empty": (_write_and_rehash("embeddings.npy", b""), "not a readable array"),
    "embeddings float64": (
        _write_and_rehash("embeddings.npy", _npy(np.zeros((6, 8)))),
        "not a 2-D float32 matrix",
    ),
    "LATEST not UTF-8": (
        lambda d: (d.parent / "LATEST").write_bytes(b"\xff\xfe\n"),
        "LATEST is not UTF-8",
    ),
    "LATEST a directory": (
        lambda d: ((d.parent / "LATEST").unlink(), (d.parent / "LATEST").mkdir()),
        "LATEST .* is not a file",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_raises_one_pack_error_line(packs: Path, tmp_path: Path, case: str) -> None:
    version_dir = _copy(packs, tmp_path)
    mutate, match = MALFORMED[case]
    mutate(version_dir)
    _refused(version_dir.parent, match)


def test_a_folder_named_like_a_version_at_no_real_time_is_not_a_version(
    packs: Path, tmp_path: Path
) -> None:
    version_dir = _copy(packs, tmp_path)
    (version_dir.parent / "20261399T999999Z-deadbeef").mkdir()  # month 13: listing must not crash
    assert MemoryPack.load(version_dir.parent).version == version_dir.name
    assert [v.version for v in list_versions(version_dir.parent)] == [version_dir.name]


def test_refreshed_keeps_the_old_pack_and_says_why(packs: Path, tmp_path: Path) -> None:
    version_dir = _copy(packs, tmp_path)
    old = MemoryPack.load(version_dir.parent)
    newer = version_dir.with_name("20991231T000000000000Z-00000000")
    shutil.copytree(version_dir, newer)
    (version_dir.parent / "LATEST").write_text(newer.name + "\n")
    _write_and_rehash("memories.parquet", b"garbage")(newer)
    assert old.refreshed() is old
    assert old.refresh_error is not None and "version '" in old.refresh_error  # folder ≠ manifest
    _edit_manifest(newer, lambda m: m.update(version=newer.name))
    assert old.refreshed() is old
    assert "memories.parquet" in (old.refresh_error or "")
    (version_dir.parent / "LATEST").write_bytes(b"\xff")
    assert old.refreshed() is old and "not UTF-8" in (old.refresh_error or "")
    (version_dir.parent / "LATEST").write_text(version_dir.name)
    assert old.refreshed() is old and old.refresh_error is None


def test_a_tampered_latest_cannot_roll_a_running_app_back(tmp_path: Path) -> None:
    from tests.test_pack_writer import _change_lake

    paths = make_lake(tmp_path / "home")
    first = publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF)))
    _change_lake(paths, 0.9)  # the next night: new content, a day later
    inputs = load_inputs(Lake(paths), "acme", AS_OF + timedelta(days=1))
    second = publish(paths.packs, build_pack(inputs))
    tenant = paths.packs / "acme"
    app = MemoryPack.load(tenant)
    assert app.version == second.version != first.version
    # Whoever can write LATEST points it at the older retained version, which is genuine: a fresh
    # load cannot tell, but a running app knows what it has and refuses to go back.
    (tenant / "LATEST").write_text(first.version + "\n")
    assert MemoryPack.load(tenant).version == first.version
    assert app.refreshed() is app
    assert "points back in time" in (app.refresh_error or "")
    # A newer name on an older pack (renamed, manifest edited and resealed): refused by as_of.
    forged = tenant / "20991231T000000000000Z-00000000"
    shutil.copytree(tenant / first.version, forged)
    _edit_manifest(forged, lambda m: m.update(version=forged.name))
    (tenant / "LATEST").write_text(forged.name + "\n")
    assert app.refreshed() is app
    assert "older than the loaded" in (app.refresh_error or "")
    # An operator's rollback, on purpose, reaches the app when it asks for it.
    (tenant / "LATEST").write_text(first.version + "\n")
    rolled = app.refreshed(allow_older=True)
    assert rolled.version == first.version and app.refresh_error is None
    (tenant / "LATEST").write_text(second.version + "\n")
    assert rolled.refreshed().version == second.version and rolled.refresh_error is None


# ---- field size limits -------------------------------------------------------------------------
def test_publishing_cuts_long_texts_and_the_loader_refuses_them(tmp_path: Path) -> None:
    paths = make_lake(tmp_path / "home", tenants=("acme",)).for_tenant("acme")
    lake = Lake(paths)
    statements = lake.read("memory_statements").collect()
    long_text = "Always email, never call. " + "x" * (MAX_FIELD_CHARS * 3)
    lake.write(
        "memory_statements",
        statements.with_columns(
            content=pl.when(pl.col("event_id") == "a-m0")
            .then(pl.lit(long_text))
            .otherwise("content"),
            tags=pl.when(pl.col("event_id") == "a-m0")
            .then(pl.lit(["y" * (MAX_FIELD_CHARS + 1)]))
            .otherwise("tags"),
        ),
    )
    result = publish(paths.packs, build_pack(load_inputs(lake, "acme", AS_OF)))
    pack = MemoryPack.load(paths.packs / "acme")
    text = pack.memory("a-m0")["text"]
    assert len(text) == MAX_FIELD_CHARS and text.endswith(TRUNCATION_MARK)
    assert text.startswith("Always email, never call. xxx")
    assert len(pack.memory("a-m0")["tags"][0]) == MAX_FIELD_CHARS
    truncated = result.manifest["redactions"]["truncated"]
    assert truncated == {
        "memories.parquet:tags": 1,
        "memories.parquet:text": 1,
        "conflicts.parquet:text_a": 1,  # a-m0's text, in its conflict with a-m1
    }

    # A pack that holds a longer text (another publisher, or a forger) is refused.
    copy = _copy(paths.packs, tmp_path / "copy")
    texts = pq.read_table(copy / "memories.parquet").column("text").to_pylist()
    texts[0] = "z" * (MAX_FIELD_CHARS + 1)
    _set_column(copy, "memories.parquet", "text", pa.array(texts, pa.large_string()))
    _refused(copy, f"column text holds a text of {MAX_FIELD_CHARS + 1} characters")


def test_cut_long_texts_leaves_short_ones_and_nulls() -> None:
    frame = pl.DataFrame(
        {"a": ["short", None, "é" * (MAX_FIELD_CHARS + 1)], "n": [1, 2, 3], "l": [[], None, ["ok"]]}
    )
    cut, counts = cut_long_texts(frame)
    assert counts == {"a": 1}
    assert cut["a"].to_list()[:2] == ["short", None]
    assert cut["a"][2] == "é" * (MAX_FIELD_CHARS - len(TRUNCATION_MARK)) + TRUNCATION_MARK
    assert cut.drop("a").equals(frame.drop("a"))


# ---- fuzz: loads and verifies, or PackError; nothing else -------------------------------------
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
MANIFEST_PATHS = [
    ("pack_format",),
    ("tenant_id",),
    ("version",),
    ("as_of",),
    ("files",),
    ("content_hash",),
    *(("files", name) for name in DATA_FILES),
    *(("files", name, key) for name in DATA_FILES for key in ("sha256", "bytes", "rows")),
]
RAW_MANIFESTS = {
    "empty": b"",
    "cut": b"{",
    "nested 50000 deep": b"[" * 50_000,
    "UTF-16": b"\xff\xfe{}",
    "null": b"null",
    "no files": b'{"files": {}}',
    "huge number": b"1e999999",
}
FILE_DAMAGE = ["truncate", "flip", "garbage", "empty", "directory", "delete", "symlink-elsewhere"]
COLUMN_DAMAGE = ["drop", "integers", "texts", "nulls", "too long", "far future", "lists"]
NPY_DAMAGE = {
    "float64": _npy(np.zeros((6, 8))),
    "one-dimensional": _npy(np.zeros(6, dtype=np.float32)),
    "three-dimensional": _npy(np.zeros((6, 8, 1), dtype=np.float32)),
    "fewer rows": _npy(np.zeros((5, 8), dtype=np.float32)),
    "big-endian": _npy(np.zeros((6, 8), dtype=">f4")),
    "object header": b"\x93NUMPY\x01\x00v\x00{'descr': '|O', 'fortran_order': False, 'shape': (6,), }"
    + b" " * 50
    + b"\n",
    "huge shape": b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (99999999, 8), }"
    + b" " * 20
    + b"\n",
}

MUTATION = st.one_of(
    st.tuples(st.just("field"), st.sampled_from(MANIFEST_PATHS), JSON | st.just("<delete>")),
    st.tuples(st.just("raw manifest"), st.sampled_from(sorted(RAW_MANIFESTS))),
    st.tuples(
        st.just("file"),
        st.sampled_from(sorted(DATA_FILES)),
        st.sampled_from(FILE_DAMAGE),
        st.integers(0, 1 << 20),
    ),
    st.tuples(
        st.just("column"),
        st.sampled_from(PARQUET_FILES),
        st.integers(0, 30),
        st.sampled_from(COLUMN_DAMAGE),
    ),
    st.tuples(st.just("npy"), st.sampled_from(sorted(NPY_DAMAGE))),
    st.tuples(st.just("extra"), st.sampled_from(["file", "directory", ".hidden"])),
)


def _damage_column(version_dir: Path, name: str, index: int, how: str) -> None:
    table = pq.read_table(version_dir / name)
    if not table.num_columns:
        return
    index %= table.num_columns
    column, n = table.column_names[index], table.num_rows
    replacement = {
        "integers": pa.array(range(n), pa.int64()),
        "texts": pa.array(["x"] * n),
        "nulls": pa.nulls(n),
        "too long": pa.array(["y" * (MAX_FIELD_CHARS + 1)] * n),
        "far future": pa.array([10**18] * n, pa.int64()).cast(pa.timestamp("us")),
        "lists": pa.array([[1.5]] * n),
    }
    if how == "drop":
        table = table.remove_column(index)
    else:
        table = table.set_column(index, column, replacement[how])
    pq.write_table(table, version_dir / name)


def _mutate(version_dir: Path, mutation: tuple[Any, ...]) -> None:
    kind = mutation[0]
    if kind == "field":
        _, path, value = mutation
        manifest = json.loads((version_dir / MANIFEST).read_text())
        parent = manifest
        for key in path[:-1]:
            parent = parent[key]
        if value == "<delete>":
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = value
        (version_dir / MANIFEST).write_text(json.dumps(manifest))
    elif kind == "raw manifest":
        (version_dir / MANIFEST).write_bytes(RAW_MANIFESTS[mutation[1]])
    elif kind == "file":
        _, name, how, at = mutation
        path = version_dir / name
        data = path.read_bytes()
        if how == "truncate":
            path.write_bytes(data[: at % max(len(data), 1)])
        elif how == "flip":
            _flip(path, at)
        elif how == "garbage":
            path.write_bytes(hashlib.sha256(str(at).encode()).digest() * (1 + at % 64))
        elif how == "empty":
            path.write_bytes(b"")
        elif how == "delete":
            path.unlink()
        elif how == "symlink-elsewhere":
            path.unlink()
            path.symlink_to(version_dir.parent / "LATEST")
        else:
            path.unlink()
            path.mkdir()
    elif kind == "column":
        _damage_column(version_dir, *mutation[1:])
    elif kind == "npy":
        (version_dir / "embeddings.npy").write_bytes(NPY_DAMAGE[mutation[1]])
    else:
        extra = version_dir / ("notes" if mutation[1] != ".hidden" else ".hidden")
        extra.mkdir() if mutation[1] == "directory" else extra.write_text("x")


def _rehash_if_possible(version_dir: Path) -> None:
    try:
        _rehash(version_dir)
    except (ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError):
        _reseal(version_dir)  # a manifest the forger broke: seal it as it is


@pytest.fixture(scope="module")
def fuzz_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(
    derandomize=True,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutation=MUTATION, forged=st.sampled_from(["no", "reseal", "rehash", "rehash"]))
def test_fuzzed_packs_load_verified_or_raise_pack_error(
    packs: Path, fuzz_root: Path, mutation: tuple[Any, ...], forged: str
) -> None:
    work = Path(tempfile.mkdtemp(dir=fuzz_root))
    try:
        version_dir = _copy(packs, work)
        _mutate(version_dir, mutation)
        if forged == "rehash":
            _rehash_if_possible(version_dir)
        elif forged == "reseal" and (version_dir / MANIFEST).is_file():
            _reseal(version_dir)
        try:
            pack = MemoryPack.load(version_dir.parent)
        except PackError as error:
            assert "\n" not in str(error)
            return
        # Loaded: it is what its folder says, every file matches, and every query answers.
        verify_pack(version_dir)
        assert (pack.tenant_id, pack.version) == ("acme", version_dir.name)
        assert len(pack) == pack.manifest["files"]["memories.parquet"]["rows"]
        for memory_id in pack.memories.column("memory_id").to_pylist():
            pack.explain(memory_id)
        pack.memories_for(
            "c1", k=3, tags=["orders"], query_vector=np.ones(pack.dim) if pack.dim else None
        )
        pack.few_shot("support", k=2)
        pack.select_skill("u1", context_tags=["orders"])
        pack.template("concise_response")
        pack.conflicts("c1")
        pack.summaries.to_pylist()
    finally:
        shutil.rmtree(work)


def test_explain_reads_a_memory_with_feedback_but_no_quality_score(
    packs: Path, tmp_path: Path
) -> None:
    version_dir = _copy(packs, tmp_path)
    table = pq.read_table(version_dir / "memories.parquet")
    _set_column(
        version_dir, "memories.parquet", "quality_score", pa.nulls(table.num_rows, pa.float64())
    )
    _set_column(
        version_dir, "memories.parquet", "n_feedback", pa.array([2] * table.num_rows, pa.int64())
    )
    pack = MemoryPack.load(version_dir.parent)
    memory_id = table.column("memory_id")[0].as_py()
    assert "2 feedback signals" in pack.explain(memory_id)
