"""The night as three jobs, and a fourth off its path: ingest one load date, then each tenant
whose data changed in its own run, then the analytics build once the tenants' runs are done; a
tenant whose next DPO policy is due trains it in a run of its own after its pack published. The
02:00 UTC schedule and the landing sensor start ingest; three sensors chain the rest through the
run queue (jobs/dagster.yaml limits: one run per tenant, one training per tenant, one ingest and
one analytics build per home, and a number at once; trainings wait behind the other runs).

Sensors start from now: a sensor's first tick (a new instance, a first `make ui`) only notes
where things stand, so history is never replayed and no pack is published that nobody asked
for; what came before is the operator's (`memorypack run`), or MEMORYPACK_SENSORS_CATCH_UP=1.
Runs `memorypack run` made in its own process (PROCESS_TAG) chain their own tenants, analytics
build and trainings: the sensors leave them alone."""

from __future__ import annotations

import hashlib
import json
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg

from assets import groups
from assets.config import FAST, settings_config
from assets.partitions import DAILY, TENANTS
from assets.resources import ANALYTICS_JOB, INGEST_JOB, TRAINING_JOB
from jobs.instance import ANALYTICS_TAG, HOME_TAG, PROCESS_TAG, TENANT_TAG, TRAINING_TAG
from pipeline.config import Paths, nightly_cron
from pipeline.ingest.listing import landing_files
from pipeline.settings import Settings
from pipeline.storage.owed import owed

TENANT_JOB = "tenant_nightly"
FAST_TENANT_JOB = "tenant_nightly_fast"
CHANGED_BY = "interactions"  # the typed table whose materialization says which tenants changed
ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]

ingest_job = dg.define_asset_job(
    INGEST_JOB,
    selection=dg.AssetSelection.groups(groups.INGEST),
    partitions_def=DAILY,
    description="One load date (or a range): landing folder → events, quarantine, each tenant's "
    "typed tables; new tenants become partitions.",
)
TRAINING = "policy_training"  # the asset of the training job
TENANT_STAGES = (
    dg.AssetSelection.all()
    - dg.AssetSelection.groups(groups.INGEST)
    - dg.AssetSelection.assets("analytics_snapshot", TRAINING)
)
tenant_nightly = dg.define_asset_job(
    TENANT_JOB,
    selection=TENANT_STAGES,
    partitions_def=TENANTS,
    description="One tenant: feedback → semantic → memory → examples → preference → its pack. "
    "It reads and writes only that tenant's folders.",
)
# The same job with a smaller config tree (assets/config.py FAST): what the tests, the demo and
# the quick bench run. Only the config differs.
tenant_nightly_fast = dg.define_asset_job(
    FAST_TENANT_JOB,
    selection=TENANT_STAGES,
    partitions_def=TENANTS,
    config=settings_config(FAST),
    description="tenant_nightly with a smoke-sized DPO policy (10 steps, no SFT): tests, demo.",
)
tenant_training = dg.define_asset_job(
    TRAINING_JOB,
    selection=dg.AssetSelection.assets(TRAINING),
    partitions_def=TENANTS,
    description="One tenant's next DPO policy at the configured size, after its pack published "
    "(when its run's dpo_policy found it due): the next nights' packs ship it. It holds the "
    "tenant's training lock, never its tenant lock, so no pack waits for it.",
)
analytics_job = dg.define_asset_job(
    ANALYTICS_JOB,
    selection=dg.AssetSelection.assets("analytics_snapshot"),
    description="The warehouse caught up with the lake, and analytics.duckdb, after the tenants.",
)


def _home() -> str:
    return str(Paths.from_env().home)


def ingest_tags() -> dict[str, str]:
    """The tag the run queue limits to one ingest run per home at a time (jobs/dagster.yaml)."""
    return {HOME_TAG: _home()}


def tenant_request(tenant: str, load_dates: list[str], run_key: str | None = None) -> dg.RunRequest:
    """A tenant's run: its partition, the load dates it snapshots, its one-per-tenant tag."""
    return dg.RunRequest(
        run_key=run_key,
        job_name=TENANT_JOB,
        partition_key=tenant,
        run_config=tenant_run_config(load_dates),
        tags={TENANT_TAG: f"{_home()}:{tenant}"},
    )


def tenant_run_config(load_dates: list[str]) -> dict[str, Any]:
    return {"ops": {"decay_snapshots": {"config": {"load_dates": sorted(load_dates)}}}}


# The run queue dequeues higher priorities first: a training waits behind every pack and build.
TRAINING_PRIORITY = "-1"


def training_request(tenant: str, run_config: dict[str, Any], run_key: str) -> dg.RunRequest:
    """A tenant's training run, with the settings of the tenant run that found it due."""
    return dg.RunRequest(
        run_key=run_key,
        job_name=TRAINING_JOB,
        partition_key=tenant,
        run_config=run_config,
        tags={TRAINING_TAG: f"{_home()}:{tenant}", "dagster/priority": TRAINING_PRIORITY},
    )


SCHEDULE = "nightly_schedule"


@dg.schedule(
    name=SCHEDULE,
    cron_schedule=nightly_cron(),
    job=ingest_job,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
def nightly_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    """At 02:00 UTC, ingest the load date that just ended (yesterday); the tenants follow. A load
    date is ingested once by the schedule (a run key dedups only within a tick): a second tick
    for the same day, e.g. a cron set to fire more often, skips."""
    tick = context.scheduled_execution_time or datetime.now()
    key = (tick.date() - timedelta(days=1)).isoformat()
    scheduled = dg.RunsFilter(
        job_name=INGEST_JOB,
        tags={"dagster/partition": key, "dagster/schedule_name": SCHEDULE},
    )
    if context.instance.get_runs_count(scheduled):
        return dg.SkipReason(f"{key} was already ingested by the schedule")
    return dg.RunRequest(run_key=f"scheduled:{key}", partition_key=key, tags=ingest_tags())


def landing_fingerprints(landing: Path) -> dict[str, str]:
    """Load date → fingerprint of its files (names, sizes, mtimes): changes when anything lands."""
    prints: dict[str, str] = {}
    if not landing.is_dir():
        return prints
    first = date.fromisoformat(DAILY.start.strftime("%Y-%m-%d"))
    for folder in sorted(p for p in landing.iterdir() if p.is_dir()):
        try:
            load_date = date.fromisoformat(folder.name)
        except ValueError:
            continue  # not a landing folder
        if load_date < first:
            continue
        files = landing_files(folder, landing)  # regular files only: a FIFO is never opened
        stats = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files]
        if stats:
            prints[folder.name] = hashlib.sha256(json.dumps(stats).encode()).hexdigest()[:16]
    return prints


@dg.sensor(
    job=ingest_job, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED
)
def landing_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """Ingest every landing folder that appeared or changed since the last tick (the first tick
    notes the folders there are: catch-up is the operator's)."""
    landing = Paths.from_env().landing
    current = landing_fingerprints(landing)
    if context.cursor is None and not catching_up():
        return dg.SensorResult(run_requests=[], cursor=json.dumps(current, sort_keys=True))
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    requests = [
        dg.RunRequest(run_key=f"landing:{key}:{fp}", partition_key=key, tags=ingest_tags())
        for key, fp in current.items()
        if seen.get(key) != fp
    ]
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(current, sort_keys=True))


def catching_up() -> bool:
    """MEMORYPACK_SENSORS_CATCH_UP: a sensor's first tick acts on what came before it."""
    return Settings.from_env().sensors_catch_up


def _cursor(text: str | None) -> dict[str, float]:
    """A chaining sensor's state: `after`, the last event storage id it acted on, and `since`, the
    Unix time of its first tick (an owed entry older than that is the operator's to catch up).
    A bare storage id is the cursor of an earlier memorypack."""
    if not text:
        return {}
    if text.isdigit():
        return {"after": int(text), "since": 0.0}
    state: dict[str, float] = json.loads(text)
    return state


def _first_tick(instance: dg.DagsterInstance, asset: str) -> dict[str, float]:
    """Where a sensor starts: after the newest event of `asset` there is now (everything, with
    MEMORYPACK_SENSORS_CATCH_UP)."""
    if catching_up():
        return {"since": 0.0}
    newest = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset)), limit=1, ascending=False
    ).records
    return {"after": newest[0].storage_id if newest else 0, "since": time.time()}


def _made_by_a_cli_night(instance: dg.DagsterInstance, record: dg.EventLogRecord) -> bool:
    """The event comes from a run `memorypack run` made in its own process: that night runs its
    own tenants and analytics build."""
    run = instance.get_run_by_id(record.event_log_entry.run_id)
    return run is not None and PROCESS_TAG in run.tags


def changed_tenants(event: dg.EventLogEntry) -> dict[str, list[str]]:
    """Tenant → load dates whose typed tables an ingest run changed (its metadata)."""
    materialization = event.asset_materialization
    value = materialization.metadata.get("changed") if materialization else None
    return dict(value.value) if value is not None else {}  # type: ignore[arg-type]


@dg.sensor(
    jobs=[tenant_nightly],
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def tenant_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """After each ingest, one run per tenant whose data changed (the queue runs them in parallel,
    one per tenant at a time); and one more run for a tenant whose pack still owes load dates
    when no run of it is waiting or running (`owed_requests`). Its first tick starts from now."""
    state = _cursor(context.cursor)
    if not state:
        state = _first_tick(context.instance, CHANGED_BY)
        if "after" in state:
            return dg.SensorResult(run_requests=[], cursor=json.dumps(state))
    after = int(state["after"]) if state.get("after") else None
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(CHANGED_BY), after_storage_id=after),
        limit=100,
        ascending=True,
    ).records
    requests = [
        tenant_request(tenant, dates, run_key=f"tenant:{tenant}:{record.storage_id}")
        for record in records
        if not _made_by_a_cli_night(context.instance, record)
        for tenant, dates in changed_tenants(record.event_log_entry).items()
    ]
    if records:
        state["after"] = records[-1].storage_id
    requested = {r.partition_key for r in requests}
    requests += owed_requests(context.instance, requested, state.get("since", 0.0))
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(state))


def owed_requests(
    instance: dg.DagsterInstance, requested: set[str | None], since: float = 0.0
) -> list[dg.RunRequest]:
    """A run for each tenant whose pack still owes load dates (pipeline/storage/owed.py: its run
    failed, or its worker was killed) and that no run of this tick, the queue or an ingest under
    way will bring up to date; only what was recorded `since` (the sensor's first tick). The run
    key is what it owes, so a tenant that fails again is not retried in a loop: new data (a new
    debt) or an operator's re-execution tries it next."""
    if instance.get_runs_count(dg.RunsFilter(job_name=INGEST_JOB, statuses=ACTIVE)):
        return []  # ingest records what it owes before it writes: its own requests follow
    requests = []
    for tenant, dates in owed(Paths.from_env(), since).items():
        tag = {TENANT_TAG: f"{_home()}:{tenant}"}
        if tenant in requested or instance.get_runs_count(dg.RunsFilter(tags=tag, statuses=ACTIVE)):
            continue
        debt = hashlib.sha256(json.dumps(dates).encode()).hexdigest()[:16]
        requests.append(tenant_request(tenant, dates, run_key=f"owed:{tenant}:{debt}"))
    return requests


# Every 30 s, as the tenant sensor: on the Postgres deployment a night waited 62-65 s between its
# last tenant run and the analytics build at 60 s (bench/README "the night on the PostgreSQL
# deployment"); an evaluation is a few run-storage queries.
@dg.sensor(
    job=analytics_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def analytics_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult | dg.SkipReason:
    """Build the warehouse and analytics snapshot once no tenant run is waiting or running and a
    pack was materialized since the last build by a run the daemon made (a `memorypack run`
    builds its own). Its first tick starts from now."""
    if context.cursor is None:
        start = _first_tick(context.instance, "memory_pack")
        if "after" in start:
            return dg.SensorResult(run_requests=[], cursor=str(int(start["after"])))
    after = int(context.cursor) if context.cursor else None
    packs = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("memory_pack"), after_storage_id=after),
        limit=100,
        ascending=False,
    ).records
    if not packs:
        return dg.SkipReason("no pack materialized since the last analytics build")
    if all(_made_by_a_cli_night(context.instance, record) for record in packs):
        return dg.SensorResult(run_requests=[], cursor=str(packs[0].storage_id))
    busy = sum(
        context.instance.get_runs_count(dg.RunsFilter(job_name=job, statuses=ACTIVE))
        for job in (TENANT_JOB, FAST_TENANT_JOB)
    )
    if busy:
        return dg.SkipReason(f"{busy} tenant run(s) still queued or running")
    newest = packs[0].storage_id
    return dg.SensorResult(
        run_requests=[dg.RunRequest(run_key=f"analytics:{newest}", tags={ANALYTICS_TAG: _home()})],
        cursor=str(newest),
    )


def training_due_in_run(instance: dg.DagsterInstance, run_id: str) -> bool:
    """Whether a tenant run's dpo_policy said its configured policy is due to train."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
    ).records
    for record in records:
        materialization = record.event_log_entry.asset_materialization
        if materialization is not None and materialization.asset_key == dg.AssetKey("dpo_policy"):
            due = materialization.metadata.get("training_due")
            return bool(due.value) if due is not None else False
    return False


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    monitored_jobs=[tenant_nightly, tenant_nightly_fast],
    request_job=tenant_training,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
)
def training_sensor(context: dg.RunStatusSensorContext) -> dg.RunRequest | dg.SkipReason:
    """After a tenant's run published its pack: its training run, when the run's dpo_policy
    found the configured policy due (a run that failed trains nothing: its next night decides).
    Dagster starts a run status sensor from now (its first tick notes the newest event), so no
    training of history is replayed; what is due is found again by the tenant's next run."""
    run = context.dagster_run
    if PROCESS_TAG in run.tags:
        return dg.SkipReason(f"run {run.run_id}: memorypack run trains its own")
    tenant = run.tags.get("dagster/partition")
    if not tenant or not training_due_in_run(context.instance, run.run_id):
        return dg.SkipReason(f"run {run.run_id}: no policy due to train")
    settings = {"resources": run.run_config["resources"]} if "resources" in run.run_config else {}
    return training_request(tenant, settings, run_key=f"training:{run.run_id}")
