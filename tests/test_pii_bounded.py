"""Bounded PII analysis (issue 40): long texts are analysed in windows, so no text costs more than
its length times a constant — a quarantined line of 200,000 nested brackets stalled the analytics
build in spaCy's tokenizer — and the publish guard's patterns stay linear on such texts."""

import importlib
import re
from collections import Counter
from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.pii import analyse, detect
from pipeline.pii.detect import LONG_TOKEN, OVERLAP, WINDOW, Span, _merge, analysis_engine, pieces
from pipeline.pii.guard import find_spans
from pipeline.pii.redactor import Redactor
from pipeline.publish.snapshot_redaction import redacting

# `pipeline.pii.detect` is also the name of a function in `pipeline.pii`.
detect_module = importlib.import_module("pipeline.pii.detect")
PIECE_MAX = WINDOW + 2 * OVERLAP
BRACKETS = 200_000  # the red team's line: ~400 KB, under the 1 MiB line limit


@pytest.fixture
def seen(monkeypatch) -> Iterator[dict[str, list[str]]]:
    """What the engine and spaCy are given during a test (the real engine, spied on)."""
    analyzer, nlp = analysis_engine()
    given: dict[str, list[str]] = {"engine": [], "spacy": []}
    analyze, make_doc, pipe = analyzer.analyze, nlp.make_doc, nlp.pipe

    def spy_analyze(text, *args, **kwargs):
        given["engine"].append(text)
        return analyze(text, *args, **kwargs)

    def spy_make_doc(text):
        given["spacy"].append(text)
        return make_doc(text)

    def spy_pipe(texts, *args, **kwargs):
        texts = list(texts)
        given["spacy"] += texts
        return pipe(texts, *args, **kwargs)

    monkeypatch.setattr(analyzer, "analyze", spy_analyze)
    monkeypatch.setattr(nlp, "make_doc", spy_make_doc)
    monkeypatch.setattr(nlp, "pipe", spy_pipe)
    yield given


def _bounded(given: dict[str, list[str]]) -> None:
    assert given["engine"] and given["spacy"]
    assert max(map(len, given["engine"] + given["spacy"])) <= PIECE_MAX
    long_run = re.compile(rf"\S{{{LONG_TOKEN + 1},}}")
    assert not any(long_run.search(text) for text in given["spacy"])


def test_pieces_own_the_text_once_and_read_a_margin_around() -> None:
    text = " ".join(f"word{i % 97}" for i in range(12_000))[:65_536]
    found = pieces(text)
    assert len(found) > 30
    assert [p.own_start for p in found[1:]] == [p.own_end for p in found[:-1]]
    assert found[0].own_start == 0 and found[-1].own_end == len(text)
    for piece in found:
        assert piece.end - piece.start <= PIECE_MAX
        assert piece.start == max(0, piece.own_start - OVERLAP)
        assert piece.end == min(len(text), piece.own_end + OVERLAP)
        assert piece.own_start == 0 or text[piece.own_start - 1] == " "  # cut at whitespace
    assert pieces("short text") == [detect_module.Piece(0, 10, 0, 10)]
    no_space = pieces("x" * 5_000)  # nowhere to cut: cut anyway
    assert [p.own_start for p in no_space] == [0, WINDOW, 2 * WINDOW]


def test_values_on_the_cuts_of_a_65536_character_input_are_found(seen) -> None:
    # The only whitespace is inside the phones: every cut falls inside one.
    phones = [f"+1 {area} 555 01{n:02d}" for area in (415, 212, 617) for n in range(100)]
    chunks, n = [], 0
    while sum(map(len, chunks)) < 65_536:
        chunks.append(f"tel.({phones[n % 300]}),mail:user{n}@mail.example;")
        n += 1
    text = "".join(chunks)[:65_536]
    redacted, kinds = analyse([text])[0]
    planted_phones = text.count("+1 ")
    assert Counter(kinds) == {"phone": planted_phones, "email": text.count("@mail.example")}
    assert "555 01" not in redacted and "@mail.example" not in redacted
    assert redacted.count("[PHONE]") == planted_phones
    phone_spans = [m.span() for m in re.finditer(r"\+1 \d{3} 555 01\d\d", text)]
    cuts = [p.own_start for p in pieces(text)[1:]]
    assert len(cuts) >= 30
    assert all(any(s < cut < e for s, e in phone_spans) for cut in cuts)
    _bounded(seen)


def _bracket_line() -> str:
    return (
        '{"schema_version": 1, "event_id": "e1", "tenant_id": "acme", "input": "mail '
        'ana@mail.example", "metadata": ' + "[" * BRACKETS + "]" * BRACKETS + ', "output": '
        '"call +1 415 555 0132 or Priya Lopez"}'
    )


def test_the_nested_bracket_line_is_analysed_in_bounded_pieces(seen) -> None:
    line = _bracket_line()
    (spans,) = detect([line])
    assert [(line[s.start : s.end], s.kind) for s in spans] == [
        ("ana@mail.example", "email"),
        ("+1 415 555 0132", "phone"),
        ("Priya Lopez", "person"),
    ]
    _bounded(seen)
    # Pieces of nothing but brackets hold no PII: only the line's two ends are analysed.
    assert len(seen["engine"]) <= 4


def test_the_analytics_build_redacts_the_quarantined_line(seen) -> None:
    rows = pa.table({"tenant_id": ["acme"], "reason": ["invalid_json"], "raw": [_bracket_line()]})
    found: Counter[str] = Counter()
    redacted = redacting(Redactor(b"test-key"), found)(rows)
    raw = redacted["raw"][0].as_py()
    assert found == {"email": 1, "phone": 1, "person": 1}
    assert raw.startswith('{"schema_version": 1, "event_id": "e1", "tenant_id": "acme", "input"')
    assert raw.endswith('"output": "call [PHONE] or [PERSON]"}')
    assert "mail [EMAIL]" in raw and raw.count("[") == BRACKETS + 3
    _bounded(seen)


def _merge_unbounded(text: str, spans: list[Span]) -> list[Span]:
    """`_merge` as it was before it was made linear: each span widened over whole words."""
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
            best = max(last, span, key=lambda s: (s.kind not in {"person", "location"}, s.score))
            merged[-1] = Span(last.start, max(last.end, end), best.kind, best.score)
        else:
            merged.append(span)
    return merged


@settings(derandomize=True, max_examples=300, deadline=None)
@given(
    st.text(alphabet="ab1 .-", min_size=1, max_size=40),
    st.lists(
        st.tuples(
            st.integers(0, 40),
            st.integers(1, 8),
            st.sampled_from(["phone", "person", "email"]),
            st.sampled_from([0.5, 0.85]),
        ),
        max_size=8,
    ),
)
def test_linear_merge_is_the_merge_it_replaced(text: str, raw: list) -> None:
    spans = [
        Span(min(s, len(text) - 1), min(s + n, len(text)), kind, score) for s, n, kind, score in raw
    ]
    assert _merge(text, spans) == _merge_unbounded(text, spans)


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ("a" * 200_000 + " user@mail.example", ["email"]),  # a long run before no @
        ("a-" * 100_000 + " write to user@mail.example", ["email"]),
        ("1:: " * 50_000, ["ip_address"] * 50_000),  # a value every 4 characters
        (_bracket_line(), ["email", "phone"]),
        ("version " * 20_000 + "10.0.0.1", []),  # a version number, however long the text
        ("x" * 100 + "@mail.example", ["email"]),  # a local part over 64: still an e-mail
    ],
    ids=["letters", "dashes", "many-values", "brackets", "version", "long-local-part"],
)
def test_the_guard_stays_linear_and_finds_the_same(text: str, kinds: list[str]) -> None:
    assert [kind for _, _, kind in find_spans(text)] == kinds
