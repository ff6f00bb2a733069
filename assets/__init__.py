"""Dagster assets and checks: thin wrappers over `pipeline/` that attach metadata."""

import warnings

import dagster as dg

# backfill_policy is marked beta; it is the documented way to run a date range as one run.
warnings.filterwarnings("ignore", category=dg.BetaWarning)
