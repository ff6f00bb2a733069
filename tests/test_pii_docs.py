"""The pseudonym recipe docs/PRIVACY.md gives app developers computes the pipeline's pseudonyms
(issue 50: it once called the key file "32 random bytes", and an app that followed it found
nobody)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pipeline.pii import pii_key, pseudonym

DOC = Path(__file__).resolve().parents[1] / "docs" / "PRIVACY.md"


def _recipe() -> str:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    recipe = [b for b in blocks if "def pseudonym(" in b]
    assert len(recipe) == 1, "PRIVACY.md holds one pseudonym recipe"
    return recipe[0]


def test_the_documented_recipe_gives_the_pipelines_pseudonym(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMORYPACK_PII_KEY", raising=False)
    home = tmp_path / "data"
    key = pii_key(home)  # the pipeline creates the key file on first use
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(_recipe(), str(DOC), "exec"), namespace)
    assert namespace["contact_id"] == pseudonym(key, "acme", "jane.doe@example.com")
    assert re.fullmatch(r"[0-9a-f]{64}\n", (home / "secrets" / "pii.key").read_text())
    assert os.stat(home / "secrets" / "pii.key").st_mode & 0o777 == 0o600
