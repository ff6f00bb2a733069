"""The Definitions object: every asset, check, job, schedule and sensor, loaded by `dagster dev`."""

import dagster as dg

from assets import examples, feedback, ingest, memory, preference, publish, semantic, usage
from assets.catalog import catalogued
from assets.config import StageSettings
from assets.handoffs import resources
from assets.resources import home_resource
from jobs.nightly import (
    analytics_job,
    analytics_sensor,
    ingest_job,
    landing_sensor,
    nightly_schedule,
    tenant_nightly,
    tenant_nightly_fast,
    tenant_sensor,
    tenant_training,
    training_sensor,
)

STAGES = [ingest, feedback, usage, semantic, memory, examples, preference, publish]  # data order

defs = dg.Definitions(
    assets=catalogued([a for stage in STAGES for a in stage.ASSETS]),
    asset_checks=[c for stage in STAGES for c in stage.CHECKS],
    jobs=[ingest_job, tenant_nightly, tenant_nightly_fast, tenant_training, analytics_job],
    schedules=[nightly_schedule],
    sensors=[landing_sensor, tenant_sensor, training_sensor, analytics_sensor],
    # `settings`: every stage's knobs, set per run (assets/config.py); the home and the lake's
    # input manager over it (assets/handoffs.py).
    resources={**resources(home_resource()), "settings": StageSettings.configure_at_launch()},
    # One process per run: the `home` resource holds its part's lock from the first step to the last.
    executor=dg.in_process_executor,
)
