"""Queries by text, offline (issue 16 item 2): the pack ships the pipeline's own ONNX model and
tokenizer (by sha256), the app library's encoder reproduces the pipeline's vectors."""

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.retrieval_set import write_pack
from memorypack import MemoryPack, PackError
from memorypack.format import sha256_file
from pipeline.errors import UserError
from pipeline.publish.commands import register
from pipeline.publish.models import encoder_files, prune_models
from pipeline.semantic.embed import encode, load_model, model_name
from tests.conftest import SOURCE_PATH

TEXTS = [
    "Prefers to be contacted by email, never by phone",
    "Order ORD-48213 arrived damaged and was replaced",
    "Allergic to peanuts and tree nuts",
    "Works night shifts at the hospital",
    "  Wants   quotes in EUROS, not dollars  ",
]


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A pack embedded by the pipeline's default model (ONNX int8), with that model shipped."""
    export_dir = tmp_path_factory.mktemp("models") / "embeddings"
    model = load_model(None, "onnx-int8", export_dir)
    name = model_name(None, "onnx-int8")
    vectors = encode([" ".join(t.lower().split()) for t in TEXTS], model=model)
    files = encoder_files(name, 384, export_dir)
    assert files is not None
    tenant_dir = write_pack(
        tmp_path_factory.mktemp("packs"),
        TEXTS,
        vectors,
        models={"embedding": {"model": name, "dim": 384, "encoder": files.spec}},
        model_files=files.sources,
    )
    return tenant_dir, model


def test_the_pack_names_and_ships_the_exact_model(shipped) -> None:
    tenant_dir, _ = shipped
    pack = MemoryPack.load(tenant_dir)
    spec = pack.manifest["models"]["embedding"]["encoder"]
    assert spec["model"] == "all-MiniLM-L6-v2+onnx-int8.v3"
    assert (spec["pooling"], spec["normalize"], spec["max_seq_length"]) == ("mean", "l2", 256)
    for role, suffix in (("onnx", ".onnx"), ("tokenizer", ".json")):
        entry = spec["files"][role]
        path = tenant_dir / "models" / entry["file"]
        assert entry["file"] == entry["sha256"] + suffix
        assert sha256_file(path) == entry["sha256"] and path.stat().st_size == entry["bytes"]
    # Nothing but format 1's files in the version folder.
    assert "models" not in {p.name for p in pack.path.iterdir()}


def test_loader_vectors_agree_with_the_pipelines(shipped) -> None:
    tenant_dir, model = shipped
    pack = MemoryPack.load(tenant_dir)
    normalised = [" ".join(t.lower().split()) for t in TEXTS]
    stored = np.asarray(pack.embeddings)
    # The pipeline embeds one text per run, so its vectors do not depend on the batch size or on
    # the other texts of the run (int8 quantizes a run's activations with one scale).
    assert np.allclose(encode(normalised, model=model, batch_size=len(TEXTS)), stored, atol=1e-6)
    assert np.allclose(
        encode([*normalised[::-1], "x " * 200], model=model)[:5][::-1], stored, atol=1e-6
    )
    # A query embedded alone by the loader is the stored vector of the same text; so are several.
    for i, text in enumerate(TEXTS):
        alone = pack.embed([text])[0]
        assert float(alone @ stored[i]) > 0.99999
        assert np.allclose(alone, stored[i], atol=1e-5)
    assert np.allclose(pack.embed(TEXTS), stored, atol=1e-5)


def test_text_queries_rank_by_meaning_and_by_words(shipped) -> None:
    pack = MemoryPack.load(shipped[0])
    top = pack.memories_for(None, k=1, query="food allergy for the team dinner")[0]
    assert top.text == "Allergic to peanuts and tree nuts"
    assert 0.3 < top.parts["similarity"] < 1 and top.parts["vector_rank"] == 1.0
    assert pack.encoder_error is None
    vector_only = pack.search("how should we reach her", k=1, retrieval="vector")[0]
    assert vector_only.text.startswith("Prefers to be contacted by email")
    assert pack.search("ORD-48213", k=1)[0].text.startswith("Order ORD-48213")
    context = pack.prompt_context(None, query="is there a problem with order ORD-48213")
    assert context.memories[0].text.startswith("Order ORD-48213")


@pytest.mark.parametrize("retrieval", ["hybrid", "keyword", "vector"])
def test_an_undecodable_query_is_a_malformed_argument(shipped, retrieval: str) -> None:
    pack = MemoryPack.load(shipped[0])
    message = r"^query is not valid Unicode text \(a lone surrogate at character 7\)$"
    with pytest.raises(ValueError, match=message):
        pack.search("refund \ud800", k=1, retrieval=retrieval)
    with pytest.raises(ValueError, match=message):
        pack.prompt_context(None, query="refund \ud800")
    with pytest.raises(ValueError, match="text to embed is not valid Unicode"):
        pack.embed(["fine", "\udfff"])
    valid = pack.search("peanuts \u00e9\U0001f600", k=1, retrieval=retrieval)  # answered
    assert valid[0].text == "Allergic to peanuts and tree nuts"


def test_a_tampered_model_is_refused(shipped, tmp_path: Path) -> None:
    copy = tmp_path / "retrieval"
    shutil.copytree(shipped[0], copy)
    (model,) = (copy / "models").glob("*.onnx")
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    pack = MemoryPack.load(copy)  # the pack itself is fine: the model is checked when first used
    with pytest.raises(PackError, match="does not match its sha256"):
        pack.search("anything")


def test_pack_verify_checks_the_model_files(
    shipped, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memorypack pack verify` also checks the shared model files the manifest names."""
    packs = tmp_path / "packs"
    copy = packs / "retrieval"
    shutil.copytree(shipped[0], copy)
    version = (copy / "LATEST").read_text().strip()
    verify = ["pack", "verify", "--packs", str(packs)]
    assert _run_cli(*verify) == 0
    assert capsys.readouterr().out.strip() == (
        f"ok      retrieval {version}  (8 files and 2 model files verified)"
    )
    (model,) = (copy / "models").glob("*.onnx")
    (tokenizer,) = (copy / "models").glob("*.json")
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    tokenizer.write_text(tokenizer.read_text() + " ")
    expected = {
        "onnx": f"model file {model} (onnx) does not match its sha256 (tampered?)",
        "tokenizer": f"model file {tokenizer} (tokenizer) has {tokenizer.stat().st_size} bytes, "
        f"the manifest says {tokenizer.stat().st_size - 1}",
    }
    with pytest.raises(UserError, match="1 pack version"):
        _run_cli(*verify)
    assert capsys.readouterr().out.strip() == f"FAILED  retrieval {version}: {expected['onnx']}"
    model.unlink()
    with pytest.raises(UserError):
        _run_cli(*verify)
    assert capsys.readouterr().out.strip() == (
        f"FAILED  retrieval {version}: model file {model} (onnx) is missing"
    )
    shutil.copy(shipped[0] / "models" / model.name, model)
    with pytest.raises(UserError):
        _run_cli(*verify)
    assert (
        capsys.readouterr().out.strip() == f"FAILED  retrieval {version}: {expected['tokenizer']}"
    )


def _run_cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="memorypack")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return int(args.func(args))


def test_without_the_embed_extra_text_queries_use_keywords(shipped) -> None:
    code = (
        "import sys\n"
        "sys.modules['onnxruntime'] = None\n"
        "from memorypack import MemoryPack, EncoderUnavailable\n"
        f"pack = MemoryPack.load({str(shipped[0])!r})\n"
        "print(pack.search('ORD-48213', k=1)[0].memory_id)\n"
        "print(pack.encoder_error)\n"
        "try:\n"
        "    pack.search('x', retrieval='vector')\n"
        "except EncoderUnavailable as error:\n"
        "    print('refused:', error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": SOURCE_PATH, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    found, reason, refused = done.stdout.strip().splitlines()
    assert found == "m000001"
    assert reason == (
        "text queries need ONNX Runtime and tokenizers (onnxruntime is missing): "
        "pip install 'memorypack[embed]'"
    )
    assert refused == f"refused: {reason}"


def test_retention_removes_models_no_kept_version_names(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    for name in ("a" * 64 + ".onnx", "b" * 64 + ".onnx", "c" * 64 + ".json"):
        (folder / name).write_bytes(b"x")
    manifest = {
        "models": {
            "embedding": {
                "encoder": {
                    "files": {
                        "onnx": {"file": "a" * 64 + ".onnx"},
                        "tokenizer": {"file": "c" * 64 + ".json"},
                    }
                }
            }
        }
    }
    assert prune_models(tmp_path, [manifest, {}]) == ["b" * 64 + ".onnx"]
    assert sorted(p.name for p in folder.iterdir()) == ["a" * 64 + ".onnx", "c" * 64 + ".json"]
