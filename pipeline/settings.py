"""Every environment variable the pipeline reads, in one place: `Settings.from_env()`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from pipeline.errors import UserError


def _env(name: str, doc: str) -> dict[str, str]:
    return {"env": name, "doc": doc}


@dataclass(frozen=True)
class Settings:
    """The environment as memorypack sees it. An empty variable counts as unset. Read at the time
    a value is used (`Settings.from_env()` where it is needed), never frozen at import, except
    where Dagster needs a value when the code location loads (the first partition, the cron)."""

    home: str = field(
        default="./data",
        metadata=_env("MEMORYPACK_HOME", "the home: a folder or an `s3://bucket/prefix` URL"),
    )
    landing: str | None = field(
        default=None,
        metadata=_env(
            "MEMORYPACK_LANDING", "the landing folder (default `<home>/landing`, `<local>/landing`)"
        ),
    )
    packs: str | None = field(
        default=None,
        metadata=_env(
            "MEMORYPACK_PACKS",
            "where packs are published: a folder or S3 URL (default `<home>/packs`)",
        ),
    )
    local_dir: str | None = field(
        default=None,
        metadata=_env(
            "MEMORYPACK_LOCAL_DIR",
            "an object-store home's local work folder (default: in the user's cache)",
        ),
    )
    pii_key: str | None = field(
        default=None,
        metadata=_env(
            "MEMORYPACK_PII_KEY", "the pseudonym secret (default `<home>/secrets/pii.key`)"
        ),
    )
    pack_key: str | None = field(
        default=None,
        metadata=_env(
            "MEMORYPACK_PACK_KEY",
            "the key packs are signed with (16 bytes or more; apps verify with the same key)",
        ),
    )
    embed_model: str | None = field(
        default=None,
        metadata=_env(
            "MEMORYPACK_EMBED_MODEL", "an embedding model folder (default: the packaged MiniLM)"
        ),
    )
    first_date: str = field(
        default="2026-01-01",
        metadata=_env("MEMORYPACK_FIRST_DATE", "the first daily partition the UI counts from"),
    )
    nightly_cron: str = field(
        default="0 2 * * *",
        metadata=_env("MEMORYPACK_NIGHTLY_CRON", "when the nightly schedule starts ingest (UTC)"),
    )
    workers: int | None = field(
        default=None,
        metadata=_env("MEMORYPACK_WORKERS", "runs in progress at once (default: the core count)"),
    )
    dagster_home: str | None = field(
        default=None,
        metadata=_env("DAGSTER_HOME", "the Dagster instance folder (default `<local>/dagster`)"),
    )
    sensors_catch_up: bool = field(
        default=False,
        metadata=_env(
            "MEMORYPACK_SENSORS_CATCH_UP",
            "`1`: a sensor that has not ticked yet (a new instance, a first `make ui`) acts on what"
            " happened before it started: every landing folder, every ingest, every owed pack"
            " (default: it starts from now; catch-up is `memorypack run`)",
        ),
    )
    cache_home: str | None = field(
        default=None,
        metadata=_env("XDG_CACHE_HOME", "the user's cache, for the local work folder's default"),
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """The variables that are set (and not empty); a malformed one is a one-line UserError."""
        found: dict[str, object] = {}
        for spec in fields(cls):
            value = environ.get(spec.metadata["env"])
            if value:
                found[spec.name] = _typed(spec.name, spec.metadata["env"], value)
        return cls(**found)  # type: ignore[arg-type]

    @staticmethod
    def variable(name: str) -> str:
        """The environment variable of field `name`."""
        return next(spec.metadata["env"] for spec in fields(Settings) if spec.name == name)

    def is_set(self, name: str) -> bool:
        """Whether field `name` came from the environment (differs from its default)."""
        spec = next(spec for spec in fields(self) if spec.name == name)
        return bool(getattr(self, name) != spec.default)


def _typed(name: str, variable: str, value: str) -> object:
    if name == "sensors_catch_up":
        if value.lower() not in ("1", "true", "yes", "0", "false", "no"):
            raise UserError(f"{variable} must be 1 or 0, not {value!r}")
        return value.lower() in ("1", "true", "yes")
    if name != "workers":
        return value
    if not value.isdigit() or int(value) < 1:
        raise UserError(f"{variable} must be a whole number of runs (1 or more), not {value!r}")
    return int(value)


def variables_table() -> str:
    """The variables as a Markdown table (docs/OPERATIONS.md holds a copy; a test compares)."""
    rows = ["| Variable | Default | What it does |", "| --- | --- | --- |"]
    for spec in fields(Settings):
        default = "—" if spec.default is None else f"`{spec.default}`"
        default = "`0`" if spec.default is False else default
        rows.append(f"| `{spec.metadata['env']}` | {default} | {spec.metadata['doc']} |")
    return "\n".join(rows)
