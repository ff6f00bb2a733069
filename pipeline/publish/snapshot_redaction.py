"""The analyst snapshot's redaction of lake rows (SPEC §5, §6): as in a pack, per slice."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from pipeline.ingest.contracts import COMMENT_MAX_CHARS
from pipeline.pii.redactor import Redactor
from pipeline.progress import Heartbeat
from pipeline.publish.redaction import redact_rows

if TYPE_CHECKING:
    from pipeline.pii.names import TenantNames


def redacting(
    redactor: Redactor,
    found: Counter[str],
    report: Callable[[str], None] | None = None,
    done: list[int] | None = None,
) -> Callable[[pa.Table], pa.Table]:
    """The snapshot's PII redaction of rows, as in a pack (SPEC §5): text columns redacted,
    identifiers and labels that hold PII pseudonymized with the same key (so analysts can join
    them with the packs' ids), each tenant's names (the ones its last pack spread) redacted in
    its rows, comments cut to their published length after redaction (never before: a cut value
    is no longer found), raw line bytes of quarantined lines cleared (their text is redacted in
    `raw`); what it finds is counted in `found`. Texts already seen by a pack or an earlier build
    come from the redactor's cache, where each slice's new analyses go. `done` counts the rows
    (shared by the parts one build makes, so its progress lines grow)."""
    from pipeline.publish.content import ENUM_COLUMNS, MACHINE_COLUMNS

    names: dict[str, TenantNames] = {}

    beat, analysed = Heartbeat(), redactor.analysed
    done = [0] if done is None else done

    def redact(rows: pa.Table) -> pa.Table:
        rows = _redacted(rows)
        done[0] += rows.num_rows
        if report is not None and beat.due():
            report(
                f"analytics: {done[0]} rows redacted in {beat.elapsed():.0f} s "
                f"({redactor.analysed - analysed} texts analysed, the rest from the cache)"
            )
        return rows

    def _redacted(rows: pa.Table) -> pa.Table:
        texts = [
            f.name
            for f in rows.schema
            if _is_text(f.type) and f.name not in ENUM_COLUMNS | MACHINE_COLUMNS | {"tenant_id"}
        ]
        for f in rows.schema:
            if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type):
                rows = _set_column(rows, f.name, pa.nulls(rows.num_rows, f.type))
        if texts:
            tenant = ["tenant_id"] if "tenant_id" in rows.column_names else []
            frame = pl.from_arrow(rows.select([*tenant, *texts]))
            assert isinstance(frame, pl.DataFrame)
            redacted, counts = redact_rows(redactor, frame, names)
            found.update(counts)
            if "comment" in redacted.columns:
                redacted = redacted.with_columns(pl.col("comment").str.slice(0, COMMENT_MAX_CHARS))
            for column in texts:
                kind = rows.schema.field(column).type
                rows = _set_column(rows, column, redacted[column].to_arrow().cast(kind))
            redactor.flush()
        return rows

    return redact


def _is_text(kind: pa.DataType) -> bool:
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        kind = kind.value_type
    return (
        pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind)
    )


def _set_column(rows: pa.Table, name: str, values: pa.Array | pa.ChunkedArray) -> pa.Table:
    return rows.set_column(rows.schema.get_field_index(name), name, values)
