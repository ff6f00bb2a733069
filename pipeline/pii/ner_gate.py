"""Which texts spaCy's NER reads (~90 % of a text's analysis): only a text with a capitalised word
that could be, or start, a person or place the other detectors and lists do not already find."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from pipeline.pii.places import faker_places, listed_places, world_places
from pipeline.pii.postcodes import postcode_places
from pipeline.pii.rules import (
    NAME_PAIR,
    STREET_PATTERNS,
    WORD,
    faker_names,
    is_name,
    is_proper,
    name_candidates,
)
from pipeline.pii.scripts import find_names
from pipeline.pii.words import NOT_NAMES, given_names

_STREETS = [re.compile(pattern) for pattern in STREET_PATTERNS]


@lru_cache(maxsize=1024)
def name_pairs(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) of each known first name followed by one or two capitalised words ("Priya
    Lopez"; `rules.is_name`), as the name list recognizer finds them. Cached for the last texts:
    the gate asks first, the recognizer then."""
    found, position = [], 0
    while match := NAME_PAIR.search(text, position):
        if is_name(match.group().split()):
            found.append(match.span())
            position = match.end()
        else:  # "Meet Siobhan O'Callaghan": the name may start at the next word
            position = match.end(1)
    return tuple(found)


def _found_elsewhere(text: str) -> Iterator[tuple[int, int]]:
    """The spans of people and places the detectors without the NER find in `text`."""
    yield from name_pairs(text)
    yield from listed_places(text)
    yield from find_names(text)
    yield from postcode_places(text)
    for street in _STREETS:
        yield from (m.span() for m in street.finditer(text))


# The word right before or after a found span, only spaces between: the NER may take it into the
# name ("Bugün Zeynep Yılmaz", Turkish for "today Zeynep Yılmaz", is one person to it).
_WORD_BEFORE = re.compile(r"([^\W\d_][^\W\d_'-]*)[ \t]+\Z")
_WORD_AFTER = re.compile(r"[ \t]+([^\W\d_][^\W\d_'-]*)")


def _beside(text: str, start: int, end: int) -> bool:
    """Whether a proper word (`rules.is_proper`) touches the span `text[start:end]`."""
    before = _WORD_BEFORE.search(text, max(0, start - 64), start)
    after = _WORD_AFTER.match(text, end)
    return any(m is not None and is_proper(m.group(1)) for m in (before, after))


@lru_cache(maxsize=1)
def not_name_words() -> frozenset[str]:
    """Capitalised words no list knows as a name or place: roles, days and months, nationalities,
    interjections (`words.NOT_NAMES`) and Faker's English lorem words ("Security", "Business"),
    less every first, last and given name and every place of the lists ("Hope", "Nice")."""
    from faker.providers.lorem.en_US import Provider

    first, last = faker_names()
    words = NOT_NAMES | {w.title() for w in Provider.word_list}
    return frozenset(words - first - last - given_names() - world_places())


# A list item's marker: a bullet or a number ("- Great news", "1) Open Settings"), after which a
# word opens an item as a word opens a sentence (`rules.starts_sentence`).
_ITEM_MARKER = re.compile(r"(?:\A|\s)(?:[-*•]|\(?\d{1,2}[.)])[ \t]+\Z")


def _opens_item(text: str, start: int) -> bool:
    """Whether the word at `start` opens a list item, and no list knows it as a name or place."""
    first, last = faker_names()
    word = WORD.match(text, start)
    if word is None or word.group() in first or word.group() in last:
        return False
    return word.group() not in faker_places() and bool(
        _ITEM_MARKER.search(text[max(0, start - 32) : start])
    )


def needs_ner(text: str) -> bool:
    """Whether the NER could add a person or place to what the other detectors find here: a
    candidate word (`rules.name_candidates`) that is not inside a name, place or address they
    already found (`_found_elsewhere`), not a word of `not_name_words` standing alone (the NER's
    one-word person must be a listed name, `detect._findings`; two capitalised words side by
    side may be a person whatever they are) and not an unlisted word opening a list item (as
    one opening a sentence); or a proper word beside a span they found."""
    spans: list[tuple[int, int]] | None = None
    for match in name_candidates(text):
        if spans is None:
            spans = list(_found_elsewhere(text))
            if any(_beside(text, s, e) for s, e in spans):
                return True
        start, end = match.span()
        if any(s <= start and end <= e for s, e in spans):
            continue
        if match.group() in not_name_words() and not _beside(text, start, end):
            continue
        if _opens_item(text, start):
            continue
        return True
    return False
