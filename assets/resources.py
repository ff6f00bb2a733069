"""The one resource every asset uses: the memorypack home (lake, models, packs), seen as the run's
part of it (ingest, one tenant, or the analytics build)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import polars as pl
from pydantic import PrivateAttr

from assets.metadata import previews_redacted_by
from pipeline.config import DEFAULT_HOME, Paths, scratch_in_local
from pipeline.pii.redactor import Redactor
from pipeline.publish.redaction import redact_rows
from pipeline.settings import Settings
from pipeline.storage.homelock import (
    ANALYTICS,
    clean_leftovers,
    held_if_free,
    home_lock,
    scope_tenant,
    training_scope,
)
from pipeline.storage.lake import Lake
from pipeline.storage.vectors import EmbeddingCache, TextVectors

# The assets of the ingest job: a run of these holds the ingest lock and sees the whole home.
INGEST_ASSETS = frozenset(
    {"raw_events", "quarantine", "ingest_stats", "interactions", "feedback", "memory_statements"}
)
INGEST_JOB, ANALYTICS_JOB = "ingest", "analytics"
TRAINING_JOB = "tenant_training"  # a tenant's next DPO policy, after its pack published
TENANTS_NAME = "tenants"  # the dynamic partitions of tenants (assets/partitions.py)


def run_scope(run: dg.DagsterRun | None, instance: dg.DagsterInstance | None) -> str | None:
    """Which part of the home a run works on: a tenant, when its partition is one (every asset
    after ingest is partitioned by tenant, and a tenant's run is one partition), or that tenant's
    policies for its training run; ANALYTICS for a run without a partition (the analytics
    build); None for ingest (a load date)."""
    if run is None:
        return None
    selected = {key.to_user_string() for key in run.asset_selection or ()}
    if run.job_name == INGEST_JOB or selected & INGEST_ASSETS:
        return None
    key = run.tags.get("dagster/partition")
    if key and instance is not None and instance.has_dynamic_partition(TENANTS_NAME, key):
        return training_scope(key) if run.job_name == TRAINING_JOB else key
    return None if key else ANALYTICS


class MemorypackHome(dg.ConfigurableResource):
    """Configured from MEMORYPACK_HOME (default ./data). A tenant's run sees only that tenant's
    folders of the lake (`paths`, `lake`): it cannot read or write another tenant's rows.

    A run holds its part's lock from its first step to its last (the job runs in one process):
    ingest the ingest lock, a tenant's run its tenant's, a tenant's training run the tenant's
    training lock (not its tenant's: training never holds back a pack), the analytics build its
    own. So a run the daemon launched and a `memorypack run` never work on the same part at
    once, while different tenants run side by side."""

    home: str = DEFAULT_HOME
    landing: str = ""  # empty = <home>/landing (or MEMORYPACK_LANDING)
    _scope: str | None = PrivateAttr(default=None)
    _redactor: Redactor | None = PrivateAttr(default=None)

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext) -> Iterator[MemorypackHome]:
        home, log = self.paths.local, context.log  # locks are local files (see homelock)
        scratch_in_local(self.paths)
        run = context.dagster_run
        self._scope = run_scope(run, context.instance)
        partition = run.tags.get("dagster/partition", "") if run else ""
        command = f"dagster run {context.run_id} {partition}".strip()

        def busy(holder: str) -> None:
            if log:
                log.info(f"home {home} ({self._scope or 'ingest'}) is busy: {holder}; waiting")

        # Taken by this run (False: `memorypack run` in this process holds it and has cleaned).
        with home_lock(home, command, wait=True, on_busy=busy, scope=self._scope) as taken:
            removed = clean_leftovers(home, self._scope) if taken else []
            if removed and log:
                log.info(f"removed {len(removed)} leftover(s) of a killed run: {removed}")
            if taken and self._scope not in (None, ANALYTICS) and self.tenant == self._scope:
                # a tenant's run also cleans a killed policy write, unless a training is writing
                with held_if_free(home, command, training_scope(self._scope)):
                    pass
            with previews_redacted_by(self.redact_preview):
                yield self

    def redact_preview(self, frame: pl.DataFrame) -> pl.DataFrame:
        """A metadata preview's rows redacted as the pack redacts them: with the home's key and
        cache and each tenant's names (one redactor for the run)."""
        if self._redactor is None:
            self._redactor = Redactor.for_home(self.paths)
        redacted, _ = redact_rows(self._redactor, frame, strict=True)
        self._redactor.flush()
        return redacted

    @property
    def tenant(self) -> str | None:
        """The tenant of this run (None: ingest or the analytics build, which see every tenant)."""
        return scope_tenant(self._scope)

    @property
    def paths(self) -> Paths:
        return Paths.from_env(self.home).for_tenant(self.tenant)

    @property
    def landing_dir(self):  # type: ignore[no-untyped-def]
        from pathlib import Path

        return Path(self.landing).resolve() if self.landing else self.paths.landing

    @property
    def lake(self) -> Lake:
        return Lake(self.paths)

    def table(self, name: str) -> pl.DataFrame:
        """A lake table with its declared columns (pipeline.tables), empty before its stage has
        run: what a step reads of its own previous output (upstream tables arrive as its inputs,
        assets/handoffs.py)."""
        return self.lake.read_or_empty(name).collect()

    @property
    def embedding_cache(self) -> EmbeddingCache:
        return EmbeddingCache(self.paths.embedding_cache)

    def vectors(self, embeddings: pl.DataFrame, *more: pl.Series) -> TextVectors:
        """The cached vectors of `embeddings`' texts (and of the hashes in `more`), in their model."""
        models = embeddings["model"].drop_nulls().unique().sort()
        model = str(models[0]) if models.len() else ""
        hashes = pl.concat([embeddings["text_hash"], *more]) if more else embeddings["text_hash"]
        return self.embedding_cache.vectors(model, hashes)


def home_resource() -> MemorypackHome:
    """The home from the environment, passed unresolved (`dg.EnvVar`): each run's process reads
    the variable, and the UI shows where the value comes from instead of a path baked in when the
    code location loaded. A variable that is not set keeps the field's default."""
    settings = Settings.from_env()
    return MemorypackHome(
        **{
            field: dg.EnvVar(Settings.variable(field))
            for field in ("home", "landing")
            if settings.is_set(field)
        }
    )
