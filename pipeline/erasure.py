"""Erasure and export of one person (GDPR art. 17 and 15): find everything held about them, remove
it from the lake, warehouse, analytics snapshot, caches, models and packs, and keep a tombstone."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import polars as pl

from pipeline import tables
from pipeline.config import Paths
from pipeline.contracts import QUARANTINE_SCHEMA, TENANT_ID_PATTERN, EventType, Reason
from pipeline.erasure_files import scrub_dagster_history, scrub_landing
from pipeline.errors import UserError
from pipeline.pii import pii_key, pseudonym
from pipeline.scrub import FRAGMENT_CHARS, MIN_FRAGMENT_CHARS, Needles, scrub_frame
from pipeline.storage import Lake, Warehouse, read_file, write_parquet_atomic
from pipeline.tables import COMMENTS

# Where tombstones live: a lake table only the ingest and this module read (not in the warehouse:
# its hashes are keyed, but no analyst needs them).
TOMBSTONES = "tombstones"
POLICY_WITHDRAWALS = "policy_withdrawals"
TOMBSTONE_SCHEMA = tables.schema(TOMBSTONES)
WITHDRAWAL_SCHEMA = tables.schema(POLICY_WITHDRAWALS)
# Free-text fields of an event: what the person wrote or was answered.
TEXT_FIELDS = ("input", "output", "summary", "comment", "corrected_output", "content", "metadata")
# Lake tables the erasure rewrites together (a removed line stays counted, see `_erased_rows`).
INGEST_TABLES = ("events", "quarantine", "ingest_stats")
CACHES = ("pii_cache", "embedding_cache")
_JSON_ID = r'"{field}"\s*:\s*"((?:[^"\\]|\\.)*)"'


def _lake_dir(paths: Paths) -> Path:
    """The lake folder erasure rewrites file by file; an object-store home is refused in one line
    (erasure there is not built yet: packs on S3 are, `MEMORYPACK_PACKS=s3://…`)."""
    if not isinstance(paths.lake, Path):
        raise UserError(
            f"forget and export do not work on an object-store home yet ({paths.home}): "
            "see README, Scaling out"
        )
    return paths.lake


def tombstone_hash(key: bytes, tenant_id: str, kind: str, value: str) -> str:
    """HMAC-SHA256 (the home's PII key) of a tombstoned identifier, in its own domain so that it
    never equals the pseudonym packs carry for the same id: a tombstone names nobody."""
    message = f"erasure\x00{kind}\x00{tenant_id}\x00{value}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def line_hash(key: bytes, raw: str) -> str:
    """A tombstoned raw line: keyed, without a tenant (the line may not name one readably)."""
    return tombstone_hash(key, "", "line", raw)


def check_request(tenant_id: str, contact_id: str) -> None:
    if not re.fullmatch(TENANT_ID_PATTERN, tenant_id or ""):
        raise UserError(f"--tenant {tenant_id!r} is not a tenant id ({TENANT_ID_PATTERN})")
    if not contact_id or not contact_id.strip():
        raise UserError("--contact must name the person (their contact id)")


# --- who the person is in the data ------------------------------------------------------------


@dataclass
class Subject:
    """One person of one tenant as the data holds them: their events (by raw id in the lake),
    their ids and texts, and what finds them in derived tables, caches and packs (`needles`)."""

    tenant_id: str
    contact_id: str
    events: pl.DataFrame
    quarantined: pl.DataFrame
    needles: Needles
    texts: frozenset[str] = frozenset()

    @property
    def event_ids(self) -> list[str]:
        return sorted(self.events["event_id"].to_list())

    @property
    def had_training_data(self) -> bool:
        """Whether their interactions or feedback could be in a DPO policy's train set (pairs and
        SFT examples come from those; memory statements never reach one)."""
        kinds = set(self.events["event_type"].to_list())
        return bool(kinds & {EventType.INTERACTION.value, EventType.FEEDBACK.value})


def _their_events(events: pl.DataFrame, contact_id: str) -> pl.DataFrame:
    """Events where they are the contact or the user, feedback about those events and
    regenerations of them (closed over a few rounds: a chain is short)."""
    mine = (pl.col("contact_id") == contact_id) | (pl.col("user_id") == contact_id)
    theirs = events.filter(mine.fill_null(False))
    for _ in range(4):
        ids = theirs["event_id"].implode()
        linked = (pl.col("target_id").is_in(ids) | pl.col("parent_event_id").is_in(ids)).fill_null(
            False
        )
        grown = events.filter(mine.fill_null(False) | linked)
        if grown.height == theirs.height:
            break
        theirs = grown
    return theirs


def json_field(raw: pl.Expr, name: str) -> pl.Expr:
    """A string field read off a raw JSON line's text (for lines that failed the contract)."""
    return raw.str.extract(_JSON_ID.format(field=name), 1)


def _their_quarantine(quarantine: pl.DataFrame, tenant_id: str, contact_id: str) -> pl.DataFrame:
    """Quarantined lines of theirs: the raw JSON names them as contact or user (a line that failed
    the contract is never parsed; the field is read off its text)."""
    raw = pl.col("raw")
    named = (json_field(raw, "contact_id") == contact_id) | (
        json_field(raw, "user_id") == contact_id
    )
    tenant = (json_field(raw, "tenant_id") == tenant_id) | (pl.col("tenant_id") == tenant_id)
    return quarantine.filter((named & tenant).fill_null(False))


def _quarantine_texts(lines: pl.DataFrame) -> set[str]:
    """The raw lines and the text fields inside them (where the JSON parses)."""
    texts: set[str] = set()
    for raw in lines["raw"].drop_nulls().to_list():
        texts.add(raw)
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        if isinstance(value, dict):
            texts.update(v for k, v in value.items() if k in TEXT_FIELDS and isinstance(v, str))
    return texts


def _texts(events: pl.DataFrame) -> set[str]:
    columns = [c for c in TEXT_FIELDS if c in events.columns]
    if not columns or events.is_empty():
        return set()
    values = events.select(pl.concat_list(pl.col(columns).cast(pl.String)).alias("t")).explode("t")
    return set(values["t"].drop_nulls().to_list())


def _normalised(text: str) -> str:
    return " ".join(text.split())


def _fragments(candidates: Iterable[str], others: set[str]) -> tuple[str, ...]:
    """Prefixes of their (whitespace-normalised) texts to look for inside other texts, e.g. a
    template quoting a corrected answer (quotes are normalised and cut). A prefix that also
    starts someone else's text is replaced by the whole text; a text someone else's holds, by
    nothing (the person's rows are still found by id)."""
    wanted: dict[str, str] = {}
    for text in candidates:
        whole = _normalised(text)
        if len(whole) >= MIN_FRAGMENT_CHARS:
            wanted[whole] = whole[:FRAGMENT_CHARS]
    if not wanted:
        return ()
    pool = pl.Series([_normalised(t) for t in others], dtype=pl.String)
    hit: set[str] = set()
    if len(pool):
        patterns = sorted(set(wanted.values()) | set(wanted))
        found = pool.str.extract_many(patterns, overlapping=True)
        hit = {p for row in found.to_list() for p in row or []}
    chosen = set()
    for whole, prefix in wanted.items():
        if prefix not in hit:
            chosen.add(prefix)
        elif whole not in hit:
            chosen.add(whole)
    return tuple(sorted(chosen))


def _cached_redactions(paths: Paths, hashes: set[str]) -> set[str]:
    """What packs and the analytics snapshot hold for their texts: their redacted forms, read from
    the redaction cache (every detector version's) by the keyed hash of the text."""
    parts = sorted((_lake_dir(paths) / "pii_cache").glob("**/part-*.parquet"))
    if not parts or not hashes:
        return set()
    found = (
        pl.scan_parquet(parts)
        .filter(pl.col("text_hash").is_in(list(hashes)))
        .select("redacted")
        .collect()
    )
    return set(found["redacted"].drop_nulls().to_list())


def _embedding_hashes(texts: set[str], others: set[str]) -> set[str]:
    """Embedding-cache keys (sha256 of the normalised text) of texts only they had."""
    from pipeline.embed import normalise_text

    def keys(values: set[str]) -> set[str]:
        frame = pl.DataFrame({"t": list(values)}, schema={"t": pl.String})
        return set(frame.select(normalise_text(pl.col("t")))["t"].to_list())

    return {hashlib.sha256(t.encode()).hexdigest() for t in keys(texts) - keys(others)}


def find_subject(paths: Paths, tenant_id: str, contact_id: str, key: bytes) -> Subject:
    """Everything that identifies one person's data, from their raw id in the lake."""
    lake = Lake(paths)
    events = lake.read("events").collect() if lake.exists("events") else pl.DataFrame()
    if events.is_empty():
        events = pl.DataFrame(
            schema={
                c: pl.String
                for c in ("tenant_id", "event_id", "event_type", "contact_id", "user_id")
            }
        )
    for column in ("user_id", "target_id", "parent_event_id"):
        if column not in events.columns:
            events = events.with_columns(pl.lit(None, pl.String).alias(column))
    in_tenant = events.filter(pl.col("tenant_id") == tenant_id)
    theirs = _their_events(in_tenant, contact_id)
    others = events.join(
        theirs.select("tenant_id", "event_id"), on=["tenant_id", "event_id"], how="anti"
    )
    quarantine = (
        lake.read("quarantine").collect()
        if lake.exists("quarantine")
        else pl.DataFrame(schema=QUARANTINE_SCHEMA)
    )
    quarantined = _their_quarantine(quarantine, tenant_id, contact_id)
    other_texts = _texts(others)
    texts = (_texts(theirs) | _quarantine_texts(quarantined)) - other_texts
    keyed = {hmac.new(key, t.encode(), hashlib.sha256).hexdigest() for t in texts}
    redacted = _cached_redactions(paths, keyed) - other_texts
    ids = {contact_id, *theirs["event_id"].to_list()}
    pseudonyms = {pseudonym(key, tenant_id, i) for i in ids}
    needles = Needles(
        tenant_id,
        ids=frozenset(ids | pseudonyms),
        texts=frozenset(texts | redacted),
        fragments=_fragments(texts | redacted, other_texts),
        hashes=frozenset(keyed | _embedding_hashes(texts, other_texts)),
        global_ids=frozenset({contact_id, pseudonym(key, tenant_id, contact_id)}),
    )
    # Every quarantined line that mentions them, also those no field reader could attribute.
    quarantined = pl.concat(
        [quarantined, scrub_frame(quarantine, needles).removed], how="vertical_relaxed"
    ).unique(["load_date", "file", "line_no"], keep="first", maintain_order=True)
    return Subject(tenant_id, contact_id, theirs, quarantined, needles, frozenset(texts))


# --- tombstones -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tombstones:
    """The erased identifiers, as keyed hashes per tenant: what ingest refuses to bring back."""

    key: bytes
    contacts: frozenset[tuple[str, str]] = frozenset()  # (tenant_id, subject_hash)
    events: frozenset[tuple[str, str]] = frozenset()
    # Hashes of their quarantined raw lines, whatever tenant the line names (one that names the
    # person in a form no field reader finds, e.g. JSON inside a JSON string, still stays out).
    lines: frozenset[str] = frozenset()

    @classmethod
    def load(cls, paths: Paths) -> Tombstones:
        path = paths.table(TOMBSTONES)
        key = pii_key(paths.home)
        if not path.exists():
            return cls(key)
        frame = read_file(path)
        pairs = {
            kind: frozenset(
                frame.filter(pl.col("kind") == kind).select("tenant_id", "subject_hash").iter_rows()
            )
            for kind in ("contact", "event")
        }
        lines = frozenset(frame.filter(pl.col("kind") == "line")["subject_hash"].to_list())
        return cls(key, pairs["contact"], pairs["event"], lines)

    def __bool__(self) -> bool:
        return bool(self.contacts or self.events or self.lines)

    def line_hits(self, raw: pl.Series) -> pl.Series:
        """Per raw line: is it one of the erased quarantined lines."""
        return pl.Series(
            "erased",
            [
                bool(self.lines) and line is not None and line_hash(self.key, line) in self.lines
                for line in raw.to_list()
            ],
            dtype=pl.Boolean,
        )

    def erased(self, tenant_id: str, contact_id: str) -> bool:
        return (
            tenant_id,
            tombstone_hash(self.key, tenant_id, "contact", contact_id),
        ) in self.contacts

    def _hits(self, frame: pl.DataFrame, column: str, kind: str) -> pl.Series:
        known = self.contacts if kind == "contact" else self.events
        tenants = {t for t, _ in known}
        pairs = frame.select(pl.col("tenant_id").cast(pl.String), pl.col(column).cast(pl.String))
        hits = [
            tenant in tenants
            and value is not None
            and (tenant, tombstone_hash(self.key, tenant, kind, value)) in known
            for tenant, value in pairs.iter_rows()
        ]
        return pl.Series(column, hits, dtype=pl.Boolean)

    def matches(
        self, frame: pl.DataFrame, contact_columns: Iterable[str], event_columns: Iterable[str]
    ) -> pl.Series:
        """Per row: does one of the columns hold an erased identifier of the row's tenant."""
        found = pl.Series("erased", [False] * frame.height, dtype=pl.Boolean)
        if not self or frame.is_empty():
            return found
        for column in contact_columns:
            if column in frame.columns:
                found = found | self._hits(frame, column, "contact")
        for column in event_columns:
            if column in frame.columns:
                found = found | self._hits(frame, column, "event")
        return found


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


# --- the lake ---------------------------------------------------------------------------------


def erased_quarantine_rows(
    rows: pl.DataFrame, load_date: date | None, file: str, line: str
) -> pl.DataFrame:
    """What stays of a removed line: where it was and why it is gone, nothing of what it said —
    so every run's `lines read = accepted + duplicates + quarantined` still holds."""
    return rows.select(
        pl.lit(load_date, pl.Date).alias("load_date"),
        pl.col(file).cast(pl.String).alias("file"),
        pl.col(line).cast(pl.Int64).alias("line_no"),
        pl.lit(Reason.ERASED_CONTACT.value).alias("reason"),
        pl.lit(None, pl.String).alias("raw"),
        pl.lit(None, pl.Binary).alias("raw_bytes"),
        pl.col("tenant_id").cast(pl.String),
        pl.lit(None, pl.String).alias("event_id"),
    )


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
        read_file(quarantine_path)
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
    for path in sorted(_lake_dir(paths).rglob("*.parquet")):
        table = path.relative_to(_lake_dir(paths)).parts[0]
        if table in (*INGEST_TABLES, TOMBSTONES, POLICY_WITHDRAWALS) or path.name.startswith("."):
            continue
        scrubbed = scrub_frame(pl.read_parquet(path), needles)
        if scrubbed.changed:
            write_parquet_atomic(scrubbed.frame, path)
            add(table, scrubbed.removed.height)
            add(f"{table}:items", scrubbed.stripped)
    return counts


def _lake_text_hashes(paths: Paths, key: bytes) -> set[str]:
    """Keyed hashes of every text (and list item) the lake holds outside its caches: the texts a
    pack or the analytics snapshot can still ask the redaction cache for."""
    hashes: set[str] = set()
    for path in sorted(_lake_dir(paths).rglob("*.parquet")):
        if path.relative_to(_lake_dir(paths)).parts[0] in CACHES or path.name.startswith("."):
            continue
        frame = pl.read_parquet(path)
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
    parts = sorted((_lake_dir(paths) / "pii_cache").glob("**/part-*.parquet"))
    if not parts:
        return 0
    live = list(_lake_text_hashes(paths, key))
    dropped = 0
    for part in parts:
        frame = pl.read_parquet(part)
        kept = frame.filter(pl.col("text_hash").is_in(live))
        if kept.height < frame.height:
            dropped += frame.height - kept.height
            write_parquet_atomic(kept, part)
    return dropped


# --- models, warehouse, snapshot --------------------------------------------------------------


def withdraw_policies(paths: Paths, subject: Subject, now: datetime) -> list[str]:
    """Delete every DPO policy their data may have trained (the tenant's and a pooled one): weights,
    tokenizer (trained on the tenant's texts) and frozen eval pairs; record the withdrawal. The
    next night trains a new policy without them (no saved policy is left to reuse)."""
    from pipeline.dpo import POOLED_TENANT, RUN_FILE

    if not subject.had_training_data or not paths.models.is_dir():
        return []
    withdrawn = []
    for folder in sorted(p for p in paths.models.iterdir() if p.is_dir()):
        run = folder / RUN_FILE
        if not run.is_file():
            continue
        try:
            owner = json.loads(run.read_text()).get("tenant_id")
        except ValueError:
            owner = None
        if owner in (subject.tenant_id, POOLED_TENANT):
            shutil.rmtree(folder)
            withdrawn.append(folder.name)
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


# --- the whole erasure ------------------------------------------------------------------------


@dataclass
class ForgetReport:
    tenant_id: str
    events: int  # their events found in the lake
    quarantined: int  # their quarantined lines
    new_tombstones: int
    removed: dict[str, int] = field(default_factory=dict)  # lake rows per table
    packs: dict[str, str] = field(default_factory=dict)  # old version -> rewritten version
    policies: list[str] = field(default_factory=list)  # DPO policies withdrawn
    warehouse_tables: int = 0
    analytics: bool = False
    landing: dict[str, int] = field(default_factory=dict)  # landing file -> lines removed
    history: dict[str, int] = field(default_factory=dict)  # Dagster file -> replacements
    seconds: float = 0.0

    def lines(self) -> list[str]:
        removed = ", ".join(f"{k} {v}" for k, v in sorted(self.removed.items())) or "none"
        rewritten = ", ".join(f"{a} -> {b}" for a, b in self.packs.items()) or "none"
        return [
            f"found {self.events} events and {self.quarantined} quarantined lines of the person",
            f"lake rows removed: {removed}",
            f"pack versions rewritten: {rewritten}",
            f"DPO policies withdrawn (retrained next night): {', '.join(self.policies) or 'none'}",
            f"warehouse rebuilt ({self.warehouse_tables} tables); analytics snapshot "
            + ("rebuilt" if self.analytics else "absent"),
            f"landing lines removed: {sum(self.landing.values())} in {len(self.landing)} files; "
            f"Dagster run history scrubbed: {sum(self.history.values())} replacements in "
            f"{len(self.history)} files",
            f"tombstone recorded ({self.new_tombstones} new hashes) in {self.seconds:.1f}s",
        ]


def reachable_packs(paths: Paths) -> None:
    """An erasure rewrites the packs last: refuse before changing anything when they cannot be
    reached (an object store that is down, wrong credentials), rather than erase half."""
    try:
        paths.packs.is_dir()
    except OSError as error:
        reason = (str(error).splitlines() or [type(error).__name__])[0][:200]
        raise UserError(
            f"packs at {paths.packs} are unreachable ({reason}): nothing was changed"
        ) from None


def forget(
    paths: Paths,
    tenant_id: str,
    contact_id: str,
    source: str = "cli",
    now: datetime | None = None,
    snapshot: bool = True,
) -> ForgetReport:
    """Erase one person of one tenant everywhere under the home (call under the home lock).

    Order: tombstone first (nothing can come back from here on), then the lake (source of
    truth), models, packs, and last the warehouse and analytics snapshot rebuilt from the lake.
    Running it again finishes an erasure a crash interrupted and changes nothing otherwise."""
    from pipeline.pack.erase import erase_from_packs

    check_request(tenant_id, contact_id)
    _lake_dir(paths)
    reachable_packs(paths)
    began = time.perf_counter()
    now = now or datetime.now(UTC)
    key = pii_key(paths.home)
    subject = find_subject(paths, tenant_id, contact_id, key)
    report = ForgetReport(
        tenant_id,
        subject.events.height,
        subject.quarantined.height,
        record_tombstone(paths, key, subject, source, now),
    )
    report.removed = scrub_lake(paths, subject.needles)
    report.landing = scrub_landing(paths.landing, subject.needles)
    report.history = scrub_dagster_history(paths.local / "dagster", subject.needles)
    swept = sweep_redaction_cache(paths, key)
    if swept:
        report.removed["pii_cache:unused"] = swept
    report.policies = withdraw_policies(paths, subject, now)
    # Local or on an object store (MEMORYPACK_PACKS=s3://…): every kept version is rewritten.
    report.packs = erase_from_packs(paths.packs / tenant_id, subject.needles)
    if paths.packs.is_dir() and (paths.lake / "pack_versions").exists():
        from pipeline.analytics import pack_versions_frame

        Lake(paths).write("pack_versions", pack_versions_frame(paths))
    report.warehouse_tables = len(rebuild_warehouse(paths))
    if snapshot and paths.analytics.exists():
        from pipeline.analytics import build_snapshot

        build_snapshot(paths)
        report.analytics = True
    report.seconds = time.perf_counter() - began
    return report


# --- export -----------------------------------------------------------------------------------


def _records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts; vectors are left out (numbers derived from texts listed here)."""
    vectors = [
        n for n, t in frame.schema.items() if isinstance(t, pl.Array) or t == pl.List(pl.Float32())
    ]
    return frame.drop(vectors).to_dicts()


def export(paths: Paths, tenant_id: str, contact_id: str) -> dict[str, Any]:
    """Everything held about one person: their events and quarantined lines, every derived lake
    row that mentions them, and the rows of every kept pack version (where their ids are
    pseudonyms). Nothing is changed."""
    from pipeline.pack.erase import pack_mentions

    check_request(tenant_id, contact_id)
    _lake_dir(paths)
    key = pii_key(paths.home)
    tombstones = Tombstones.load(paths)
    subject = find_subject(paths, tenant_id, contact_id, key)
    lake: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(_lake_dir(paths).rglob("*.parquet")):
        table = path.relative_to(_lake_dir(paths)).parts[0]
        if table in (*INGEST_TABLES, TOMBSTONES, POLICY_WITHDRAWALS) or path.name.startswith("."):
            continue
        removed = scrub_frame(pl.read_parquet(path), subject.needles).removed
        if removed.height:
            lake.setdefault(table, []).extend(_records(removed))
    return {
        "tenant_id": tenant_id,
        "contact_id": contact_id,
        "exported_at": datetime.now(UTC).isoformat(),
        "erased": tombstones.erased(tenant_id, contact_id),
        "events": _records(
            subject.events.sort("ts") if "ts" in subject.events.columns else subject.events
        ),
        "quarantined_lines": _records(subject.quarantined.drop("raw_bytes", strict=False)),
        "derived": lake,
        "packs": pack_mentions(paths.packs / tenant_id, subject.needles),
        "omitted": "embedding and preference vectors (numbers computed from the texts above)",
    }


def write_export(document: dict[str, Any], out: Path | None) -> None:
    text = json.dumps(document, indent=2, default=str, ensure_ascii=False) + "\n"
    if out is None:
        print(text, end="")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, 0o600)  # personal data: readable by the operator only
    os.replace(tmp, out)
