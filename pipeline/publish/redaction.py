"""A pack's PII redaction (SPEC §5): every text redacted and every identifier or label holding
personal data pseudonymized, by the detector and by the tenant's names (every name found or given
anywhere in the tenant); derived text made again from the redacted text; long texts cut."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import polars as pl

from memorypack.format import MAX_FIELD_CHARS, TRUNCATION_MARK
from pipeline.pii.keys import PSEUDONYM, pseudonym
from pipeline.pii.lexicon import preview_names
from pipeline.pii.names import TenantNames, tenant_names
from pipeline.pii.redactor import Redactor
from pipeline.publish.content import (
    ENUM_COLUMNS,
    ID_COLUMNS,
    MACHINE_COLUMNS,
    STRING,
    STRINGS,
    PackInputs,
)
from pipeline.semantic.conflicts import subject
from pipeline.semantic.wording import speaker

# The identifiers that name people, whose words are names of the tenant's (an e-mail's local
# part, a contact id written as a name: pipeline.pii.lexicon.identifier_names).
PEOPLE_COLUMNS = ("contact_id", "user_id", "owner_id")
# The conflicts file's subject is derived from one side's text: the side it was made of is kept
# while the texts are redacted, then the subject is made again from that side's redacted text.
_SUBJECT_SIDE = "_subject_side"


def declared_speakers(inputs: PackInputs) -> list[str]:
    """Who said each statement of a conversation log (`metadata.speaker`, SPEC §2): people."""
    rows = inputs.rows("memory_statements")
    if rows is None or "metadata" not in rows.columns:
        return []
    said = rows.select(speaker(pl.col("metadata"))).to_series().drop_nulls().unique().sort()
    return said.to_list()


def people_ids(frames: dict[str, pl.DataFrame]) -> list[str]:
    """The raw values of the identifier columns that name people, in every file."""
    values: set[str] = set()
    for frame in frames.values():
        for column in PEOPLE_COLUMNS:
            if column in frame.columns and frame.schema[column] == STRING:
                values.update(frame[column].drop_nulls().unique().to_list())
    return sorted(values)


def _tenant_names(
    findings: list[pl.DataFrame], speakers: list[str], identifiers: list[str]
) -> TenantNames:
    """The tenant's names, from the free texts' redactions of every file, the speakers its
    conversation logs declare and its people's identifiers."""
    if not findings and not identifiers:
        return TenantNames(frozenset())
    table = (
        pl.concat(findings).unique("text", maintain_order=True)
        if findings
        else pl.DataFrame(schema={"text": STRING, "redacted": STRING, "kinds": STRINGS})
    )
    return tenant_names(table, table["text"], speakers, identifiers)


def spread_names(
    frame: pl.DataFrame, names: TenantNames, key: bytes, tenant: str
) -> tuple[pl.DataFrame, int]:
    """`frame` with the tenant's names redacted in its free-text columns and every identifier or
    label that holds one pseudonymized (the same pseudonym in every file, so ids still join)."""
    total, columns = 0, []
    for column, dtype in frame.schema.items():
        if column in ENUM_COLUMNS or dtype not in (STRING, STRINGS):
            continue
        if column in ID_COLUMNS:
            series, n = _pseudonymize_named(frame[column], names, key, tenant)
        else:
            series, n = names.redact(frame[column])
        if n:
            columns.append(series)
            total += n
    return (frame.with_columns(columns) if columns else frame), total


def _pseudonymize_named(
    series: pl.Series, names: TenantNames, key: bytes, tenant: str
) -> tuple[pl.Series, int]:
    flat = series.explode() if series.dtype == STRINGS else series
    values = flat.drop_nulls().unique()
    values = values.filter(~values.str.contains(PSEUDONYM))
    named = values.filter(names.in_identifiers(values)).to_list()
    if not named:
        return series, 0
    mapping = {value: pseudonym(key, tenant, value) for value in named}
    n = int(flat.is_in(named).sum())
    if series.dtype == STRINGS:
        return series.list.eval(pl.element().replace(mapping)).alias(series.name), n
    return series.replace(mapping).alias(series.name), n


def redact_rows(
    redactor: Redactor,
    frame: pl.DataFrame,
    names: dict[str, TenantNames] | None = None,
    strict: bool = False,
) -> tuple[pl.DataFrame, Counter[str]]:
    """Any table's rows redacted as a pack's files are, each tenant's rows with the names its
    last pack spread (`Redactor.names`; `names` memoizes them across calls): the analyst snapshot
    and the previews in Dagster's metadata. Enumerations and the pipeline's own digests,
    versions and run ids stay as they are. Rows of no tenant get every memoized tenant's names.
    `strict` (previews): also every capitalised word that may be a name (`preview_names`)."""
    names = {} if names is None else names
    redacted, found = redactor.frame(
        frame, identifiers=ID_COLUMNS, keep=ENUM_COLUMNS | MACHINE_COLUMNS
    )
    extra = frozenset(preview_names(*_strings(frame))) if strict else frozenset()
    if redacted.is_empty():
        return redacted, found
    if "tenant_id" not in redacted.columns:
        spread, n = spread_names(redacted, _everyone(names).with_words(extra), redactor.key, "")
        return spread, found + Counter({"person": n})
    parts = []
    for part in redacted.with_row_index("_row").partition_by("tenant_id", maintain_order=True):
        tenant = part["tenant_id"][0]
        if tenant is not None and tenant not in names:
            names[tenant] = redactor.names(tenant)
        own = names[tenant] if tenant is not None else _everyone(names)
        part, n = spread_names(part, own.with_words(extra), redactor.key, tenant or "")
        found += Counter({"person": n})
        parts.append(part)
    return pl.concat(parts).sort("_row").drop("_row"), found


def _everyone(names: dict[str, TenantNames]) -> TenantNames:
    return TenantNames(
        frozenset().union(*(n.words for n in names.values())),
        frozenset().union(*(n.surnames for n in names.values())),
    )


def _strings(frame: pl.DataFrame) -> tuple[pl.Series, pl.Series]:
    """Every free-text value of a frame, and every identifier and label value."""

    def values(ids: bool) -> pl.Series:
        columns = [
            frame[c].explode() if t == STRINGS else frame[c]
            for c, t in frame.schema.items()
            if t in (STRING, STRINGS)
            and c not in ENUM_COLUMNS | MACHINE_COLUMNS
            and (c in ID_COLUMNS) == ids
        ]
        return pl.concat(columns) if columns else pl.Series("text", [], dtype=pl.String)

    return values(ids=False), values(ids=True)


def with_subject_side(conflicts: pl.DataFrame) -> pl.DataFrame:
    """Which side's text the subject was made of (a or b; null: neither, the subject stays as
    redacted text), before the texts are redacted."""
    side = (
        pl.when(subject(pl.col("text_a")) == pl.col("subject"))
        .then(pl.lit("a"))
        .when(subject(pl.col("text_b")) == pl.col("subject"))
        .then(pl.lit("b"))
    )
    return conflicts.with_columns(side.alias(_SUBJECT_SIDE))


def _subjects_again(conflicts: pl.DataFrame) -> pl.DataFrame:
    """The subject made again from its side's redacted text (SPEC §5 round 4: derive from
    redacted text, never redact a derived one), so no piece of a name is left in it."""
    if _SUBJECT_SIDE not in conflicts.columns:
        return conflicts
    side = pl.col(_SUBJECT_SIDE)
    made = (
        pl.when(side == "a")
        .then(subject(pl.col("text_a")))
        .when(side == "b")
        .then(subject(pl.col("text_b")))
        .otherwise(pl.col("subject"))
    )
    return conflicts.with_columns(made.alias("subject")).drop(_SUBJECT_SIDE)


def _cut(text: pl.Expr) -> pl.Expr:
    keep = MAX_FIELD_CHARS - len(TRUNCATION_MARK)
    return (
        pl.when(text.str.len_chars() > MAX_FIELD_CHARS)
        .then(text.str.slice(0, keep) + TRUNCATION_MARK)
        .otherwise(text)
    )


def cut_long_texts(frame: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """Every text (identifiers and list items too) cut to MAX_FIELD_CHARS, ending with the marker,
    so one huge field cannot bloat a pack or an app's memory (loaders refuse longer ones); how
    many were cut, per column. Run after redaction, which may lengthen a text."""
    counts: dict[str, int] = {}
    cuts = []
    for column, dtype in frame.schema.items():
        if dtype not in (pl.String, STRINGS):
            continue
        texts = pl.col(column).explode() if dtype == STRINGS else pl.col(column)
        n = int(frame.select((texts.str.len_chars() > MAX_FIELD_CHARS).sum()).item())
        if n:
            counts[column] = n
            cuts.append(
                pl.col(column).list.eval(_cut(pl.element()))
                if dtype == STRINGS
                else _cut(pl.col(column))
            )
    return (frame.with_columns(cuts) if cuts else frame), counts


def redact_pack(
    inputs: PackInputs,
    frames: dict[str, pl.DataFrame],
    report: Callable[[str], None] | None = None,
) -> tuple[dict[str, Any], TenantNames]:
    """Redact every file of the pack in place (`frames`); what was redacted, and the tenant's
    names (kept by the publisher for the analyst snapshot: pipeline.pii.redactor.save_names).
    A line goes to `report` before the files and after each (a tenant's memories may take
    minutes)."""
    report = report or (lambda _line: None)
    tenant = inputs.tenant
    rows = sum(frame.height for frame in frames.values())
    report(f"{tenant}: redacting {len(frames)} files ({rows} rows)")
    redactor: Redactor | None = inputs.redactor
    if redactor is None:
        raise ValueError("PackInputs.redactor is not set: build packs from load_inputs")
    by_kind: Counter[str] = Counter()
    by_file: dict[str, dict[str, int]] = {}
    truncated: dict[str, int] = {}
    identifiers = people_ids(frames)
    findings: list[pl.DataFrame] = []
    for file_name in sorted(frames):
        began = time.perf_counter()
        frames[file_name], found = redactor.frame(
            frames[file_name], identifiers=ID_COLUMNS, keep=ENUM_COLUMNS, findings=findings
        )
        seconds, n = time.perf_counter() - began, frames[file_name].height
        report(
            f"{tenant}: {file_name} redacted ({n} rows, {seconds:.1f} s, {sum(found.values())} found)"
        )
        by_kind.update(found)
        if found:
            by_file[file_name] = dict(sorted(found.items()))
    redactor.flush()
    # A name found or given anywhere in the tenant is redacted in every text of it (SPEC §5).
    names = _tenant_names(findings, declared_speakers(inputs), identifiers)
    for file_name in sorted(frames):
        frames[file_name], spread = spread_names(frames[file_name], names, redactor.key, tenant)
        if spread:
            by_kind["person"] += spread
            counts = by_file.setdefault(file_name, {})
            counts["person"] = counts.get("person", 0) + spread
        frames[file_name], cut = cut_long_texts(_subjects_again(frames[file_name]))
        truncated.update({f"{file_name}:{column}": n for column, n in cut.items()})
    redactions = {
        "total": sum(by_kind.values()),
        "by_kind": dict(sorted(by_kind.items())),
        "by_file": by_file,
        "truncated": truncated,  # texts over MAX_FIELD_CHARS characters, per file:column
        # what the publish guard found and masked, per file:column and kind (pipeline.publish.masking)
        "pii_masked": {},
    }
    return redactions, names
