"""The app library as an app installs it: its wheel, in a fresh venv without the pipeline stack.

The wheel is built from `lib/` with this venv's setuptools (offline). The fresh venv gets numpy and
pyarrow — the wheel's only requirements — by linking this venv's copies of those two packages (and
their metadata, so pip sees the requirements met) into a folder on its path: no network, no
seconds-long wheel installs, and nothing else of this venv is visible there. pip then installs
the wheel with `--no-index`, so a requirement beyond numpy and pyarrow would fail the install.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

from pipeline.pack.build import build_pack, load_inputs
from pipeline.pack.writer import publish
from pipeline.storage import Lake
from tests.test_pack_support import AS_OF, make_lake

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "dagster", "polars", "duckdb", "sentence_transformers", "sklearn")
PIPELINE_PACKAGES = ("pipeline", "assets", "jobs")
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


def _light_packages(into: Path) -> Path:
    """A folder holding only numpy and pyarrow (links to this venv's copies, with metadata)."""
    into.mkdir()
    for dist in ("numpy", "pyarrow"):
        files = metadata.distribution(dist).files or []
        tops = {Path(str(f)).parts[0] for f in files if not str(f).startswith("..")}
        site = Path(str(metadata.distribution(dist).locate_file("")))
        for top in tops:
            if (site / top).exists() and not top.endswith(".pth"):
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
        wheel,
        cwd=home,
        env=CLEAN_ENV,
    )
    return venv


@pytest.fixture(scope="module")
def packs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    paths = make_lake(tmp_path_factory.mktemp("home"), tenants=("acme",))
    publish(paths.packs, build_pack(load_inputs(Lake(paths), AS_OF), "acme"))
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
    assert requires == ["numpy>=1.26", "pyarrow>=15"]


PROBE = """
import importlib.util, json, sys
import memorypack
from memorypack import MemoryPack, PackError

pack = MemoryPack.load(sys.argv[1])
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
