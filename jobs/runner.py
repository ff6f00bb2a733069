"""Run the night without a daemon: what `memorypack run` and `memorypack demo` call. Ingest runs in
this process; each tenant and then the analytics build in its own (`workers`), or here one by one."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from multiprocessing import forkserver, get_context
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import dagster as dg

from assets.handoffs import resources
from assets.resources import TENANTS_NAME, MemorypackHome
from jobs import stopping
from jobs.instance import PROCESS_TAG, dagster_home
from memorypack.fs import ObjectPath
from pipeline.config import Paths, offline_environment
from pipeline.errors import one_line
from pipeline.lifeline import die_with
from pipeline.storage.owed import owed


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


def _not_published(result: dg.ExecuteInProcessResult) -> dict[str, str]:
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
    return dg.DagsterInstance.from_config(str(dagster_home(paths.local)))


def _execute(
    paths: Paths,
    landing: Path,
    job_name: str,
    tags: dict[str, str],
    run_config: dict[str, Any],
    log_level: str,
    instance: dg.DagsterInstance | None = None,
) -> tuple[dg.ExecuteInProcessResult, RunOutcome]:
    """One job run in this process, on `instance` or the home's."""
    from jobs.definitions import defs
    from jobs.nightly import FAST_TENANT_JOB, TENANT_JOB

    with ExitStack() as stack:
        if instance is None:
            instance = stack.enter_context(_instance(paths))
        tenant = (
            tags.get("dagster/partition") if job_name in (TENANT_JOB, FAST_TENANT_JOB) else None
        )
        if tenant and not instance.has_dynamic_partition(TENANTS_NAME, tenant):
            instance.add_dynamic_partitions(TENANTS_NAME, [tenant])  # another instance's ingest
        result = defs.resolve_job_def(job_name).execute_in_process(
            instance=instance,
            tags={**tags, PROCESS_TAG: str(os.getpid())},
            resources=resources(MemorypackHome(home=str(paths.home), landing=str(landing))),
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}, **run_config},
            raise_on_error=False,
        )
        steps = _step_seconds(instance, result.run_id)
    if result.success:
        return result, RunOutcome(True, result.run_id, step_seconds=steps, results=[result])
    failure = next((e for e in result.all_events if e.event_type_value == "STEP_FAILURE"), None)
    message = None
    if failure is not None and failure.step_failure_data and failure.step_failure_data.error:
        message = failure_cause(failure.step_failure_data)
    return result, RunOutcome(
        False,
        result.run_id,
        failure.step_key if failure else None,
        message,
        steps,
        results=[result],
    )


def run_tenant(
    home: str | Path | ObjectPath,
    landing: Path,
    tenant: str,
    load_dates: list[str],
    log_level: str = "INFO",
    settings: dict[str, dict[str, Any]] | None = None,
    fast: bool = False,
    instance: dg.DagsterInstance | None = None,
) -> RunOutcome:
    """One tenant's run of `tenant_nightly` (or `tenant_nightly_fast`) in this process; `settings`
    changes stage knobs over the job's own (assets/config.py), e.g. {"dpo": {"max_steps": 10}}."""
    from assets.config import FAST, settings_config
    from jobs.nightly import FAST_TENANT_JOB, TENANT_JOB, tenant_run_config

    config = settings_config(FAST if fast else None, settings) | tenant_run_config(load_dates)
    job = FAST_TENANT_JOB if fast else TENANT_JOB
    tags = {"dagster/partition": tenant}
    paths = Paths.from_env(home)
    result, outcome = _execute(paths, landing, job, tags, config, log_level, instance)
    outcome.not_published = _not_published(result) if outcome.success else {}
    if not outcome.success:
        where = outcome.failed_step or "an unknown step"
        outcome.not_published = {
            tenant: f"run failed at {where}: {outcome.error}; previous pack stays"
        }
    return outcome


def _fork_server() -> BaseContext:
    """The context worker processes are made from, its fork server started: it imports
    jobs/forked.py (the heavy libraries, the PII engine) in its own process meanwhile this one
    goes on, e.g. with ingest. The server keeps the environment it started with: each worker
    is handed this one's instead (`_forked`)."""
    offline_environment()  # before the server imports transformers, which reads it at import
    context = get_context("forkserver")
    context.set_forkserver_preload(["jobs.forked"])
    forkserver.ensure_running()
    return context


def _forked(args: tuple[Any, ...]) -> RunOutcome:
    """`run(*call)` in a fresh worker process forked from the fork server (one run per process):
    its heap goes with it, and its torch threads are its share of the cores. It takes the
    environment and folder of the process that asked for the run, not the server's."""
    run, call, threads, environment, folder = args
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(folder)
    import torch

    torch.set_num_threads(threads)
    outcome: RunOutcome = run(*call)
    outcome.results = []  # Dagster's results stay in the worker
    return outcome


_UNFINISHED = [
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def _fail_runs_of(home: str, pids: list[int], why: str) -> None:
    """Runs the processes `pids` left unfinished, recorded as failed with `why`, so that the UI
    and the daemon's sensors do not wait on them forever."""
    with _instance(Paths.from_env(home)) as instance:
        for pid in pids:
            tagged = dg.RunsFilter(tags={PROCESS_TAG: str(pid)}, statuses=_UNFINISHED)
            for record in instance.get_runs(tagged):
                instance.report_run_failed(record, message=why)


def _in_worker(
    run: Callable[..., RunOutcome],
    call: tuple[Any, ...],
    threads: int,
    died: Callable[[str], RunOutcome],
) -> RunOutcome:
    """`run(*call)` in its own worker, forked with this process's environment and folder. A worker
    that dies (killed, out of memory) fails this run only (`died(why)`): each run has its own
    one-process pool, as a dead worker breaks its pool and every run still pending in it."""
    asker = (threads, dict(os.environ), os.getcwd())
    # The worker dies with this process (forked by the fork server, which ends with this process:
    # the kernel's parent-death signal, and a watchdog on this process; pipeline/lifeline.py), and
    # when the run is stopped (jobs/stopping.py).
    with (
        ProcessPoolExecutor(
            1,
            mp_context=_fork_server(),
            max_tasks_per_child=1,
            initializer=die_with,
            initargs=(os.getpid(),),
        ) as pool,
        stopping.tracked(pool),
    ):
        future = pool.submit(_forked, (run, call, *asker))
        pids = stopping.pids(pool)
        try:
            return stopping.result(future, pool)
        except Exception as error:  # the worker process died
            _fail_runs_of(call[0], pids, f"its process died: {one_line(error)}")
            return died(f"its run's process died: {one_line(error)}")
        except BaseException as error:  # stopped (in the main thread): the pool must not wait
            stopping.stop_workers()
            _fail_runs_of(call[0], pids, str(error) or "stopped")
            raise


def _tenant_died(tenant: str, why: str) -> RunOutcome:
    why = f"{why}; previous pack stays"
    return RunOutcome(False, "", error=why, not_published={tenant: why})


def _tenant_runs(
    calls: list[tuple[Any, ...]],
    workers: int,
    instance: dg.DagsterInstance | None,
    run: Callable[..., RunOutcome] = run_tenant,
) -> Iterator[tuple[str, RunOutcome]]:
    """Each tenant's outcome as its run ends (`workers` at once, each in its own process)."""
    if workers <= 0:
        for call in calls:
            yield call[2], run(*call, instance)
        return
    threads = max(1, (os.cpu_count() or 1) // workers)
    with ThreadPoolExecutor(workers, thread_name_prefix="tenant-run") as slots:
        futures = {
            slots.submit(_in_worker, run, call, threads, partial(_tenant_died, call[2])): call[2]
            for call in calls
        }
        try:
            for future in stopping.as_completed(futures):
                yield futures[future], future.result()
        except BaseException:  # stopped: no run starts, the running ones end, then it unwinds
            for future in futures:
                future.cancel()
            stopping.stop_workers()
            raise


def run_analytics(home: str, landing: Path, log_level: str) -> RunOutcome:
    """The analytics build's run (the warehouse and analytics.duckdb) in this process."""
    from jobs.nightly import ANALYTICS_JOB

    return _execute(Paths.from_env(home), landing, ANALYTICS_JOB, {}, {}, log_level)[1]


def run_nightly(
    home: str | Path | ObjectPath,
    landing: Path,
    start: str,
    end: str,
    log_level: str = "INFO",
    settings: dict[str, dict[str, Any]] | None = None,
    workers: int = 0,
    fast: bool = False,
    on_tenant: Callable[[str, RunOutcome], None] | None = None,
    instance: dg.DagsterInstance | None = None,
) -> RunOutcome:
    """The night over the load dates start..end: ingest (one run; a single-run backfill when the
    dates differ), then one run per tenant whose pack owes load dates (its data changed, now or
    in a night that did not finish its run), then the analytics build.

    `workers` > 0 runs that many tenants at once, each in its own process, and then the analytics
    build in one more; 0 runs them all one after the other in this process (tests). `fast` runs
    `tenant_nightly_fast`; `settings` changes stage knobs over the job's, e.g.
    {"dpo": {"min_pairs": 5}}. `on_tenant` hears of each tenant's run as it ends.
    `instance`: the runs' Dagster instance (default: the home's; tests pass their own)."""
    from jobs.nightly import ANALYTICS_JOB, INGEST_JOB

    paths = Paths.from_env(home)
    stopping.begin()
    stopping.phase("ingest")
    if workers > 0:
        _fork_server()  # its imports overlap ingest
    tags = (
        {"dagster/partition": start}
        if start == end
        else {
            "dagster/asset_partition_range_start": start,
            "dagster/asset_partition_range_end": end,
        }
    )
    ingested, outcome = _execute(paths, landing, INGEST_JOB, tags, {}, log_level, instance)
    stopping.check()  # Dagster took the signal while it ran ingest: a failed step, or none
    if not outcome.success:
        return outcome
    outcome.notices, outcome.not_published = ingest_notices(ingested)
    # What ingest changed and what earlier nights left owed (pipeline/storage/owed.py): ingest records
    # each change there before writing it.
    debts = owed(paths)
    outcome.tenants = {}
    calls = [
        (str(paths.home), landing, tenant, dates, log_level, settings, fast)
        for tenant, dates in sorted(debts.items())
    ]
    # A tenant's run settles what it owed once its pack is published or verified unchanged.
    stopping.phase("the tenant runs")
    for tenant, tenant_outcome in _tenant_runs(calls, workers, instance):
        outcome.tenants[tenant] = tenant_outcome
        outcome.results += tenant_outcome.results
        outcome.not_published |= tenant_outcome.not_published
        outcome.step_seconds |= {f"{tenant}/{k}": v for k, v in tenant_outcome.step_seconds.items()}
        if not tenant_outcome.success and outcome.success:  # the night's first failure
            outcome.success = False
            outcome.failed_step = f"{tenant}/{tenant_outcome.failed_step}"
            outcome.error = tenant_outcome.error
        if on_tenant is not None:
            on_tenant(tenant, tenant_outcome)
    stopping.phase("the analytics build")
    if workers > 0:  # forked like the tenants' runs: the PII engine is loaded there already
        final = _in_worker(
            run_analytics,
            (str(paths.home), landing, log_level),
            os.cpu_count() or 1,
            lambda why: RunOutcome(False, "", "analytics_snapshot", why),
        )
    else:
        _, final = _execute(paths, landing, ANALYTICS_JOB, {}, {}, log_level, instance)
    stopping.check()
    outcome.step_seconds |= final.step_seconds
    outcome.results += final.results
    if not final.success:
        final.not_published, final.tenants = outcome.not_published, outcome.tenants
        final.results = outcome.results
        return final
    return outcome
