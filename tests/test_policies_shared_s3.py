"""DPO policies on an object-store home are the home's, not one host's (issue 14, item 5): a host
that never ran a tenant reuses the policy another host trained (no retraining), scores templates
with it from its own work folder, and an erasure on one host withdraws the policy on every host.
Against a real SeaweedFS on 127.0.0.1."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from memorypack.fs import ObjectPath
from pipeline.config import Paths
from pipeline.erasure.lake import withdraw_policies
from pipeline.erasure.scrub import Needles
from pipeline.erasure.subject import Subject
from pipeline.preference.dpo import RUN_FILE, STATUS_TRAINED, PolicyScorer, runs_frame
from pipeline.preference.dpo.shared import shared_policies, train_shared
from pipeline.preference.templates.rewards import latest_trained
from pipeline.storage.lake import Lake
from tests.test_dpo import FAST, _sft, planted_pairs

pytestmark = pytest.mark.slow


def _host(home: str, local: Path, monkeypatch: pytest.MonkeyPatch) -> Paths:
    """The home as one host sees it: its own work folder."""
    monkeypatch.setenv("MEMORYPACK_LOCAL_DIR", str(local))
    paths = Paths.from_env(home).for_tenant("acme")
    assert paths.local == local.resolve()
    return paths


def _erasure_of(tenant: str) -> Subject:
    events = pl.DataFrame({"event_id": ["e1"], "event_type": ["interaction"]})
    return Subject(tenant, "c1", events, events.clear(), Needles(tenant))


def test_a_policy_trained_on_one_host_is_reused_and_withdrawn_on_another(
    seaweedfs: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in seaweedfs.environment().items():
        monkeypatch.setenv(name, value)
    home = f"{seaweedfs.new_prefix()}/home"
    pairs = planted_pairs(40)
    sft = _sft(pairs)

    first = _host(home, tmp_path / "host-a", monkeypatch)
    trained = train_shared(first, pairs, sft, FAST, "acme")
    assert trained.status == STATUS_TRAINED and not trained.reused
    store = shared_policies(first)
    assert isinstance(store, ObjectPath)
    stored = {o.relative_to(store) for o in store.walk_files()}
    assert f"{trained.policy_id}/{RUN_FILE}" in stored
    assert any(s.startswith(f"{trained.policy_id}/policy/") for s in stored)

    second = _host(home, tmp_path / "host-b", monkeypatch)
    assert not second.models.exists()
    reused = train_shared(second, pairs, sft, FAST, "acme")
    assert reused.reused and reused.policy_id == trained.policy_id
    assert reused.model_dir == str(second.models / str(trained.policy_id))
    assert reused.eval_accuracy == trained.eval_accuracy
    # The history written by the first host names its own folder; the second scores from its own.
    history = runs_frame([trained]).with_columns(is_latest=pl.lit(True))
    [model_dir] = latest_trained(history, second.models)["model_dir"].to_list()
    assert model_dir == reused.model_dir
    evals = pairs.filter(pl.col("split") == "eval")
    accuracy, _, _ = PolicyScorer.load(model_dir).evaluate(evals)
    assert accuracy == pytest.approx(trained.eval_accuracy)

    # An erasure on the first host deletes the policy from the store and records it; the second
    # host drops its copy before its next training, so nothing withdrawn is ever reused.
    now = datetime.now(UTC)
    first = _host(home, tmp_path / "host-a", monkeypatch)
    assert withdraw_policies(first, _erasure_of("acme"), now) == [trained.policy_id]
    assert not list(store.walk_files())
    withdrawn = Lake(first).read("policy_withdrawals").collect()
    assert withdrawn["policy_id"].to_list() == [trained.policy_id]
    second = _host(home, tmp_path / "host-b", monkeypatch)
    again = train_shared(second, pairs, sft, FAST, "acme")
    assert again.status == STATUS_TRAINED and not again.reused
    assert {o.relative_to(store).split("/")[0] for o in store.walk_files()} == {again.policy_id}
    # Trained again after the withdrawal (the same pairs: the same id), it is kept and reused.
    after = train_shared(second, pairs, sft, FAST, "acme")
    assert after.reused and after.policy_id == again.policy_id
