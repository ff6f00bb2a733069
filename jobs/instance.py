"""The Dagster instance folder `memorypack run` and `make ui` share, with memorypack's dagster.yaml.

DAGSTER_HOME=$(python -m jobs.instance)   # prepares it and prints its path (the Makefile's ui)
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from pipeline.config import Paths
from pipeline.settings import Settings

CONFIG = Path(__file__).with_name("dagster.yaml")
# The run tags the queue limits to one run per value (dagster.yaml): ingest runs carry the home,
# tenant runs and training runs `<home>:<tenant>`, the analytics build the home.
HOME_TAG = "memorypack/home"
TENANT_TAG = "memorypack/tenant"
TRAINING_TAG = "memorypack/training"
ANALYTICS_TAG = "memorypack/analytics"
# The process a run ran in, set by `memorypack run` (jobs/runner.py) on the runs it makes itself:
# a worker killed mid-run leaves its run "started", which the parent then records as failed; and
# the sensors leave such a night's events to it.
PROCESS_TAG = "memorypack/process"


def workers() -> int:
    """Runs in progress at once: MEMORYPACK_WORKERS, else the core count."""
    return Settings.from_env().workers or os.cpu_count() or 1


def rendered_config() -> str:
    """The packaged dagster.yaml with this machine's number of runs at once."""
    text = CONFIG.read_text(encoding="utf-8")
    return re.sub(r"max_concurrent_runs: \d+", f"max_concurrent_runs: {workers()}", text)


def dagster_home(home: Path) -> Path:
    """DAGSTER_HOME when set, else `<home>/dagster` (`home`: the home's local folder, see
    `Paths.local`), with the packaged dagster.yaml in it.

    `<home>/dagster` is memorypack's: its dagster.yaml is rewritten whenever it differs from the
    packaged one. A DAGSTER_HOME set explicitly is the user's: its dagster.yaml is written only
    when it has none (the home lock still keeps runs apart under any config)."""
    explicit = Settings.from_env().dagster_home
    folder = Path(explicit).resolve() if explicit else home / "dagster"
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "dagster.yaml"
    wanted = rendered_config()
    if not config.exists() or (not explicit and config.read_text(encoding="utf-8") != wanted):
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as tmp:
            tmp.write(wanted)
        os.chmod(tmp.name, 0o644)
        os.replace(tmp.name, config)  # a reader never sees half a file
    return folder


if __name__ == "__main__":
    print(dagster_home(Paths.from_env().local))
