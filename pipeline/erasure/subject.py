"""Erasure, step 1: find one person in a tenant's data (events, quarantined lines, texts, caches)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from pipeline import tables
from pipeline.config import Paths
from pipeline.erasure.scrub import (
    FRAGMENT_CHARS,
    MIN_FRAGMENT_CHARS,
    Needles,
    scrub_frame,
)
from pipeline.errors import UserError
from pipeline.ingest.contracts import QUARANTINE_SCHEMA, EventType
from pipeline.ingest.rawjson import read_object
from pipeline.ingest.tenant_ids import check_tenant_id, is_tenant_id, shown
from pipeline.ingest.tombstones import json_field
from pipeline.pii import pseudonym
from pipeline.storage.lake import Lake, parquet_files, scan_files

# Free-text fields of an event: what the person wrote or was answered.
TEXT_FIELDS = ("input", "output", "summary", "comment", "corrected_output", "content", "metadata")


def check_request(tenant_id: str, contact_id: str) -> None:
    check_tenant_id(tenant_id or "")
    if not contact_id or not contact_id.strip():
        raise UserError("--contact must name the person (their contact id)")
    try:
        contact_id.encode()
    except UnicodeEncodeError:  # bytes no UTF-8 decodes (the shell passes them as surrogates)
        raise UserError(f"--contact {shown(contact_id)} is not UTF-8 text") from None


def home_tenants(paths: Paths) -> list[str]:
    """The tenants the home holds anything of: rows in the ingest tables (accepted or
    quarantined), a folder in a table laid out by tenant, or a packs folder."""
    from pipeline.publish.store import tenant_folders

    lake = Lake(paths)
    found = {folder.name for folder in tenant_folders(paths.packs)}
    tables = [p.name for p in paths.lake.iterdir() if p.is_dir()] if paths.lake.is_dir() else []
    for table in tables:
        if table in ("events", "quarantine"):
            if lake.exists(table):
                column = lake.read(table).select("tenant_id").unique().collect()["tenant_id"]
                found |= set(column.drop_nulls().to_list())
        else:
            found |= set(lake.tenants(table))
    return sorted(t for t in found if is_tenant_id(t))  # a quarantined line's bad id is none


def check_known_tenant(paths: Paths, tenant_id: str) -> None:
    """A request names a tenant of this home: an id of none would find only lines no tenant
    claims, and another tenant's caches and run history."""
    check_tenant_id(tenant_id)
    known = home_tenants(paths)
    if tenant_id not in known:
        listed = ", ".join(known[:20]) + (", …" if len(known) > 20 else "") or "none"
        raise UserError(f"no data for tenant {tenant_id!r} under {paths.home} (tenants: {listed})")


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
    """The raw lines and the text fields inside them (where the bounded reader reads the JSON:
    a line too deep or too big stays whole, `pipeline.ingest.rawjson`)."""
    texts: set[str] = set()
    for raw in lines["raw"].drop_nulls().to_list():
        texts.add(raw)
        value = read_object(raw)
        if value is not None:
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
    parts = [path for _, path in parquet_files(paths.lake / "pii_cache", "**/part-*.parquet")]
    if not parts or not hashes:
        return set()
    found = (
        scan_files(parts)
        .filter(pl.col("text_hash").is_in(list(hashes)))
        .select("redacted")
        .collect()
    )
    return set(found["redacted"].drop_nulls().to_list())


def _embedding_hashes(texts: set[str], others: set[str]) -> set[str]:
    """Embedding-cache keys (sha256 of the normalised text) of texts only they had."""
    from pipeline.semantic.embed import normalise_text

    def keys(values: set[str]) -> set[str]:
        frame = pl.DataFrame({"t": list(values)}, schema={"t": pl.String})
        return set(frame.select(normalise_text(pl.col("t")))["t"].to_list())

    return {hashlib.sha256(t.encode()).hexdigest() for t in keys(texts) - keys(others)}


def _embedded_hashes(lake: Lake, tenant_id: str, event_ids: set[str]) -> set[str]:
    """Embedding-cache keys memory_embeddings holds for their memories that no other memory has:
    those of their redacted texts, which none of their texts hashes to."""
    if not lake.exists("memory_embeddings"):
        return set()
    rows = lake.read("memory_embeddings").select("tenant_id", "memory_id", "text_hash").collect()
    mine = (pl.col("tenant_id") == tenant_id) & pl.col("memory_id").is_in(sorted(event_ids))
    return set(rows.filter(mine)["text_hash"].to_list()) - set(
        rows.filter(~mine)["text_hash"].to_list()
    )


def find_subject(paths: Paths, tenant_id: str, contact_id: str, key: bytes) -> Subject:
    """Everything that identifies one person's data, from their raw id in the lake."""
    lake = Lake(paths)
    events = lake.read("events").collect() if lake.exists("events") else pl.DataFrame()
    if events.is_empty():
        events = tables.empty("events")
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
        hashes=frozenset(
            keyed
            | _embedding_hashes(texts, other_texts)
            | _embedded_hashes(lake, tenant_id, set(theirs["event_id"].to_list()))
        ),
        global_ids=frozenset({contact_id, pseudonym(key, tenant_id, contact_id)}),
    )
    # Every quarantined line that mentions them, also those no field reader could attribute.
    quarantined = pl.concat(
        [quarantined, scrub_frame(quarantine, needles).removed], how="vertical_relaxed"
    ).unique(["load_date", "file", "line_no"], keep="first", maintain_order=True)
    return Subject(tenant_id, contact_id, theirs, quarantined, needles, frozenset(texts))
