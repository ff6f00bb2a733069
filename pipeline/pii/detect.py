"""Finding PII spans in texts (the engine's results, filtered by our rules, merged to whole words)
and replacing them with placeholders."""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from multiprocessing import get_context
from typing import Any

from pipeline.lifeline import die_with
from pipeline.pii import rules
from pipeline.pii.national_ids import names_an_id
from pipeline.pii.ner_gate import needs_ner
from pipeline.pii.normalise import normalise
from pipeline.pii.postcodes import widen
from pipeline.pii.rules import (
    CONTEXT_CHECKED,
    ID_ENTITIES,
    KIND,
    PLACEHOLDER,
    SCORE_THRESHOLD,
    TEXT_ENTITIES,
    has_proper_word,
    known_if_alone,
    may_hold_name,
    not_pii_before,
    plausible_phone,
)
from pipeline.pii.scripts import find_names, in_word


def analysis_engine() -> tuple[Any, Any]:
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
_NER_ENTITIES = {"PERSON", "LOCATION"}  # the NER's and the name list's (rules.KIND)
_PLACE_KINDS = {"address", "location"}


def _merge(text: str, spans: list[Span]) -> list[Span]:
    """Overlapping findings become one span (their union; the kind of a validated pattern over
    the NER's guess, then of the surest), widened to whole words so no half of a value is left
    beside its placeholder (`in_word`: not into the next word of a script written without
    spaces, "请把合同发给张伟"). Linear in the text: a span widens only over characters no earlier
    merged span covers (the end of a merged span is never followed by a letter or digit)."""
    merged: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        start, end = span.start, span.end
        last = merged[-1] if merged else None
        if last is None or start >= last.end:
            while start > 0 and in_word(text[start - 1]):
                start -= 1
        if last is None or end > last.end:
            while end < len(text) and in_word(text[end]):
                end += 1
        span = Span(start, end, span.kind, span.score)
        if last is not None and start < last.end:
            best = max(last, span, key=lambda s: (s.kind not in _NER_KINDS, s.score))
            merged[-1] = Span(last.start, max(last.end, end), best.kind, best.score)
        else:
            merged.append(span)
    return merged


def _findings(text: str, results: Iterable[Any]) -> list[Span]:
    """The results our rules keep, as spans (not yet merged). The NER's and the name list's
    people and places must hold a capitalised word; names in other scripts or in lower case
    (pipeline.pii.scripts, `SCRIPT_PERSON`) have their own rules."""
    spans = []
    for result in results:
        kind = KIND.get(result.entity_type)
        if kind is None or result.score < SCORE_THRESHOLD:
            continue
        if kind in CONTEXT_CHECKED and not_pii_before(text, result.start):
            continue
        if kind == "phone" and not plausible_phone(text[result.start : result.end]):
            continue
        value = text[result.start : result.end]
        if result.entity_type in _NER_ENTITIES and not has_proper_word(value):
            continue
        if result.entity_type == "PERSON" and (not known_if_alone(value) or names_an_id(value)):
            continue
        spans.append(Span(result.start, result.end, kind, float(result.score)))
    return spans


def _with_postcodes(text: str, spans: list[Span]) -> list[Span]:
    """Merged spans with each address or place widened over a postcode beside it
    (pipeline.pii.postcodes), merged again."""
    taken = [(s.start, s.end) for s in spans]
    widened = [
        Span(*widen(text, s.start, s.end, taken), s.kind, s.score) if s.kind in _PLACE_KINDS else s
        for s in spans
    ]
    return _merge(text, widened) if widened != spans else spans


def _apply(text: str, spans: list[Span]) -> str:
    """`text` with each (merged, ordered) span replaced by its placeholder, in one pass."""
    parts, at = [], 0
    for span in spans:
        parts += [text[at : span.start], PLACEHOLDER[span.kind]]
        at = span.end
    return "".join([*parts, text[at:]])


# Bounded analysis: a text longer than WINDOW characters is analysed in pieces, so its cost grows
# with its length, not with its square (the engine's context words, phonenumbers' matcher and
# spaCy's tokenizer are all worse than linear in what they are given; 2k, 4k, 8k and 16k
# characters took 0.6, 2.5, 10 and 42 s). Each piece owns WINDOW characters, cut at whitespace
# where it can be, and reads OVERLAP more on each side: a value shorter than OVERLAP that starts
# in what a piece owns is whole in it, with the context before it; only the findings that start
# in what a piece owns are kept, then merged over the whole text.
WINDOW, OVERLAP = 2_000, 256
# spaCy's tokenizer costs the square of a run without whitespace (affixes are peeled one by one: a
# 400 KB `[[[…]]]` took more than 10 minutes). Runs longer than this are blanked in what spaCy
# sees (the same length, so offsets hold): only the pattern recognizers read them, as text.
LONG_TOKEN = 200
_LONG_RUN = re.compile(rf"\S{{{LONG_TOKEN + 1},}}")


@dataclass(frozen=True)
class Piece:
    """A window of a text: `text[start:end]` is analysed, the findings starting in
    [`own_start`, `own_end`) are kept."""

    start: int
    end: int
    own_start: int
    own_end: int


def pieces(text: str) -> list[Piece]:
    """The windows a text is analysed in: one for a text of WINDOW characters or fewer."""
    cuts = [0]
    while len(text) - cuts[-1] > WINDOW:
        cut = cuts[-1] + WINDOW
        floor = cut - WINDOW // 4  # cut at the last whitespace of the window's last quarter
        while cut > floor and not text[cut - 1].isspace():
            cut -= 1
        cuts.append(cut if cut > floor else cuts[-1] + WINDOW)
    cuts.append(len(text))
    return [
        Piece(max(0, own_start - OVERLAP), min(len(text), own_end + OVERLAP), own_start, own_end)
        for own_start, own_end in itertools.pairwise(cuts)
    ]


def _for_spacy(text: str) -> str:
    """`text` with its runs of more than LONG_TOKEN non-space characters blanked."""
    return _LONG_RUN.sub(lambda run: " " * len(run.group()), text)


# Texts go through the NER in batches; nlp.pipe on 2 cores is fastest around this size.
NER_BATCH = 256


def _docs(nlp: Any, texts: list[str], ner: bool) -> Iterator[Any]:
    """spaCy docs in the order of `texts`: tagged by the NER in batches (`nlp.pipe`) where it
    could add a name or place (`ner_gate.needs_ner`), only tokenized elsewhere (the pattern
    recognizers need the tokens for their context words). Lazy: a first night's 100,000 docs
    are never all held at once."""
    needs = [ner and needs_ner(text) for text in texts]
    tagged = nlp.pipe(
        (t for t, need in zip(texts, needs, strict=True) if need), batch_size=NER_BATCH
    )
    for text, need in zip(texts, needs, strict=True):
        yield next(tagged) if need else nlp.make_doc(text)


def detect(texts: list[str], ner: bool = True) -> list[list[Span]]:
    """The PII spans of each text; `ner=False` (identifiers) skips the NER and the name and
    address kinds. Every detector reads the text normalised (pipeline.pii.normalise: NFKC, no
    format characters, percent escapes decoded); a span found there is mapped back to the
    characters that wrote it and merged again over the original's words."""
    normals = {text: normalise(text) for text in dict.fromkeys(texts)}
    found = _detect_normal(list(dict.fromkeys(n.text for n in normals.values())), ner)
    spans: dict[str, list[Span]] = {}
    for text, normal in normals.items():
        spans[text] = found.get(normal.text, [])
        if normal.starts is not None and spans[text]:
            mapped = [Span(*normal.span(s.start, s.end), s.kind, s.score) for s in spans[text]]
            spans[text] = _merge(text, mapped)
    return [spans[text] for text in texts]


def may_hold_pii(text: str, names: bool = True) -> bool:
    """Whether any recognizer could find something `_findings` keeps: every card, IBAN, SSN,
    phone, IPv4 and street address holds a digit, an e-mail an @, an IPv6 address a colon, a
    person or place a proper word (`may_hold_name`; `names=False` for identifiers), and a plain
    identifier (`PLAIN_ID`) none of them. The rest ("Thank them for the feedback.") skip presidio altogether: its recognizers and context
    words cost ~0.3 ms a text for nothing."""
    if not names and rules.PLAIN_ID.fullmatch(text):  # as free text, "Maria123" may still be a name
        return False
    if "@" in text or ":" in text or any(char.isdigit() for char in text):
        return True
    if not names:
        return False
    return may_hold_name(text) or bool(find_names(text))


def _detect_normal(texts: list[str], ner: bool) -> dict[str, list[Span]]:
    """The merged spans of each (normalised) text that may hold PII. Texts, and pieces of long
    texts (`pieces`), that cannot hold PII (`may_hold_pii`) are not analysed."""
    candidates = [text for text in texts if may_hold_pii(text, names=ner)]
    windows = [
        (text, piece)
        for text in candidates
        for piece in pieces(text)
        if len(text) <= WINDOW or may_hold_pii(text[piece.start : piece.end], names=ner)
    ]
    spans: dict[str, list[Span]] = {text: [] for text in candidates}
    for (text, piece), found in zip(
        windows, _analysed([text[p.start : p.end] for text, p in windows], ner), strict=True
    ):
        spans[text] += [
            Span(s.start + piece.start, s.end + piece.start, s.kind, s.score)
            for s in found
            if piece.own_start <= s.start + piece.start < piece.own_end
        ]
    return {text: _with_postcodes(text, _merge(text, found)) for text, found in spans.items()}


def _analysed(texts: list[str], ner: bool) -> Iterator[list[Span]]:
    """presidio's findings over each text (at most WINDOW + 2 * OVERLAP characters), filtered by
    `_findings`; spaCy reads them without their over-long runs (`_for_spacy`)."""
    analyzer, nlp = analysis_engine()
    engine = analyzer.nlp_engine
    entities = TEXT_ENTITIES if ner else ID_ENTITIES
    docs = _docs(nlp, [_for_spacy(text) for text in texts], ner)
    for text, doc in zip(texts, docs, strict=True):
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
# batches: the first snapshot parts of a home at 1M interactions made outside the night analyse
# ~124,000 texts in batches of a few thousand (a slice of a table at a time).
POOL_MIN, POOL_CHUNK = 10_000, 500


@dataclass
class AnalysisPool:
    """`analyse` over `workers` processes for large batches, in this process for the rest. For a
    caller with cores to spare: snapshot parts made outside the night (`analytics.make_parts`)
    analyse every text no pack analysed (~124,000 at 1M interactions). The processes start once POOL_MIN texts were given and end at `close` (spawned, not
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
