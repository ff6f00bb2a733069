"""Finding PII spans in texts (the engine's results, filtered by our rules, merged to whole words)
and replacing them with placeholders."""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from multiprocessing import get_context
from typing import Any

from pipeline.lifeline import die_with
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


# An `AnalysisPool` starts its processes once it has been given POOL_MIN texts (each process loads
# the engine, ~5 s on 2 cores; 10,000 texts are ~14 s of analysis in one) and from then on sends
# them every batch of two chunks or more, POOL_CHUNK texts (~0.7 s) a chunk. Counted over the
# batches: a first analytics build at 1M interactions analyses ~124,000 texts in batches of a
# few thousand (a slice of a table at a time).
POOL_MIN, POOL_CHUNK = 10_000, 500


@dataclass
class AnalysisPool:
    """`analyse` over `workers` processes for large batches, in this process for the rest. For a
    caller with cores to spare: the analytics build's first night analyses every text no pack
    analysed (~124,000 at 1M interactions) while its other thread's DuckDB work leaves a core
    idle. The processes start once POOL_MIN texts were given and end at `close` (spawned, not
    forked from this process and its threads; so, as with any process pool, a script using it
    runs its work under `if __name__ == "__main__":`)."""

    workers: int = 1
    given: int = 0  # texts given so far
    _pool: ProcessPoolExecutor | None = field(default=None, init=False, repr=False)

    def analyse(self, texts: list[str], ner: bool = True) -> list[tuple[str, list[str]]]:
        self.given += len(texts)
        if self.workers < 2 or self.given < POOL_MIN or len(texts) < 2 * POOL_CHUNK:
            return analyse(texts, ner)
        if self._pool is None:
            self._pool = self._start()
        chunks = [texts[i : i + POOL_CHUNK] for i in range(0, len(texts), POOL_CHUNK)]
        return [row for rows in self._pool.map(partial(analyse, ner=ner), chunks) for row in rows]

    def _start(self) -> ProcessPoolExecutor:
        """The processes, each dying with this one (pipeline/lifeline.py): by the kernel's
        parent-death signal too when started from the main thread, which lives as long as this
        process (the signal follows the thread that started a process, here the caller's)."""
        main = threading.current_thread() is threading.main_thread()
        return ProcessPoolExecutor(
            self.workers,
            get_context("spawn"),
            initializer=_pool_worker,
            initargs=(os.getpid(), main),
        )

    def close(self) -> None:
        """Stop the processes; later batches are analysed in this process."""
        self.workers = 1
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


# A text that loads what a first analysis loads lazily: the NER model and recognizers, Faker's
# name and place lists, phonenumbers' region metadata.
WARM_UP = "Priya Lopez in Berlin: call 0612345678901234 or mail a@b.example"


def warm_up() -> None:
    analyse([WARM_UP])


def _pool_worker(parent: int, parent_death: bool) -> None:
    """An `AnalysisPool` process: it dies with the process that started it, then loads the engine."""
    die_with(parent, parent_death)
    warm_up()


def redact_text(text: str) -> tuple[str, Counter[str]]:
    """The text with every detected PII value replaced by its placeholder, and counts per kind."""
    redacted, kinds = analyse([text])[0]
    return redacted, Counter(kinds)
