"""The record of policy runs (`dpo_runs`): one row a tenant a night, the saved policy a night may
reuse, the sampled pairs and the content-hash id of a policy."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import tables
from pipeline.preference.dpo.settings import (
    EVAL_FILE,
    HELD_OUT,
    MINED,
    RUN_FILE,
    STATUS_FAILED,
    TRAINED_AT,
    DPOPolicyConfig,
)

# One run as `PolicyRun` records it: a row of `dpo_runs` before the history dates it.
DPO_RUNS_SCHEMA = {
    c: t for c, t in tables.schema("dpo_runs").items() if c not in ("run_at", "is_latest")
}


# The lake's `dpo_runs`: a tenant's rows in the order they were recorded, its newest is_latest.
DPO_RUNS_HISTORY_SCHEMA = tables.schema("dpo_runs")


# What makes two runs of a tenant the same policy outcome (`reused` only says how it was obtained).
SAME_RUN = [c for c in DPO_RUNS_SCHEMA if c != "reused"]


@dataclass
class PolicyRun:
    """One row of `dpo_runs`."""

    tenant_id: str
    policy_id: str | None
    status: str
    skipped_reason: str | None = None
    n_train: int = 0
    n_eval: int = 0
    eval_accuracy: float | None = None
    eval_margin: float | None = None
    eval_accuracy_low: float | None = None
    eval_accuracy_high: float | None = None
    reference_accuracy: float | None = None
    length_rule_accuracy: float | None = None
    verdict: str | None = None
    train_loss: float | None = None
    steps: int = 0
    seconds: float = 0.0
    model_dir: str | None = None
    n_sft: int = 0
    sft_loss: float | None = None
    base_model: str | None = None
    beta: float | None = None
    reused: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in DPO_RUNS_SCHEMA}


def runs_frame(runs: Sequence[PolicyRun]) -> pl.DataFrame:
    return pl.DataFrame([r.row() for r in runs], schema=DPO_RUNS_SCHEMA)


def record_runs(history: pl.DataFrame, current: pl.DataFrame, now: datetime) -> pl.DataFrame:
    """`history` (DPO_RUNS_HISTORY_SCHEMA) plus the rows of `current` (runs_frame) that differ from
    their tenant's latest row, stamped `run_at = now`; those tenants' older rows stop being latest.

    A night whose policies are the ones already recorded (same input, or a reused policy) adds no
    row, so re-running a night leaves the history, and the packs built from it, as they were.
    """
    latest = history.filter(pl.col("is_latest")).select(SAME_RUN)
    # A failed run is not recorded: its tenant's latest policy stays the one the packs use.
    current = current.filter(pl.col("status") != STATUS_FAILED)
    changed = current.join(latest, on=SAME_RUN, how="anti", nulls_equal=True)
    if changed.is_empty():
        return history
    renewed = pl.col("tenant_id").is_in(changed["tenant_id"].implode())
    return pl.concat(
        [
            history.with_columns(is_latest=pl.col("is_latest") & ~renewed),
            changed.with_columns(
                run_at=pl.lit(now, DPO_RUNS_HISTORY_SCHEMA["run_at"]), is_latest=pl.lit(True)
            ),
        ]
    )


def extend_history(
    previous: pl.DataFrame, current: pl.DataFrame, now: datetime
) -> tuple[pl.DataFrame, int]:
    """`record_runs` on the stored history (read with at least its columns): the new history and
    how many runs it recorded (0 when every tenant's policy is the one already recorded)."""
    previous = previous.select(list(DPO_RUNS_HISTORY_SCHEMA))
    history = record_runs(previous, current, now)
    return history, history.height - previous.height


def saved_run(model_dir: Path) -> dict[str, Any] | None:
    path = model_dir / RUN_FILE
    return json.loads(path.read_text()) if path.exists() else None


def finished_runs(tenant_id: str, models_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The saved runs of this tenant's complete policies (`run.json` is written last), newest
    first: by when training finished (`trained_at`), else by when `run.json` was written (a
    policy saved before it was recorded; a rewrite of its run.json may move it forward)."""
    found = []
    for path in Path(models_dir).glob(f"{tenant_id}-*/{RUN_FILE}"):
        saved = json.loads(path.read_text())
        if saved.get("tenant_id") != tenant_id:
            continue  # another tenant whose name starts alike
        when = (
            saved.get(TRAINED_AT) or datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat()
        )
        found.append((when, path.parent.name, saved))
    return [saved for *_, saved in sorted(found, key=lambda item: item[:2], reverse=True)]


def newest_run(
    tenant_id: str, config: DPOPolicyConfig, models_dir: str | os.PathLike[str]
) -> dict[str, Any] | None:
    """The newest saved policy of this tenant trained with this exact config, if any."""
    wanted = json.loads(config.fingerprint())  # as saved: tuples became JSON lists
    return next(
        (s for s in finished_runs(tenant_id, models_dir) if s.get("config") == wanted), None
    )


def reusable_run(
    tenant_id: str, train: pl.DataFrame, config: DPOPolicyConfig, models_dir: str | os.PathLike[str]
) -> dict[str, Any] | None:
    """The saved policy a night uses instead of training this config on `train` (the tenant's
    mined train pairs; only `pair_id` is read): the policy of exactly these pairs and config, or
    the newest of this config while the pairs have grown by less than `retrain_growth` since."""
    sample = consistent_sample(train, config.max_train_pairs)
    model_dir = Path(models_dir) / policy_id_for(tenant_id, sample, config)
    saved = saved_run(model_dir) or newest_run(tenant_id, config, models_dir)
    if saved is None or train.height >= saved.get(MINED, saved["n_train"]) * (
        1 + config.retrain_growth
    ):
        return None
    return saved


def run_of(saved: dict[str, Any], tenant_id: str, models_dir: str | os.PathLike[str]) -> PolicyRun:
    """A saved policy as this night's run of `tenant_id` (reused: not trained by this step),
    where this host keeps it (another host, or another home folder, may have trained it)."""
    fields = {k: saved[k] for k in DPO_RUNS_SCHEMA if k in saved}
    fields["model_dir"] = str(Path(models_dir) / saved["policy_id"])
    return PolicyRun(**{**fields, "tenant_id": tenant_id, "reused": True})


def consistent_sample(pairs: pl.DataFrame, limit: int) -> pl.DataFrame:
    """At most `limit` pairs, smallest pair_id first (a sha256, so the sample is uniform and a
    growing set keeps most of yesterday's)."""
    return pairs.sort("pair_id").head(limit)


def held_out_pairs(
    model_dir: str | os.PathLike[str],
    tenant_id: str,
    eval_pairs: pl.DataFrame,
    config: DPOPolicyConfig,
) -> pl.DataFrame:
    """The tenant's eval pairs a saved policy was evaluated on, frozen with it: every night that
    reuses the policy scores templates on exactly these pairs (comparable, memoisable), even when
    later mining no longer yields some of them. A policy saved with only their ids (run.json) gets
    those still mined; one saved with neither, the same sampling rule."""
    folder = Path(model_dir)
    if (folder / EVAL_FILE).exists():
        return pl.read_parquet(folder / EVAL_FILE).filter(pl.col("tenant_id") == tenant_id)
    saved = saved_run(folder) or {}
    if HELD_OUT in saved:
        return eval_pairs.filter(pl.col("pair_id").is_in(saved[HELD_OUT]))
    return consistent_sample(eval_pairs, config.max_eval_pairs)


def policy_id_for(tenant_id: str, train_pairs: pl.DataFrame, config: DPOPolicyConfig) -> str:
    """`<tenant>-<12 hex>`: a content hash of the train pairs and the config (same data → same id)."""
    digest = hashlib.sha256()
    for pair_id in sorted(train_pairs["pair_id"].to_list()):
        digest.update(pair_id.encode())
    digest.update(config.fingerprint().encode())
    return f"{tenant_id}-{digest.hexdigest()[:12]}"
