"""The app library as an app installs it: its wheel, in a fresh venv without the pipeline stack.

The wheel is built from `lib/` with this venv's setuptools (offline). The fresh venv gets numpy and
pyarrow — the wheel's only requirements — and, for the `[embed]` extra, onnxruntime and tokenizers
with what they require, by linking this venv's copies of those packages (and their metadata, so
pip sees the requirements met) into a folder on its path: no network, no seconds-long wheel
installs, and nothing else of this venv is visible there. pip then installs `wheel[embed]` with
`--no-index`, so a requirement beyond those would fail the install.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from bench.retrieval_set import write_pack
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.models import encoder_files
from pipeline.publish.writer import publish
from pipeline.semantic.embed import encode, load_model, model_name
from pipeline.storage.lake import Lake
from tests.test_pack_support import AS_OF, make_lake

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "dagster", "polars", "duckdb", "sentence_transformers", "sklearn")
PIPELINE_PACKAGES = ("pipeline", "assets", "jobs")
EMBED_EXTRA = ("onnxruntime", "tokenizers")
# Without this checkout on the path (the test runner may put it there).
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _run(*argv: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{argv}\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = tmp_path_factory.mktemp("build") / "lib"  # setuptools writes build/ into its source
    shutil.copytree(ROOT / "lib", source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "--quiet",
        "--wheel-dir",
        out,
        source,
        cwd=source,
        env=CLEAN_ENV,
    )
    (found,) = out.glob("memorypack-*.whl")
    return found


def _requirements(names: tuple[str, ...]) -> list[str]:
    """The distributions `names` need to run, transitively (extras and other platforms' left out)."""
    from packaging.requirements import Requirement

    seen: list[str] = []
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        seen.append(name)
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def _light_packages(into: Path) -> Path:
    """A folder holding only the app library's requirements and its `[embed]` extra's (links to
    this venv's copies, with metadata)."""
    into.mkdir()
    for dist in _requirements(("numpy", "pyarrow", *EMBED_EXTRA)):
        files = metadata.distribution(dist).files or []
        tops = {Path(str(f)).parts[0] for f in files if not str(f).startswith("..")}
        site = Path(str(metadata.distribution(dist).locate_file("")))
        for top in tops:
            if (site / top).exists() and not top.endswith(".pth") and not (into / top).exists():
                (into / top).symlink_to(site / top)
    return into


@pytest.fixture(scope="module")
def app_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("app")
    venv = home / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=home)
    python = venv / "bin" / "python"
    site = Path(
        _run(
            python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=home
        ).strip()
    )
    (site / "light.pth").write_text(f"{_light_packages(home / 'light')}\n")
    _run(
        sys.executable,
        "-m",
        "pip",
        "--python",
        python,
        "install",
        "--no-index",
        "--no-cache-dir",
        "--quiet",
        f"memorypack[embed] @ {wheel.as_uri()}",
        cwd=home,
        env=CLEAN_ENV,
    )
    return venv


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    paths = make_lake(tmp_path_factory.mktemp("home"), tenants=("acme",))
    publish(paths.packs, build_pack(load_inputs(Lake(paths), "acme", AS_OF)))
    # A second tenant's pack embedded by the pipeline's default model, which it ships.
    export_dir = paths.models / "embeddings"
    name = model_name(None, "onnx-int8")
    model = load_model(None, "onnx-int8", export_dir)
    files = encoder_files(name, 384, export_dir)
    assert files is not None
    write_pack(
        paths.packs,
        TEXTS,
        encode([" ".join(t.lower().split()) for t in TEXTS], model=model),
        models={"embedding": {"model": name, "dim": 384, "encoder": files.spec}},
        tenant="texts",
        model_files=files.sources,
    )
    return paths.packs


def test_wheel_holds_the_app_library_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        meta = archive.read(info).decode()
    tops = {name.split("/")[0] for name in names}
    assert not tops & set(PIPELINE_PACKAGES), sorted(tops)
    assert "memorypack/py.typed" in names
    assert {"memorypack/__init__.py", "memorypack/loader.py", "memorypack/format.py"} <= set(names)
    assert not any(n.endswith("entry_points.txt") for n in names)  # no `memorypack` command
    requires = sorted(
        line.split(":", 1)[1].strip()
        for line in meta.splitlines()
        if line.startswith("Requires-Dist:")
    )
    assert requires == [
        "numpy>=1.26",
        'onnxruntime>=1.17; extra == "embed"',
        "pyarrow>=15",
        'tokenizers>=0.15; extra == "embed"',
    ]


TEXTS = [
    "Prefers to be contacted by email, never by phone",
    "Order ORD-48213 arrived damaged and was replaced",
    "Allergic to peanuts and tree nuts",
]
PROBE = """
import importlib.util, json, sys
import memorypack
from memorypack import MemoryPack, PackError

pack = MemoryPack.load(sys.argv[1])
texts = MemoryPack.load(sys.argv[4])
choice = pack.select_skill("a-user-never-seen")
try:
    MemoryPack.load(sys.argv[2])
    refused = None
except PackError as error:
    refused = str(error)
print(json.dumps({
    "absent": [n for n in sys.argv[3].split(",") if importlib.util.find_spec(n) is None],
    "library": memorypack.__file__,
    "version": pack.version,
    "memories": len(pack),
    "top": [m.memory_id for m in pack.memories_for("c1", k=2)],
    "skill": choice.skill_id if choice else None,
    "refused": refused,
    "context": pack.prompt_context("c1", query="where is my order", system="support",
                                   budget_chars=600).text,
    "keyword_only": pack.encoder_error,
    "by_text": [m.memory_id for m in texts.memories_for(None, k=1, query="food allergy")],
    "by_number": [m.memory_id for m in texts.search("ORD-48213", k=1)],
    "parts": sorted(texts.search("food allergy", k=1)[0].parts),
    "encoder_error": texts.encoder_error,
}))
"""


def test_the_installed_library_loads_a_published_pack_without_the_pipeline(
    app_venv: Path, packs: Path, tmp_path: Path
) -> None:
    probed = HEAVY + PIPELINE_PACKAGES
    out = _run(
        app_venv / "bin" / "python",
        "-c",
        PROBE,
        packs / "acme",
        tmp_path / "nothing",
        ",".join(probed),
        packs / "texts",
        cwd=tmp_path,
        env=CLEAN_ENV,
    )
    seen = json.loads(out)
    assert seen["absent"] == list(probed)  # no torch, dagster, polars, duckdb; no pipeline code
    assert seen["library"].startswith(str(app_venv))
    assert seen["version"] == (packs / "acme" / "LATEST").read_text().strip()
    assert seen["memories"] == 6
    assert seen["top"] == ["a-m0", "a-i0"]
    assert seen["skill"] == "concise_response"
    assert seen["refused"] == f"no published pack at {tmp_path / 'nothing'} (no LATEST file)"
    assert not (app_venv / "bin" / "memorypack").exists()
    # prompt_context on the pipeline's pack: within budget, the template and the conflict first.
    context = seen["context"]
    assert len(context) <= 600
    assert context.startswith("## Procedure (concise_response, version 2)")
    assert "## Open conflicts" in context
    assert "ships no embedding model" in seen["keyword_only"]  # keyword channel only there
    # Text queries with the shipped model, run by ONNX Runtime from the [embed] extra: no torch.
    assert seen["encoder_error"] is None
    assert seen["by_text"] == ["m000002"] and seen["by_number"] == ["m000001"]
    assert seen["parts"] == [
        "age_days",
        "confidence",
        "keyword",
        "keyword_rank",
        "neighbours",
        "relevance",
        "similarity",
        "status_factor",
        "vector_rank",
    ]
