"""Run the nightly job in this process (no daemon): what `memorypack run` and `memorypack demo` call."""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from assets.resources import MemorypackHome
from jobs.instance import dagster_home
from pipeline.config import Paths


@dataclass
class RunOutcome:
    success: bool
    run_id: str
    failed_step: str | None = None
    error: str | None = None
    step_seconds: dict[str, float] = field(default_factory=dict)  # wall time of each step
    # Tenants whose pack failed a guard or its build: they keep their previous pack.
    not_published: dict[str, str] = field(default_factory=dict)


def _not_published(result: dg.ExecuteInProcessResult) -> dict[str, str]:
    found = result.asset_materializations_for_node("memory_pack")
    value = found[0].metadata.get("not_published") if found else None
    return dict(value.value) if value is not None else {}  # type: ignore[arg-type]


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


def _step_seconds(instance: dg.DagsterInstance, run_id: str) -> dict[str, float]:
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


def _instance(paths: Paths) -> dg.DagsterInstance:
    """The instance `make ui` shows too (DAGSTER_HOME, else `<home>/dagster`; jobs/instance.py)."""
    return dg.DagsterInstance.from_config(str(dagster_home(paths.home)))


def run_nightly(
    home: Path,
    landing: Path,
    start: str,
    end: str,
    log_level: str = "INFO",
    op_config: dict[str, dict[str, Any]] | None = None,
) -> RunOutcome:
    """One run of `nightly` over the load dates start..end (a single-run backfill when they differ);
    `op_config` is run config per asset, e.g. {"dpo_policy": {"max_steps": 10}}."""
    from jobs.definitions import defs

    paths = Paths.from_env(home)
    job = defs.resolve_job_def("nightly")
    tags = (
        {"dagster/partition": start}
        if start == end
        else {
            "dagster/asset_partition_range_start": start,
            "dagster/asset_partition_range_end": end,
        }
    )
    with _instance(paths) as instance:
        result = job.execute_in_process(
            instance=instance,
            tags=tags,
            resources={"home": MemorypackHome(home=str(paths.home), landing=str(landing))},
            run_config={
                "loggers": {"console": {"config": {"log_level": log_level}}},
                "ops": {name: {"config": config} for name, config in (op_config or {}).items()},
            },
            raise_on_error=False,
        )
        steps = _step_seconds(instance, result.run_id)
    if result.success:
        return RunOutcome(
            True, result.run_id, step_seconds=steps, not_published=_not_published(result)
        )
    failure = next((e for e in result.all_events if e.event_type_value == "STEP_FAILURE"), None)
    message = None
    if failure is not None and failure.step_failure_data and failure.step_failure_data.error:
        message = failure_cause(failure.step_failure_data)
    return RunOutcome(False, result.run_id, failure.step_key if failure else None, message, steps)
