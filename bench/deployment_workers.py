"""The same night through the PostgreSQL-backed deployment with 1 and with 2 run workers
(issue 53 item 7): scale-out shown, not only documented.

`python -m bench.deployment_workers [INTERACTIONS] [TENANTS]` (defaults 300 and 4): for each
worker count, the same generated landing (3 days ending yesterday, seed 3) is driven by the real
stack of `deploy/local_stack.py` (PostgreSQL, the gRPC code server, `dagster-daemon`, the
webserver; the schedule ticks every minute) until ingest, a run per tenant and the analytics build
after them have ended. Prints per worker count: the night (ingest's start to the analytics build's
end), the tenant runs' sum and longest, and how many ran at once at most, from the run records in
PostgreSQL, with ingest's and the build's own seconds and the wait from ingest's end to the first
tenant run (the sensor's tick and the queue). Trainings (lowest priority, after a tenant's pack)
are not waited for.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg

from bench.common import offline_env
from bench.machine import machine
from deploy.local_stack import local_stack
from pipeline.generate import generate

DONE = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def night_records(
    instance: dg.DagsterInstance, tenants: int, deadline: float
) -> list[dg.RunRecord]:
    """The run records once ingest, every tenant's run and an analytics build after them ended."""
    while time.monotonic() < deadline:
        records = [r for r in instance.get_run_records() if r.dagster_run.status in DONE]
        by_job = [r.dagster_run.job_name for r in records]
        tenant_ends = [
            r.end_time or 0 for r in records if r.dagster_run.job_name == "tenant_nightly"
        ]
        builds = [r.end_time or 0 for r in records if r.dagster_run.job_name == "analytics"]
        if (
            "ingest" in by_job
            and len(tenant_ends) == tenants
            and builds
            and max(builds) >= max(tenant_ends)
        ):
            return records
        time.sleep(2)
    raise TimeoutError("the night did not finish in time")


def at_once(spans: list[tuple[float, float]]) -> int:
    """The most spans open at one moment."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = open_ = 0
    for _, step in edges:
        open_ += step
        most = max(most, open_)
    return most


def one_night(workers: int, interactions: int, tenants: int) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix=f"deploy-w{workers}-"))
    landing, home = work / "landing", work / "home"
    today = datetime.now(UTC).date()
    generate(landing, days=3, interactions=interactions, tenants=tenants, seed=3,
             start=today - timedelta(days=2))  # fmt: skip
    with local_stack(home, landing, cron="* * * * *", workers=workers) as stack:
        for name, value in stack.env.items():
            if name.startswith("DAGSTER_PG_"):
                os.environ[name] = value
        instance = dg.DagsterInstance.from_config(str(stack.dagster_home))
        records = night_records(instance, tenants, time.monotonic() + 3600)

    def spans_of(job: str) -> list[tuple[float, float]]:
        return [
            (r.start_time or 0, r.end_time or 0) for r in records if r.dagster_run.job_name == job
        ]

    spans, ingest = spans_of("tenant_nightly"), min(spans_of("ingest"))
    build = max(spans_of("analytics"), key=lambda span: span[1])
    return {
        "night_s": round(build[1] - ingest[0], 1),
        "ingest_s": round(ingest[1] - ingest[0], 1),
        # from ingest's end to the first tenant run's start: the sensor's tick and the queue
        "to_first_tenant_run_s": round(min(s for s, _ in spans) - ingest[1], 1),
        "tenant_runs_span_s": round(max(e for _, e in spans) - min(s for s, _ in spans), 1),
        "analytics_s": round(build[1] - build[0], 1),
        "tenant_runs_sum_s": round(sum(e - s for s, e in spans), 1),
        "tenant_run_longest_s": round(max(e - s for s, e in spans), 1),
        "tenant_runs_at_once": at_once(spans),
        "failed_runs": sum(r.dagster_run.status != dg.DagsterRunStatus.SUCCESS for r in records),
    }


def main(interactions: int, tenants: int) -> None:
    offline_env()
    print(machine())
    for workers in (1, 2):
        print(f"workers {workers}:", one_night(workers, interactions, tenants), flush=True)


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    main(*(args + [300, 4][len(args) :]))
