"""The cached redactor over frames: text columns redacted (each distinct text analysed once, the
result kept in the lake), identifier columns pseudonymized per tenant."""

from __future__ import annotations

import hmac
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import polars as pl

from memorypack.fs import Location
from pipeline import tables
from pipeline.config import TENANT_COLUMN, Paths
from pipeline.pii.detect import analyse
from pipeline.pii.keys import pii_key, pseudonym
from pipeline.pii.rules import detector_version
from pipeline.storage import Lake
from pipeline.vectors import PartsCache

IDENTIFIERS_KEY = (
    "+identifiers"  # the cache folder of identifiers: `<detector version>+identifiers`
)


class RedactionCache(PartsCache):
    """`<lake>/pii_cache/<detector version>/part-*.parquet`: text_hash (a keyed hash of the exact
    text), redacted, kinds; identifiers' findings in `<detector version>+identifiers/` (no
    redacted text). Append-only like the embedding cache; a new detector version starts
    a new folder, so nothing redacted by an older detector is ever served."""

    def __init__(self, root: Location, also: Sequence[Location] = ()) -> None:
        super().__init__(root)
        self.also = [PartsCache(other) for other in also]  # read, never written

    def lookup(self, version: str, hashes: pl.Series) -> pl.DataFrame:
        scans = [s for s in (c.scan(version) for c in (self, *self.also)) if s is not None]
        if not scans:
            return pl.DataFrame(schema=_CACHE_SCHEMA)
        return (
            pl.concat(scans, how="diagonal_relaxed")
            .filter(pl.col("text_hash").is_in(hashes.implode()))
            .unique("text_hash", keep="first")
            .collect()
        )


_CACHE_SCHEMA = tables.schema("pii_cache")


@dataclass
class Redactor:
    """Redacts text columns (cached by text) and pseudonymizes identifier columns of one tenant.

    `cache=None` analyses every text (tests, one-off calls). Fresh analyses are kept until
    `flush()` writes them to the cache, one part for texts and one for identifiers.
    """

    key: bytes
    cache: RedactionCache | None = None
    version: str = field(default_factory=detector_version)
    fresh: dict[str, list[pl.DataFrame]] = field(default_factory=dict)  # cache key -> parts
    analysed: int = 0  # distinct texts analysed (not served by the cache) since creation
    ids_analysed: int = 0  # distinct identifiers analysed (not served by the cache)
    served: int = 0  # distinct texts served by the cache
    seconds: float = 0.0  # wall time spent redacting frames and flushing the cache

    @classmethod
    def for_home(cls, paths: Paths) -> Redactor:
        """With the home's key and the redaction cache of `paths`' view: a tenant's own, or for
        the whole home (the analytics snapshot) the home's, which also reads every tenant's
        (a text a pack redacted is not analysed again; the key and detector are the same)."""
        cache = paths.pii_cache
        tenants = [] if paths.tenant is not None else Lake(paths).tenants("pii_cache")
        also = [cache / f"{TENANT_COLUMN}={tenant}" for tenant in tenants]
        return cls(pii_key(paths.home), RedactionCache(cache, also))

    def _hash(self, texts: pl.Series) -> pl.Series:
        return pl.Series(
            "text_hash",
            # hmac.digest: the same HMAC-SHA256 as hmac.new(…).hexdigest(), in one C call (a night
            # hashes every distinct text and id of the tenant, ~230,000 at 100,000 memories).
            [hmac.digest(self.key, t.encode(), "sha256").hex() for t in texts.to_list()],
            dtype=pl.String,
        )

    def _cache_key(self, ner: bool) -> str:
        """Texts and identifiers are analysed with different kinds (no NER on ids): each has its
        own folder, so an id's finding is never served for the same string met as free text."""
        return self.version if ner else self.version + IDENTIFIERS_KEY

    def _redactions(self, distinct: pl.Series, ner: bool) -> pl.DataFrame:
        """text, redacted, kinds for distinct non-null texts (identifiers: redacted is null, their
        pseudonym is computed per tenant from the value). Identifiers are cached too: every night
        packs every memory_id again, and an id like `i_00000042` costs the phone matcher as much
        as a sentence."""
        frame = pl.DataFrame({"text": distinct}).with_columns(self._hash(distinct))
        key = self._cache_key(ner)
        known = pl.DataFrame(schema=_CACHE_SCHEMA)
        for pending in self.fresh.get(key, []):
            known = pl.concat([known, pending])
        if self.cache is not None:
            known = pl.concat([known, self.cache.lookup(key, frame["text_hash"])])
        known = known.unique("text_hash", keep="first")
        missing = frame.join(known, on="text_hash", how="anti")
        if ner:
            self.served += frame.height - missing.height
        if missing.height:
            rows = analyse(missing["text"].to_list(), ner=ner)
            computed = missing.select("text_hash").with_columns(
                pl.Series("redacted", [r if ner else None for r, _ in rows], dtype=pl.String),
                pl.Series("kinds", [k for _, k in rows], dtype=pl.List(pl.String)),
            )
            if ner:
                self.analysed += computed.height
            else:
                self.ids_analysed += computed.height
            self.fresh.setdefault(key, []).append(computed)
            known = pl.concat([known, computed])
        return frame.join(known, on="text_hash", how="left")

    def flush(self) -> None:
        """Write the redactions computed since the last flush to the cache (one part per key)."""
        started = time.perf_counter()
        if self.cache is not None:
            for key, frames in self.fresh.items():
                if frames:
                    self.cache.append(key, pl.concat(frames).unique("text_hash"))
        self.fresh = {}
        self.seconds += time.perf_counter() - started

    def series(
        self, series: pl.Series, tenant_id: str | None = None
    ) -> tuple[pl.Series, Counter[str]]:
        """A String or List(String) column with PII redacted (tenant_id=None: free text) or, for
        an identifier column (tenant_id given), PII-looking values replaced by pseudonyms."""
        counts: Counter[str] = Counter()
        if series.dtype not in (pl.String, pl.List(pl.String)):
            return series, counts
        is_list = series.dtype == pl.List(pl.String)
        flat = series.explode() if is_list else series
        distinct = flat.drop_nulls().unique(maintain_order=True)
        if distinct.is_empty():
            return series, counts
        table = self._redactions(distinct, ner=tenant_id is None)
        changed = table.filter(pl.col("kinds").list.len() > 0)
        if changed.is_empty():
            return series, counts
        if tenant_id is not None:
            changed = changed.with_columns(
                pl.Series(
                    "redacted",
                    [pseudonym(self.key, tenant_id, v) for v in changed["text"].to_list()],
                    dtype=pl.String,
                )
            )
        occurrences = flat.value_counts(name="n").rename({flat.name: "text"})
        for kinds, n in changed.join(occurrences, on="text").select("kinds", "n").iter_rows():
            for kind in kinds:
                counts[kind] += n
        mapping = dict(zip(changed["text"].to_list(), changed["redacted"].to_list(), strict=True))
        if is_list:
            out = series.list.eval(pl.element().replace(mapping))
        else:
            out = series.replace(mapping)
        return out.alias(series.name), counts

    def frame(
        self, frame: pl.DataFrame, identifiers: Iterable[str] = (), keep: Iterable[str] = ()
    ) -> tuple[pl.DataFrame, Counter[str]]:
        """Redact every String / List(String) column; `identifiers` get pseudonyms instead (per
        the frame's tenant_id) and `keep` (enumerations such as kind or status) stay as they are.
        """
        started = time.perf_counter()
        try:
            return self._frame(frame, set(identifiers), set(keep))
        finally:
            self.seconds += time.perf_counter() - started

    def _frame(
        self, frame: pl.DataFrame, identifiers: set[str], keep: set[str]
    ) -> tuple[pl.DataFrame, Counter[str]]:
        tenants = frame["tenant_id"].unique().to_list() if "tenant_id" in frame.columns else []
        if len(tenants) > 1:  # pseudonyms are per tenant: one tenant at a time, order kept
            counts: Counter[str] = Counter()
            parts = []
            for part in frame.with_row_index("_row").partition_by("tenant_id"):
                part, found = self._frame(part, identifiers, keep | {"_row"})
                parts.append(part)
                counts.update(found)
            return pl.concat(parts).sort("_row").drop("_row"), counts
        tenant = str(tenants[0]) if tenants else ""
        counts = Counter()
        columns = []
        for column in frame.columns:
            series = frame[column]
            if column not in keep and column != "tenant_id":
                series, found = self.series(series, tenant if column in identifiers else None)
                counts.update(found)
            columns.append(series)
        return pl.DataFrame(columns), counts
