"""The policy a tenant's pack ships, and whether its next one is due to train.

A pack never waits for training: it ships the tenant's newest finished policy, which a training
run of its own made after an earlier publish. A tenant with no finished policy yet (its first
night) trains a small one in its run (`DPOPolicyConfig.first_policy`), so its first pack has
templates. The configured policy is due to train when none of its config is reusable for the
tenant's train pairs (`reusable_run`: none yet, or the pairs grew by `retrain_growth`); the
training runs after the publish, holding the tenant's training lock, never its pack run's.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from pipeline.config import Paths
from pipeline.preference.dpo.runs import (
    PolicyRun,
    finished_runs,
    newest_run,
    reusable_run,
    run_of,
)
from pipeline.preference.dpo.settings import (
    MINED,
    POOLED_TENANT,
    STATUS_SKIPPED,
    DPOPolicyConfig,
)
from pipeline.preference.dpo.shared import pulled, train_shared
from pipeline.progress import Progress
from pipeline.storage.homelock import held_if_free, training_scope

BUSY = "its first policy is training in another run: the registry templates stay until it ends"


def _owner(tenant: str, config: DPOPolicyConfig) -> str:
    return POOLED_TENANT if config.pooled else tenant


def ship_policy(
    paths: Paths,
    pairs: Callable[[], pl.DataFrame],
    sft_examples: Callable[[], pl.DataFrame],
    config: DPOPolicyConfig,
    tenant: str,
    progress: Progress | None = None,
) -> PolicyRun:
    """The tenant's policy for this night's pack: its newest finished one, else a first one
    trained now on its pairs (`pairs`, `sft_examples`: the tenant's, called only then) while no
    training run of the tenant holds its training lock (else skipped with the reason); its
    training reports to `progress`."""
    owner = _owner(tenant, config)
    pulled(paths, [owner])
    newest = next(iter(finished_runs(owner, paths.models)), None)
    if newest is not None:
        return run_of(newest, tenant, paths.models)
    scope = training_scope(tenant)
    with held_if_free(paths.local, f"dpo_policy {tenant}: first policy", scope) as held:
        if not held:
            return PolicyRun(tenant, None, STATUS_SKIPPED, skipped_reason=BUSY)
        first = config.first_policy()
        return train_shared(paths, pairs(), sft_examples(), first, tenant, progress)


def training_due(
    train_pairs: pl.DataFrame, config: DPOPolicyConfig, paths: Paths, tenant: str
) -> str | None:
    """Why the tenant's configured policy is due to train (None: it is not), after `ship_policy`
    pulled the home's policies. `train_pairs`: the tenant's mined train pairs (pair_id)."""
    owner = _owner(tenant, config)
    if train_pairs.height < config.min_pairs:
        return None  # it would skip: nothing to train
    if reusable_run(owner, train_pairs, config, paths.models) is not None:
        return None
    newest = newest_run(owner, config, paths.models)
    if newest is None:
        return "no policy of its config yet"
    return (
        f"its train pairs grew from {newest.get(MINED, newest['n_train'])} to "
        f"{train_pairs.height} (retrain_growth {config.retrain_growth:.0%})"
    )
