"""The event contract as polars rules: each line's first broken rule is its quarantine reason."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, timedelta

import polars as pl

from pipeline.ingest.contracts import (
    COMMENT_MAX_CHARS,
    CONTEXT_KEYS,
    CONTEXT_MAX_ITEMS,
    CONTEXT_PACK_PATTERN,
    CONTROL_CHARACTERS,
    EARLIEST_TS_YEAR,
    EVENT_ID_MAX_CHARS,
    EVENT_SCHEMA,
    FIELDS,
    FUTURE_TOLERANCE_DAYS,
    ID_MAX_CHARS,
    MEMORY_CATEGORIES,
    SUPPORTED_SCHEMA_VERSIONS,
    TENANT_ID_PATTERN,
    EventType,
    Field,
    JsonKind,
    Reason,
    Signal,
)
from pipeline.ingest.parse import extract
from pipeline.ingest.tenant_ids import RESERVED_PREFIX
from pipeline.pii.keys import PSEUDONYM

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


# The envelope's fields, checked first and in this order; the body's fields follow.
_ENVELOPE = ("schema_version", "event_id", "tenant_id", "event_type", "ts")


def _envelope_rules(load_date: date) -> list[tuple[pl.Expr, pl.Expr]]:
    """The line, its JSON and the envelope (schema_version, event_id, tenant_id, event_type, ts)."""
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
        (pl.col("too_deep"), lit(Reason.TOO_DEEP.value)),
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
    for name in _ENVELOPE[1:]:
        f = by_name[name]
        rules.append((~_present(f), lit(f"{Reason.MISSING_FIELD}:{name}")))
        rules.append((_wrong_type(f), lit(f"{Reason.WRONG_TYPE}:{name}")))
    rules += [
        (
            ~pl.col("event_id").str.len_chars().is_between(1, EVENT_ID_MAX_CHARS),
            lit(Reason.BAD_EVENT_ID.value),
        ),
        *_identifier_rules(by_name["event_id"]),
        (
            ~pl.col("tenant_id").str.contains(TENANT_ID_PATTERN)
            | pl.col("tenant_id").str.starts_with(RESERVED_PREFIX),
            lit(Reason.BAD_TENANT_ID.value),
        ),
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
    return rules


def _identifier_rules(f: Field, applies: pl.Expr | None = None) -> list[tuple[pl.Expr, pl.Expr]]:
    """An identifier (each string of a list) holds no control or format character, and is not
    shaped like a pseudonym of the pipeline's (a spoofed one would name another person in a
    pack). The tenant id has its own pattern, which allows neither."""
    applies = _present(f) if applies is None else applies & _present(f)
    value = pl.col(f.name)
    if f.kind is JsonKind.STRING_LIST:  # checked where it is a list of strings
        # Its JSON text shows a raw format character and a whole pseudonym as they are; only a
        # text with an escape (`\u0000`) needs decoding, item by item.
        escaped = pl.col(f"{f.name}__all_str") & value.str.contains("\\", literal=True)
        items = pl.when(escaped).then(value).str.json_decode(pl.List(pl.String))
        whole = '"' + PSEUDONYM.strip("^$") + '"'
        control = (
            pl.when(escaped)
            .then(items.list.eval(pl.element().str.contains(CONTROL_CHARACTERS)).list.any())
            .otherwise(value.str.contains(CONTROL_CHARACTERS))
        )
        spoofed = (
            pl.when(escaped)
            .then(items.list.eval(pl.element().str.contains(PSEUDONYM)).list.any())
            .otherwise(value.str.contains(whole))
        )
    else:
        control, spoofed = value.str.contains(CONTROL_CHARACTERS), value.str.contains(PSEUDONYM)
    return [
        (applies & control, pl.lit(f"{Reason.CONTROL_CHARACTER}:{f.name}")),
        (applies & spoofed, pl.lit(f"{Reason.PSEUDONYM_SHAPED_ID}:{f.name}")),
    ]


def _field_rules(f: Field) -> list[tuple[pl.Expr, pl.Expr]]:
    """One body field's rules: required, type, length, allowed values, range."""
    lit = pl.lit
    rules: list[tuple[pl.Expr, pl.Expr]] = []
    applies = _applies(f)
    if f.required:
        rules.append((applies & ~_present(f), lit(f"{Reason.MISSING_FIELD}:{f.name}")))
    rules.append((applies & _wrong_type(f), lit(f"{Reason.WRONG_TYPE}:{f.name}")))
    if f.max_chars is not None:
        too_long = pl.col(f.name).str.len_chars() > f.max_chars
        rules.append((applies & _present(f) & too_long, lit(f"{Reason.TOO_LONG}:{f.name}")))
    if f.identifier:
        rules += _identifier_rules(f, applies)
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
    return rules


def _cross_field_rules() -> list[tuple[pl.Expr, pl.Expr]]:
    """Fields one event type needs that the others do not."""
    by_name = {f.name: f for f in FIELDS}
    erasure = pl.col("event_type") == EventType.ERASURE.value
    return [
        (erasure & ~_present(by_name["contact_id"]), pl.lit(f"{Reason.MISSING_FIELD}:contact_id")),
        (  # a request must name the person: "" or "   " would name nobody (or everybody)
            erasure & (pl.col("contact_id").str.strip_chars() == ""),
            pl.lit(f"{Reason.BLANK_FIELD}:contact_id"),
        ),
        (
            (pl.col("event_type") == EventType.FEEDBACK.value)
            & (pl.col("signal") == Signal.CORRECTION.value)
            & ~_present(by_name["corrected_output"]),
            pl.lit(f"{Reason.MISSING_FIELD}:corrected_output"),
        ),
    ]


# The receipt is checked on DuckDB's minified JSON text of `context`, whose strings hold every `"`
# escaped: `{"` and `,"` only ever open a key, so these anchored patterns cannot match inside a
# value. (A key twice is `duplicate_key` already: the line's strict parse.)
_STR = r'"(?:[^"\\]|\\.)*"'
_CONTEXT_VALUES = {
    "pack_version": _STR,
    "items": rf"\[(?:{_STR}(?:,{_STR})*)?\]",
    "holdout": "(?:true|false)",
}
_MEMBER = "|".join(f'"{key}":{value}' for key, value in _CONTEXT_VALUES.items())
_CONTEXT_SHAPE = rf"^\{{(?:(?:{_MEMBER})(?:,(?:{_MEMBER}))*)?\}}$"
_CONTEXT_TYPE = pl.Struct(
    {"pack_version": pl.String, "items": pl.List(pl.String), "holdout": pl.Boolean}
)


def _receipt(shaped: pl.Expr) -> pl.Expr:
    """The receipt as a struct where `shaped` holds (its JSON then has the struct's types)."""
    return pl.when(shaped).then(pl.col("context")).str.json_decode(_CONTEXT_TYPE)


def _context_rules() -> list[tuple[pl.Expr, pl.Expr]]:
    """The receipt (SPEC §2 `context`): exactly its three keys, each of its type, at most
    CONTEXT_MAX_ITEMS item ids of at most ID_MAX_CHARS, and a pack of the event's own tenant."""
    text = pl.col("context")
    given = (pl.col("event_type") == EventType.INTERACTION.value) & (
        pl.col("context__t") == "OBJECT"
    )
    keys = text.str.extract_all(rf"[{{,]{_STR}:").list.eval(
        pl.element().str.slice(2).str.strip_suffix('":')
    )
    unknown = ~keys.list.eval(pl.element().is_in(CONTEXT_KEYS)).list.all()
    rules = [(given & unknown, f"{Reason.UNKNOWN_KEY}:context")]
    rules += [
        (given & ~text.str.contains(f'[{{,]"{key}":'), f"{Reason.MISSING_FIELD}:context.{key}")
        for key in CONTEXT_KEYS
    ]
    rules += [
        (
            given & ~text.str.contains(f'[{{,]"{key}":{value}[,}}]'),
            f"{Reason.WRONG_TYPE}:context.{key}",
        )
        for key, value in _CONTEXT_VALUES.items()
    ]
    shaped = given & text.str.contains(_CONTEXT_SHAPE)
    rules.append((given & ~shaped, f"{Reason.WRONG_TYPE}:context"))
    receipt = _receipt(shaped)
    items = receipt.struct.field("items")
    longest = items.list.eval(pl.element().str.len_chars().max()).list.first()
    pack = receipt.struct.field("pack_version")
    rules += [
        (
            (items.list.len() > CONTEXT_MAX_ITEMS) | (longest > ID_MAX_CHARS),
            f"{Reason.TOO_LONG}:context.items",
        ),
        (
            items.list.eval(pl.element().str.contains(CONTROL_CHARACTERS)).list.any(),
            f"{Reason.CONTROL_CHARACTER}:context.items",
        ),
        (shaped & ~pack.str.contains(CONTEXT_PACK_PATTERN), Reason.BAD_PACK_VERSION.value),
        (
            pack.str.extract(CONTEXT_PACK_PATTERN, 1) != pl.col("tenant_id"),
            Reason.FOREIGN_PACK.value,
        ),
    ]
    return [(condition, pl.lit(reason)) for condition, reason in rules]


def _context_columns() -> list[pl.Expr]:
    """An accepted receipt as its three columns (the pack's version without its tenant)."""
    interaction = pl.col("event_type") == EventType.INTERACTION.value
    receipt = _receipt(interaction & (pl.col("context__t") == "OBJECT"))
    pack = receipt.struct.field("pack_version").str.extract(CONTEXT_PACK_PATTERN, 2)
    return [
        pack.alias("context_pack_version"),
        receipt.struct.field("items").alias("context_items"),
        receipt.struct.field("holdout").alias("context_holdout"),
    ]


def _rules(load_date: date) -> list[tuple[pl.Expr, pl.Expr]]:
    """Every contract rule as (condition, reason), in order: the first that holds is the reason."""
    rules = _envelope_rules(load_date)
    for f in FIELDS:
        if f.name not in _ENVELOPE:
            rules += _field_rules(f)
    return rules + _context_rules() + _cross_field_rules()


def _first_reason(rules: Iterable[tuple[pl.Expr, pl.Expr]]) -> pl.Expr:
    return pl.coalesce(
        [pl.when(cond.fill_null(False)).then(reason) for cond, reason in rules]
    ).alias("reason")


# RFC 3339 §5.6 date-time: `T`/`Z` in either case (§5.6 NOTE), an offset `Z` or `±hh:mm`. No
# space separator (an application may allow one: this contract does not), no offset-less time,
# no `+hhmm`. [0-9], not \d: the regex crate's \d matches every Unicode digit. Hours 00-23,
# minutes and seconds 00-59: RFC 3339 allows a leap second (:60), but the parser would roll it
# into the next minute, and no clock an app logs from should write one (a `10:00:60` is a bug).
_RFC3339 = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt](?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]+)?"
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


def validate_lines(lines: pl.DataFrame, load_date: date) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split read lines into candidate events (typed) and quarantined lines (with reasons). A line
    over LINE_MAX_BYTES comes cut, with its reason (`damage`), from pipeline.ingest.lines."""
    lines = lines.with_row_index("row")
    wide = extract(lines).with_columns(_parse_ts("ts").alias("ts_parsed"))
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
    typed = [_typed(f) for f in FIELDS if f.name not in ("ts", "schema_version", "context")]
    comment = pl.col("comment")
    events = good.with_columns(*typed, *_context_columns()).with_columns(
        pl.col("ts_parsed").alias("ts"),
        load.alias("load_date"),
        pl.col("schema_version").cast(pl.Int32, strict=False).fill_null(1),
        # Kept whole (to a field's kept_chars): cut to its published length after redaction, never
        # before (a value cut in two is no longer found: pipeline.publish.analytics).
        *(pl.col(f.name).str.slice(0, f.kept_chars) for f in FIELDS if f.kept_chars),
        (comment.str.len_chars() > COMMENT_MAX_CHARS).fill_null(False).alias("comment_truncated"),
        pl.col("file").alias("source_file"),
    )
    return events.select([pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()]), quarantine
