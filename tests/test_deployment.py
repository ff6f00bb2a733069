"""The documented deployment, exercised: PostgreSQL storage, a separate gRPC code server,
`dagster-daemon` and the webserver as their own processes (deploy/local_stack.py). The schedule
starts ingest, the sensors start one run per tenant (two at once) and the analytics build; the
packs, the run records in PostgreSQL and the UI's GraphQL view of the runs are checked.

Opt-in (minutes of real runs): MEMORYPACK_DEPLOY_TEST=1 pytest tests/test_deployment.py
"""

import json
import os
import shutil
import time
import urllib.request
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import psycopg2
import pytest

from deploy.local_stack import local_stack
from jobs.nightly import training_due_in_run
from memorypack import MemoryPack
from pipeline.generate import generate

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get("MEMORYPACK_DEPLOY_TEST"),
        reason="a real deployment runs a whole night (minutes): MEMORYPACK_DEPLOY_TEST=1",
    ),
    pytest.mark.skipif(shutil.which("initdb") is None, reason="PostgreSQL is not installed"),
]
DONE = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}
TENANTS = {"acme", "globex"}
RUNS_QUERY = (
    """{ runsOrError { ... on Runs { results { runId jobName status tags { key value } } } } }"""
)


def finished(instance: dg.DagsterInstance, deadline: float) -> list[dg.RunRecord]:
    """The runs once ingest, a run per tenant, an analytics build after them and a training run
    for each tenant run that found its next policy due have ended."""
    while True:
        records = instance.get_run_records()
        jobs = [r.dagster_run.job_name for r in records]
        tenant_runs = [r for r in records if r.dagster_run.job_name == "tenant_nightly"]
        tenant_ends = [r.end_time or 0 for r in tenant_runs]
        analytics_ends = [r.end_time or 0 for r in records if r.dagster_run.job_name == "analytics"]
        due = sum(training_due_in_run(instance, r.dagster_run.run_id) for r in tenant_runs)
        if (
            all(r.dagster_run.status in DONE for r in records)
            and "ingest" in jobs
            and len(tenant_ends) == len(TENANTS)
            and analytics_ends
            and max(analytics_ends) >= max(tenant_ends)
            and jobs.count("tenant_training") == due
        ) or time.monotonic() > deadline:
            return records
        time.sleep(3)


def test_the_schedule_and_sensors_drive_a_night_on_postgres_with_two_runs_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    today = datetime.now(UTC).date()
    landing, home = tmp_path / "landing", tmp_path / "home"
    # yesterday is what a tick ingests; the day either side covers a tick across midnight
    generate(landing, days=3, interactions=60, tenants=2, seed=3, start=today - timedelta(days=2))
    with local_stack(home, landing, cron="* * * * *", workers=2) as stack:
        for name, value in stack.env.items():
            if name.startswith("DAGSTER_PG_"):  # what the instance's storage block reads
                monkeypatch.setenv(name, value)
        instance = dg.DagsterInstance.from_config(str(stack.dagster_home))
        records = finished(instance, deadline=time.monotonic() + 1800)
        logs = {name: (stack.folder / f"{name}.log").read_text(errors="replace")[-3000:]
                for name in ("daemon", "grpc")}  # fmt: skip
        by_job: dict[str, list[dg.RunRecord]] = {}
        for record in records:
            by_job.setdefault(record.dagster_run.job_name, []).append(record)
        trainings = by_job.pop("tenant_training", [])
        assert {job: len(runs) for job, runs in by_job.items()} == {
            "ingest": 1,
            "tenant_nightly": 2,
            "analytics": 1,
        }, logs
        # a tenant's next policy trains after its pack run, at the queue's lowest priority
        ended = {
            r.dagster_run.tags["dagster/partition"]: r.end_time for r in by_job["tenant_nightly"]
        }
        for training in trainings:
            assert training.dagster_run.tags["dagster/priority"] == "-1"
            tenant = training.dagster_run.tags["dagster/partition"]
            assert (training.start_time or 0) >= (ended[tenant] or 0)
        assert all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in records), logs
        (ingest,) = by_job["ingest"]
        assert ingest.dagster_run.tags.get("dagster/schedule_name") == "nightly_schedule"
        tenants = sorted(by_job["tenant_nightly"], key=lambda r: r.start_time or 0)
        assert {r.dagster_run.tags["dagster/partition"] for r in tenants} == TENANTS
        assert all(
            r.dagster_run.tags.get("dagster/sensor_name") == "tenant_sensor" for r in tenants
        )
        # two runs at once: the second tenant's run started before the first one's ended
        assert (tenants[1].start_time or 0) < (tenants[0].end_time or 0)

        # the run records are PostgreSQL's (no SQLite storage beside the instance)
        env = stack.env
        with (
            psycopg2.connect(
                host=env["DAGSTER_PG_HOST"],
                port=int(env["DAGSTER_PG_PORT"]),
                user=env["DAGSTER_PG_USER"],
                password=env["DAGSTER_PG_PASSWORD"],
                dbname=env["DAGSTER_PG_DB"],
            ) as connection,
            connection.cursor() as cursor,
        ):
            cursor.execute("SELECT run_id, pipeline_name, status FROM runs")
            rows = {run_id: (job, status) for run_id, job, status in cursor.fetchall()}
        assert rows == {r.dagster_run.run_id: (r.dagster_run.job_name, "SUCCESS") for r in records}
        assert not list(stack.dagster_home.rglob("*.db"))

        # the UI shows the same runs
        request = urllib.request.Request(
            f"{stack.ui}/graphql",
            data=json.dumps({"query": RUNS_QUERY}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            shown = json.load(response)["data"]["runsOrError"]["results"]
        assert {(r["runId"], r["jobName"], r["status"]) for r in shown} == {
            (run_id, job, status) for run_id, (job, status) in rows.items()
        }

    load_date = date.fromisoformat(ingest.dagster_run.tags["dagster/partition"])
    for tenant in TENANTS:
        pack = MemoryPack.load(home / "packs" / tenant)  # verified: every file's sha256
        assert pack.tenant_id == tenant
        assert pack.as_of.date() > load_date  # as of the end of the ingested day
        assert len(pack) > 0
