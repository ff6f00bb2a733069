"""Where a tenant's names come from besides the detector (SPEC §5 round 4): the given names of
open name lists used as names in its texts, the people its texts address or introduce ("Hey Nate!",
"I'm Jolene"), the speakers who open its turns ("Nate: …") and the people its identifiers name
("jane.doe@example.com", a contact id "Siobhan O'Callaghan"). Each source is a vectorised pass
over the tenant's distinct texts; `pipeline.pii.names` weighs them against look-alikes."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

import polars as pl

from pipeline.pii.rules import faker_names, is_name
from pipeline.pii.words import NOT_NAMES, given_names

# A capitalised word (a name's shape): polars' regex; `'` and `’` join "O'Callaghan".
NAME_WORD = r"\p{Lu}[\p{Ll}\p{Lm}]+(?:['’-]\p{Lu}?[\p{Ll}\p{Lm}]+)*"
_WORDS = r"[^\W\d_][^\W\d_'’-]*"
# Words that open a text or a sentence (after . ! ? : ; and spaces, maybe quotes or brackets):
# their capital says nothing about them being names.
_OPENING = r"(?:^|[.!?:;…]['\"”’)\]]*\s+)['\"“‘(\[]*\p{Lu}[\p{L}'’-]*"
# A greeting, a thanks or a farewell, then a capitalised word and a pause: who is addressed.
_GREETINGS = (
    r"hi|hey|hello|hiya|howdy|dear|thanks|thank you|thx|ty|cheers|bye|goodbye|see you|"
    r"congrats|congratulations|welcome|good morning|good evening|good night|morning|evening|"
    r"sorry|love you|miss you|way to go|well done|great job|nice one"
)
_ADDRESSED = rf"(?:^|[\s,.!?;:(\"“])(?i:{_GREETINGS})[,!]?\s+({NAME_WORD})\s*(?:[,.!?;:)…]|$)"
# "I'm Jolene", "my name is Priya", "this is Nate speaking", "call me Sam".
_INTRODUCED = (
    rf"(?i:\bi'm|\bi’m|\bi am|\bmy name is|\bmy name's|\bthis is|\bcall me)\s+({NAME_WORD})\b"
)
# Speakers opening a turn ("Nate: …"): a label, not a sentence.
_LABEL = rf"^\s*({_WORDS})\s*:"


def listed(word: str) -> bool:
    """In a given-name or family-name list, common word or not ("Grace" of "Grace Hopper")."""
    return word in given_names() or word in faker_names()[1]


def given_name(word: str) -> bool:
    """A given name of the lists and not a common word ("Will") or a nationality ("German")."""
    return word not in NOT_NAMES and word in given_names()


def known_name(word: str) -> bool:
    """A given name (`given_name`) or a family name of Faker's lists ("Raghunathan")."""
    return given_name(word) or (word not in NOT_NAMES and word in faker_names()[1])


def counts(words: pl.Series) -> dict[str, int]:
    return dict(words.drop_nulls().rename("word").value_counts(name="n").iter_rows())


def mid_sentence(texts: pl.Series) -> dict[str, int]:
    """Per capitalised word, its uses that do not open a text or a sentence: where a capital marks
    a proper name ("… met Jolene at …"), not the start of a sentence ("Yep, …")."""
    inner = texts.drop_nulls().str.replace_all(_OPENING, " ")
    words = inner.str.extract_all(rf"\b{NAME_WORD}").explode()
    return counts(words.str.replace(r"['’]s$", ""))


_DETERMINED = rf"(?i:\b(?:the|a|an|this|that|these|those|our|your|their|its)\s+){NAME_WORD}"


def determined(texts: pl.Series) -> dict[str, int]:
    """Per capitalised word, its uses after a determiner: a thing's ("the Mercedes", "our
    Jasper server", "an Alexa"), which a person's name rarely has."""
    found = texts.drop_nulls().str.extract_all(_DETERMINED).explode()
    return counts(found.str.extract(rf"({NAME_WORD})$"))


def addressed(texts: pl.Series) -> dict[str, int]:
    """Per capitalised word, how often a text greets, thanks or bids farewell to it, or someone
    introduces themselves as it ("Hey Nate!", "Thanks, Jolene.", "I'm Priya")."""
    texts = texts.drop_nulls()
    return counts(
        pl.concat([texts.str.extract_all(_ADDRESSED), texts.str.extract_all(_INTRODUCED)])
        .explode()
        .str.extract(rf"({NAME_WORD})\W*$")
    )


def speaker_labels(texts: pl.Series) -> dict[str, int]:
    """Per capitalised word, the texts it opens as a speaker label ("Jon: …")."""
    opened = texts.drop_nulls().str.extract(_LABEL, 1).drop_nulls()
    return counts(opened.filter(opened.str.contains(r"^\p{Lu}")))


def identifier_names(values: Iterable[str]) -> set[str]:
    """The name words of identifiers that name a person: an e-mail's local part or an id written
    as a name ("jane.doe@example.com", "priya_lopez", "Siobhan O'Callaghan"): all its letter words
    (≥ 3 letters) when one of them is a known given name."""
    ids = pl.Series("id", list(values), dtype=pl.String).drop_nulls().unique()
    local = ids.str.replace(r"@.*$", "")
    parts = (
        pl.DataFrame({"id": local, "word": local.str.extract_all(r"[^\W\d_]{3,}")})
        .explode("word")
        .drop_nulls()
        .with_columns(
            pl.col("word").str.slice(0, 1).str.to_uppercase()
            + pl.col("word").str.slice(1).str.to_lowercase()
        )
    )
    if parts.is_empty():
        return set()
    given = pl.Series(sorted(given_names() - NOT_NAMES), dtype=pl.String)
    named = parts.filter(pl.col("word").is_in(given.implode()))["id"].unique()
    return set(parts.filter(pl.col("id").is_in(named.implode()))["word"].to_list()) - NOT_NAMES


_ID_WORD = re.compile(r"[^\W\d_]{2,}")


def names_a_person(identifier: str) -> bool:
    """Whether an identifier or a label names a person by its words: a known given name then a
    capitalised word ("Bartholomew Quigley desk", as the name list finds names in text), or,
    written in lower case or joined ("jane_doe", "aiko.lopez"), a given name then a family
    name of the lists. One id at a time: ids are few and cached (pipeline.pii.redactor)."""
    words = _ID_WORD.findall(identifier)
    for first, second in itertools.pairwise(words):
        if first[:1].isupper() and second[:1].isupper() and is_name([first, second]):
            return True
        if given_name(first.title()) and second.title() in faker_names()[1]:
            return True
    return False


def preview_names(texts: pl.Series, labels: pl.Series) -> set[str]:
    """Stricter than a tenant's names, for previews shown before tonight's names are known (the
    Dagster UI's metadata): every capitalised word of `texts` that is a listed given or family
    name or is used inside a sentence, and every capitalised word of `labels` (identifiers and
    labels, whose words have no sentence around them), unless it is a common, calendar, role or
    stop word."""
    from spacy.lang.en.stop_words import STOP_WORDS

    def words(values: pl.Series) -> dict[str, int]:
        return counts(values.drop_nulls().str.extract_all(rf"\b{NAME_WORD}").explode())

    inside = mid_sentence(texts)
    candidates = {w for w in words(texts) if w in inside or listed(w)} | set(words(labels))
    return {
        w for w in candidates if len(w) >= 3 and w not in NOT_NAMES and w.lower() not in STOP_WORDS
    }
