"""What a run of the night says: its outcome (success, the step that failed and why in one line,
each step's seconds, the tenants that kept their previous pack, the trainings it started, what
ingest could not read or do)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg


@dataclass
class RunOutcome:
    success: bool
    run_id: str
    failed_step: str | None = None
    error: str | None = None
    step_seconds: dict[str, float] = field(default_factory=dict)  # wall time of each step
    # Tenants whose pack failed a guard, its build or its run: they keep their previous pack.
    not_published: dict[str, str] = field(default_factory=dict)
    tenants: dict[str, RunOutcome] = field(default_factory=dict)  # each tenant's run
    # A tenant run: its dpo_policy found the configured policy due to train after the publish.
    training_due: bool = False
    trainings: dict[str, RunOutcome] = field(default_factory=dict)  # each training run
    # What ingest could not read or do, one line each for a person: landing files not read (a
    # FIFO, a symlink leaving the folder, a damaged gzip), erasure requests that failed.
    notices: list[str] = field(default_factory=list)
    # The Dagster results of the runs made in this process (ingest, tenants with workers=0,
    # analytics), for callers that read their events.
    results: list[dg.ExecuteInProcessResult] = field(default_factory=list, repr=False)

    @property
    def all_events(self) -> list[dg.DagsterEvent]:
        return [event for result in self.results for event in result.all_events]

    def get_asset_check_evaluations(self) -> list[dg.AssetCheckEvaluation]:
        return [e for result in self.results for e in result.get_asset_check_evaluations()]

    def asset_materializations_for_node(self, node: str) -> list[dg.AssetMaterialization]:
        return [m for r in self.results for m in r.asset_materializations_for_node(node)]


def training_due(result: dg.ExecuteInProcessResult) -> bool:
    """Whether a tenant run's dpo_policy found the configured policy due to train."""
    found = result.asset_materializations_for_node("dpo_policy")
    value = next(
        (m.metadata.get("training_due") for m in found if m.asset_key.path == ["dpo_policy"]), None
    )
    return bool(value.value) if value is not None else False


def not_published(result: dg.ExecuteInProcessResult) -> dict[str, str]:
    """Tenant → why its pack was not published, from a tenant run's memory_pack."""
    found = result.asset_materializations_for_node("memory_pack")
    value = found[0].metadata.get("not_published") if found else None
    return dict(value.value) if value is not None else {}  # type: ignore[arg-type]


def ingest_notices(result: dg.ExecuteInProcessResult) -> tuple[list[str], dict[str, str]]:
    """From ingest's metadata: a line per landing file not read (assets/ingest.py
    FILES_NOT_READ) and tenant → why its erasure request failed (its pack is withheld)."""
    from assets.ingest import ERASURES_FAILED, FILES_NOT_READ

    lines: dict[str, None] = {}
    failed: dict[str, str] = {}
    for found in result.asset_materializations_for_node("raw_events"):
        files: dict[str, str] = _json(found, FILES_NOT_READ)
        for file, why in files.items():
            lines[f"landing file {found.partition}/{file} not read: {why}"] = None
        erasures: dict[str, list[str]] = _json(found, ERASURES_FAILED)
        failed |= {tenant: why[0] for tenant, why in erasures.items()}
    return list(lines), failed


def _json(materialization: dg.AssetMaterialization, name: str) -> Any:
    value = materialization.metadata.get(name)
    return value.value if value is not None else {}


def failure_cause(data: Any) -> str:
    """One line of cause: a `dg.Failure`'s description or a `UserError`'s message, else the
    innermost exception and its line."""
    user = getattr(data, "user_failure_data", None)
    if user is not None and user.description:
        return str(user.description).strip().splitlines()[0]
    error = data.error
    while error.cause is not None:  # Dagster wraps the op's exception: the cause is what matters
        error = error.cause
    lines = error.message.strip().splitlines()
    text = lines[0] if lines else error.cls_name or "unknown error"
    if error.cls_name == "UserError":  # an expected failure: its message is the whole line
        return text.split(": ", 1)[-1]
    frames = [f for f in error.stack if "site-packages" not in f] or error.stack
    # The last frame of our own code says where; numpy's internals rarely help.
    where = re.search(r'File "([^"]+)", line (\d+)', frames[-1]) if frames else None
    return f"{text} ({Path(where[1]).name}:{where[2]})" if where else text


def step_seconds(instance: dg.DagsterInstance, run_id: str) -> dict[str, float]:
    """Wall seconds of each step of a run, from its events."""
    started: dict[str, float] = {}
    seconds: dict[str, float] = {}
    for entry in instance.all_logs(run_id):
        event = entry.dagster_event
        if event is None or event.step_key is None:
            continue
        if event.event_type_value == "STEP_START":
            started[event.step_key] = entry.timestamp
        elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE"):
            begin = started.get(event.step_key, entry.timestamp)
            seconds[event.step_key] = round(entry.timestamp - begin, 2)
    return seconds
