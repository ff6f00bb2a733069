"""DPO policies shared by every host of an object-store home.

torch reads and writes files, so a policy is trained into and scored from the host's local work
folder (`Paths.models`). On an object-store home the store keeps the policies too, under
`<home>/models/policies/<policy_id>/`: before a tenant's run trains, the tenant's saved policies are
pulled into the work folder (a host that never ran the tenant reuses the policy another host
trained, as the same host would), and a policy trained here is pushed, `run.json` last, so a
policy whose `run.json` is in the store is complete. A folder home keeps them in `<home>/models`
only, as before.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import polars as pl

from memorypack.fs import Location
from pipeline.config import Paths
from pipeline.preference.dpo.runs import PolicyRun
from pipeline.preference.dpo.settings import (
    POOLED_TENANT,
    RUN_FILE,
    STATUS_TRAINED,
    DPOPolicyConfig,
)
from pipeline.preference.dpo.training import train_or_fail
from pipeline.progress import Progress
from pipeline.stores import store_of
from pipeline.stores.base import below


def shared_policies(paths: Paths) -> Location | None:
    """Where the home keeps its policies, or None on a folder home (the work folder is the home)."""
    return None if paths.local == paths.home else paths.home / "models" / "policies"


def _owner(policy_id: str) -> str:
    """The tenant (or the pooled policy's name) a policy id `<tenant>-<12 hex>` belongs to."""
    return policy_id.rsplit("-", 1)[0]


def stored_policies(store: Location, owners: Iterable[str]) -> list[str]:
    """The ids of the complete policies (`run.json` present) of `owners` in the store."""
    wanted = set(owners)
    complete = {
        obj.parent.name
        for obj in store_of(store).files(store, RUN_FILE)
        if obj.parent.parent == store
    }
    return sorted(p for p in complete if _owner(p) in wanted)


def pull_policies(store: Location, models_dir: Path, owners: Iterable[str]) -> list[str]:
    """Copy the complete policies of `owners` that this host lacks from the store into
    `models_dir` (each into a temporary sibling, then renamed); the ids copied."""
    pulled = []
    for policy_id in stored_policies(store, owners):
        target = models_dir / policy_id
        if (target / RUN_FILE).exists():
            continue
        tmp = models_dir / f".{policy_id}.{uuid.uuid4().hex}.pull"
        for obj in store_of(store).files(store / policy_id):
            local = tmp / below(obj, store / policy_id)
            local.parent.mkdir(parents=True, exist_ok=True)
            with obj.open("rb") as source, local.open("wb") as sink:
                shutil.copyfileobj(source, sink)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        pulled.append(policy_id)
    return pulled


def drop_withdrawn(paths: Paths) -> list[str]:
    """Delete this host's copies of policies an erasure withdrew (on any host) that were saved
    before the withdrawal: they must never be reused. (A policy trained again on the same pairs
    after it has the same id and is kept.) The ids deleted."""
    from pipeline.storage.lake import Lake

    withdrawn = (
        Lake(paths)
        .read_or_empty("policy_withdrawals")
        .group_by("policy_id")
        .agg(pl.col("withdrawn_at").max())
        .collect()
    )
    gone = []
    for policy_id, at in withdrawn.sort("policy_id").iter_rows():
        run = paths.models / policy_id / RUN_FILE
        if run.exists() and run.stat().st_mtime < at.timestamp():
            shutil.rmtree(run.parent)
            gone.append(policy_id)
    return gone


def push_policy(store: Location, models_dir: Path, policy_id: str) -> None:
    """Copy a policy trained here to the store, `run.json` last (what marks it complete)."""
    folder = models_dir / policy_id
    files = sorted((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.name == RUN_FILE)
    for path in files:
        store_of(store).copy_in(path, store / policy_id / path.relative_to(folder).as_posix())


def pulled(paths: Paths, owners: Iterable[str]) -> None:
    """On an object-store home: this host's copies of withdrawn policies dropped, and the
    complete policies of `owners` it lacks pulled from the store (a folder home: nothing)."""
    store = shared_policies(paths)
    if store is not None:
        drop_withdrawn(paths)
        pull_policies(store, paths.models, owners)


def train_shared(
    paths: Paths,
    pairs: pl.DataFrame,
    sft_examples: pl.DataFrame,
    config: DPOPolicyConfig,
    tenant: str,
    progress: Progress | None = None,
) -> PolicyRun:
    """The tenant's policy from its pairs and SFT examples (`config.pooled`: the pooled policy of
    them), trained in the host's work folder by `train_or_fail`, with the home's saved policies
    pulled first and the one trained here pushed after (on an object-store home); `progress` as
    `train_policy`'s."""
    owner = POOLED_TENANT if config.pooled else tenant
    store = shared_policies(paths)
    pulled(paths, [owner])
    train, evals = (pairs.filter(pl.col("split") == split) for split in ("train", "eval"))
    run = train_or_fail(owner, train, evals, sft_examples, config, paths.models, progress)
    if store is not None and run.status == STATUS_TRAINED and not run.reused and run.policy_id:
        push_policy(store, paths.models, run.policy_id)
    return replace(run, tenant_id=tenant)


def remove_shared(paths: Paths, owners: Iterable[str]) -> list[str]:
    """Delete the policies of `owners` from the home's store (erasure), `run.json` first so a
    half-deleted one is never taken for complete; the ids deleted."""
    store = shared_policies(paths)
    if store is None:
        return []
    removed = stored_policies(store, owners)
    for policy_id in removed:
        store_of(store).remove_folder(store / policy_id, (RUN_FILE,))
    return removed
