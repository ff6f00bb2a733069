"""Vectors of distinct texts: the embedding cache in the lake (append-only, one folder per model,
on the generic `PartsCache`) and `TextVectors`, the in-memory lookup stages use instead of one copy
of a vector per memory."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import polars as pl

from memorypack.fs import Location
from pipeline.storage.lake import scan_files, write_parquet_atomic

# Parts a model's folder may hold before they are compacted into one (a night adds one part).
MAX_PARTS = 32


def matrix(frame: pl.DataFrame, column: str = "embedding") -> np.ndarray:
    """The (n, dim) float32 matrix of an Array(Float32, dim) (or List) column."""
    if frame.height == 0:
        dtype = frame.schema.get(column)
        width = dtype.size if isinstance(dtype, pl.Array) else 0
        return np.zeros((0, width), dtype=np.float32)
    series = frame[column]
    if isinstance(series.dtype, pl.List):
        series = series.cast(pl.Array(pl.Float32, int(series.list.len().max())))  # type: ignore[arg-type]
    return np.ascontiguousarray(series.to_numpy(), dtype=np.float32)


@dataclass(frozen=True)
class TextVectors:
    """Unit vectors by text_hash: row i of `matrix` belongs to the text_hash in `index` row i."""

    index: pl.DataFrame  # text_hash (unique), row (UInt32)
    matrix: np.ndarray  # (n, dim) float32

    @classmethod
    def from_frame(cls, frame: pl.DataFrame, column: str = "embedding") -> TextVectors:
        """From any frame with text_hash and a vector column (one vector per hash is kept)."""
        frame = frame.unique("text_hash", keep="first", maintain_order=True)
        return cls(frame.select("text_hash").with_row_index("row"), matrix(frame, column))

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return int(self.matrix.shape[0])

    def has(self, hashes: pl.Series) -> pl.Series:
        return hashes.is_in(self.index["text_hash"].implode())

    def rows(self, hashes: pl.Series) -> np.ndarray:
        found = (
            pl.DataFrame({"text_hash": hashes.cast(pl.String)})
            .join(self.index, on="text_hash", how="left", maintain_order="left")
            .get_column("row")
        )
        if found.null_count():
            missing = hashes.filter(found.is_null()).head(3).to_list()
            raise KeyError(f"no vector for text_hash {missing}")
        return found.to_numpy().astype(np.int64)

    def only(self, hashes: pl.Series) -> TextVectors:
        """The vectors of `hashes` alone (a copy: what a stage may change without the others)."""
        distinct = hashes.unique(maintain_order=True).rename("text_hash")
        return TextVectors(distinct.to_frame().with_row_index("row"), self.of(distinct))

    def of(self, hashes: pl.Series) -> np.ndarray:
        """The (len(hashes), dim) vectors, in the order of `hashes` (repeats allowed)."""
        return self.matrix[self.rows(hashes)]


class PartsCache:
    """`<root>/<key>/part-*.parquet`: rows by text_hash, only ever added (a night writes what it
    computed, nothing else) and compacted when a key has more than MAX_PARTS parts."""

    def __init__(self, root: Location) -> None:
        self.root = root

    def _folder(self, key: str) -> Location:
        return self.root / re.sub(r"[^A-Za-z0-9._+-]", "_", key)

    def _parts(self, key: str) -> list[Location]:
        return sorted(self._folder(key).glob("part-*.parquet"), key=str)

    def scan(self, key: str) -> pl.LazyFrame | None:
        """The key's cached rows, or None when it has none."""
        parts = self._parts(key)
        return scan_files(parts) if parts else None

    def hashes(self, key: str) -> pl.Series:
        scan = self.scan(key)
        if scan is None:
            return pl.Series("text_hash", [], dtype=pl.String)
        return scan.select("text_hash").collect().get_column("text_hash")

    def append(self, key: str, rows: pl.DataFrame) -> None:
        if rows.is_empty():
            return
        folder = self._folder(key)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        write_parquet_atomic(rows, folder / f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet")
        parts = self._parts(key)
        if len(parts) > MAX_PARTS:
            # Streamed: the home's identifiers cache at 1M interactions (3.7M rows) peaked at
            # 1,032 MiB collected, 569 MiB streamed, and set the analytics build's peak.
            merged = scan_files(parts).unique("text_hash", keep="first", maintain_order=True)
            write_parquet_atomic(merged, folder / f"part-{stamp}-compacted.parquet")
            for part in parts:
                part.unlink()


class EmbeddingCache(PartsCache):
    """`<lake>/embedding_cache/<model>/part-*.parquet`: vectors of distinct texts (cache_schema).

    Every model has its own folder, so vectors of models with another dimension never meet in
    one scan.
    """

    def vectors(self, model: str, hashes: pl.Series | None = None) -> TextVectors:
        """The model's vectors of `hashes` (all of them when None)."""
        scan = self.scan(model)
        if scan is None:
            return TextVectors(
                pl.DataFrame(schema={"text_hash": pl.String, "row": pl.UInt32}),
                np.zeros((0, 0), np.float32),
            )
        if hashes is not None:
            scan = scan.filter(pl.col("text_hash").is_in(hashes.unique().implode()))
        return TextVectors.from_frame(scan.select("text_hash", "embedding").collect())
