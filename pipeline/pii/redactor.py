"""The cached redactor over frames: text columns redacted (each distinct text analysed once, the
result kept in the lake), identifier columns pseudonymized per tenant."""

from __future__ import annotations

import hmac
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import polars as pl

from memorypack.fs import Location
from pipeline import tables
from pipeline.config import TENANT_COLUMN, Paths
from pipeline.pii import rules
from pipeline.pii.detect import AnalysisPool
from pipeline.pii.guard import find_pii, guard_version
from pipeline.pii.keys import pii_key, pseudonym
from pipeline.pii.lexicon import names_a_person
from pipeline.pii.names import TenantNames
from pipeline.pii.rules import detector_version
from pipeline.storage.lake import Lake, read_file, write_parquet_atomic
from pipeline.storage.vectors import PartsCache

# The cache folder of identifiers: `<detector version>+<guard version>+identifiers3`. 2: plain ids
# are no longer cached (`plain_identifiers`); the first folder held every id (3.7M at 1M
# interactions), which each lookup scanned. 3: ids that name a person by their words
# (`lexicon.names_a_person`: "jane_doe") are pseudonymized. A home's earlier folders are no
# longer read (they may be deleted).
IDENTIFIERS_KEY = "+identifiers3"
# The tenant's names (pipeline.pii.names), `<lake>/pii_names/tenant_id=<id>/names.parquet`:
# written with each pack, read by the analyst snapshot, which redacts the tenant's rows as its
# pack's.
NAMES_FILE = "names.parquet"


class RedactionCache(PartsCache):
    """`<lake>/pii_cache/<detector version>/part-*.parquet`: text_hash (a keyed hash of the exact
    text), redacted, kinds; identifiers' findings in
    `<detector version>+<guard version>+identifiers2/` (no redacted text). Append-only like the embedding cache; a new detector version starts
    a new folder, so nothing redacted by an older detector is ever served."""

    def __init__(self, root: Location, tenants: Mapping[str, Location] | None = None) -> None:
        super().__init__(root)
        # tenant -> its packs' cache: read, never written
        self.tenants = {t: PartsCache(folder) for t, folder in (tenants or {}).items()}

    def lookup(
        self, version: str, hashes: pl.Series, tenants: Sequence[str] | None = None
    ) -> pl.DataFrame:
        """The cached rows of `hashes`: from this cache and the caches of `tenants` (None: every
        tenant's). A text another tenant's pack redacted is then analysed again: the same result,
        and each lookup scans a tenant's cache, not the home's ~1M texts at 1M interactions."""
        chosen = self.tenants if tenants is None else [t for t in tenants if t in self.tenants]
        caches = [self, *(self.tenants[t] for t in chosen)]
        scans = [s for s in (c.scan(version) for c in caches) if s is not None]
        if not scans:
            return pl.DataFrame(schema=_CACHE_SCHEMA)
        return (
            pl.concat(scans, how="diagonal_relaxed")
            .filter(pl.col("text_hash").is_in(hashes.implode()))
            .unique("text_hash", keep="first")
            .collect()
        )


_CACHE_SCHEMA = tables.schema("pii_cache")
_TEXT_TYPES = (pl.String, pl.List(pl.String))


def _flat(series: pl.Series) -> pl.Series:
    """A String column, or the items of a List(String) one."""
    return series.explode() if series.dtype == pl.List(pl.String) else series


def _values(series: pl.Series) -> pl.Series:
    """The distinct non-null values of a String column or of the lists of a List(String) one."""
    return _flat(series).drop_nulls().unique(maintain_order=True).rename("text")


def plain_identifiers(values: pl.Series) -> pl.Series:
    """Which identifiers are plain (`rules.PLAIN_ID` matches the whole value), in one vectorised
    pass: they cannot hold PII (`detect.may_hold_pii`), so ids of these shapes are neither hashed, looked
    up in the cache nor analysed (millions a night in the snapshot parts, most of their ids)."""
    return values.str.contains(f"^(?:{rules.PLAIN_ID.pattern})$").fill_null(False)


def identifier_kinds(ids: list[str], rows: list[tuple[str, list[str]]]) -> list[list[str]]:
    """The kinds found in each identifier: by the redactor's detector (`rows`, its analysis of
    `ids`) or else by the publish guard's (pipeline.pii.guard), or a person its words name
    (`lexicon.names_a_person`: "jane_doe", "Bartholomew Quigley desk"). One rule for
    identifiers: an id either detector flags is pseudonymized, so the guard never finds one the
    redactor left (SPEC §5); what neither calls PII (`rules.phone_shape`: `ix-000394-153365`)
    stays."""
    return [
        kinds or list(find_pii(i)) or (["person"] if names_a_person(i) else [])
        for i, (_, kinds) in zip(ids, rows, strict=True)
    ]


@dataclass
class Redactor:
    """Redacts text columns (cached by text) and pseudonymizes identifier columns of one tenant.

    `cache=None` analyses every text (tests, one-off calls). Fresh analyses are kept until
    `flush()` writes them to the cache, one part for texts and one for identifiers. Texts the
    cache does not hold are analysed by `pool`: in this process, or split over worker processes
    (`for_home(workers=…)`) until `pool.close()`.
    """

    key: bytes
    cache: RedactionCache | None = None
    version: str = field(default_factory=detector_version)
    fresh: dict[str, list[pl.DataFrame]] = field(default_factory=dict)  # cache key -> parts
    analysed: int = 0  # distinct texts analysed (not served by the cache) since creation
    ids_analysed: int = 0  # distinct identifiers analysed (not served by the cache)
    served: int = 0  # distinct texts served by the cache
    seconds: float = 0.0  # wall time spent redacting frames and flushing the cache
    pool: AnalysisPool = field(default_factory=AnalysisPool)
    tenant: str | None = None  # the tenant whose cache this is; None: the home's (every tenant)
    names_root: Location | None = None  # where tenants' names are kept (`save_names`)

    @classmethod
    def for_home(cls, paths: Paths, workers: int = 1) -> Redactor:
        """With the home's key and the redaction cache of `paths`' view: a tenant's own, or for
        the whole home (the analytics snapshot) the home's, which also reads every tenant's
        (a text a pack redacted is not analysed again; the key and detector are the same)."""
        cache = paths.pii_cache
        tenants = [] if paths.tenant is not None else Lake(paths).tenants("pii_cache")
        packs = {tenant: cache / f"{TENANT_COLUMN}={tenant}" for tenant in tenants}
        return cls(
            pii_key(paths.home),
            RedactionCache(cache, packs),
            pool=AnalysisPool(workers),
            tenant=paths.tenant,
            names_root=paths.lake / "pii_names",
        )

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
        own folder, so an id's finding is never served for the same string met as free text.
        An identifier's findings also name the publish guard's detector (`identifier_kinds`)."""
        return self.version if ner else f"{self.version}+{guard_version()}{IDENTIFIERS_KEY}"

    def _redactions(
        self, distinct: pl.Series, ner: bool, tenants: Sequence[str] | None = None
    ) -> pl.DataFrame:
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
            known = pl.concat([known, self.cache.lookup(key, frame["text_hash"], tenants)])
        known = known.unique("text_hash", keep="first")
        missing = frame.join(known, on="text_hash", how="anti", maintain_order="left")
        if ner:
            self.served += frame.height - missing.height
        if missing.height:
            texts = missing["text"].to_list()
            rows = self.pool.analyse(texts, ner=ner)
            kinds = [k for _, k in rows] if ner else identifier_kinds(texts, rows)
            computed = missing.select("text_hash").with_columns(
                pl.Series("redacted", [r if ner else None for r, _ in rows], dtype=pl.String),
                pl.Series("kinds", kinds, dtype=pl.List(pl.String)),
            )
            if ner:
                self.analysed += computed.height
            else:
                self.ids_analysed += computed.height
            self.fresh.setdefault(key, []).append(computed)
            known = pl.concat([known, computed])
        return frame.join(known, on="text_hash", how="left")

    def known(self, key: str, texts: pl.Series) -> pl.Series:
        """Which of `texts` (distinct) the cache holds under `key`, by keyed hash: e.g. the texts
        the publish guard found clean (`remember`)."""
        if self.cache is None or texts.is_empty():
            return pl.Series("known", [False] * texts.len(), dtype=pl.Boolean)
        hashes = self._hash(texts)
        found = self.cache.lookup(key, hashes)["text_hash"]
        return hashes.is_in(found.implode()).alias("known")

    def remember(self, key: str, texts: pl.Series) -> None:
        """Keep `texts` in the cache under `key`, as values with nothing found in them."""
        if self.cache is None or texts.is_empty():
            return
        self.cache.append(
            key,
            pl.DataFrame({"text_hash": self._hash(texts)}).with_columns(
                redacted=pl.lit(None, pl.String), kinds=pl.lit([], pl.List(pl.String))
            ),
        )

    def _names_file(self, tenant: str) -> Location | None:
        """Where a tenant's names are kept (none for a redactor without a home)."""
        if self.names_root is None:
            return None
        return self.names_root / f"{TENANT_COLUMN}={tenant}" / NAMES_FILE

    def save_names(self, tenant: str, names: TenantNames) -> None:
        """Keep the names a tenant's pack spread, for the analyst snapshot (`names`)."""
        path = self._names_file(tenant)
        if path is not None:
            write_parquet_atomic(names.frame(), path)

    def names(self, tenant: str) -> TenantNames:
        """The names the tenant's last pack spread (none before its first pack)."""
        path = self._names_file(tenant)
        if path is None or not path.is_file():
            return TenantNames(frozenset())
        return TenantNames.of_frame(read_file(path))

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
        if series.dtype not in _TEXT_TYPES:
            return series, Counter()
        distinct = _values(series)
        if tenant_id is not None:
            distinct = distinct.filter(~plain_identifiers(distinct))
        if distinct.is_empty():
            return series, Counter()
        return self._apply(series, self._redactions(distinct, ner=tenant_id is None), tenant_id)

    def _apply(
        self, series: pl.Series, table: pl.DataFrame, tenant_id: str | None
    ) -> tuple[pl.Series, Counter[str]]:
        """`series` with the values `table` (`_redactions` of them, and maybe of others) found PII
        in replaced: by their redacted text, or for an identifier by its pseudonym."""
        counts: Counter[str] = Counter()
        occurrences = _flat(series).rename("text").value_counts(name="n")
        changed = table.filter(pl.col("kinds").list.len() > 0).join(occurrences, on="text")
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
        for kinds, n in changed.select("kinds", "n").iter_rows():
            for kind in kinds:
                counts[kind] += n
        mapping = dict(zip(changed["text"].to_list(), changed["redacted"].to_list(), strict=True))
        if series.dtype == pl.List(pl.String):
            out = series.list.eval(pl.element().replace(mapping))
        else:
            out = series.replace(mapping)
        return out.alias(series.name), counts

    def frame(
        self,
        frame: pl.DataFrame,
        identifiers: Iterable[str] = (),
        keep: Iterable[str] = (),
        findings: list[pl.DataFrame] | None = None,
    ) -> tuple[pl.DataFrame, Counter[str]]:
        """Redact every String / List(String) column; `identifiers` get pseudonyms instead (per
        the frame's tenant_id) and `keep` (enumerations such as kind or status) stay as they are.

        The free-text columns of every tenant are hashed and looked up in the cache together,
        once, and so are the identifier columns: a value's findings depend neither on its tenant
        nor on its column, and each lookup scans the cache (of the frame's tenants). `findings`
        gets the free texts' table (text, redacted, kinds), for the tenant's names
        (pipeline.pii.names)."""
        started = time.perf_counter()
        identifiers, kept = set(identifiers), set(keep) | {"tenant_id"}
        try:
            columns = [
                n for n, kind in frame.schema.items() if kind in _TEXT_TYPES and n not in kept
            ]
            tenants = _tenants(frame)
            counts: Counter[str] = Counter()
            for ids in (False, True):
                names = [name for name in columns if (name in identifiers) == ids]
                values = _distinct(frame, names)
                if ids:
                    values = values.filter(~plain_identifiers(values))
                if values.is_empty():
                    continue
                table = self._redactions(values, ner=not ids, tenants=tenants)
                if findings is not None and not ids:
                    findings.append(table.select("text", "redacted", "kinds"))
                if ids:
                    frame, found = self._pseudonymized(frame, names, table)
                else:
                    frame, found = self._redacted(frame, names, table, None)
                counts.update(found)
            return frame, counts
        finally:
            self.seconds += time.perf_counter() - started

    def _redacted(
        self, frame: pl.DataFrame, names: list[str], table: pl.DataFrame, tenant_id: str | None
    ) -> tuple[pl.DataFrame, Counter[str]]:
        """`frame` with columns `names` passed through `_apply` with `table`."""
        counts: Counter[str] = Counter()
        columns = []
        for name in names:
            column, found = self._apply(frame[name], table, tenant_id)
            columns.append(column)
            counts.update(found)
        return frame.with_columns(columns), counts

    def _pseudonymized(
        self, frame: pl.DataFrame, ids: list[str], table: pl.DataFrame
    ) -> tuple[pl.DataFrame, Counter[str]]:
        """The identifier columns `ids` pseudonymized where `table` found PII, per tenant."""
        if "tenant_id" not in frame.columns or frame["tenant_id"].n_unique() == 1:
            tenant = str(frame["tenant_id"][0]) if "tenant_id" in frame.columns else ""
            return self._redacted(frame, ids, table, tenant)
        counts: Counter[str] = Counter()
        parts = []  # pseudonyms are per tenant: one tenant at a time, order kept
        for part in frame.with_row_index("_row").partition_by("tenant_id"):
            part, found = self._redacted(part, ids, table, str(part["tenant_id"][0]))
            parts.append(part)
            counts.update(found)
        return pl.concat(parts).sort("_row").drop("_row"), counts


def _tenants(frame: pl.DataFrame) -> list[str] | None:
    """The tenants of a frame's rows, or None (every tenant) without a tenant on each row."""
    if "tenant_id" not in frame.columns or frame["tenant_id"].null_count():
        return None
    return [str(t) for t in frame["tenant_id"].unique(maintain_order=True).to_list()]


def _distinct(frame: pl.DataFrame, names: list[str]) -> pl.Series:
    """The distinct non-null values of the String / List(String) columns `names`, in order."""
    if not names:
        return pl.Series("text", [], dtype=pl.String)
    return pl.concat([_values(frame[name]) for name in names]).unique(maintain_order=True)
