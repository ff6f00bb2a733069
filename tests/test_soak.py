"""Kill -9 soak, kept small: SIGKILL `memorypack run` at seeded moments, then check every invariant.

The bench runs the same soak longer (`python -m bench.soak --kills 20`). Where a kill lands varies
with the machine's speed; the invariants must hold wherever it lands.
"""

from pathlib import Path

import pytest

from bench.soak import soak


@pytest.mark.slow
@pytest.mark.soak
def test_kill_nine_soak_keeps_every_invariant(tmp_path: Path) -> None:
    report = soak(tmp_path, kills=3, seed=5)
    assert [a["broken"] for a in report["attempts"]] == [[], [], []]
    assert report["final_problems"] == []
    assert report["ok"]
