"""Parse each landed line's JSON once (DuckDB), strictly where RFC 8259 and DuckDB disagree."""

from __future__ import annotations

import duckdb
import polars as pl

from pipeline.ingest.contracts import (
    FIELDS,
    MAX_JSON_DEPTH,
    JsonKind,
)
from pipeline.ingest.rawjson import json_depth, json_reason

# What DuckDB's lenient parser (yyjson) accepts and RFC 8259 does not, or could hide: NaN and
# Infinity literals (any case), a trailing comma, a key twice in one object (first wins there).
# Only a line matching one of these cheap patterns gets Python's strict parse: a lenient literal,
# a trailing comma, space before a key's colon, whitespace RFC 8259 does not allow, a key seen
# twice in the line (in any object), or a key written with an escape (`"tenant\u005fid"`).
_LENIENT = r"(?i)[\[:,]\s*[-+]?(?:nan|inf)|,\s*[\]}]|\"\s+:"
# RFC 8259's whitespace is space, tab, LF and CR only. A line holding a control character (never
# valid raw, not even in a string), or other Unicode whitespace where a token can end or start
# (a form feed after a comma, a no-break space before a brace), is read strictly whatever
# DuckDB's parser makes of it; the same space inside a string ("12\u00a0€") is valid there.
_ODD_SPACE = r"[\x0b\x0c\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
_NON_RFC_SPACE = (
    rf"[\x00-\x08\x0b\x0c\x0e-\x1f]|(?:^|[\[{{:,])[ \t\r\n]*{_ODD_SPACE}"
    rf"|{_ODD_SPACE}[ \t\r\n]*(?:$|[\]}}:,])"
)
_KEY = r'"(?:[^"\\]|\\.)*":'


def _too_deep(lines: pl.DataFrame) -> pl.Series:
    """Per line: nested deeper than MAX_JSON_DEPTH. Only a line with more opening brackets than
    that can be; those are scanned (`json_depth`, no recursion)."""
    brackets = lines["raw"].str.count_matches(r"[\[{]").fill_null(0)
    at = (brackets > MAX_JSON_DEPTH).arg_true()
    column = pl.repeat(False, lines.height, dtype=pl.Boolean, eager=True).alias("too_deep")
    if not len(at):
        return column
    deep = [json_depth(line) > MAX_JSON_DEPTH for line in lines["raw"].gather(at).to_list()]
    return column.scatter(at, pl.Series(deep, dtype=pl.Boolean))


def _strict_json(lines: pl.DataFrame) -> pl.Series:
    """Per line: `invalid_json` / `duplicate_key` where the strict parse (`rawjson.read_json`)
    rejects it, else null. A line too deep is not parsed (`too_deep` is its reason)."""
    keys = pl.col("keys")
    candidates = (
        lines.select("raw", "too_deep", pl.col("raw").str.extract_all(_KEY).alias("keys"))
        .select(
            (
                pl.col("raw").str.contains(_LENIENT)
                | pl.col("raw").str.contains(_NON_RFC_SPACE)
                | (keys.list.n_unique() < keys.list.len())
                | keys.list.join("").str.contains("\\", literal=True)
            )
            & ~pl.col("too_deep")
        )
        .to_series()
    )
    at = candidates.arg_true()
    reasons = [json_reason(line) for line in lines["raw"].gather(at).to_list()]
    column = pl.repeat(None, lines.height, dtype=pl.String, eager=True).alias("strict_json")
    return column.scatter(at, pl.Series(reasons, dtype=pl.String)) if len(at) else column


# A JSON array whose every element is a string (tags, supersedes).
_ALL_STRINGS = r'^\[\s*(?:"(?:[^"\\]|\\.)*"\s*(?:,\s*"(?:[^"\\]|\\.)*"\s*)*)?\]$'


def extract(lines: pl.DataFrame) -> pl.DataFrame:
    """Parse each line's JSON once: root type, every field's JSON type and text value.

    DuckDB checks the line (`json_valid`) and pulls every contract field out as raw JSON in one
    parse (`json_transform` to a struct of JSON values; an explicit null comes out as a missing
    field, as the contract counts it). The rest is polars on those small values: the JSON type
    from the first character, string values unescaped. DuckDB's parser (yyjson) is lenient about
    trailing commas, NaN literals and duplicate keys: `_strict_json` re-reads the lines that
    could hold them.
    """
    lines = lines.with_columns(_too_deep(lines))
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
