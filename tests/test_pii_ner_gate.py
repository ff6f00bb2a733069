"""The NER's gate (pipeline/pii/ner_gate.py, issue 53 item 6): which texts spaCy's NER reads, and
that skipping the others changes no redaction on the labelled corpus, LoCoMo and generated texts."""

from __future__ import annotations

import importlib

import pytest

from bench.ner_gate import LOCOMO, locomo_turns
from bench.sections_pii_pack import generator_text
from pipeline.generate.pii_corpus import corpus, look_alikes_world
from pipeline.pii.ner_gate import needs_ner, not_name_words
from pipeline.pii.rules import may_hold_name

detect = importlib.import_module("pipeline.pii.detect")


@pytest.mark.parametrize(
    ("text", "reads"),
    [
        # every capitalised word inside what another detector found: no NER
        ("Please forward the contract to Priya Lopez before Friday.", False),
        ("I am flying to Paris next week.", False),
        ("Ship the replacement to 221B Baker Street, please.", False),
        ("Upgrade to the Business plan.", False),  # a common word standing alone
        ("Key points:\n- Sorry, the sync failed.", True),  # "Key" opens the text and is a surname
        ("Details: 1) Open the app 2) Great, done.", False),  # a list item's first word
        ("Thanks, we moved the call to Monday.", False),
        # a name or place the lists do not cover on their own: the NER reads it
        ("Thanks for flagging this, Fatima.", True),  # one first name: no pair to find it
        ("Their name is Carlos. What do I say?", True),
        ("Priya called yesterday.", True),  # a known name opening the text
        ("John: we went hiking.", True),  # a speaker label
        ("We met Zorblatt at the fair.", True),  # no list knows it, inside a sentence
        ("Upgrade to the Business Plan.", True),  # two capitalised words may be a person
        ("Bugün Zeynep Yılmaz ile konuştum.", True),  # a capitalised word beside a found name
        ("Meet Priya Lopez today.", True),  # "Meet" beside the name: the NER may take it in
        ("Zorblatt called.", False),  # what the sentence rule gave up before (`may_hold_name`)
        ("all lower case, sarah connor too", False),  # lower-case names: pipeline.pii.scripts
    ],
)
def test_the_ner_reads_only_texts_where_it_could_add_a_name_or_place(
    text: str, reads: bool
) -> None:
    assert needs_ner(text) is reads


def test_the_gate_never_reads_more_than_the_sentence_rule() -> None:
    """`needs_ner` narrows `may_hold_name`: a text the older gate skipped stays skipped."""
    texts = [r.text for r in corpus()] + [r.text for r in look_alikes_world()]
    assert all(may_hold_name(t) for t in texts if needs_ner(t))


def test_no_listed_name_or_place_counts_as_a_common_word() -> None:
    words = not_name_words()
    assert {"Friday", "Business", "Yeah", "Security"} <= words
    assert not words & {"Hope", "Grace", "Max", "Nice", "Paris", "Christian", "Long"}


def _in_repo() -> list[str]:
    """The labelled corpus and 200 generated texts (~670 distinct texts)."""
    texts = [r.text for r in corpus()] + [r.text for r in look_alikes_world()]
    return texts + [generator_text(p, i) for i in range(100) for p in ("text", "answer")]


def _locomo() -> list[str]:
    """Every 8th LoCoMo turn (~350)."""
    if not LOCOMO.is_dir():
        pytest.skip(f"LoCoMo data not in {LOCOMO}")
    return locomo_turns(LOCOMO)[::8]


@pytest.mark.parametrize("sample", [_in_repo, _locomo], ids=["labelled_and_generated", "locomo"])
def test_the_gated_and_ungated_redactions_are_identical(sample, monkeypatch) -> None:
    """Measured in full (`python -m bench.ner_gate`): no text differs among the 479 labelled
    texts, 2,760 LoCoMo turns and 2,322 generated texts, while the NER reads 57 % fewer of the
    labelled and 42 % fewer of the generated texts."""
    texts = list(dict.fromkeys(sample()))
    gated = detect.analyse(texts)
    monkeypatch.setattr(detect, "needs_ner", may_hold_name)
    ungated = detect.analyse(texts)
    differ = [(t, a, b) for t, a, b in zip(texts, ungated, gated, strict=True) if a != b]
    assert differ == []
    assert sum(may_hold_name(t) and not needs_ner(t) for t in texts) > 0
