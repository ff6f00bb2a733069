"""A tenant's names: every person found or given anywhere in the tenant (the detector's findings
and the sources of `pipeline.pii.lexicon`), redacted in every text of that tenant (SPEC §5 rounds
3 and 4), case-insensitively, also where the detector missed them or the text is derived (a
lower-cased conflict subject, a tag); an identifier or label that holds one is pseudonymized."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import polars as pl

from pipeline.pii import lexicon
from pipeline.pii.places import faker_places, world_places
from pipeline.pii.rules import (
    COMMON_WORD_NAMES,
    PLACEHOLDER,
    WORD,
    faker_names,
)

_PLACEHOLDERS = re.compile("|".join(re.escape(p) for p in PLACEHOLDER.values()))
_POSSESSIVE = re.compile(r"['’]s$")
_WORDS = r"[^\W\d_][^\W\d_'’-]*"  # rules.WORD, also with a curly apostrophe (polars' regex)
# A word is a tenant's name when the detector found it as (part of) a person at least MIN_FOUND
# times, or once in a full name ("Priya Raghunathan"), and in at least MIN_SHARE of the texts'
# capitalised uses of it: a product or a common word the NER sometimes calls a person ("Safari",
# "React", issue 43) is mostly not found as one, and a word used in lower case more than
# MAX_LOWER of its capitalised uses is an ordinary word ("will", "grace"), never a name to spread.
# A found word that is no known name must also be used inside a sentence at least once: the NER
# finds "Aww Mel" as one person, but "Aww" only ever opens a sentence.
MIN_FOUND = 2
# 0.1: on five LoCoMo conversations (one tenant) the speakers the NER finds least are found in
# 5-20 % of their capitalised uses (a turn's "Jon: …" prefix is mostly missed); 0.2 spread 6 of 9
# speakers (names left in memories' text: 1,330 → 936 of 3,843 raw mentions), 0.1 spreads 7 (691).
MIN_SHARE = 0.1
MAX_LOWER = 0.1
MIN_CHARS = 3
# A given name of the lists (`lexicon.given_names`) is one of the tenant's names once its texts
# use it capitalised inside a sentence MIN_LIST_USES times ("… told Jolene …"), unless it is a
# place ("Paris") or a thing: after a determiner in more than MAX_DETERMINED of those uses ("the
# Mercedes plan", "an Alexa", "our Jasper server").
MIN_LIST_USES = 2
MAX_DETERMINED = 0.1
# A word that opens texts as their speaker ("Jon: I'll call her", a transcript's turn) in at least
# MIN_LABELS texts is a name however rarely the NER finds it there, if the NER found it as a person
# MIN_FOUND times, it is a known given name or the texts address it ("Hey Nate!"): the NER misses
# most "Name: …" prefixes, and a label that is no name ("Note:", "Agent:") is none of these.
MIN_LABELS = 3
# A word the texts greet, thank or introduce ("Hey Nate!", "I'm Jolene") MIN_ADDRESSED times, or
# once if it is a known given name.
MIN_ADDRESSED = 2


@dataclass(frozen=True)
class TenantNames:
    """The words to redact in every text of one tenant, and how their matcher is built."""

    words: frozenset[str]
    # those found only after another word of a full name: a capitalised word before one is its
    # first name ("Priyanka Raghunathan" where "Priya Raghunathan" was found)
    surnames: frozenset[str] = frozenset()

    def with_words(self, more: frozenset[str]) -> TenantNames:
        return self if more <= self.words else TenantNames(self.words | more, self.surnames)

    def frame(self) -> pl.DataFrame:
        """The words as a table (word, surname), as they are kept beside the redaction cache."""
        words = sorted(self.words)
        return pl.DataFrame(
            {"word": words, "surname": [w in self.surnames for w in words]},
            schema={"word": pl.String, "surname": pl.Boolean},
        )

    @classmethod
    def of_frame(cls, frame: pl.DataFrame) -> TenantNames:
        surnames = frame.filter(pl.col("surname"))["word"].to_list()
        return cls(frozenset(frame["word"].to_list()), frozenset(surnames))

    def _names(self) -> str:
        return "|".join(re.escape(w) for w in sorted(self.words, key=lambda w: (-len(w), w)))

    def pattern(self) -> re.Pattern[str]:
        """One alternation, case-insensitive on the names (a lower-cased subject holds them too),
        with the word on either side, taken in when it is a name too (`_sub`)."""
        beside = r"[^\W\d_][\w'’-]*"
        return re.compile(
            rf"(?:\b(?P<pre>{beside})[ \t]+)?\b(?i:(?P<name>{self._names()}))\b"
            rf"(?:[ \t]+(?P<post>{beside}))?"
        )

    def redact(self, series: pl.Series) -> tuple[pl.Series, int]:
        """`series` (String or List(String)) with every name replaced by [PERSON]; how many."""
        if not self.words or series.dtype not in (pl.String, pl.List(pl.String)):
            return series, 0
        flat = series.explode() if series.dtype == pl.List(pl.String) else series
        # Only the distinct texts that hold a name (one vectorised test) go through Python's re.
        texts = flat.drop_nulls().unique()
        texts = texts.filter(texts.str.contains(f"(?i)\\b(?:{self._names()})\\b"))
        if texts.is_empty():
            return series, 0
        pattern = self.pattern()
        mapping: dict[str, str] = {}
        replaced: dict[str, int] = {}
        for text in texts.to_list():
            mapping[text], replaced[text] = self._sub(pattern, text)
        uses = (
            flat.rename("text").value_counts(name="n").filter(pl.col("text").is_in(list(mapping)))
        )
        total = sum(replaced[text] * n for text, n in uses.iter_rows())
        if series.dtype == pl.List(pl.String):
            return series.list.eval(pl.element().replace(mapping)).alias(series.name), total
        return series.replace(mapping).alias(series.name), total

    def _sub(self, pattern: re.Pattern[str], text: str) -> tuple[str, int]:
        """`text` with each name, and a name beside it, replaced: a capitalised known first or
        last name, another of the tenant's names, or a capitalised word (not a stop word) before
        a surname."""
        from spacy.lang.en.stop_words import STOP_WORDS

        first, last = faker_names()
        lower = self._lower
        surnames = {w.lower() for w in self.surnames}

        def joins(word: str | None, before_surname: bool = False) -> bool:
            if not word or not word[0].isupper() or word in COMMON_WORD_NAMES:
                return False
            bare = _POSSESSIVE.sub("", word)
            if before_surname and bare.lower() not in STOP_WORDS and bare[1:] == bare[1:].lower():
                return True
            return bare in first or bare in last or bare.lower() in lower

        def one(match: re.Match[str]) -> str:
            pre, post = match.group("pre"), match.group("post")
            head = tail = ""
            if pre and not joins(pre, match.group("name").lower() in surnames):
                head = text[match.start("pre") : match.start("name")]
            if post and not joins(post):
                tail = text[match.end("name") : match.end("post")]
            return head + PLACEHOLDER["person"] + tail

        return pattern.subn(one, text)

    def in_identifiers(self, values: pl.Series) -> pl.Series:
        """Which of `values` (identifiers, labels) hold one of the names as a word of letters,
        in any case ("jolene_smith", "desk-nate"): they are pseudonymized like PII."""
        if not self.words:
            return pl.Series(values.name, [False] * len(values), dtype=pl.Boolean)
        letters = r"[^\p{L}]"
        named = rf"(?i)(?:^|{letters})(?:{self._names()})(?:{letters}|$)"
        return values.str.contains(named).fill_null(False)

    @property
    def _lower(self) -> frozenset[str]:
        return frozenset(w.lower() for w in self.words)


def found_people(findings: pl.DataFrame, kind: str = "person") -> list[str]:
    """The values of a kind the detector found (people by default), one per finding, read off
    each text beside its redaction (`text`, `redacted`, `kinds`: the redaction cache's rows), so
    the names themselves are never stored: only the keyed hashes and redacted texts the cache
    already holds."""
    rows = findings.filter(pl.col("kinds").list.contains(kind)).select("text", "redacted")
    placeholder = PLACEHOLDER[kind]
    people = []
    for text, redacted in rows.iter_rows():
        pieces = _PLACEHOLDERS.split(redacted)
        kinds = _PLACEHOLDERS.findall(redacted)
        match = re.fullmatch("(.+?)".join(re.escape(p) for p in pieces), text, re.DOTALL)
        if match is None:  # the redaction is not the text's (cannot be aligned): nothing to read
            continue
        people += [v for v, k in zip(match.groups(), kinds, strict=True) if k == placeholder]
    return people


def _people_called_places(findings: pl.DataFrame) -> list[str]:
    """Full names the NER called places: two or more capitalised words, none of them a place of
    the lists ("Olusegun Adeyemi" is no place): taken as a person's full name."""
    return [
        value
        for value in found_people(findings, "location")
        if len(words := WORD.findall(value)) > 1
        and all(w[:1].isupper() and w not in world_places() for w in words)
    ]


def tenant_names(
    findings: pl.DataFrame,
    texts: pl.Series,
    declared: Iterable[str] = (),
    identifiers: Iterable[str] = (),
) -> TenantNames:
    """The tenant's names, from every source it has: the people the detector found (`findings`),
    the speakers opening its turns, the people its texts address or introduce, the given names of
    the name lists used as names in its `texts` (its distinct original free texts), the
    `declared` people (a conversation log's speakers) and the people its `identifiers` name
    (contact and user ids; `pipeline.pii.lexicon`). Weighed against look-alikes: see MIN_FOUND,
    MIN_SHARE, MIN_LIST_USES, MIN_LABELS, MIN_ADDRESSED and MAX_LOWER."""
    from spacy.lang.en.stop_words import STOP_WORDS

    found: Counter[str] = Counter()
    in_full: set[str] = set()  # words of a full name found with a known name in it
    leading: set[str] = set()  # words found first in a value ("Priya" of "Priya Raghunathan")
    called_places = _people_called_places(findings)
    for value in found_people(findings) + called_places:
        words = [_POSSESSIVE.sub("", w) for w in WORD.findall(value)]
        words = [w for w in words if w[:1].isupper() and w[1:] == w[1:].lower()]
        found.update(words)
        leading.update(words[:1])
        named = any(map(lexicon.listed, words)) or value in called_places  # not "Whispering Pines"
        if len(words) > 1 and named:
            in_full.update(words)
    texts = texts.drop_nulls()
    mid = lexicon.mid_sentence(texts)
    labels, called = lexicon.speaker_labels(texts), lexicon.addressed(texts)
    determined = lexicon.determined(texts)
    given = {w for person in declared for w in WORD.findall(person) if w[:1].isupper()}
    given |= lexicon.identifier_names(identifiers)
    # A place of the lists or of the detector's findings is no given name ("Paris", "Austin").
    places = faker_places() | {
        w for v in found_people(findings, "location") for w in WORD.findall(v)
    }

    def by_detector(w: str) -> bool:
        n, confirmed = found[w], mid.get(w, 0) > 0 or lexicon.known_name(w)
        return (n >= MIN_FOUND or w in in_full) and n >= MIN_SHARE * counts.get(w, 0) and confirmed

    def by_list(w: str) -> bool:
        uses, things = mid.get(w, 0), determined.get(w, 0)
        listed = lexicon.given_name(w) and w not in places
        return uses >= MIN_LIST_USES and listed and things <= MAX_DETERMINED * uses

    def by_label(w: str) -> bool:
        vouched = found[w] >= MIN_FOUND or lexicon.known_name(w) or called.get(w, 0) > 0
        return labels.get(w, 0) >= MIN_LABELS and vouched

    def by_address(w: str) -> bool:
        n = called.get(w, 0)
        return n >= MIN_ADDRESSED or (n > 0 and lexicon.known_name(w))

    wanted = set(found) | given | set(labels) | set(called) | {w for w in mid if by_list(w)}
    if not wanted:
        return TenantNames(frozenset())
    counts = _word_counts(texts, wanted | {w.lower() for w in wanted})
    names = {
        w
        for w in wanted
        if len(w) >= MIN_CHARS
        and w not in lexicon.NOT_NAMES
        and w.lower() not in STOP_WORDS
        and (w in given or by_detector(w) or by_list(w) or by_label(w) or by_address(w))
        and counts.get(w.lower(), 0) <= MAX_LOWER * counts.get(w, 0)
    }
    return TenantNames(frozenset(names), frozenset((names & in_full) - leading))


def _word_counts(texts: pl.Series, wanted: Iterable[str]) -> dict[str, int]:
    """How often each of `wanted` is used as a word in `texts` (case kept, possessive dropped)."""
    # A text without a capital (a lower-cased subject) says nothing about how a word is written.
    written = texts.drop_nulls()
    words = (
        written.filter(written.str.contains(r"\p{Lu}"))
        .str.extract_all(_WORDS)
        .explode()
        .drop_nulls()
        .str.replace(r"['’]s$", "")
        .rename("word")
    )
    wanted_words = pl.Series("word", sorted(set(wanted)), dtype=pl.String)
    counts = words.filter(words.is_in(wanted_words.implode())).value_counts(name="n")
    return dict(counts.iter_rows())
