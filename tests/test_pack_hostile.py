"""The app library against a hostile pack folder and hostile arguments (issue 51): a file is read
only once it is known to be a regular file of the size the sealed manifest names, a seen-versions
file is bounded, and NaN, infinity and unknown pieces are the library's own ValueError."""

from __future__ import annotations

import hashlib
import json
import math
import os
import resource
import shutil
from pathlib import Path

import numpy as np
import pytest

from bench.retrieval_set import write_pack
from memorypack import MemoryPack, PackError
from memorypack.format import read_latest

TEXTS = ["Prefers email over phone calls", "Order ORD-48213 arrived damaged", "Allergic to nuts"]
BIG = 8 << 30  # an 8 GB (sparse) file: reading it whole is an out-of-memory kill


pytestmark = pytest.mark.usefixtures("no_hang")  # tests/conftest.py: a hang fails, never hangs


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack whose manifest names a model and tokenizer (their sha256 and size), as the
    pipeline ships its encoder; the bytes are stand-ins: what is tested is what is read."""
    sources = tmp_path_factory.mktemp("model")
    files, paths = {}, {}
    for role, suffix, data in (("onnx", ".onnx", b"stand-in model"), ("tokenizer", ".json", b"{}")):
        digest = hashlib.sha256(data).hexdigest()
        (sources / f"{digest}{suffix}").write_bytes(data)
        files[role] = {"file": f"{digest}{suffix}", "sha256": digest, "bytes": len(data)}
        paths[f"{digest}{suffix}"] = sources / f"{digest}{suffix}"
    spec = {"model": "stand-in", "files": files, "max_seq_length": 128, "pooling": "mean"}
    spec |= {"normalize": "l2", "text": "nfkc_lower_single_spaces"}
    vectors = np.random.default_rng(0).normal(size=(len(TEXTS), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    models = {"embedding": {"model": "stand-in", "dim": 384, "encoder": spec}}
    return write_pack(tmp_path_factory.mktemp("packs"), TEXTS, vectors, models, model_files=paths)


def _copy(shipped: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the tenant folder, and its model file."""
    copy = tmp_path / shipped.name
    shutil.copytree(shipped, copy, symlinks=True)
    (model,) = (copy / "models").glob("*.onnx")
    return copy, model


def _peak_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


@pytest.mark.parametrize("swap", ["sparse 8 GB file", "link to /dev/zero", "FIFO"])
def test_a_model_file_is_checked_before_it_is_read(
    shipped: Path, tmp_path: Path, swap: str
) -> None:
    """The model was read whole before its size was compared: an 8 GB sparse file or a link to
    /dev/zero (an out-of-memory kill at 21 GB), and a FIFO blocked forever."""
    copy, model = _copy(shipped, tmp_path)
    model.unlink()
    if swap == "sparse 8 GB file":
        with model.open("wb") as handle:
            handle.truncate(BIG)
    elif swap == "link to /dev/zero":
        model.symlink_to("/dev/zero")
    else:
        os.mkfifo(model)
    pack = MemoryPack.load(copy)  # the model is read on the first text query
    before = _peak_mib()
    with pytest.raises(PackError, match=r"encoder onnx .* (has 8589934592 bytes|is not a file)"):
        pack.search("anything", retrieval="vector")
    assert _peak_mib() - before < 64


@pytest.mark.parametrize("swap", ["sparse 3 GB file", "link to /dev/zero", "FIFO"])
def test_a_seen_versions_file_is_bounded(shipped: Path, tmp_path: Path, swap: str) -> None:
    seen = tmp_path / "seen.json"
    if swap == "sparse 3 GB file":
        with seen.open("wb") as handle:
            handle.truncate(3 << 30)
    elif swap == "link to /dev/zero":
        seen.symlink_to("/dev/zero")
    else:
        os.mkfifo(seen)
    before = _peak_mib()
    with pytest.raises(PackError, match=r"seen-versions file .* (has 3221225472 bytes|not a file)"):
        MemoryPack.load(shipped, seen=seen)
    assert _peak_mib() - before < 64


def test_a_fifo_for_the_seen_lock_is_refused_not_waited_on(shipped: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    os.mkfifo(tmp_path / "seen.json.lock")
    with pytest.raises(PackError, match="seen-versions file"):
        MemoryPack.load(shipped, seen=seen)


def test_a_data_file_linked_to_a_device_is_refused(shipped: Path, tmp_path: Path) -> None:
    copy, _ = _copy(shipped, tmp_path)
    version = copy / str(read_latest(copy))
    (version / "embeddings.npy").unlink()
    (version / "embeddings.npy").symlink_to("/dev/zero")
    with pytest.raises(PackError, match=r"embeddings\.npy is not a file"):
        MemoryPack.load(copy)


def test_the_seen_file_still_records_what_was_accepted(shipped: Path, tmp_path: Path) -> None:
    seen = tmp_path / "seen.json"
    pack = MemoryPack.load(shipped, seen=seen)
    assert json.loads(seen.read_text())[pack.tenant_id]["version"] == pack.version


@pytest.fixture(scope="module")
def pack(shipped: Path) -> MemoryPack:
    return MemoryPack.load(shipped)


NAN_VECTOR = [math.nan] + [0.0] * 383
INF_VECTOR = [math.inf] + [0.0] * 383


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda p: p.memories_for(None, query_vector=NAN_VECTOR), "query_vector holds NaN"),
        (lambda p: p.search(query_vector=INF_VECTOR), "query_vector holds NaN or infinite"),
        (lambda p: p.few_shot("support", query_vector=NAN_VECTOR), "query_vector holds NaN"),
        (lambda p: p.memories_for(None, k=math.nan), "k must be a whole number, not nan"),
        (lambda p: p.search("email", k=math.inf), "k must be a whole number, not inf"),
        (lambda p: p.few_shot("support", k=2.5), "k must be a whole number"),
        (lambda p: p.memories_for(None, k=True), "k must be a whole number"),
        (lambda p: p.memories_for(None, min_confidence=math.nan), "min_confidence must be a"),
        (lambda p: p.select_skill("u1", epsilon=math.nan), "epsilon must be a finite number"),
        (lambda p: p.prompt_context("c1", budget_chars=math.nan), "budget_chars must be a whole"),
        (lambda p: p.prompt_context("c1", k_memories=math.inf), "k_memories must be a whole"),
        (lambda p: p.receipt(template="nosuch"), "no template 'nosuch' in this pack"),
        (lambda p: p.receipt(memories=["m000001"]), "receipt memories must be ScoredMemory"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_malformed_arguments_are_the_librarys_own_value_error(
    pack: MemoryPack, call: object, match: str
) -> None:
    """`k=nan` once returned every row, a NaN vector and `budget_chars=nan` answered silently,
    `receipt(template="nosuch")` raised AttributeError."""
    with pytest.raises(ValueError, match=match):
        call(pack)  # type: ignore[operator]


def test_well_formed_arguments_still_answer(pack: MemoryPack) -> None:
    vector = np.asarray(pack.embeddings[0])
    assert pack.memories_for(None, k=2.0, query_vector=vector)[0].text == TEXTS[0]
    assert len(pack.search("email", k=1, retrieval="keyword")) == 1
    assert pack.prompt_context("c1", budget_chars=100.0).budget_chars == 100
