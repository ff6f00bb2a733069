"""Ingest's tables: every accepted event, the quarantine, the load statistics and the typed
event tables (SPEC §2, §3)."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import (
    _I,
    _S,
    CONTEXT_DESCRIPTIONS,
    EVENT_COLUMNS,
    FEEDBACK_COLUMNS,
    INTERACTION_COLUMNS,
    LOAD_DATE,
    MEMORY_COLUMNS,
    Table,
    _pick,
)

TABLES: tuple[Table, ...] = (
    Table(
        "events",
        "Every accepted event, one row per (tenant_id, event_id), partitioned by load_date.",
        EVENT_COLUMNS,
        ("tenant_id", "event_id"),
        asset="raw_events",
        partition=LOAD_DATE,
        by_tenant=False,
        descriptions={
            "content_hash": "hash of the event's content: a re-sent line is a duplicate",
            **CONTEXT_DESCRIPTIONS,
        },
    ),
    Table(
        "quarantine",
        "Rejected raw lines with file, line number, load date and machine-readable reason.",
        {
            "load_date": pl.Date(),
            "file": _S,
            "line_no": _I,
            "reason": _S,
            "raw": _S,
            "raw_bytes": pl.Binary(),
            "tenant_id": _S,
            "event_id": _S,
        },
        ("load_date", "file", "line_no"),
        asset="quarantine",
        partition=LOAD_DATE,
        by_tenant=False,
        descriptions={
            "reason": "machine-readable: missing_field:<f>, bad_type:<f>, corrupt_gzip, …",
            "raw_bytes": "the bytes not ingested of an unreadable file's rest",
        },
    ),
    Table(
        "ingest_stats",
        "Per load date: files, lines read, accepted, duplicates, quarantined.",
        {
            "load_date": pl.Date(),
            "files": _I,
            "lines_read": _I,
            "accepted": _I,
            "duplicates": _I,
            "quarantined": _I,
        },
        ("load_date",),
        asset="ingest_stats",
        partition=LOAD_DATE,
        by_tenant=False,
    ),
    Table(
        "interactions",
        "AI calls: what was asked (input), what it answered (output); one memory each.",
        _pick(INTERACTION_COLUMNS),
        ("tenant_id", "event_id"),
        asset="interactions",
        partition=LOAD_DATE,
        descriptions=CONTEXT_DESCRIPTIONS,
    ),
    Table(
        "feedback",
        "Signals about interactions and memories (votes, corrections, validations).",
        _pick(FEEDBACK_COLUMNS),
        ("tenant_id", "event_id"),
        asset="feedback",
        partition=LOAD_DATE,
    ),
    Table(
        "memory_statements",
        "Statements learned about a person: instructions, patterns, inferences.",
        _pick(MEMORY_COLUMNS),
        ("tenant_id", "event_id"),
        asset="memory_statements",
        partition=LOAD_DATE,
    ),
)
