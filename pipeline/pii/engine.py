"""Presidio's analyzer with our recognizers (phonenumbers' matcher, checksummed cards and IBANs,
a known-name list, street patterns) over spaCy's NER only — built once per process."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import spacy
from presidio_analyzer import (
    AnalyzerEngine,
    EntityRecognizer,
    Pattern,
    PatternRecognizer,
    RecognizerRegistry,
    RecognizerResult,
)
from presidio_analyzer.nlp_engine import NlpArtifacts, SpacyNlpEngine
from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    PhoneRecognizer,
    SpacyRecognizer,
    UsSsnRecognizer,
)

from pipeline.pii.national_ids import NATIONAL_ID, SSN, find_national_ids
from pipeline.pii.ner_gate import name_pairs
from pipeline.pii.phones import fitting_regions, keeps
from pipeline.pii.places import listed_places
from pipeline.pii.postcodes import postcode_places
from pipeline.pii.rules import (
    IPV4_PADDED,
    NAME_LIST_SCORE,
    NANP_PHONE,
    PHONE_LENIENCY,
    PHONE_REGIONS,
    SPACY_MODEL,
    STREET_PATTERNS,
    digit_runs,
    faker_names,
    ipv4_padded,
    phone_runs,
)
from pipeline.pii.scripts import find_names, name_lists


class NerOnlyEngine(SpacyNlpEngine):  # type: ignore[misc]
    """spaCy NER only; context words are matched on lower-cased tokens (no lemmatizer). The
    artifacts are built once per text (presidio's own builds its keywords, then we rebuilt them
    from our lemmas: a quarter of a text's analysis), and a word's stop/punct flags are looked
    up once per process, not once per token."""

    _flags: dict[str, tuple[bool, bool]]

    def _doc_to_nlp_artifact(self, doc: Any, language: str) -> Any:
        entities, scores = self._get_updated_entities(
            self._get_entities(doc), self._get_scores_for_entities(doc)
        )
        return NlpArtifacts(
            entities=entities,
            tokens=doc,
            tokens_indices=[token.idx for token in doc],
            lemmas=[token.lower_ for token in doc],
            nlp_engine=self,
            language=language,
            scores=scores,
        )

    def _lexeme_flags(self, word: str, language: str) -> tuple[bool, bool]:
        flags = self.__dict__.setdefault("_flags", {})
        if word not in flags:
            lexeme = self.get_nlp(language).vocab[word]
            flags[word] = (lexeme.is_stop, lexeme.is_punct)
        return flags[word]

    def is_stopword(self, word: str, language: str) -> bool:
        return self._lexeme_flags(word, language)[0]

    def is_punct(self, word: str, language: str) -> bool:
        return self._lexeme_flags(word, language)[1]


class NameListRecognizer(EntityRecognizer):  # type: ignore[misc]
    """A known first name followed by one or two capitalised words ("Priya Lopez"): the
    small NER model misses about one full name in eight in chat text."""

    def load(self) -> None:
        faker_names()

    def analyze(self, text: str, entities: list[str], nlp_artifacts: Any) -> list[Any]:
        return [RecognizerResult("PERSON", s, e, NAME_LIST_SCORE) for s, e in name_pairs(text)]


_URL_PUNCTUATION = "/?=&"


class Emails(EmailRecognizer):  # type: ignore[misc]
    """Every address shape counts, whatever its domain ("a@b.example", "x@host.local"); and
    presidio's own check would fetch the public suffix list at run time."""

    def validate_result(self, pattern_text: str) -> bool:
        return True

    def analyze(self, text: str, entities: list[str], *args: Any, **kwargs: Any) -> list[Any]:
        """An address inside a URL starts after its query's `/`, `?`, `=` or `&`
        (`…/?to=jane@example.com`): the rest of the URL is no part of it."""
        results = super().analyze(text, entities, *args, **kwargs)
        for result in results:
            local = text[result.start : result.end].split("@", 1)[0]
            cut = max(local.rfind(c) for c in _URL_PUNCTUATION)
            if 0 <= cut < len(local) - 1:
                result.start += cut + 1
        return results


def _any_number(region: str, match: Any) -> bool:
    """Every number phonenumbers finds in `PHONE_REGIONS` counts (`plausible_phone` later)."""
    return True


class Phones(PhoneRecognizer):  # type: ignore[misc]
    """phonenumbers' matcher, region by region (US first: it also takes every +CC number),
    stopping as soon as no run of digits long enough for a phone is left unexplained: one
    region costs about 2 ms, most texts need one or none. After `PHONE_REGIONS`, every other
    region where a run left could be one of its numbers (pipeline.pii.phones)."""

    def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> Any:
        results: list[Any] = []
        masked = text
        for start, end, _ in find_national_ids(text):  # explained: no region need try them
            masked = masked[:start] + " " * (end - start) + masked[end:]
        masked = self._matched(text, masked, self.supported_regions, results, _any_number)
        if digit_runs(masked):  # every other region, where a run left could be one of its numbers
            self._matched(text, masked, fitting_regions(phone_runs(masked)), results, keeps)
        return results

    def _matched(
        self,
        text: str,
        masked: str,
        regions: Sequence[str],
        results: list[Any],
        kept: Callable[[str, Any], bool],
    ) -> str:
        """`masked` with the numbers found in `regions` (and `kept`) blanked and added to
        `results`."""
        import phonenumbers

        for region in regions:
            if not digit_runs(masked):
                break
            for match in phonenumbers.PhoneNumberMatcher(masked, region, PHONE_LENIENCY):
                if not kept(region, match):
                    continue
                results.append(self._get_recognizer_result(match, text, region, None))
                blank = " " * (match.end - match.start)
                masked = masked[: match.start] + blank + masked[match.end :]
        return masked


class NationalIds(EntityRecognizer):  # type: ignore[misc]
    """National ids by their shapes and checksums (pipeline.pii.national_ids), and US SSNs
    written with spaces."""

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str], nlp_artifacts: Any) -> list[Any]:
        entity = {NATIONAL_ID: "NATIONAL_ID", SSN: "US_SSN"}
        return [
            RecognizerResult(entity[kind], start, end, 0.85)
            for start, end, kind in find_national_ids(text)
        ]


class ScriptNames(EntityRecognizer):  # type: ignore[misc]
    """Names in every script and in lower case (pipeline.pii.scripts)."""

    def load(self) -> None:
        name_lists()

    def analyze(self, text: str, entities: list[str], nlp_artifacts: Any) -> list[Any]:
        return [RecognizerResult("SCRIPT_PERSON", s, e, 0.75) for s, e in find_names(text)]


class PostcodePlaces(EntityRecognizer):  # type: ignore[misc]
    """A postcode and the place after it (pipeline.pii.postcodes)."""

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str], nlp_artifacts: Any) -> list[Any]:
        return [RecognizerResult("POSTCODE_PLACE", s, e, 0.7) for s, e in postcode_places(text)]


class ListedPlaces(EntityRecognizer):  # type: ignore[misc]
    """A place of the lists where a place goes (pipeline.pii.places.listed_places)."""

    def load(self) -> None:
        pass

    def analyze(self, text: str, entities: list[str], nlp_artifacts: Any) -> list[Any]:
        return [RecognizerResult("LISTED_PLACE", s, e, 0.6) for s, e in listed_places(text)]


class PaddedIpv4(PatternRecognizer):  # type: ignore[misc]
    """An IPv4 address with zero-padded octets ("192.168.001.010"), which presidio's own
    recognizer leaves (`ipaddress` refuses it)."""

    def validate_result(self, pattern_text: str) -> bool:
        return ipv4_padded(pattern_text)


def _recognizers() -> list[Any]:
    """Our recognizers: validated patterns for the shaped kinds, the NER and a name list for
    people and places, street patterns for addresses."""
    return [
        Emails(),
        IbanRecognizer(regex_flags=re.DOTALL | re.MULTILINE | re.IGNORECASE),  # mod-97 validated
        # Cards grouped by spaces, dashes or dots; Luhn validated.
        CreditCardRecognizer(
            patterns=[Pattern("card", r"(?<![\w.+-])\d(?:[ .-]?\d){12,18}(?![\w.-]\d)", 0.3)],
            replacement_pairs=[("-", ""), (" ", ""), (".", "")],
        ),
        UsSsnRecognizer(),  # a bare 9-digit run counts only beside "ssn", "social security"…
        IpRecognizer(),  # IPv4 and IPv6, validated by `ipaddress`
        # phonenumbers' matcher: valid numbers, digits grouped as the region groups them
        Phones(supported_regions=PHONE_REGIONS, leniency=PHONE_LENIENCY),
        # …and North American shapes whatever the number (555.123.4567)
        PatternRecognizer(
            "PHONE_NUMBER", name="NanpPhoneRecognizer", patterns=[Pattern("nanp", NANP_PHONE, 0.5)]
        ),
        PaddedIpv4(
            "IP_ADDRESS", name="PaddedIpv4Recognizer", patterns=[Pattern("ipv4", IPV4_PADDED, 0.6)]
        ),
        SpacyRecognizer(supported_entities=["PERSON", "LOCATION"]),
        NameListRecognizer(supported_entities=["PERSON"], name="NameListRecognizer"),
        ScriptNames(supported_entities=["SCRIPT_PERSON"], name="ScriptNameRecognizer"),
        NationalIds(supported_entities=["NATIONAL_ID", "US_SSN"], name="NationalIdRecognizer"),
        PostcodePlaces(supported_entities=["POSTCODE_PLACE"], name="PostcodePlaceRecognizer"),
        ListedPlaces(supported_entities=["LISTED_PLACE"], name="ListedPlaceRecognizer"),
        PatternRecognizer(
            "STREET_ADDRESS",
            name="StreetAddressRecognizer",
            patterns=[Pattern(f"street{i}", p, 0.6) for i, p in enumerate(STREET_PATTERNS)],
            global_regex_flags=re.UNICODE,  # case matters: "5 Main Street", not "5 main st"
        ),
    ]


@lru_cache(maxsize=1)
def build_engine() -> tuple[Any, Any]:
    """(presidio AnalyzerEngine, spaCy pipeline with only its NER) — built once per process."""
    # presidio warns once per text for every spaCy label it does not map (CARDINAL, WORK_OF_ART…):
    # thousands of lines in a night's log, none actionable.
    logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
    # The NER has its own token-to-vector layer in en_core_web_sm: the rest is not needed.
    nlp = spacy.load(SPACY_MODEL, exclude=["tagger", "parser", "attribute_ruler", "lemmatizer"])
    nlp.disable_pipe("tok2vec")
    engine = NerOnlyEngine(models=[{"lang_code": "en", "model_name": SPACY_MODEL}])
    engine.nlp = {"en": nlp}  # type: ignore[assignment]
    registry = RecognizerRegistry(supported_languages=["en"])
    for recognizer in _recognizers():
        registry.add_recognizer(recognizer)
    return AnalyzerEngine(nlp_engine=engine, registry=registry, supported_languages=["en"]), nlp
