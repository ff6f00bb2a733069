"""Dagster assets and checks: thin wrappers over `pipeline/` that attach metadata."""
