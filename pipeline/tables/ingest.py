"""Ingest's tables: every accepted event, the quarantine, the load statistics and the typed
event tables (SPEC §2, §3)."""

from __future__ import annotations

import polars as pl

from pipeline.tables.declaration import (
    CONTEXT_DESCRIPTIONS,
    EVENT_COLUMNS,
    EVENT_DESCRIPTIONS,
    FEEDBACK_COLUMNS,
    INT,
    INTERACTION_COLUMNS,
    LOAD_DATE,
    MEMORY_COLUMNS,
    STR,
    Table,
    event_descriptions,
    pick,
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
        descriptions=EVENT_DESCRIPTIONS | CONTEXT_DESCRIPTIONS,
    ),
    Table(
        "quarantine",
        "Rejected raw lines with file, line number, load date and machine-readable reason.",
        {
            "load_date": pl.Date(),
            "file": STR,
            "line_no": INT,
            "reason": STR,
            "raw": STR,
            "raw_bytes": pl.Binary(),
            "tenant_id": STR,
            "event_id": STR,
            "lines": INT,
            "line_nos": pl.List(INT),
        },
        ("load_date", "file", "line_no"),
        asset="quarantine",
        partition=LOAD_DATE,
        by_tenant=False,
        descriptions={
            "reason": "machine-readable: missing_field:<f>, wrong_type:<f>, corrupt_gzip, … "
            "(docs/INPUT.md lists them)",
            "raw_bytes": "the bytes not ingested of an unreadable file's rest",
            "lines": "how many landing lines the row stands for: 1, or a file's blank lines, or "
            "its identical rejected lines (same reason and text), counted as one row",
            "line_nos": "the numbers of the first of those lines (at most 5); line_no is the first",
            "raw": "the line as read (redacted in the analytics snapshot)",
            "tenant_id": "the line's tenant_id when it could be read",
            "event_id": "the line's event_id when it could be read",
        },
    ),
    Table(
        "ingest_stats",
        "Per load date: files, lines read, accepted, duplicates, quarantined.",
        {
            "load_date": pl.Date(),
            "files": INT,
            "lines_read": INT,
            "accepted": INT,
            "duplicates": INT,
            "quarantined": INT,
        },
        ("load_date",),
        asset="ingest_stats",
        partition=LOAD_DATE,
        by_tenant=False,
        descriptions={
            "files": "landing files read",
            "lines_read": "lines read: accepted + duplicates + quarantined",
            "accepted": "events stored",
            "duplicates": "re-sent identical events, counted once",
            "quarantined": "lines refused, each in quarantine with its reason",
        },
    ),
    Table(
        "interactions",
        "AI calls: what was asked (input), what it answered (output); one memory each.",
        pick(INTERACTION_COLUMNS),
        ("tenant_id", "event_id"),
        asset="interactions",
        partition=LOAD_DATE,
        descriptions=event_descriptions(INTERACTION_COLUMNS) | CONTEXT_DESCRIPTIONS,
    ),
    Table(
        "feedback",
        "Signals about interactions and memories (votes, corrections, validations).",
        pick(FEEDBACK_COLUMNS),
        ("tenant_id", "event_id"),
        asset="feedback",
        partition=LOAD_DATE,
        descriptions=event_descriptions(FEEDBACK_COLUMNS)
        | {"user_id": "the app user who gave the feedback"},
    ),
    Table(
        "memory_statements",
        "Statements learned about a person: instructions, patterns, inferences.",
        pick(MEMORY_COLUMNS),
        ("tenant_id", "event_id"),
        asset="memory_statements",
        partition=LOAD_DATE,
        descriptions=event_descriptions(MEMORY_COLUMNS)
        | {"category": "communication | scheduling | money | relationships | preferences | other"},
    ),
)
