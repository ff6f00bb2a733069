"""What a pack holds: the schemas of its files, the columns an app may see, and the inputs and
content a build passes along."""

from __future__ import annotations

import os
import tempfile
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import polars as pl
import pyarrow as pa

from memorypack.columns import FILE_COLUMNS
from pipeline.pii.names import TenantNames
from pipeline.pii.redactor import Redactor
from pipeline.preference.dpo import DPO_RUNS_SCHEMA
from pipeline.storage.vectors import EmbeddingCache

TIMESTAMP = pl.Datetime("us", "UTC")


STRING = pl.String()


STRINGS = pl.List(pl.String())


FLOATS = pl.List(pl.Float32())


def pack_schema(file: str) -> dict[str, pl.DataType]:
    """The columns a pack file always has and their polars types, as the app library declares
    them (memorypack.columns: the format the loader checks)."""
    empty = pa.schema(list(FILE_COLUMNS[file].items())).empty_table()
    return dict(pl.DataFrame(pl.from_arrow(empty)).schema)


MEMORY_SCHEMA = pack_schema("memories.parquet")
PACK_CONFLICT_SCHEMA = pack_schema("conflicts.parquet")
VECTOR_SCHEMA = pack_schema("vectors.parquet")
# The pack files copied from a lake table (extra upstream columns kept): the table, the file's
# columns, its sort keys.
PASS_THROUGH: dict[str, tuple[str, dict[str, pl.DataType], list[str]]] = {
    "summaries.parquet": (
        "consolidated_summaries",
        pack_schema("summaries.parquet"),
        ["cluster_id"],
    ),
    "few_shot.parquet": (
        "few_shot_sets",
        pack_schema("few_shot.parquet"),
        ["system", "kind", "skill_id", "rank", "memory_id"],
    ),
    "templates.parquet": (
        "template_history",
        pack_schema("templates.parquet"),
        ["skill_id", "version"],
    ),
    "skills.parquet": ("skill_stats", pack_schema("skills.parquet"), ["user_id", "skill_id"]),
}


# Enumerations are kept verbatim: closed sets the contract validates or the pipeline makes. Every
# other string the raw contract carries is an identifier or a label (SPEC §5 round 4): one that
# holds personal data (an e-mail, a phone number, a name of the tenant's…) becomes its keyed
# pseudonym (pipeline.pii.pseudonym); every other text column of every pack file goes through PII
# redaction.
ENUM_COLUMNS = frozenset(
    {
        "tenant_id",
        "memory_kind",
        "memory_type",
        "status",
        "impact_level",
        "scope",
        "owner",
        "stage",
        "promotion_to",
    }
)


# Texts the pipeline makes: digests (sha256 or HMAC hex), pack versions (`<publish time>-<hash>`)
# and Dagster run ids. Nothing of a person can be read in them, so the analytics snapshot keeps
# them as they are instead of analysing them as text (no pack file has one): spaCy's NER tags
# about one version in a thousand as a place, and a redacted version joins to no pack.
MACHINE_COLUMNS = frozenset(
    {"content_hash", "text_hash", "subject_hash", "pair_id", "version", "dagster_run_id"}
)


ID_COLUMNS = frozenset(
    {
        "memory_id",
        "contact_id",
        "skill_id",
        "user_id",
        "cluster_id",
        "representative_id",
        "member_ids",
        "memory_id_a",
        "memory_id_b",
        "preferred_id",
        "policy_id",
        "owner_id",
        "session_id",
        # labels: free strings of the contract an app filters by (`few_shot(system=…)`)
        "system",
        "kind",
        "category",
        "model",
        "tags",
        # in the analytics snapshot: the same pseudonyms as the packs' ids, so analysts can join
        "event_id",
        "target_id",
        "parent_event_id",
        "chosen_id",
        "rejected_id",
    }
)


# What a pack reports of its tenant's policy (SPEC §4.7): facts of the policy only. When and how
# long it ran, and whether a night reused it, stay in dpo_runs: a pack's content never depends on
# the clock, so a re-run with identical input builds identical content (SPEC §5).
POLICY_METRICS = tuple(
    c for c in DPO_RUNS_SCHEMA if c not in ("tenant_id", "model_dir", "seconds", "reused")
)


# Used only while no decay snapshot exists yet: the §4.2 base of the type (BASE_CONFIDENCE).
DEFAULT_CONFIDENCE = 0.5


@dataclass
class PackInputs:
    """Every lake table one tenant's pack reads, as scans of that tenant's folders only: the pack
    is built from them as they are (no row of another tenant is in them to filter out)."""

    tenant: str
    as_of: datetime
    tables: dict[str, pl.LazyFrame]
    missing: list[str]
    decay_snapshot: str | None
    load_dates: list[str] = field(default_factory=list)
    event_counts: dict[str, int] = field(default_factory=dict)  # the tenant's events by type
    cache: EmbeddingCache | None = None  # where memory_embeddings' vectors are
    redactor: Redactor | None = None  # PII redaction with the home's cache and key
    models_dir: Path | None = None  # the embedding stage's ONNX exports (shipped for text queries)

    @property
    def run_date(self) -> date:
        return (self.as_of - timedelta(days=1)).date()

    def has_memories(self) -> bool:
        """Whether the tenant has an interaction or a statement: what a pack is made of."""
        return any(
            self.tables[name].head(1).collect().height
            for name in ("interactions", "memory_statements")
            if name in self.tables
        )

    def columns(self, name: str) -> list[str]:
        return self.tables[name].collect_schema().names() if name in self.tables else []

    def rows(self, name: str) -> pl.DataFrame | None:
        """The tenant's rows of a table (None when the table is not in the lake)."""
        table = self.tables.get(name)
        return None if table is None else table.collect()

    def frame(self, name: str, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        """The tenant's rows of a table with at least `schema`'s columns (missing ones null; no
        rows when the table is not in the lake)."""
        frame = self.rows(name)
        return pl.DataFrame(schema=schema) if frame is None else ensure_columns(frame, schema)


def ensure_columns(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    """Add any guaranteed column the upstream table does not (yet) have, as nulls."""
    extra = [
        pl.lit(None, dtype=dtype).alias(c) for c, dtype in schema.items() if c not in frame.columns
    ]
    return frame.with_columns(extra) if extra else frame


FILL_ROWS = 16_384  # rows of the embedding matrix handled at a time (24 MiB of 384-dim vectors)


def write_npy(path: Path, blocks: Iterable[np.ndarray], rows: int, dim: int) -> None:
    """A (rows × dim) float32 .npy file from blocks of rows: the bytes np.save writes of the whole
    matrix, which is never made."""
    header = {"descr": "<f4", "fortran_order": False, "shape": (rows, dim)}
    written = 0
    with path.open("wb") as out:
        np.lib.format.write_array_header_1_0(out, header)
        for block in blocks:
            out.write(np.ascontiguousarray(block, dtype="<f4").tobytes())
            written += len(block)
    if written != rows:
        raise ValueError(f"{written} embedding rows written to {path.name}, {rows} declared")


def _npy_shape(handle: BinaryIO) -> tuple[int, int]:
    np.lib.format.read_magic(handle)
    rows, dim = np.lib.format.read_array_header_1_0(handle)[0]
    return int(rows), int(dim)


def npy_shape(path: Path) -> tuple[int, int]:
    """(rows, dim) of a 2-D .npy file, from its header."""
    with path.open("rb") as handle:
        return _npy_shape(handle)


def npy_blocks(path: Path, size: int = FILL_ROWS) -> Iterator[np.ndarray]:
    """The rows of a 2-D float32 .npy file, `size` at a time, read (not mapped: a block that was
    read is freed)."""
    with path.open("rb") as handle:
        rows, dim = _npy_shape(handle)
        for start in range(0, rows, size):
            n = min(size, rows - start)
            yield np.fromfile(handle, dtype="<f4", count=n * dim).reshape(n, dim)


class EmbeddingMatrix:
    """A pack's embeddings (rows × dim float32; row i is memory i's unit vector, zeros without
    one) in a temporary .npy file, written and read a block of rows at a time: at 1.3M memories
    the matrix is 2 GB, and a night never holds it whole. The file goes with the object."""

    def __init__(self, blocks: Iterable[np.ndarray], rows: int, dim: int) -> None:
        handle, name = tempfile.mkstemp(prefix="pack-embeddings-", suffix=".npy")
        os.close(handle)
        self.path, self.rows, self.dim = Path(name), rows, dim
        weakref.finalize(self, self.path.unlink, missing_ok=True)
        write_npy(self.path, blocks, rows, dim)

    @classmethod
    def of(cls, matrix: np.ndarray) -> EmbeddingMatrix:
        """A matrix already in memory (a small one: tests, benchmarks)."""
        return cls([matrix], matrix.shape[0], matrix.shape[1])

    def blocks(self, size: int = FILL_ROWS) -> Iterator[np.ndarray]:
        yield from npy_blocks(self.path, size)  # a generator of self: the file lives while read

    def read(self) -> np.ndarray:
        """The whole matrix (a small one)."""
        return np.load(self.path)


@dataclass
class PackContent:
    """One tenant's pack before it is written: frames per file, the embedding matrix, manifest parts."""

    tenant_id: str
    as_of: datetime
    frames: dict[str, pl.DataFrame]
    embeddings: EmbeddingMatrix
    models: dict[str, Any]
    metrics: dict[str, Any]
    inputs: dict[str, Any]
    redactions: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    # The embedding model's files to ship beside the tenant's versions (pipeline.publish.models).
    model_files: dict[str, Path] = field(default_factory=dict)
    # The tenant's names its redaction spread (kept for the analyst snapshot: Redactor.save_names).
    names: TenantNames = field(default_factory=lambda: TenantNames(frozenset()))
