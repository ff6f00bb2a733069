"""The policy a tenant's pack ships, and whether its next one is due to train.

A pack never waits for training: it ships the tenant's newest finished policy, which a training
run of its own made after an earlier publish. A tenant with no finished policy yet (its first
night) trains a small one in its run (`DPOPolicyConfig.first_policy`), so its first pack has
templates. The configured policy is due to train when none of its config is reusable for the
tenant's train pairs (`reusable_run`: none yet, or the pairs grew by `retrain_growth`); the
training runs after the publish, holding the tenant's training lock, never its pack run's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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


def ship_policies(
    paths: Paths,
    pairs: Callable[[], pl.DataFrame],
    sft_examples: Callable[[], pl.DataFrame],
    config: DPOPolicyConfig,
    tenants: Sequence[str],
    progress: Progress | None = None,
) -> list[PolicyRun]:
    """Each tenant's policy for this night's pack: its newest finished one, else a first one
    trained now (`pairs`, `sft_examples`: called only then) while no training run of the tenant
    holds its training lock (else skipped with the reason); its training reports to `progress`."""
    models = paths.models
    pulled(paths, [_owner(t, config) for t in tenants])
    runs = []
    for tenant in tenants:
        newest = next(iter(finished_runs(_owner(tenant, config), models)), None)
        if newest is not None:
            runs.append(run_of(newest, tenant, models))
            continue
        scope = training_scope(tenant)
        with held_if_free(paths.local, f"dpo_policy {tenant}: first policy", scope) as held:
            if not held:
                runs.append(PolicyRun(tenant, None, STATUS_SKIPPED, skipped_reason=BUSY))
                continue
            mine = pl.col("tenant_id") == tenant
            first = config.first_policy()
            runs += train_shared(
                paths, pairs().filter(mine), sft_examples().filter(mine), first, [tenant], progress
            )
    return runs


def training_due(
    train_pairs: pl.DataFrame, config: DPOPolicyConfig, paths: Paths, tenants: Sequence[str]
) -> dict[str, str]:
    """Tenant → why its configured policy is due to train (tenants not due are left out), after
    `ship_policies` pulled the home's policies. `train_pairs`: the mined train pairs (tenant_id,
    pair_id)."""
    due = {}
    for tenant in tenants:
        owner = _owner(tenant, config)
        mine = train_pairs.filter(pl.col("tenant_id") == tenant)
        if mine.height < config.min_pairs:
            continue  # it would skip: nothing to train
        if reusable_run(owner, mine, config, paths.models) is not None:
            continue
        newest = newest_run(owner, config, paths.models)
        due[tenant] = (
            "no policy of its config yet"
            if newest is None
            else f"its train pairs grew from {newest.get(MINED, newest['n_train'])} to "
            f"{mine.height} (retrain_growth {config.retrain_growth:.0%})"
        )
    return due
