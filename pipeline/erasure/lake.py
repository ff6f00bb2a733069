"""Erasure, step 3: remove the person from the lake, the caches, the DPO policies and the warehouse."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
from datetime import date, datetime

import polars as pl

from memorypack.fs import Location
from pipeline import tables
from pipeline.config import TENANT_COLUMN, Paths
from pipeline.erasure.scrub import Needles, scrub_frame
from pipeline.erasure.subject import Subject
from pipeline.ingest.contracts import QUARANTINE_SCHEMA
from pipeline.ingest.quarantined import with_counts
from pipeline.ingest.tombstones import TOMBSTONES, erased_quarantine_rows
from pipeline.storage.lake import Lake, parquet_files, read_file, write_parquet_atomic
from pipeline.storage.warehouse import Warehouse
from pipeline.tables import COMMENTS

POLICY_WITHDRAWALS = "policy_withdrawals"
WITHDRAWAL_SCHEMA = tables.schema(POLICY_WITHDRAWALS)
# Lake tables the erasure rewrites together (a removed line stays counted, see `_erased_rows`).
INGEST_TABLES = ("events", "quarantine", "ingest_stats")
CACHES = ("pii_cache", "pii_names", "embedding_cache")


# --- the lake ---------------------------------------------------------------------------------


def _scrub_ingest_partition(lake: Lake, key: str, needles: Needles) -> dict[str, int]:
    """One load date's events and quarantine scrubbed; every removed line becomes an
    `erased_contact` quarantine row and `ingest_stats` moves it from accepted to quarantined."""
    paths = lake.paths
    removed: dict[str, int] = {}
    events_path, quarantine_path = (
        paths.partition("events", key),
        paths.partition("quarantine", key),
    )
    erased = []
    moved = 0
    if events_path.exists():
        scrubbed = scrub_frame(read_file(events_path), needles)
        if scrubbed.changed:
            write_parquet_atomic(scrubbed.frame, events_path)
            moved = scrubbed.removed.height
            removed["events"] = moved
            erased.append(
                erased_quarantine_rows(
                    scrubbed.removed, date.fromisoformat(key), "source_file", "line_no"
                )
            )
    quarantine = (
        with_counts(read_file(quarantine_path))
        if quarantine_path.exists()
        else pl.DataFrame(schema=QUARANTINE_SCHEMA)
    )
    scrubbed_q = scrub_frame(quarantine, needles)
    if scrubbed_q.removed.height:
        removed["quarantine"] = scrubbed_q.removed.height
        erased.append(
            erased_quarantine_rows(scrubbed_q.removed, date.fromisoformat(key), "file", "line_no")
        )
    if erased:
        kept = scrubbed_q.frame.select(list(QUARANTINE_SCHEMA))
        frame = pl.concat([kept.cast(pl.Schema(QUARANTINE_SCHEMA)), *erased])
        write_parquet_atomic(frame.sort("file", "line_no"), quarantine_path)
    stats_path = paths.partition("ingest_stats", key)
    if moved and stats_path.exists():
        stats = read_file(stats_path).with_columns(
            (pl.col("accepted") - moved).alias("accepted"),
            (pl.col("quarantined") + moved).alias("quarantined"),
        )
        write_parquet_atomic(stats, stats_path)
    return removed


def tenant_files(paths: Paths, tenant: str) -> list[tuple[str, Location]]:
    """(table, file) of every Parquet file of the lake but those in another tenant's folder: a
    table or cache laid out by tenant keeps each tenant's rows in its own folder, and its files
    need not hold a tenant column (a cache's do not), so the folder is what says whose they are."""
    root = str(paths.lake).rstrip("/")
    mine = f"{TENANT_COLUMN}={tenant}"

    def theirs(path: Location) -> bool:
        folders = str(path)[len(root) :].split("/")
        return any(f.startswith(f"{TENANT_COLUMN}=") and f != mine for f in folders)

    return [(table, path) for table, path in parquet_files(paths.lake) if not theirs(path)]


def scrub_lake(paths: Paths, needles: Needles) -> dict[str, int]:
    """Every Parquet file of the lake (tables, partitions, caches) without the person's rows;
    returns rows removed (and list items stripped, as `<table>:items`) per table. Only files that
    change are rewritten, atomically."""
    lake = Lake(paths)
    counts: dict[str, int] = {}

    def add(name: str, n: int) -> None:
        if n:
            counts[name] = counts.get(name, 0) + n

    for key in sorted(set(lake.partition_keys("events")) | set(lake.partition_keys("quarantine"))):
        for name, n in _scrub_ingest_partition(lake, key, needles).items():
            add(name, n)
    for table, path in tenant_files(paths, needles.tenant_id):
        if table in (*INGEST_TABLES, TOMBSTONES, POLICY_WITHDRAWALS):
            continue
        scrubbed = scrub_frame(read_file(path), needles)
        if scrubbed.changed:
            write_parquet_atomic(scrubbed.frame, path)
            add(table, scrubbed.removed.height)
            add(f"{table}:items", scrubbed.stripped)
    return counts


def _lake_text_hashes(paths: Paths, key: bytes) -> set[str]:
    """Keyed hashes of every text (and list item) the lake holds outside its caches: the texts a
    pack or the analytics snapshot can still ask the redaction cache for."""
    hashes: set[str] = set()
    for table, path in parquet_files(paths.lake):
        if table in CACHES:
            continue
        frame = read_file(path)
        for name, dtype in frame.schema.items():
            series = frame[name].explode() if dtype == pl.List(pl.String()) else frame[name]
            if series.dtype != pl.String():
                continue
            for text in series.drop_nulls().unique().to_list():
                hashes.add(hmac.new(key, text.encode(), hashlib.sha256).hexdigest())
    return hashes


def sweep_redaction_cache(paths: Paths, key: bytes) -> int:
    """Drop every cached redaction whose text the lake no longer holds. Matching cannot find them
    all: a derived text (a conflict's subject, an audit detail) holds the person's words without
    being one of their texts. Texts still in use keep their row; the rest would only be analysed
    again if they came back. Returns rows dropped."""
    parts = [path for _, path in parquet_files(paths.lake / "pii_cache", "**/part-*.parquet")]
    if not parts:
        return 0
    live = list(_lake_text_hashes(paths, key))
    dropped = 0
    for part in parts:
        frame = read_file(part)
        kept = frame.filter(pl.col("text_hash").is_in(live))
        if kept.height < frame.height:
            dropped += frame.height - kept.height
            write_parquet_atomic(kept, part)
    return dropped


def sweep_names(paths: Paths, tenant_id: str) -> int:
    """Drop from the tenant's name lexicon (kept beside its redaction cache for the analyst
    snapshot) every name no text or id of the tenant's lake holds any more: the erased person's
    own. The rest keep redacting until the next pack makes the lexicon again. Returns names
    dropped."""
    from pipeline.pii.names import TenantNames
    from pipeline.pii.redactor import NAMES_FILE
    from pipeline.pii.rules import WORD

    path = paths.lake / "pii_names" / f"{TENANT_COLUMN}={tenant_id}" / NAMES_FILE
    if not path.is_file():
        return 0
    names = TenantNames.of_frame(read_file(path))
    if not names.words:
        return 0
    held: set[str] = set()
    for table, file in parquet_files(paths.lake):
        if table in CACHES or f"{TENANT_COLUMN}={tenant_id}" not in str(file):
            continue
        frame = read_file(file)
        for name, dtype in frame.schema.items():
            series = frame[name].explode() if dtype == pl.List(pl.String()) else frame[name]
            if series.dtype == pl.String():
                texts = series.drop_nulls().unique()
                hits = texts.filter(names.in_identifiers(texts)).to_list()
                held.update(w.lower() for t in hits for w in WORD.findall(t))
    kept = TenantNames(
        frozenset(w for w in names.words if w.lower() in held),
        frozenset(w for w in names.surnames if w.lower() in held),
    )
    write_parquet_atomic(kept.frame(), path)
    return len(names.words) - len(kept.words)


# --- models, warehouse, snapshot --------------------------------------------------------------


def withdraw_policies(paths: Paths, subject: Subject, now: datetime) -> list[str]:
    """Delete every DPO policy their data may have trained (the tenant's and a pooled one): weights,
    tokenizer (trained on the tenant's texts) and frozen eval pairs; record the withdrawal. The
    next night trains a new policy without them (no saved policy is left to reuse)."""
    from pipeline.preference.dpo import POOLED_TENANT, RUN_FILE
    from pipeline.preference.dpo.shared import remove_shared

    if not subject.had_training_data:
        return []
    owners = (subject.tenant_id, POOLED_TENANT)
    local = sorted(p for p in paths.models.iterdir() if p.is_dir()) if paths.models.is_dir() else []
    removed = set()
    for folder in local:
        run = folder / RUN_FILE
        if not run.is_file():
            continue
        try:
            owner = json.loads(run.read_text()).get("tenant_id")
        except ValueError:
            owner = None
        if owner in owners:
            shutil.rmtree(folder)
            removed.add(folder.name)
    # an object-store home's shared copies (pipeline.preference.dpo.shared), also those no host pulled here
    withdrawn = sorted(removed | set(remove_shared(paths, owners)))
    if withdrawn:
        path = paths.table(POLICY_WITHDRAWALS)
        old = read_file(path) if path.exists() else pl.DataFrame(schema=WITHDRAWAL_SCHEMA)
        new = pl.DataFrame(
            {
                "tenant_id": [subject.tenant_id] * len(withdrawn),
                "policy_id": withdrawn,
                "withdrawn_at": [now] * len(withdrawn),
                "reason": ["erasure: trained on data of an erased person"] * len(withdrawn),
            },
            schema=WITHDRAWAL_SCHEMA,
        )
        write_parquet_atomic(pl.concat([old, new]), path)
    return withdrawn


def rebuild_warehouse(paths: Paths) -> dict[str, int]:
    """A new warehouse file loaded from the scrubbed lake: deleting rows in DuckDB leaves their
    bytes in free blocks of the old file, so the old file is removed whole."""
    if not paths.warehouse.exists():
        return {}
    warehouse = Warehouse(paths)
    with warehouse.connect() as con:
        tables = con.execute(
            "SELECT table_name, comment FROM duckdb_tables() WHERE schema_name = 'main'"
            " AND table_name IN (SELECT DISTINCT table_name FROM _lake_files)"
        ).fetchall()
    old = paths.warehouse.with_name(f".{paths.warehouse.name}.erasure.tmp")
    os.replace(paths.warehouse, old)
    for leftover in (old, paths.warehouse.with_name(paths.warehouse.name + ".wal")):
        leftover.unlink(missing_ok=True)
    lake = Lake(paths)
    counts = {
        str(name): warehouse.refresh(str(name), lake, comment=comment) for name, comment in tables
    }
    if (paths.table(POLICY_WITHDRAWALS)).exists():
        counts[POLICY_WITHDRAWALS] = warehouse.refresh(
            POLICY_WITHDRAWALS, lake, comment=COMMENTS[POLICY_WITHDRAWALS]
        )
    with warehouse.connect() as con:
        con.execute("CHECKPOINT")
    return counts
