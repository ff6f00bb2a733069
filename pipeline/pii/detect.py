"""Finding PII spans in texts (the engine's results, filtered by our rules, merged to whole words)
and replacing them with placeholders."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from pipeline.pii.rules import (
    _CONTEXT_CHECKED,
    _ID_ENTITIES,
    _KIND,
    _NOT_PII_BEFORE,
    _TEXT_ENTITIES,
    PLACEHOLDER,
    SCORE_THRESHOLD,
    _has_proper_word,
    _known_if_alone,
    _plausible_phone,
    may_hold_name,
    may_hold_pii,
)


def _engine() -> tuple[Any, Any]:
    """(presidio AnalyzerEngine, spaCy pipeline): imported here so `pipeline.pii` loads without
    spaCy until something is analysed."""
    from pipeline.pii.engine import build_engine

    return build_engine()


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str
    score: float


_NER_KINDS = {"person", "location"}


def _merge(text: str, spans: list[Span]) -> list[Span]:
    """Overlapping findings become one span (their union; the kind of a validated pattern over
    the NER's guess, then of the surest), widened to whole words so no half of a value is left
    beside its placeholder."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        start, end = span.start, span.end
        while start > 0 and text[start - 1].isalnum():
            start -= 1
        while end < len(text) and text[end].isalnum():
            end += 1
        span = Span(start, end, span.kind, span.score)
        if merged and start < merged[-1].end:
            last = merged[-1]
            best = max(last, span, key=lambda s: (s.kind not in _NER_KINDS, s.score))
            merged[-1] = Span(last.start, max(last.end, end), best.kind, best.score)
        else:
            merged.append(span)
    return merged


def _findings(text: str, results: Iterable[Any]) -> list[Span]:
    spans = []
    for result in results:
        kind = _KIND.get(result.entity_type)
        if kind is None or result.score < SCORE_THRESHOLD:
            continue
        if kind in _CONTEXT_CHECKED and _NOT_PII_BEFORE.search(text[: result.start]):
            continue
        if kind == "phone" and not _plausible_phone(text[result.start : result.end]):
            continue
        if kind in _NER_KINDS and not _has_proper_word(text[result.start : result.end]):
            continue
        if kind == "person" and not _known_if_alone(text[result.start : result.end]):
            continue
        spans.append(Span(result.start, result.end, kind, float(result.score)))
    return _merge(text, spans)


def _apply(text: str, spans: list[Span]) -> str:
    for span in reversed(spans):
        text = text[: span.start] + PLACEHOLDER[span.kind] + text[span.end :]
    return text


# Texts go through the NER in batches; nlp.pipe on 2 cores is fastest around this size.
NER_BATCH = 256


def _docs(nlp: Any, texts: list[str], ner: bool) -> Iterator[Any]:
    """spaCy docs in the order of `texts`: tagged by the NER in batches (`nlp.pipe`) where a name
    or place could be found (`may_hold_name`), only tokenized elsewhere (the pattern recognizers
    need the tokens for their context words). Lazy: a first night's 100,000 docs are never all
    held at once."""
    needs = [ner and may_hold_name(text) for text in texts]
    tagged = nlp.pipe(
        (t for t, need in zip(texts, needs, strict=True) if need), batch_size=NER_BATCH
    )
    for text, need in zip(texts, needs, strict=True):
        yield next(tagged) if need else nlp.make_doc(text)


def detect(texts: list[str], ner: bool = True) -> list[list[Span]]:
    """The PII spans of each text; `ner=False` (identifiers) skips the NER and the name and
    address kinds. Texts that cannot hold PII (`may_hold_pii`) are not analysed."""
    candidates = [text for text in texts if may_hold_pii(text, names=ner)]
    found = dict(zip(candidates, _analysed(candidates, ner), strict=True))
    return [found.get(text, []) for text in texts]


def _analysed(texts: list[str], ner: bool) -> Iterator[list[Span]]:
    """presidio's findings over each text, filtered and merged by `_findings`."""
    analyzer, nlp = _engine()
    engine = analyzer.nlp_engine
    entities = _TEXT_ENTITIES if ner else _ID_ENTITIES
    for text, doc in zip(texts, _docs(nlp, texts, ner), strict=True):
        results = analyzer.analyze(
            text,
            language="en",
            entities=entities,
            nlp_artifacts=engine._doc_to_nlp_artifact(doc, "en"),
            score_threshold=SCORE_THRESHOLD,
        )
        yield _findings(text, results)


def analyse(texts: list[str], ner: bool = True) -> list[tuple[str, list[str]]]:
    """(redacted text, kinds found) for each text."""
    return [
        (_apply(text, spans), [s.kind for s in spans])
        for text, spans in zip(texts, detect(texts, ner), strict=True)
    ]


def redact_text(text: str) -> tuple[str, Counter[str]]:
    """The text with every detected PII value replaced by its placeholder, and counts per kind."""
    redacted, kinds = analyse([text])[0]
    return redacted, Counter(kinds)
