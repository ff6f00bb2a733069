"""The Dagster internals this project uses (`dagster._core`, not public API), in one place: a
Dagster upgrade that moves them fails on import here, not somewhere in the code that uses them."""

import importlib

from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)

# The instance's storage modules (~1 s of imports a run), preloaded by the fork server.
INSTANCE_STORAGE_MODULES = (
    "dagster._core.storage.event_log.sqlite",
    "dagster._core.storage.root",
    "dagster._core.storage.runs.sqlite",
    "dagster._core.storage.schedules.sqlite",
)


def preload_instance_storage() -> None:
    """Import the instance's storage modules (jobs/forked.py: once a night, before the fork)."""
    for name in INSTANCE_STORAGE_MODULES:
        importlib.import_module(name)


__all__ = ["AssetCheckEvaluationTargetMaterializationData", "preload_instance_storage"]
