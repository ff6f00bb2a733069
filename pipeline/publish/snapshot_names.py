"""Each tenant's names redacted in every row of the analyst snapshot, the rows of earlier nights
included: the snapshot's base redacts a row when it loads it, with the names known then, and a
name found tonight must leave yesterday's rows too (SPEC §5: a name found anywhere in a tenant is
redacted in every text of it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection

import duckdb
import polars as pl

from pipeline.pii.names import TenantNames
from pipeline.pii.redactor import Redactor
from pipeline.publish.content import ENUM_COLUMNS, MACHINE_COLUMNS
from pipeline.publish.redaction import spread_names

_TEXT_TYPES = ("VARCHAR", "VARCHAR[]")


def _text_columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Per table with a tenant_id, its text and text-list columns a name could be in."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE schema_name = 'main' AND table_name IN (SELECT table_name FROM duckdb_columns() "
        "WHERE column_name = 'tenant_id')"
    ).fetchall()
    columns: dict[str, list[str]] = {}
    for table, column, kind in rows:
        if kind in _TEXT_TYPES and column not in ENUM_COLUMNS | MACHINE_COLUMNS:
            columns.setdefault(str(table), []).append(str(column))
    return columns


def _pattern(names: TenantNames) -> str:
    """RE2 for DuckDB: a row that may hold one of the names as a word (a superset: the exact
    replacement is `spread_names`'s)."""
    words = "|".join(sorted((w.lower() for w in names.words), key=lambda w: (-len(w), w)))
    return rf"(?i)(?:^|[^\p{{L}}])(?:{words})(?:[^\p{{L}}]|$)"


def spread_in_snapshot(
    con: duckdb.DuckDBPyConnection,
    redactor: Redactor,
    tenants: list[str],
    only: Collection[str] | None = None,
    of_no_tenant: bool = True,
) -> Counter[str]:
    """Redact each tenant's names (`Redactor.names`) in the rows of `con`'s tables that still
    hold one (of the tables `only` names, if given); rows of no tenant (a quarantined line
    without one) get every tenant's names (`of_no_tenant`: a tenant's part holds none). Only
    the rows a regular expression selects in DuckDB are read into Python; how many names were
    replaced, per table."""
    names = {tenant: redactor.names(tenant) for tenant in tenants}
    names = {t: n for t, n in names.items() if n.words}
    if not names:
        return Counter()
    everyone = TenantNames(
        frozenset().union(*(n.words for n in names.values())),
        frozenset().union(*(n.surnames for n in names.values())),
    )
    replaced: Counter[str] = Counter()
    for table, columns in _text_columns(con).items():
        if only is not None and table not in only:
            continue
        for tenant, own in [*names.items(), *([(None, everyone)] if of_no_tenant else [])]:
            replaced[table] += _spread_rows(con, table, columns, tenant, own, redactor.key)
    return +replaced


def _spread_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    columns: list[str],
    tenant: str | None,
    names: TenantNames,
    key: bytes,
) -> int:
    kinds = dict(
        con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = ?", [table]
        ).fetchall()
    )
    texts = [
        f'"{c}"' if kinds[c] == "VARCHAR" else f'array_to_string("{c}", chr(31))' for c in columns
    ]
    holds = " OR ".join(f"regexp_matches(coalesce({t}, ''), $pattern)" for t in texts)
    which = "tenant_id = $tenant" if tenant is not None else "tenant_id IS NULL"
    params: dict[str, object] = {"pattern": _pattern(names)}
    if tenant is not None:
        params["tenant"] = tenant
    quoted = ", ".join(f'"{c}"' for c in columns)
    hits = pl.DataFrame(
        pl.from_arrow(
            con.execute(
                f'SELECT rowid AS _rowid, {quoted} FROM "{table}" WHERE {which} AND ({holds})',
                params,
            ).to_arrow_table()
        )
    )
    if hits.is_empty():
        return 0
    spread, n = spread_names(hits, names, key, tenant or "")
    con.register("_spread", spread.to_arrow())
    try:
        sets = ", ".join(f'"{c}" = _spread."{c}"' for c in columns)
        con.execute(
            f'UPDATE "{table}" SET {sets} FROM _spread WHERE "{table}".rowid = _spread._rowid'
        )
    finally:
        con.unregister("_spread")
    return n
