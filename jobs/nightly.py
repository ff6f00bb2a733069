"""The nightly job, its 02:00 UTC schedule and the sensor that reacts to landing folders."""

from __future__ import annotations

import hashlib
import json
from datetime import date, datetime, timedelta
from pathlib import Path

import dagster as dg

from assets.partitions import DAILY
from jobs.instance import HOME_TAG
from pipeline.config import Paths
from pipeline.ingest import landing_files


def home_tags() -> dict[str, str]:
    """The tag the run queue limits to one run per home at a time (jobs/dagster.yaml)."""
    return {HOME_TAG: str(Paths.from_env().home)}


nightly = dg.define_asset_job(
    "nightly",
    selection=dg.AssetSelection.all(),
    description=(
        "Everything for one load date: ingest → feedback → semantic → memory → examples → "
        "preference → publish."
    ),
)


@dg.schedule(
    cron_schedule="0 2 * * *",
    job=nightly,
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
def nightly_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    """At 02:00 UTC, process the load date that just ended (yesterday)."""
    tick = context.scheduled_execution_time or datetime.now()
    key = (tick.date() - timedelta(days=1)).isoformat()
    return dg.RunRequest(run_key=f"scheduled:{key}", partition_key=key, tags=home_tags())


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
        stats = [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in landing_files(folder)]
        if stats:
            prints[folder.name] = hashlib.sha256(json.dumps(stats).encode()).hexdigest()[:16]
    return prints


@dg.sensor(job=nightly, minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED)
def landing_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    """Launch `nightly` for every landing folder that appeared or changed since the last tick."""
    landing = Paths.from_env().landing
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    current = landing_fingerprints(landing)
    requests = [
        dg.RunRequest(run_key=f"landing:{key}:{fp}", partition_key=key, tags=home_tags())
        for key, fp in current.items()
        if seen.get(key) != fp
    ]
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(current, sort_keys=True))
