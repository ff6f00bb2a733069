"""Raw landing folder → validated events and quarantined lines, with counts that always add up."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import polars as pl
import pyarrow as pa

from pipeline.contracts import (
    COMMENT_MAX_CHARS,
    EARLIEST_TS_YEAR,
    EVENT_ID_MAX_CHARS,
    EVENT_SCHEMA,
    FEEDBACK_COLUMNS,
    FIELDS,
    FUTURE_TOLERANCE_DAYS,
    INTERACTION_COLUMNS,
    LINE_MAX_BYTES,
    MEMORY_CATEGORIES,
    MEMORY_COLUMNS,
    QUARANTINE_SCHEMA,
    RAW_KEPT_CHARS,
    SUPPORTED_SCHEMA_VERSIONS,
    TENANT_ID_PATTERN,
    EventType,
    Field,
    JsonKind,
    Reason,
    Signal,
)
from pipeline.erasure import Tombstones, erased_quarantine_rows, json_field
from pipeline.landing_bytes import Damage, read_landing_bytes

BOM = "\ufeff"
LANDING_PATTERNS = ("*.jsonl", "*.jsonl.gz")
VALIDATE_CHUNK_LINES = 200_000

_LINES_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "line_no": pl.Int64(),
    "raw": pl.String(),
    "raw_bytes": pl.Binary(),
    "damage": pl.String(),  # the reason of a row standing for a file's unreadable rest
}


@dataclass
class IngestResult:
    """One landing folder, split: every line read is in exactly one of the three outcomes."""

    load_date: date
    events: pl.DataFrame
    quarantine: pl.DataFrame
    files: list[str] = field(default_factory=list)
    lines_read: int = 0
    duplicates: int = 0
    # (tenant_id, contact_id) of the erasure requests read: kept in memory only, for the run to
    # act on; the stored `erasure` events do not hold the id.
    erasures: list[tuple[str, str]] = field(default_factory=list)

    @property
    def stats(self) -> dict[str, int | str]:
        return {
            "load_date": self.load_date.isoformat(),
            "files": len(self.files),
            "lines_read": self.lines_read,
            "accepted": self.events.height,
            "duplicates": self.duplicates,
            "quarantined": self.quarantine.height,
        }

    @property
    def conserved(self) -> bool:
        return self.lines_read == self.events.height + self.duplicates + self.quarantine.height


def landing_files(folder: Path) -> list[Path]:
    return sorted({p for pattern in LANDING_PATTERNS for p in folder.glob(pattern)})


def read_lines(path: Path, name: str | None = None) -> pl.DataFrame:
    """One row per line: text when it is valid UTF-8, otherwise the bytes (quarantined later).

    A file that is damaged (corrupt gzip) or unreadable keeps the whole lines read before the
    damage and ends with one more row standing for the unreadable rest (see `_damage_row`).
    """
    data, damage = read_landing_bytes(path)
    label = name or path.name
    if damage is None:
        return _split_lines(data, label)
    cut = data.rfind(b"\n") + 1  # a line cut by the damage is not a whole line
    lines = _split_lines(data[:cut], label)
    tail = data[cut:] + damage.unverified
    return pl.concat([lines, _damage_row(damage, label, lines.height + 1, cut, tail)])


def _damage_row(damage: Damage, label: str, line_no: int, offset: int, tail: bytes) -> pl.DataFrame:
    """The unreadable rest of a file as one line: quarantined with the damage's reason.

    `raw` says what happened and where: `offset` is the byte offset in the decompressed stream
    where the unreadable part starts (the start of the line the damage cut, so everything before
    it was ingested), the compressed offset is where zlib saw the damage. `raw_bytes` keeps what
    was not ingested but could be decompressed: the partial line the damage cut and any
    unverified output of a corrupt member.
    """
    where = ""
    if damage.reason is Reason.CORRUPT_GZIP:
        where = (
            f" (unreadable from decompressed byte {offset};"
            f" damage at compressed byte {damage.compressed_offset})"
        )
    return pl.DataFrame(
        {
            "file": [label],
            "line_no": [line_no],
            "raw": [f"{damage.detail}{where}"],
            "raw_bytes": [tail or None],
            "damage": [damage.reason.value],
        },
        schema=_LINES_SCHEMA,
    )


def _split_lines(data: bytes, label: str) -> pl.DataFrame:
    """The lines of a file's bytes, cut without a copy per line.

    The bytes become an Arrow string column directly: newline positions (numpy) are the offsets,
    and Arrow checks UTF-8 for the whole file at once (the happy path). Only a file holding
    invalid UTF-8 has its non-ASCII lines decoded one by one, so one bad line costs that line
    alone (no Python object per line, unlike `bytes.decode().split()`).
    """
    if b"\r" in data:  # memchr: the copy below is only paid by files that have a CR
        data = data.replace(b"\r\n", b"\n")
    data = data.removeprefix(BOM.encode())
    if not data:
        return pl.DataFrame(schema=_LINES_SCHEMA)
    if not data.endswith(b"\n"):
        data += b"\n"
    buf = np.frombuffer(data, dtype=np.uint8)
    ends = np.flatnonzero(buf == ord("\n"))
    offsets = np.concatenate(([0], ends + 1)).astype(np.int64)
    n = len(ends)
    raw_bytes = pl.repeat(None, n, dtype=pl.Binary, eager=True).alias("raw_bytes")
    try:
        text = _string_array(buf, offsets)
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere: find the lines, blank them, keep bytes
        bad = _invalid_utf8_lines(data, buf, offsets)
        buf = buf.copy()
        for i in bad.tolist():
            buf[offsets[i] : offsets[i + 1] - 1] = ord(" ")
        text = _string_array(buf, offsets, null=bad)
        lines = [data[offsets[i] : offsets[i + 1] - 1] for i in bad.tolist()]
        raw_bytes = raw_bytes.scatter(bad, pl.Series(lines, dtype=pl.Binary))
    raw = pl.Series("raw", text).str.strip_suffix("\n")
    return pl.DataFrame({"raw": raw, "raw_bytes": raw_bytes}).select(
        pl.lit(label, dtype=pl.String).alias("file"),
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("line_no"),
        "raw",
        "raw_bytes",
        pl.lit(None, dtype=pl.String).alias("damage"),
    )


def _string_array(buf: np.ndarray, offsets: np.ndarray, null: np.ndarray | None = None) -> pa.Array:
    """Arrow strings over `buf` cut at `offsets` (no copy), UTF-8 checked; rows in `null` null."""
    n = len(offsets) - 1
    nulls = 0 if null is None else int(null.size)
    validity = None
    if nulls:
        valid = np.ones(n, dtype=bool)
        valid[null] = False
        validity = pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(
        pa.large_string(),
        n,
        [validity, pa.py_buffer(offsets), pa.py_buffer(buf)],
        null_count=nulls,
    )
    array.validate(full=True)
    return array


def _invalid_utf8_lines(data: bytes, buf: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Indexes of the lines that are not valid UTF-8: only lines with a byte ≥ 0x80 can be."""
    line_of = np.searchsorted(offsets, np.flatnonzero(buf >= 0x80), side="right") - 1
    candidates = np.unique(line_of).tolist()
    bad = [i for i in candidates if not _is_utf8(data[offsets[i] : offsets[i + 1]])]
    return np.array(bad, dtype=np.int64)


def _is_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# What DuckDB's lenient parser (yyjson) accepts and RFC 8259 does not, or could hide: NaN and
# Infinity literals (any case), a trailing comma, a key twice in one object (first wins there).
# Only a line matching one of these cheap patterns gets Python's strict parse: a lenient literal,
# a trailing comma, space before a key's colon, a key seen twice in the line (in any object), or
# a key written with an escape (`"tenant\u005fid"` is `tenant_id`).
_LENIENT = r"(?i)[\[:,]\s*[-+]?(?:nan|inf)|,\s*[\]}]|\"\s+:"
_KEY = r'"(?:[^"\\]|\\.)*":'


class _DuplicateKeyError(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, object]]) -> dict[str, object]:
    if len({k for k, _ in pairs}) < len(pairs):
        raise _DuplicateKeyError
    return {}  # only the check matters


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _strict_json_reason(line: str) -> str | None:
    """The reason RFC 8259 rejects a line DuckDB accepted, or None."""
    try:
        json.loads(line, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except _DuplicateKeyError:
        return Reason.DUPLICATE_KEY.value
    except (ValueError, RecursionError):
        return Reason.INVALID_JSON.value
    return None


def _strict_json(lines: pl.DataFrame) -> pl.Series:
    """Per line: `invalid_json` / `duplicate_key` where the strict parse rejects it, else null."""
    keys = pl.col("keys")
    candidates = (
        lines.select("raw", pl.col("raw").str.extract_all(_KEY).alias("keys"))
        .select(
            pl.col("raw").str.contains(_LENIENT)
            | (keys.list.n_unique() < keys.list.len())
            | keys.list.join("").str.contains("\\", literal=True)
        )
        .to_series()
    )
    at = candidates.arg_true()
    reasons = [_strict_json_reason(line) for line in lines["raw"].gather(at).to_list()]
    column = pl.repeat(None, lines.height, dtype=pl.String, eager=True).alias("strict_json")
    return column.scatter(at, pl.Series(reasons, dtype=pl.String)) if len(at) else column


# A JSON array whose every element is a string (tags, supersedes).
_ALL_STRINGS = r'^\[\s*(?:"(?:[^"\\]|\\.)*"\s*(?:,\s*"(?:[^"\\]|\\.)*"\s*)*)?\]$'


def _extract(lines: pl.DataFrame) -> pl.DataFrame:
    """Parse each line's JSON once: root type, every field's JSON type and text value.

    DuckDB checks the line (`json_valid`) and pulls every contract field out as raw JSON in one
    parse (`json_transform` to a struct of JSON values; an explicit null comes out as a missing
    field, as the contract counts it). The rest is polars on those small values: the JSON type
    from the first character, string values unescaped. DuckDB's parser (yyjson) is lenient about
    trailing commas, NaN literals and duplicate keys: `_strict_json` re-reads the lines that
    could hold them.
    """
    lines = lines.with_columns(_strict_json(lines))
    structure = "{" + ", ".join(f'"{f.name}": "JSON"' for f in FIELDS) + "}"
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        con.register("lines", lines.select("row", "raw").to_arrow())
        parsed = pl.from_arrow(
            con.sql(
                f"""
                SELECT row, json_ok,
                       CASE WHEN json_ok THEN json_transform(raw, '{structure}') END AS fields,
                       md5(raw) AS content_hash
                FROM (SELECT row, raw, coalesce(json_valid(raw), false) AS json_ok FROM lines)
                """
            )
            .arrow()
            .read_all()
        )
    finally:
        con.close()
    assert isinstance(parsed, pl.DataFrame)
    parsed = parsed.unnest("fields").with_columns(pl.col(f.name).cast(pl.String) for f in FIELDS)
    values = [
        expr
        for f in FIELDS
        for expr in (_json_type(f.name).alias(f"{f.name}__t"), _json_text(f.name).alias(f.name))
    ]
    lists = [
        pl.col(f.name).str.contains(_ALL_STRINGS).alias(f"{f.name}__all_str")
        for f in FIELDS
        if f.kind is JsonKind.STRING_LIST
    ]
    root = pl.when(pl.col("json_ok")).then(
        pl.when(pl.col("raw").str.strip_chars_start().str.starts_with("{"))
        .then(pl.lit("OBJECT"))
        .otherwise(pl.lit("OTHER"))
    )
    wide = parsed.with_columns(*lists).with_columns(*values)
    if wide["row"].equals(lines["row"]):  # DuckDB kept the order: no join needed
        out = pl.concat([lines, wide.drop("row")], how="horizontal")
    else:
        out = lines.join(wide, on="row", how="left")
    return out.with_columns(root.alias("root_type"))


def _json_type(name: str) -> pl.Expr:
    """DuckDB's name for the JSON type of a raw JSON value (null when absent)."""
    value = pl.col(name)
    first = value.str.slice(0, 1)
    return (
        pl.when(value.is_null())
        .then(None)
        .when(first == '"')
        .then(pl.lit("VARCHAR"))
        .when(first == "{")
        .then(pl.lit("OBJECT"))
        .when(first == "[")
        .then(pl.lit("ARRAY"))
        .when(first.is_in(["t", "f"]))
        .then(pl.lit("BOOLEAN"))
        .when(value.str.contains(r"^-?[0-9]+$"))
        .then(pl.lit("BIGINT"))
        .otherwise(pl.lit("DOUBLE"))
    )


def _json_text(name: str) -> pl.Expr:
    """A raw JSON value as text: a string unescaped, anything else its (minified) JSON."""
    value = pl.col(name)
    is_string = value.str.starts_with('"')
    escaped = pl.when(is_string & value.str.contains("\\", literal=True)).then(value)
    return pl.coalesce(
        escaped.str.json_decode(pl.String),
        pl.when(is_string).then(value.str.strip_prefix('"').str.strip_suffix('"')).otherwise(value),
    )


_INTEGER_TYPES = ("BIGINT", "UBIGINT")
_KIND_TYPES: dict[JsonKind, tuple[str, ...]] = {
    JsonKind.STRING: ("VARCHAR",),
    JsonKind.INTEGER: _INTEGER_TYPES,
    JsonKind.NUMBER: (*_INTEGER_TYPES, "DOUBLE"),
    JsonKind.STRING_LIST: ("ARRAY",),
    JsonKind.OBJECT: ("OBJECT",),
}


def _present(f: Field) -> pl.Expr:
    """The field is there and not JSON null (an explicit null counts as absent)."""
    t = pl.col(f"{f.name}__t")
    return t.is_not_null() & (t != "NULL")


def _wrong_type(f: Field) -> pl.Expr:
    if f.kind is JsonKind.ANY:
        return pl.lit(False)
    bad = ~pl.col(f"{f.name}__t").is_in(_KIND_TYPES[f.kind])
    if f.kind is JsonKind.STRING_LIST:
        bad = bad | ~pl.col(f"{f.name}__all_str").fill_null(True)
    return _present(f) & bad


def _applies(f: Field) -> pl.Expr:
    if not f.event_types:
        return pl.lit(True)
    return pl.col("event_type").is_in([str(t) for t in f.event_types])


def _rules(load_date: date) -> list[tuple[pl.Expr, pl.Expr]]:
    """Every contract rule as (condition, reason), in order: the first that holds is the reason."""
    lit = pl.lit
    by_name = {f.name: f for f in FIELDS}
    ts_floor_of_future = datetime(load_date.year, load_date.month, load_date.day) + timedelta(
        days=1 + FUTURE_TOLERANCE_DAYS
    )
    strict = pl.col("strict_json")
    rules: list[tuple[pl.Expr, pl.Expr]] = [
        (pl.col("damage").is_not_null(), pl.col("damage")),
        (pl.col("raw").is_null(), lit(Reason.INVALID_UTF8.value)),
        (pl.col("raw").str.strip_chars() == "", lit(Reason.EMPTY_LINE.value)),
        (
            ~pl.col("json_ok").fill_null(False) | (strict == Reason.INVALID_JSON.value),
            lit(Reason.INVALID_JSON.value),
        ),
        (strict == Reason.DUPLICATE_KEY.value, lit(Reason.DUPLICATE_KEY.value)),
        (pl.col("root_type") != "OBJECT", lit(Reason.NOT_AN_OBJECT.value)),
        (_wrong_type(by_name["schema_version"]), lit(f"{Reason.WRONG_TYPE}:schema_version")),
        (  # compared as JSON text: 2**80 is an integer, but no Int64
            _present(by_name["schema_version"])
            & ~pl.col("schema_version").is_in([str(v) for v in SUPPORTED_SCHEMA_VERSIONS]),
            lit(Reason.UNSUPPORTED_SCHEMA_VERSION.value),
        ),
    ]
    for name in ("event_id", "tenant_id", "event_type", "ts"):
        f = by_name[name]
        rules.append((~_present(f), lit(f"{Reason.MISSING_FIELD}:{name}")))
        rules.append((_wrong_type(f), lit(f"{Reason.WRONG_TYPE}:{name}")))
    rules += [
        (
            ~pl.col("event_id").str.len_chars().is_between(1, EVENT_ID_MAX_CHARS),
            lit(Reason.BAD_EVENT_ID.value),
        ),
        (~pl.col("tenant_id").str.contains(TENANT_ID_PATTERN), lit(Reason.BAD_TENANT_ID.value)),
        (~pl.col("event_type").is_in(list(EventType)), lit(Reason.UNKNOWN_EVENT_TYPE.value)),
        (pl.col("ts_parsed").is_null(), lit(Reason.BAD_TIMESTAMP.value)),
        (
            pl.col("ts_parsed") < lit(datetime(EARLIEST_TS_YEAR, 1, 1, tzinfo=UTC)),
            lit(Reason.ANCIENT_TIMESTAMP.value),
        ),
        (
            pl.col("ts_parsed") >= lit(ts_floor_of_future).dt.replace_time_zone("UTC"),
            lit(Reason.FUTURE_TIMESTAMP.value),
        ),
    ]
    for f in FIELDS:
        if f.name in ("schema_version", "event_id", "tenant_id", "event_type", "ts"):
            continue
        applies = _applies(f)
        if f.required:
            rules.append((applies & ~_present(f), lit(f"{Reason.MISSING_FIELD}:{f.name}")))
        rules.append((applies & _wrong_type(f), lit(f"{Reason.WRONG_TYPE}:{f.name}")))
        if f.max_chars is not None:
            too_long = pl.col(f.name).str.len_chars() > f.max_chars
            rules.append((applies & _present(f) & too_long, lit(f"{Reason.TOO_LONG}:{f.name}")))
        allowed = f.allowed
        if f.name == "category":  # free text on interactions, an enumeration on memories
            applies = applies & (pl.col("event_type") == EventType.MEMORY.value)
            allowed = tuple(MEMORY_CATEGORIES)
        if allowed is not None:
            reason = (
                Reason.UNKNOWN_SIGNAL.value
                if f.name == "signal"
                else f"{Reason.UNKNOWN_VALUE}:{f.name}"
            )
            rules.append((applies & _present(f) & ~pl.col(f.name).is_in(allowed), lit(reason)))
        if f.low is not None and f.high is not None:
            value = pl.col(f.name).cast(pl.Float64, strict=False)
            rules.append(
                (
                    applies & _present(f) & ~value.is_between(f.low, f.high),
                    lit(f"{Reason.OUT_OF_RANGE}:{f.name}"),
                )
            )
    rules.append(
        (
            (pl.col("event_type") == EventType.ERASURE.value) & ~_present(by_name["contact_id"]),
            lit(f"{Reason.MISSING_FIELD}:contact_id"),
        )
    )
    rules.append(
        (
            (pl.col("event_type") == EventType.FEEDBACK.value)
            & (pl.col("signal") == Signal.CORRECTION.value)
            & ~_present(by_name["corrected_output"]),
            lit(f"{Reason.MISSING_FIELD}:corrected_output"),
        )
    )
    return rules


def _first_reason(rules: Iterable[tuple[pl.Expr, pl.Expr]]) -> pl.Expr:
    return pl.coalesce(
        [pl.when(cond.fill_null(False)).then(reason) for cond, reason in rules]
    ).alias("reason")


# RFC 3339 §5.6 date-time: `T`/`Z` in either case (§5.6 NOTE), an offset `Z` or `±hh:mm`. No
# space separator (an application may allow one: this contract does not), no offset-less time,
# no `+hhmm`. [0-9], not \d: the regex crate's \d matches every Unicode digit.
_RFC3339 = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?"
    r"(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"
)


def _parse_ts(col: str) -> pl.Expr:
    """RFC 3339 date-time, stored as UTC; anything else (or an impossible date) is null."""
    value = pl.col(col)
    return (
        pl.when(value.str.contains(_RFC3339))
        .then(value.str.to_uppercase().str.replace("Z$", "+00:00"))
        .str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_unit="us", time_zone="UTC")
    )


def _typed(f: Field) -> pl.Expr:
    """A field's text value in its table type; a field that does not apply to the type is null."""
    value = pl.when(_applies(f) & _present(f)).then(pl.col(f.name))
    dtype = EVENT_SCHEMA[f.name]
    if f.kind is JsonKind.STRING_LIST:
        return value.str.json_decode(pl.List(pl.String)).alias(f.name)
    return value.cast(dtype, strict=False).alias(f.name)


def _cut_long_lines() -> list[pl.Expr]:
    """A line over LINE_MAX_BYTES is `line_too_long` before any parse; its raw keeps a prefix."""
    size = pl.col("raw").str.len_bytes()
    too_long = size > LINE_MAX_BYTES
    cut = pl.format(
        "{}… [cut: the line is {} bytes]", pl.col("raw").str.slice(0, RAW_KEPT_CHARS), size
    )
    return [
        pl.when(too_long)
        .then(pl.lit(Reason.LINE_TOO_LONG.value))
        .otherwise("damage")
        .alias("damage"),
        pl.when(too_long).then(cut).otherwise("raw").alias("raw"),
    ]


def validate_lines(lines: pl.DataFrame, load_date: date) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split read lines into candidate events (typed) and quarantined lines (with reasons)."""
    lines = lines.with_row_index("row").with_columns(_cut_long_lines())
    wide = _extract(lines).with_columns(_parse_ts("ts").alias("ts_parsed"))
    wide = wide.with_columns(_first_reason(_rules(load_date)))
    bad = wide.filter(pl.col("reason").is_not_null())
    good = wide.filter(pl.col("reason").is_null())
    load = pl.lit(load_date, dtype=pl.Date)
    quarantine = bad.select(
        load.alias("load_date"),
        "file",
        "line_no",
        "reason",
        "raw",
        "raw_bytes",
        pl.col("tenant_id").cast(pl.String),
        pl.col("event_id").cast(pl.String),
    )
    typed = [_typed(f) for f in FIELDS if f.name not in ("ts", "schema_version")]
    comment = pl.col("comment")
    events = good.with_columns(typed).with_columns(
        pl.col("ts_parsed").alias("ts"),
        load.alias("load_date"),
        pl.col("schema_version").cast(pl.Int32, strict=False).fill_null(1),
        comment.str.slice(0, COMMENT_MAX_CHARS),
        (comment.str.len_chars() > COMMENT_MAX_CHARS).fill_null(False).alias("comment_truncated"),
        pl.col("file").alias("source_file"),
    )
    return events.select([pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()]), quarantine


def deduplicate(
    events: pl.DataFrame, existing: pl.LazyFrame | None
) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Keep one copy of each (tenant_id, event_id), here and across other partitions.

    A re-sent identical event is a duplicate (counted, not stored twice); the same id with
    different content is quarantined as `conflicting_duplicate`: the first accepted copy stays.
    Returns (kept events, conflicting rows as events, number of identical duplicates).
    """
    key = ["tenant_id", "event_id"]
    ordered = events.sort("source_file", "line_no")
    first = ordered.unique(subset=key, keep="first", maintain_order=True)
    rest = ordered.join(
        first.select(*key, "source_file", "line_no"),
        on=[*key, "source_file", "line_no"],
        how="anti",
    )
    rest = rest.join(
        first.select(*key, pl.col("content_hash").alias("kept_hash")), on=key, how="left"
    )
    duplicates = rest.filter(pl.col("content_hash") == pl.col("kept_hash")).height
    conflicts = rest.filter(pl.col("content_hash") != pl.col("kept_hash")).drop("kept_hash")
    if existing is not None:
        seen = (
            existing.select(*key, pl.col("content_hash").alias("seen_hash"))
            .join(first.lazy().select(key), on=key, how="semi")
            .collect()
        )
        first = first.join(seen, on=key, how="left")
        duplicates += first.filter(pl.col("seen_hash") == pl.col("content_hash")).height
        conflicts = pl.concat(
            [
                conflicts,
                first.filter(pl.col("seen_hash") != pl.col("content_hash")).drop("seen_hash"),
            ]
        )
        first = first.filter(pl.col("seen_hash").is_null()).drop("seen_hash")
    return first, conflicts, duplicates


def _conflicts_to_quarantine(
    conflicts: pl.DataFrame, lines: pl.DataFrame, load_date: date
) -> pl.DataFrame:
    return (
        conflicts.select("source_file", "line_no", "tenant_id", "event_id")
        .join(
            lines.select(pl.col("file").alias("source_file"), "line_no", "raw"),
            on=["source_file", "line_no"],
            how="left",
        )
        .select(
            pl.lit(load_date, dtype=pl.Date).alias("load_date"),
            pl.col("source_file").alias("file"),
            "line_no",
            pl.lit(Reason.CONFLICTING_DUPLICATE.value).alias("reason"),
            "raw",
            pl.lit(None, dtype=pl.Binary).alias("raw_bytes"),
            "tenant_id",
            "event_id",
        )
    )


def _drop_erased(
    events: pl.DataFrame, quarantine: pl.DataFrame, tombstones: Tombstones | None, load_date: date
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Lines of erased people (by contact or user id, or naming one of their events) become
    `erased_contact` quarantine rows without their text: re-ingesting old files never brings an
    erased person back. Erasure requests themselves stay (they hold the id they tombstone)."""
    if not tombstones:
        return events, quarantine
    requests = events["event_type"] == EventType.ERASURE.value
    erased = (
        tombstones.matches(
            events, ("contact_id", "user_id"), ("event_id", "target_id", "parent_event_id")
        )
        & ~requests
    )
    raw = pl.col("raw")
    named = quarantine.select(
        pl.coalesce(json_field(raw, "tenant_id"), pl.col("tenant_id")).alias("tenant_id"),
        *(json_field(raw, name).alias(name) for name in ("contact_id", "user_id", "target_id")),
    )
    gone = tombstones.matches(named, ("contact_id", "user_id"), ("target_id",))
    gone = gone | tombstones.line_hits(quarantine["raw"])
    dropped = erased_quarantine_rows(events.filter(erased), load_date, "source_file", "line_no")
    quarantine = pl.concat(
        [
            quarantine.filter(~gone),
            erased_quarantine_rows(quarantine.filter(gone), load_date, "file", "line_no"),
            dropped.cast(pl.Schema(QUARANTINE_SCHEMA)),
        ]
    )
    return events.filter(~erased), quarantine


def _erasure_requests(events: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[str, str]]]:
    """Erasure events stored without the person's id (or any other field than the request's
    own), with a content hash that does not derive from it; and the requests, in file order."""
    requests = pl.col("event_type") == EventType.ERASURE.value
    asked = events.filter(requests).sort("source_file", "line_no")
    pairs = list(asked.select("tenant_id", "contact_id").unique(maintain_order=True).iter_rows())
    kept = ["tenant_id", "event_id", "event_type", "ts", "load_date", "schema_version"]
    kept += ["source_file", "line_no"]
    blank = [
        pl.when(requests).then(None).otherwise(pl.col(c)).alias(c)
        for c in events.columns
        if c not in kept and c != "content_hash"
    ]
    request_hash = (
        pl.concat_str(
            [pl.col("tenant_id"), pl.col("event_id"), pl.lit(EventType.ERASURE.value)],
            separator="\x00",
        )
        .hash()
        .cast(pl.String)
    )
    events = events.with_columns(
        *blank,
        pl.when(requests)
        .then(request_hash)
        .otherwise(pl.col("content_hash"))
        .alias("content_hash"),
    )
    return events, [(str(t), str(c)) for t, c in pairs]


def ingest_folder(
    folder: Path,
    load_date: date,
    existing: pl.LazyFrame | None = None,
    tombstones: Tombstones | None = None,
) -> IngestResult:
    """Read every `*.jsonl`/`*.jsonl.gz` of one landing folder and split it three ways.

    `existing` holds (tenant_id, event_id, content_hash) of the events of every *other* partition,
    so a re-sent event is stored once however many days it arrives on. Lines of people in
    `tombstones` are counted as `erased_contact` quarantine rows; erasure requests are returned in
    `erasures` for the run to carry out.
    """
    files = landing_files(folder)
    frames = [read_lines(path) for path in files]
    lines = pl.concat(frames) if frames else pl.DataFrame(schema=_LINES_SCHEMA)
    # Lines are independent until dedupe: validating in slices bounds the memory of the wide
    # parsed frame (70 columns) whatever the size of the folder.
    parts = [
        validate_lines(chunk, load_date) for chunk in lines.iter_slices(VALIDATE_CHUNK_LINES)
    ] or [validate_lines(lines, load_date)]
    events = pl.concat([valid for valid, _ in parts])
    quarantine = pl.concat([rejected for _, rejected in parts])
    events, quarantine = _drop_erased(events, quarantine, tombstones, load_date)
    events, erasures = _erasure_requests(events)
    kept, conflicts, duplicates = deduplicate(events, existing)
    quarantine = pl.concat([quarantine, _conflicts_to_quarantine(conflicts, lines, load_date)])
    return IngestResult(
        load_date=load_date,
        events=kept.sort("tenant_id", "event_id"),
        quarantine=quarantine.select(
            [pl.col(c).cast(t) for c, t in QUARANTINE_SCHEMA.items()]
        ).sort("file", "line_no"),
        files=[p.name for p in files],
        lines_read=lines.height,
        duplicates=duplicates,
        erasures=erasures,
    )


TYPED_TABLES: dict[str, tuple[EventType, list[str]]] = {
    "interactions": (EventType.INTERACTION, INTERACTION_COLUMNS),
    "feedback": (EventType.FEEDBACK, FEEDBACK_COLUMNS),
    "memory_statements": (EventType.MEMORY, MEMORY_COLUMNS),
}


def typed_tables(events: pl.LazyFrame) -> dict[str, pl.DataFrame]:
    """The typed tables (SPEC §3) of some events: one load date's, in the lake, where `events` are
    already unique per (tenant_id, event_id) across load dates (see `deduplicate`)."""
    return {
        name: events.filter(pl.col("event_type") == kind.value)
        .select(columns)
        .unique(subset=["tenant_id", "event_id"], keep="first")
        .sort("tenant_id", "ts", "event_id")
        .collect()
        for name, (kind, columns) in TYPED_TABLES.items()
    }
