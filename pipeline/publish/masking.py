"""The publish guard masks what its detector (pipeline.pii.guard) finds in a pack: in place, before
the pack is written, so the files, their hashes and the manifest agree (SPEC §5 round 3)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from pipeline.pii import PLACEHOLDER, PSEUDONYM, pseudonym
from pipeline.pii.guard import MAYBE_PII, candidates, find_spans, guard_version
from pipeline.pii.redactor import Redactor
from pipeline.pii.scripts import in_word
from pipeline.publish.content import ENUM_COLUMNS, ID_COLUMNS, PackContent
from pipeline.publish.redaction import cut_long_texts

_TEXT_TYPES = (pl.String, pl.List(pl.String))
_INNER = re.compile(r"\[(EMAIL|PHONE|CARD|IBAN|SSN|NATIONAL_ID|IP)\]")
# What a value half left beside its placeholder is made of ("jürgen.mü[EMAIL]", "+31 6 [PHONE]").
_VALUE_CHAR = re.compile(r"[\w.%+@-]")


@dataclass
class Masked:
    """What the guard masked: occurrences per `file:column` and kind, and the values its
    detector still flags after masking (none, unless masking itself is broken)."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    left: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(sum(kinds.values()) for kinds in self.counts.values())


def _columns(content: PackContent) -> list[tuple[str, str]]:
    return [
        (name, column)
        for name, frame in sorted(content.frames.items())
        for column, dtype in frame.schema.items()
        if column not in ENUM_COLUMNS and dtype in _TEXT_TYPES
    ]


def _flat(series: pl.Series) -> pl.Series:
    return series.explode() if series.dtype == pl.List(pl.String) else series


def _values(content: PackContent, where: list[tuple[str, str]]) -> dict[str, pl.Series]:
    """The values of each `file:column` the guard's detector must look at (not pseudonyms)."""
    values = {}
    for name, column in where:
        found = candidates(content.frames[name][column])
        values[f"{name}:{column}"] = found.filter(~found.str.contains(PSEUDONYM)).unique()
    return values


def _scan(texts: pl.Series, memo: Redactor | None) -> dict[str, list[tuple[int, int, str]]]:
    """The spans the detector finds in `texts`, by text. A text found clean is remembered under
    the detector's version (the redaction cache), so a later night does not scan it again; a
    flagged one never is, so it is masked every night the redactor misses it."""
    version = guard_version()
    unknown = texts.filter(~memo.known(version, texts)) if memo is not None else texts
    flagged = {text: spans for text in unknown.to_list() if (spans := find_spans(text))}
    if memo is not None:
        memo.remember(version, unknown.filter(~unknown.is_in(list(flagged))))
    return flagged


def mask_text(text: str, spans: list[tuple[int, int, str]]) -> str:
    """`text` with each span replaced by its kind's placeholder, widened to whole words (a value
    half left beside a placeholder goes whole: "jürgen.mü[EMAIL]" → "[EMAIL]")."""
    for start, end, kind in sorted(spans, reverse=True):
        if kind == "half_redacted":
            inner = _INNER.search(text, start, end)
            placeholder = inner.group() if inner else "[PII]"
            while start > 0 and _VALUE_CHAR.match(text[start - 1]):
                start -= 1
            while end < len(text) and _VALUE_CHAR.match(text[end]):
                end += 1
        else:
            placeholder = PLACEHOLDER[kind]
            while start > 0 and in_word(text[start - 1]):  # not into the next word of CJK text
                start -= 1
            while end < len(text) and in_word(text[end]):
                end += 1
        text = text[:start] + placeholder + text[end:]
    return text


def _replaced(series: pl.Series, mapping: dict[str, str]) -> pl.Series:
    if series.dtype == pl.List(pl.String):
        return series.list.eval(pl.element().replace(mapping)).alias(series.name)
    return series.replace(mapping)


def mask_pii(content: PackContent, memo: Redactor | None) -> Masked:
    """Mask in `content` every value the guard's detector flags, where it stands: a text's
    span becomes its placeholder; a flagged identifier becomes its keyed pseudonym in every
    identifier column of every file, so ids still join (memory_id in memories, member_ids,
    conflicts…) and identical inputs still give identical files. The counts go to
    `content.redactions["pii_masked"]` (the manifest)."""
    where = _columns(content)
    values = _values(content, where)
    texts = pl.concat(values.values()).unique() if values else pl.Series(dtype=pl.String)
    flagged = _scan(texts, memo)
    masked = Masked()
    if flagged:
        ids = {v for (n, c) in where if c in ID_COLUMNS for v in values[f"{n}:{c}"].to_list()}
        ids &= flagged.keys()
        if ids and memo is None:
            raise ValueError("a flagged identifier needs the redactor's key to be pseudonymized")
        as_id = {v: pseudonym(memo.key, content.tenant_id, v) for v in ids} if memo else {}
        as_text = {text: mask_text(text, spans) for text, spans in flagged.items()}
        results = pl.Series(list(as_text.values()), dtype=pl.String)
        still = set(_scan(results.filter(results.str.contains(MAYBE_PII)), memo))
        _apply(content, where, as_id, as_text, flagged, masked, still)
    content.redactions["pii_masked"] = masked.counts
    return masked


def _apply(
    content: PackContent,
    where: list[tuple[str, str]],
    as_id: dict[str, str],
    as_text: dict[str, str],
    flagged: dict[str, list[tuple[int, int, str]]],
    masked: Masked,
    still: set[str],
) -> None:
    """Replace the flagged values of each column (ids by `as_id`, texts by `as_text`), count the
    occurrences per kind and the masked texts still flagged (`still`); a text a placeholder made
    longer than a field may be is cut again."""
    changed = set()
    for name, column in where:
        series = content.frames[name][column]
        mapping = as_id if column in ID_COLUMNS else as_text
        hits = _flat(series).filter(_flat(series).is_in(list(mapping))).value_counts(name="n")
        if hits.is_empty():
            continue
        counts: Counter[str] = Counter()
        for value, n in hits.iter_rows():
            for _, _, kind in flagged[value]:
                counts[kind] += n
            if mapping[value] in still:
                masked.left[f"{name}:{column}"] = masked.left.get(f"{name}:{column}", 0) + n
        masked.counts[f"{name}:{column}"] = dict(sorted(counts.items()))
        content.frames[name] = content.frames[name].with_columns(_replaced(series, mapping))
        changed.add(name)
    truncated = content.redactions.setdefault("truncated", {})
    for name in sorted(changed):
        content.frames[name], cut = cut_long_texts(content.frames[name])
        for column, n in cut.items():
            truncated[f"{name}:{column}"] = truncated.get(f"{name}:{column}", 0) + n
