"""Run the night without a daemon: what `memorypack run` and `memorypack demo` call. Ingest runs in
this process; each tenant and then the analytics build in its own (`workers`), or here one by one;
a tenant whose next DPO policy is due trains it in one more, after every tenant's run has
started and at a lower CPU priority, so no pack and no build waits for training."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import ExitStack
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
from jobs.outcomes import (
    RunOutcome,
    failure_cause,
    ingest_notices,
    not_published,
    step_seconds,
    training_due,
)
from memorypack.fs import ObjectPath
from pipeline.config import Paths, offline_environment
from pipeline.errors import one_line
from pipeline.lifeline import die_with
from pipeline.storage.owed import owed


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
        steps = step_seconds(instance, result.run_id)
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
    outcome.not_published = not_published(result) if outcome.success else {}
    outcome.training_due = outcome.success and training_due(result)
    if not outcome.success:
        where = outcome.failed_step or "an unknown step"
        outcome.not_published = {
            tenant: f"run failed at {where}: {outcome.error}; previous pack stays"
        }
    return outcome


def run_training(
    home: str | Path | ObjectPath,
    landing: Path,
    tenant: str,
    log_level: str = "INFO",
    settings: dict[str, dict[str, Any]] | None = None,
    fast: bool = False,
    instance: dg.DagsterInstance | None = None,
) -> RunOutcome:
    """One tenant's training run (`tenant_training`) in this process, with the settings its
    tenant run had."""
    from assets.config import FAST, settings_config
    from jobs.nightly import TRAINING_JOB

    config = settings_config(FAST if fast else None, settings)
    tags = {"dagster/partition": tenant}
    paths = Paths.from_env(home)
    return _execute(paths, landing, TRAINING_JOB, tags, config, log_level, instance)[1]


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
    run, call, threads, environment, folder, nice = args
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(folder)
    os.nice(nice)
    import torch

    torch.set_num_threads(threads)
    outcome: RunOutcome = run(*call)
    outcome.results = []  # Dagster's results stay in the worker
    return outcome


def _in_worker(
    run: Callable[..., RunOutcome],
    call: tuple[Any, ...],
    threads: int,
    died: Callable[[str], RunOutcome],
    nice: int = 0,
) -> RunOutcome:
    """`run(*call)` in its own worker, forked with this process's environment and folder (`nice`:
    added to its CPU niceness). A worker that dies (killed, out of memory) fails this run only
    (`died(why)`): each run has its own one-process pool, as a dead worker breaks its pool and
    every run still pending in it."""
    asker = (threads, dict(os.environ), os.getcwd(), nice)
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
            stopping.fail_runs_left_by(call[0], pids, f"its process died: {one_line(error)}")
            return died(f"its run's process died: {one_line(error)}")
        except BaseException as error:  # stopped (in the main thread): the pool must not wait
            stopping.stop_workers()
            stopping.fail_runs_left_by(call[0], pids, str(error) or "stopped")
            raise


def _tenant_died(tenant: str, why: str) -> RunOutcome:
    why = f"{why}; previous pack stays"
    return RunOutcome(False, "", error=why, not_published={tenant: why})


def _tenant_runs(
    calls: list[tuple[Any, ...]],
    workers: int,
    instance: dg.DagsterInstance | None,
    run: Callable[..., RunOutcome] = run_tenant,
    slots: ThreadPoolExecutor | None = None,
) -> Iterator[tuple[str, RunOutcome]]:
    """Each tenant's outcome as its run ends (`workers` at once, each in its own process, on
    `slots` or slots of its own)."""
    if workers <= 0:
        for call in calls:
            yield call[2], run(*call, instance)
        return
    threads = max(1, (os.cpu_count() or 1) // workers)
    with ExitStack() as stack:
        if slots is None:
            slots = stack.enter_context(ThreadPoolExecutor(workers, thread_name_prefix="run"))
        futures = {
            slots.submit(_in_worker, run, call, threads, partial(_tenant_died, call[2])): call[2]
            for call in calls
        }
        try:
            for future in stopping.as_completed(futures):
                yield futures[future], future.result()
        except BaseException:  # stopped: no run starts, the running ones end, then it unwinds
            stopping.stopped(futures)
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
    in a night that did not finish its run), then the analytics build; and a training run for
    each tenant whose run found its next policy due (`trainings`), which no pack waits for.

    `workers` > 0 runs that many tenants at once, each in its own process, and then the analytics
    build in one more; a training takes a worker once every tenant's run has started, at a lower
    CPU priority. 0 runs them all one after the other in this process (tests), the trainings
    last. `fast` runs `tenant_nightly_fast`; `settings` changes stage knobs over the job's, e.g.
    {"dpo": {"min_pairs": 5}}. `on_tenant` hears of each tenant's run as it ends.
    `instance`: the runs' Dagster instance (default: the home's; tests pass their own)."""
    from jobs.nightly import INGEST_JOB

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
    calls = [
        (str(paths.home), landing, tenant, dates, log_level, settings, fast)
        for tenant, dates in sorted(owed(paths).items())
    ]
    with ExitStack() as stack:
        slots = None
        if workers > 0:
            slots = stack.enter_context(ThreadPoolExecutor(workers, thread_name_prefix="run"))
        trainings: dict[str, Future[RunOutcome] | Callable[[], RunOutcome]] = {}
        try:
            # A tenant's run settles what it owed once its pack is published or verified unchanged.
            stopping.phase("the tenant runs")
            for tenant, tenant_outcome in _tenant_runs(calls, workers, instance, slots=slots):
                _add_tenant(outcome, tenant, tenant_outcome)
                if on_tenant is not None:
                    on_tenant(tenant, tenant_outcome)
                if tenant_outcome.training_due:  # queued behind the tenants' runs not yet started
                    call = (str(paths.home), landing, tenant, log_level, settings, fast)
                    trainings[tenant] = _start_training(slots, call, workers, instance)
            stopping.phase("the analytics build")
            final = _analytics(paths, landing, log_level, workers, instance)
            stopping.phase("the trainings")
            outcome.trainings = {t: _trained(pending) for t, pending in trainings.items()}
            stopping.check()
        except BaseException:  # stopped: a training queued never starts, a running one ends
            stopping.stopped([p for p in trainings.values() if isinstance(p, Future)])
            raise
    outcome.results += [r for training in outcome.trainings.values() for r in training.results]
    outcome.step_seconds |= final.step_seconds
    outcome.results += final.results
    if not final.success:
        final.not_published, final.tenants = outcome.not_published, outcome.tenants
        final.results, final.trainings = outcome.results, outcome.trainings
        return final
    return outcome


def _add_tenant(outcome: RunOutcome, tenant: str, tenant_outcome: RunOutcome) -> None:
    """A tenant's run into the night's outcome (the first failure is the night's)."""
    outcome.tenants[tenant] = tenant_outcome
    outcome.results += tenant_outcome.results
    outcome.not_published |= tenant_outcome.not_published
    outcome.step_seconds |= {f"{tenant}/{k}": v for k, v in tenant_outcome.step_seconds.items()}
    if not tenant_outcome.success and outcome.success:
        outcome.success = False
        outcome.failed_step = f"{tenant}/{tenant_outcome.failed_step}"
        outcome.error = tenant_outcome.error


def _analytics(
    paths: Paths, landing: Path, log_level: str, workers: int, instance: dg.DagsterInstance | None
) -> RunOutcome:
    """The analytics build, once every tenant's run ended (trainings may still run beside it)."""
    from jobs.nightly import ANALYTICS_JOB

    if workers > 0:  # forked like the tenants' runs: the PII engine is loaded there already
        return _in_worker(
            run_analytics,
            (str(paths.home), landing, log_level),
            os.cpu_count() or 1,
            lambda why: RunOutcome(False, "", "analytics_snapshot", why),
        )
    return _execute(paths, landing, ANALYTICS_JOB, {}, {}, log_level, instance)[1]


# A training's worker yields the CPU to the runs beside it (packs, the analytics build): training
# takes what they leave idle, and never lengthens the night's path to its packs.
TRAINING_NICE = 10


def _start_training(
    slots: ThreadPoolExecutor | None,
    call: tuple[Any, ...],
    workers: int,
    instance: dg.DagsterInstance | None,
) -> Future[RunOutcome] | Callable[[], RunOutcome]:
    """A tenant's training run on the night's slots (its own process, niced), or the call to
    make once the analytics build is done (no workers: in this process)."""
    if slots is None:
        home, landing, tenant, log_level, settings, fast = call
        return partial(run_training, home, landing, tenant, log_level, settings, fast, instance)
    threads = max(1, (os.cpu_count() or 1) // workers)
    died = partial(_training_died, call[2])
    return slots.submit(_in_worker, run_training, call, threads, died, TRAINING_NICE)


def _training_died(tenant: str, why: str) -> RunOutcome:
    return RunOutcome(False, "", error=f"{why}; {tenant}'s packs keep the policy they ship")


def _trained(pending: Future[RunOutcome] | Callable[[], RunOutcome]) -> RunOutcome:
    return stopping.result(pending) if isinstance(pending, Future) else pending()
