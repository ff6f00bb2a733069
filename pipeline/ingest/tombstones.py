"""The tombstones, keyed hashes of what ingest must never bring back (erasure writes them:
`pipeline.erasure.tombstones`), and what stays of a line ingest drops for them."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date

import polars as pl

from pipeline import tables
from pipeline.config import Paths
from pipeline.ingest.contracts import Reason
from pipeline.pii import pii_key
from pipeline.storage.lake import read_file

# Where tombstones live: a lake table only the ingest and this module read (not in the warehouse:
# its hashes are keyed, but no analyst needs them).
TOMBSTONES = "tombstones"
TOMBSTONE_SCHEMA = tables.schema(TOMBSTONES)


def tombstone_hash(key: bytes, tenant_id: str, kind: str, value: str) -> str:
    """HMAC-SHA256 (the home's PII key) of a tombstoned identifier, in its own domain so that it
    never equals the pseudonym packs carry for the same id: a tombstone names nobody."""
    message = f"erasure\x00{kind}\x00{tenant_id}\x00{value}".encode()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def line_hash(key: bytes, raw: str) -> str:
    """A tombstoned raw line: keyed, without a tenant (the line may not name one readably)."""
    return tombstone_hash(key, "", "line", raw)


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


def erased_quarantine_rows(
    rows: pl.DataFrame, load_date: date | None, file: str, line: str
) -> pl.DataFrame:
    """What stays of a removed line: where it was and why it is gone, nothing of what it said —
    so every run's `lines read = accepted + duplicates + quarantined` still holds (a counted row
    keeps how many lines it stands for)."""
    number = pl.col(line).cast(pl.Int64)
    return rows.select(
        pl.lit(load_date, pl.Date).alias("load_date"),
        pl.col(file).cast(pl.String).alias("file"),
        number.alias("line_no"),
        pl.lit(Reason.ERASED_CONTACT.value).alias("reason"),
        pl.lit(None, pl.String).alias("raw"),
        pl.lit(None, pl.Binary).alias("raw_bytes"),
        pl.col("tenant_id").cast(pl.String),
        pl.lit(None, pl.String).alias("event_id"),
        (pl.col("lines") if "lines" in rows.columns else pl.lit(1, pl.Int64)).alias("lines"),
        (pl.col("line_nos") if "line_nos" in rows.columns else pl.concat_list(number)).alias(
            "line_nos"
        ),
    )


_JSON_ID = r'"{field}"\s*:\s*"((?:[^"\\]|\\.)*)"'


def json_field(raw: pl.Expr, name: str) -> pl.Expr:
    """A string field read off a raw JSON line's text (for lines that failed the contract)."""
    return raw.str.extract(_JSON_ID.format(field=name), 1)
