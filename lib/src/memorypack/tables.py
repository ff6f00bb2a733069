"""Read a pack's files and check them against the columns and types the loader reads (SPEC §7).

Every check raises PackError with one line; the helpers turn Arrow columns into the numpy arrays
the indexes are built from."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memorypack.columns import FILE_COLUMNS, REQUIRED_MEMORY_COLUMNS
from memorypack.format import EMBEDDINGS, MAX_FIELD_CHARS, PackError
from memorypack.fs import Location, load_matrix, read_parquet

EMPTY = np.zeros(0, dtype=np.int64)
SECONDS_PER_DAY = 86400.0


def _text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _list_of(item: Any) -> Any:
    def check(kind: pa.DataType) -> bool:
        is_list = pa.types.is_list(kind) or pa.types.is_large_list(kind)
        return bool(is_list and item(kind.value_type))

    return check


_texts = _list_of(_text)


def _time(kind: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(kind) and kind.unit == "us")


def _accepts(declared: pa.DataType) -> Any:
    """What the loader takes for a declared type: any text, integer or float width, and lists of
    such (a pack written by another Arrow writer may pick large_string or float32)."""
    if pa.types.is_list(declared):
        return _list_of(_accepts(declared.value_type))
    if _text(declared):
        return _text
    if pa.types.is_timestamp(declared):
        return _time
    for family in (pa.types.is_floating, pa.types.is_integer, pa.types.is_boolean):
        if family(declared):
            return family
    raise TypeError(f"no check for pack column type {declared}")


# Columns of memories.parquet that packs published before them lack (read as nulls).
OPTIONAL_MEMORY_COLUMNS = tuple(
    c for c in FILE_COLUMNS["memories.parquet"] if c not in REQUIRED_MEMORY_COLUMNS
)
# Each file's declared columns (memorypack.columns) and the check of the Arrow type each must
# have. memories.parquet must hold its required ones; a file may lack any other (read as nulls)
# but not hold it retyped.
COLUMNS: dict[str, dict[str, Any]] = {
    name: {column: _accepts(kind) for column, kind in columns.items()}
    for name, columns in FILE_COLUMNS.items()
}
NOT_NULL = {"memories.parquet": ("memory_id", "confidence")}
# Columns the index combines, which must therefore share one type.
SAME_TYPE = (("kind", "memory_type"), ("last_confirmed", "ts"))
# Python datetimes span years 1..9999: a timestamp outside cannot be handed to an app.
_TIME_RANGE_US = (-62135596800 * 10**6, 253402300799 * 10**6)


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__


def _check_table(table: pa.Table, name: str, where: str, tenant: str) -> None:
    """PackError unless the table has the columns and types the loader reads, only the tenant's
    rows, no text over MAX_FIELD_CHARS and no time a Python datetime cannot hold."""
    expected = COLUMNS.get(name, {})
    if name == "memories.parquet":
        missing = sorted(set(expected) - set(table.column_names) - set(OPTIONAL_MEMORY_COLUMNS))
        if missing:
            raise PackError(f"{where}: {name} lacks columns {missing}")
    for column, kind in expected.items():
        if column in table.column_names and not kind(table.schema.field(column).type):
            raise PackError(
                f"{where}: {name} column {column} has type {table.schema.field(column).type}"
            )
    for column in NOT_NULL.get(name, ()):
        if table.column(column).null_count:
            raise PackError(f"{where}: {name} column {column} has nulls")
    for a, b in SAME_TYPE if name == "memories.parquet" else ():
        if table.schema.field(a).type != table.schema.field(b).type:
            raise PackError(f"{where}: {name} columns {a} and {b} differ in type")
    if "tenant_id" in table.column_names:
        if not _text(table.schema.field("tenant_id").type):
            raise PackError(f"{where}: {name} column tenant_id is not text")
        own = pc.sum(pc.equal(table.column("tenant_id"), tenant)).as_py() or 0
        if own != table.num_rows:
            raise PackError(f"{where}: {name} holds {table.num_rows - own} rows of other tenants")
    for column, field in zip(table.column_names, table.schema, strict=True):
        values = combined(table.column(column))
        if _texts(field.type):
            values = pc.list_flatten(values)
        if _text(values.type):
            longest = pc.max(pc.utf8_length(values)).as_py() or 0
            if longest > MAX_FIELD_CHARS:
                raise PackError(
                    f"{where}: {name} column {column} holds a text of {longest} characters "
                    f"(the limit is {MAX_FIELD_CHARS})"
                )
        elif pa.types.is_timestamp(field.type):
            low, high = pc.min_max(values.cast(pa.int64())).values()
            if not _time(field.type) or (
                low.is_valid
                and (low.as_py() < _TIME_RANGE_US[0] or high.as_py() > _TIME_RANGE_US[1])
            ):
                raise PackError(
                    f"{where}: {name} column {column} holds times out of range or not in µs"
                )


def read_table(folder: Location, name: str, manifest: dict[str, Any]) -> pa.Table:
    """A listed Parquet file, checked (`_check_table`); an empty table when it is not listed."""
    entry = manifest["files"].get(name)
    if entry is None:
        return pa.table({})
    where = f"pack {folder}"
    try:
        table = read_parquet(folder / name).combine_chunks()
        table.validate(full=True)  # offsets and UTF-8, so no value fails later in an app's query
    except (pa.ArrowException, OSError, ValueError) as error:
        raise PackError(
            f"{where}: {name} is not a readable Parquet file ({one_line(error)})"
        ) from None
    if table.num_rows != entry["rows"]:
        raise PackError(
            f"{where}: {name} has {table.num_rows} rows, the manifest says {entry['rows']}"
        )
    _check_table(table, name, where, manifest["tenant_id"])
    return table


def read_embeddings(folder: Location, rows: int) -> np.ndarray:
    """The float32 matrix, memory-mapped: one row per memory."""
    try:
        matrix = load_matrix(folder / EMBEDDINGS)
    except (OSError, ValueError, EOFError) as error:
        raise PackError(
            f"pack {folder}: {EMBEDDINGS} is not a readable array ({one_line(error)})"
        ) from None
    if not isinstance(matrix, np.ndarray) or matrix.dtype != np.float32 or matrix.ndim != 2:
        raise PackError(f"pack {folder}: {EMBEDDINGS} is not a 2-D float32 matrix")
    if matrix.shape[0] != rows:
        raise PackError(f"pack {folder}: {matrix.shape[0]} embedding rows for {rows} memories")
    return matrix


def numbers(table: pa.Table, name: str, default: float = 0.0) -> np.ndarray:
    """A numeric column as float64, nulls (and a missing column) as `default`."""
    if name not in table.column_names:
        return np.full(table.num_rows, default)
    values = pc.fill_null(table.column(name).cast(pa.float64()), default)
    return np.asarray(values.to_numpy(), dtype=np.float64)


def strings(table: pa.Table, name: str) -> pa.Array:
    """A text column as one large_string array (all nulls when the file lacks it)."""
    if name not in table.column_names:
        return pa.nulls(table.num_rows, pa.large_string())
    return combined(table.column(name)).cast(pa.large_string())


def column_values(table: pa.Table, name: str, default: Any = None) -> list[Any]:
    if name in table.column_names:
        return list(table.column(name).to_pylist())
    return [default] * table.num_rows


def group_rows(codes: np.ndarray) -> dict[int, np.ndarray]:
    """Code → the row indices holding it (one argsort, no Python loop over rows)."""
    if not codes.size:  # e.g. a pack whose memories carry no tags
        return {}
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    ends = np.r_[starts[1:], codes.size]
    return {int(sorted_codes[s]): order[s:e] for s, e in zip(starts, ends, strict=True)}


def combined(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def encode(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, dict[str, int]]:
    encoded = pc.dictionary_encode(combined(values))
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, {value: i for i, value in enumerate(encoded.dictionary.to_pylist())}


def has_text(query: str | None) -> bool:
    return isinstance(query, str) and bool(query.strip())


def unit_query(vector: Any, dim: int) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32).ravel()
    if not np.isfinite(array).all():
        raise ValueError("query_vector holds NaN or infinite values")
    if array.shape[0] != dim:
        raise ValueError(f"query vector has {array.shape[0]} dimensions, the pack has {dim}")
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array
