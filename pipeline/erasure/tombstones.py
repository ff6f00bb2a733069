"""Erasure, step 2: the tombstones written first, so nothing can come back from here on (ingest
reads them: `pipeline.ingest.tombstones`)."""

from __future__ import annotations

from datetime import datetime

import polars as pl

from pipeline.config import Paths
from pipeline.erasure.subject import Subject
from pipeline.ingest.tombstones import TOMBSTONE_SCHEMA, TOMBSTONES, line_hash, tombstone_hash
from pipeline.storage.lake import read_file, write_parquet_atomic


def record_tombstone(paths: Paths, key: bytes, subject: Subject, source: str, now: datetime) -> int:
    """Add the person's id and their event ids to the tombstones (hashes only); returns how many
    were new. Written first, so a crash part-way through an erasure still keeps them out."""
    rows = [("contact", subject.contact_id), *(("event", e) for e in subject.event_ids)]
    hashes = [tombstone_hash(key, subject.tenant_id, k, v) for k, v in rows]
    lines = subject.quarantined
    raw = sorted(set(lines["raw"].drop_nulls().to_list())) if "raw" in lines.columns else []
    rows += [("line", line) for line in raw]
    hashes += [line_hash(key, line) for line in raw]
    fresh = pl.DataFrame(
        {
            "tenant_id": [subject.tenant_id] * len(rows),
            "kind": [kind for kind, _ in rows],
            "subject_hash": hashes,
            "erased_at": [now] * len(rows),
            "source": [source] * len(rows),
        },
        schema=TOMBSTONE_SCHEMA,
    )
    path = paths.table(TOMBSTONES)
    old = read_file(path) if path.exists() else pl.DataFrame(schema=TOMBSTONE_SCHEMA)
    new = fresh.join(old, on=["tenant_id", "kind", "subject_hash"], how="anti")
    if new.height:
        write_parquet_atomic(pl.concat([old, new]), path)
    return new.height
