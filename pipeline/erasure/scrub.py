"""Finding one person in any table: which rows mention them, and those rows removed (erasure)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from pipeline.ingest.tombstones import json_field

# Ids shorter than this are matched only as whole values, never inside a longer text ("c1" would
# be found in every "c12"). Longer ones are found inside texts too, between non-word characters.
MIN_ID_CHARS = 4
# A text of the person is looked for inside other texts (a template quoting it, a raw line, a
# redacted copy) by a prefix of this many characters; shorter texts only as whole values.
MIN_FRAGMENT_CHARS = 20
FRAGMENT_CHARS = 40

_STRING = pl.String()
_STRINGS = pl.List(pl.String())


@dataclass(frozen=True)
class Needles:
    """What marks a row as the person's, in the rows of one tenant (`tenant_id`), in rows whose
    tenant is unknown (only `hashes`, `fragments` and `global_ids` apply) and in caches.

    `ids` are matched as whole cell values and, when long enough, inside texts; `texts` as whole
    values; `fragments` inside texts; `hashes` as whole values of hash columns (text_hash…)."""

    tenant_id: str
    ids: frozenset[str] = frozenset()
    texts: frozenset[str] = frozenset()
    fragments: tuple[str, ...] = ()
    hashes: frozenset[str] = frozenset()
    global_ids: frozenset[str] = frozenset()  # ids unique enough to look for in every tenant
    _patterns: dict[bool, str | None] = field(default_factory=dict, compare=False, repr=False)

    def id_pattern(self, scoped: bool) -> str | None:
        """A regex finding any long enough id inside a text, not inside a longer word."""
        if scoped not in self._patterns:
            ids = self.ids if scoped else self.global_ids
            long = sorted((i for i in ids if len(i) >= MIN_ID_CHARS), key=len, reverse=True)
            self._patterns[scoped] = (
                f"(?:^|[^A-Za-z0-9_]){_alternatives(long)}(?:[^A-Za-z0-9_]|$)" if long else None
            )
        return self._patterns[scoped]

    @property
    def empty(self) -> bool:
        return not (self.ids or self.texts or self.fragments or self.hashes)


def _alternatives(values: list[str]) -> str:
    return "(?:" + "|".join(re.escape(v) for v in values) + ")"


def text_mention(column: pl.Expr, needles: Needles, scoped: bool) -> pl.Expr:
    """Whether a string cell is or holds one of the person's ids, texts or fragments."""
    exact = needles.hashes | needles.texts | (needles.ids if scoped else needles.global_ids)
    found = column.is_in(list(exact)) if exact else pl.lit(False)
    pattern = needles.id_pattern(scoped)
    if pattern is not None:
        found = found | column.str.contains(pattern)
    if needles.fragments:
        found = found | column.str.contains_any(list(needles.fragments))
    return found.fill_null(False)


def _binary_mention(column: str, needles: Needles, scoped: bool) -> pl.Expr:
    """Raw bytes (a quarantined line that is not UTF-8) holding a long id or a fragment."""
    pattern = needles.id_pattern(scoped)
    regexes = [re.compile(pattern.encode())] if pattern else []
    regexes += [re.compile(re.escape(f.encode())) for f in needles.fragments]
    if not regexes:
        return pl.lit(False)
    return (
        pl.col(column)
        .map_elements(lambda raw: any(r.search(raw) for r in regexes), return_dtype=pl.Boolean)
        .fill_null(False)
    )


def _mentions(frame: pl.DataFrame, needles: Needles, scoped: bool) -> pl.Expr:
    found = pl.lit(False)
    for name, dtype in frame.schema.items():
        if name == "tenant_id":
            continue
        if dtype == _STRING:
            found = found | text_mention(pl.col(name), needles, scoped)
        elif dtype == pl.Binary():
            found = found | _binary_mention(name, needles, scoped)
    return found


def row_mentions(frame: pl.DataFrame, needles: Needles) -> pl.Series:
    """Per row: does a scalar cell (string or bytes) mention the person. Rows of another tenant
    never do; rows whose tenant is unknown (a quarantined line that did not parse) only by hash,
    fragment or global id; rows of tables without a tenant (caches) by any of them. A raw line
    whose tenant column is empty but whose text names a tenant readably is that tenant's."""
    if "tenant_id" not in frame.columns:  # a cache: dropping a row too many costs a recompute
        found = _mentions(frame, needles, scoped=True)
    else:
        tenant = pl.col("tenant_id")
        if frame.schema.get("raw") == _STRING:  # a quarantined line the contract refused
            named = json_field(pl.col("raw"), "tenant_id")
            # written with escapes (`ac\u006de`): not read here, so the tenant stays unknown
            tenant = pl.coalesce(
                tenant, pl.when(~named.str.contains("\\", literal=True)).then(named)
            )
        found = pl.when(tenant == needles.tenant_id).then(_mentions(frame, needles, scoped=True))
        found = found.when(tenant.is_null()).then(_mentions(frame, needles, scoped=False))
        found = found.otherwise(pl.lit(False))
    return frame.select(found.fill_null(False).alias("mentions")).to_series()


def list_columns(frame: pl.DataFrame) -> list[str]:
    return [name for name, dtype in frame.schema.items() if dtype == _STRINGS]


@dataclass
class Scrubbed:
    frame: pl.DataFrame
    removed: pl.DataFrame  # the rows removed, as they were
    stripped: int = 0  # list items (member ids, superseded ids …) taken out of kept rows

    @property
    def changed(self) -> bool:
        return self.removed.height > 0 or self.stripped > 0


def scrub_frame(frame: pl.DataFrame, needles: Needles) -> Scrubbed:
    """The rows that mention the person removed; in the rows kept, list items that do (a cluster's
    member ids, a superseded id) taken out, and `n_members` recounted where a table has it."""
    if needles.empty or frame.is_empty():
        return Scrubbed(frame, frame.clear())
    mentions = row_mentions(frame, needles)
    kept, removed = frame.filter(~mentions), frame.filter(mentions)
    lists = list_columns(kept)
    if not lists or kept.is_empty():
        return Scrubbed(kept, removed)
    scoped = "tenant_id" in kept.columns
    mine = pl.col("tenant_id") == needles.tenant_id if scoped else pl.lit(True)
    item = text_mention(pl.element(), needles, scoped)
    counts = kept.select(
        pl.when(mine).then(pl.col(c).list.eval(item).list.sum()).otherwise(0).alias(c)
        for c in lists
    )
    stripped = int(sum(counts[c].fill_null(0).sum() for c in lists))
    if not stripped:
        return Scrubbed(kept, removed)
    kept = kept.with_columns(
        pl.when(mine).then(pl.col(c).list.eval(pl.element().filter(~item))).otherwise(pl.col(c))
        for c in lists
    )
    if "n_members" in kept.columns and "member_ids" in lists:
        kept = kept.with_columns(
            pl.when(mine)
            .then(pl.col("member_ids").list.len().cast(kept.schema["n_members"]))
            .otherwise(pl.col("n_members"))
            .alias("n_members")
        )
    return Scrubbed(kept, removed, stripped)
