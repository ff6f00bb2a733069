"""The text a memory is embedded by: its redacted form, as its pack will hold it (SPEC §5), so one
vector per distinct redacted text serves clustering, conflicts, search and the pack alike."""

from __future__ import annotations

import polars as pl

from pipeline.pii.names import TenantNames, tenant_names
from pipeline.pii.redactor import Redactor
from pipeline.semantic.wording import speaker

# The identifier columns of a memory whose values may name people (the pack's PEOPLE_COLUMNS;
# a memory has no owner_id).
PEOPLE_COLUMNS = ("contact_id", "user_id")


def memory_redaction(
    redactor: Redactor,
    interactions: pl.DataFrame | pl.LazyFrame,
    statements: pl.DataFrame | pl.LazyFrame,
) -> MemoryRedaction:
    """A redaction of memory texts as the tenant's pack makes it: the detector's (cached by text,
    so the pack asks it nothing again) and then the tenant's names spread to every text. The
    names are those kept for the tenant (its last pack's) with the ones found in these memories
    (their texts, their conversations' speakers, the people their ids name): a pack also finds
    names in its other files, so a text it redacts otherwise is the pack's to encode
    (`read_embeddings`)."""
    said = pl.DataFrame({"tenant_id": [], "value": []}, schema_overrides={"value": pl.String})
    if "metadata" in statements.lazy().collect_schema():
        said = statements.lazy().select("tenant_id", value=speaker(pl.col("metadata"))).collect()
    ids = pl.concat(
        [
            frame.lazy().select("tenant_id", value=pl.col(c).cast(pl.String))
            for frame in (interactions, statements)
            for c in PEOPLE_COLUMNS
            if c in frame.lazy().collect_schema()
        ]
    ).collect()
    return MemoryRedaction(redactor, _by_tenant(said), _by_tenant(ids), find=True)


def _by_tenant(rows: pl.DataFrame) -> dict[str, list[str]]:
    """(tenant_id, value) rows as each tenant's distinct values, sorted."""
    values = rows.drop_nulls().unique().sort("value").group_by("tenant_id", maintain_order=True)
    return {str(t): v for t, v in values.agg("value").iter_rows()}


class MemoryRedaction:
    """Callable on memory rows (tenant_id, raw): the same rows, `raw` redacted. With `find`, the
    names these memories give (their texts, `speakers` and the people `ids` name: tenant →
    values) are added to the tenant's and kept as its names (`Redactor.save_names`: a superset of
    its last pack's, until its next pack), so that a later stage redacts as this one did; without
    (memory_conflicts' subjects), the tenant's names as kept are spread."""

    def __init__(
        self,
        redactor: Redactor,
        speakers: dict[str, list[str]] | None = None,
        ids: dict[str, list[str]] | None = None,
        find: bool = False,
    ) -> None:
        self.redactor, self.find = redactor, find
        self.speakers, self.ids = speakers or {}, ids or {}

    def __call__(self, memories: pl.DataFrame) -> pl.DataFrame:
        """`memories` in their order, `raw` redacted."""
        if memories.is_empty():
            return memories
        indexed = memories.with_row_index("_row").partition_by("tenant_id", maintain_order=True)
        parts = [self._tenant(part) for part in indexed]
        self.redactor.flush()
        return pl.concat(parts).sort("_row").drop("_row")

    def _tenant(self, memories: pl.DataFrame) -> pl.DataFrame:
        tenant = str(memories["tenant_id"][0])
        findings: list[pl.DataFrame] = []
        redacted, _ = self.redactor.frame(memories.select("tenant_id", "raw"), findings=findings)
        last = self.redactor.names(tenant)
        names = self._with_found(tenant, last, findings, memories["raw"]) if self.find else last
        if names != last:
            self.redactor.save_names(tenant, names)
        spread, _ = names.redact(redacted["raw"])
        return memories.with_columns(spread.alias("raw"))

    def _with_found(
        self, tenant: str, last: TenantNames, findings: list[pl.DataFrame], texts: pl.Series
    ) -> TenantNames:
        """The tenant's names as kept and those these memories give."""
        if not findings:
            return last
        found = tenant_names(
            pl.concat(findings).unique("text"),
            texts.drop_nulls().unique(),
            self.speakers.get(tenant, []),
            self.ids.get(tenant, []),
        )
        return TenantNames(last.words | found.words, last.surnames | found.surnames)
