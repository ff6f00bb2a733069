"""People's names in every script (SPEC §5 round 4), found without the English NER: a known first
name and a known last name side by side in Arabic, Greek, Hebrew, Devanagari, Thai, Cyrillic… (no
capital letters to go by); a known surname and a given name in Chinese and Japanese (no spaces
between words) and Korean; and two known names in lower case (`sarah connor`).

The lists are Faker's person providers (MIT): every locale it ships, ~30,000 native-script names
kept as plain sets (a few MB), and its lorem word lists in 30 languages as the common words a
name must not also be ("أمل" is hope, "中国" China, "will" a verb).
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from pipeline.pii.normalise import normalise
from pipeline.pii.rules import COMMON_WORD_NAMES, faker_names

_LIST = re.compile(
    r"(?:first|last)_names(?:_(?:male|female|nonbinary))?|(?:male|female|unisex)_last_names"
)
_HAN = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ebef"
_HAN_RUN = re.compile(f"[{_HAN}]+")
_TOKEN = re.compile(r"\S+")
# Each word and the word after it, one space apart (the second read ahead, so pairs overlap).
_WORD_PAIR = re.compile(r"(?<![^\W\d_])([^\W\d_]+) (?=([^\W\d_]+)(?![^\W\d_]))")
# A letter of a script other than Latin: Greek to Mongolian, then CJK, kana and Hangul.
_OTHER_SCRIPT = re.compile("[\u0370-\u1dff\u2e80-\ud7ff\uf900-\ufaff]")
# Scripts whose names are found elsewhere: Latin (the NER and rules.NAME_PAIR; lower case here),
# Han and Hangul (written without a space between surname and given name).
_UNSPACED = {"HAN", "HANGUL", "HIRAGANA", "KATAKANA"}
_CASED = {"GREEK", "CYRILLIC", "ARMENIAN"}
# Clitics glued before a name ("بمحمد": with Muhammad; "לדוד": to David) and honorifics glued
# before (Thai คุณ) or after (Chinese 先生, Japanese さん, Korean 씨): not part of the name.
_PREFIXES = {"ARABIC": ("و", "ب", "ل", "ف", "ك"), "HEBREW": ("ו", "ב", "ל", "מ", "ש", "ה", "כ")}
_THAI_TITLE = "คุณ"
_HAN_TITLE = re.compile("先生|女士|小姐|老师|老師|经理|經理|同学|同學|様")
_KANA_TITLES = ("さん", "さま", "くん", "ちゃん")
_HANGUL_TITLES = ("씨", "님")
_HANGUL_PARTICLES = (
    "에게서", "께서", "에게", "한테", "씨는", "씨가", "씨를", "씨의", "씨에게", "님은", "님이",
    "님께", "씨", "님", "은", "는", "이", "가", "을", "를", "의", "와", "과", "도", "랑",
)  # fmt: skip
MIN_LATIN = 3  # a lower-case name's words have at least this many letters


@lru_cache(maxsize=8192)
def script_of(char: str) -> str:
    """The script of a letter, by its Unicode name ("ARABIC", "GREEK", "HAN", "HANGUL"…); ""
    for what is no letter."""
    if not char.isalpha():
        return ""
    if char.isascii():
        return "LATIN"
    word = unicodedata.name(char, "").split(" ", 1)[0]
    return "HAN" if word == "CJK" else word


# Scripts written without spaces between words: a value's word ends where its characters do.
_NO_SPACES = {"HAN", "HIRAGANA", "KATAKANA", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR"}


def in_word(char: str) -> bool:
    """Whether a span beside `char` widens over it to keep a word whole: a letter or digit of a
    script that separates words with spaces."""
    return char.isalnum() and (char.isascii() or script_of(char) not in _NO_SPACES)


@dataclass(frozen=True)
class NameLists:
    first: dict[str, frozenset[str]]  # script -> first names (one word each)
    last: dict[str, frozenset[str]]
    han_surnames: frozenset[str]
    han_given: frozenset[str]
    han_given_chars: frozenset[str]  # characters of two-character given names
    hangul_surnames: frozenset[str]
    hangul_given: frozenset[str]
    common: frozenset[str]  # lower-cased common words of every language Faker has lorem for
    # Latin first and last names (rules.faker_names) in lower case, common words left out
    lower_first: frozenset[str]
    lower_last: frozenset[str]


def _provider_lists(package: str) -> Iterator[tuple[str, list[str]]]:
    """(attribute, names) of every person list of every locale of Faker's `package`."""
    module = importlib.import_module(package)
    for info in pkgutil.iter_modules(module.__path__):
        provider = importlib.import_module(f"{package}.{info.name}").Provider
        for attribute in dir(provider):
            if _LIST.fullmatch(attribute):
                value = getattr(provider, attribute)
                if isinstance(value, dict):
                    value = list(value)
                if isinstance(value, list | tuple):
                    yield attribute, [normalise(v).text for v in value if isinstance(v, str)]


def _common_words() -> frozenset[str]:
    import faker.providers.lorem as lorem
    from spacy.lang.en.stop_words import STOP_WORDS

    words: set[str] = {w.lower() for w in COMMON_WORD_NAMES} | set(STOP_WORDS)
    for info in pkgutil.iter_modules(lorem.__path__):
        provider = importlib.import_module(f"{lorem.__name__}.{info.name}").Provider
        words.update(w.lower() for w in getattr(provider, "word_list", ()) if isinstance(w, str))
    return frozenset(words)


@lru_cache(maxsize=1)
def name_lists() -> NameLists:
    """The native-script names of every Faker locale, by script (built once per process)."""
    first: dict[str, set[str]] = {}
    last: dict[str, set[str]] = {}
    for attribute, names in _provider_lists("faker.providers.person"):
        into = first if attribute.startswith("first") else last
        for name in names:
            script = script_of(name[:1])
            if " " not in name and script not in ("", "LATIN"):
                into.setdefault(script, set()).add(name)
    han_given = frozenset(first.get("HAN", set()))
    common = _common_words()
    latin_first, latin_last = faker_names()
    return NameLists(
        first={s: frozenset(v) for s, v in first.items()},
        last={s: frozenset(v) for s, v in last.items()},
        han_surnames=frozenset(last.get("HAN", set())),
        han_given=han_given,
        han_given_chars=frozenset(c for name in han_given if len(name) == 2 for c in name),
        hangul_surnames=frozenset(last.get("HANGUL", set())),
        hangul_given=frozenset(first.get("HANGUL", set())),
        common=common,
        lower_first=_lower_names(latin_first, common),
        lower_last=_lower_names(latin_last, common),
    )


def _lower_names(names: frozenset[str], common: frozenset[str]) -> frozenset[str]:
    lower = (name.lower() for name in names if len(name) >= MIN_LATIN)
    return frozenset(name for name in lower if name not in common)


def _words(text: str) -> list[tuple[int, int, bool, bool]]:
    """(start, end, punctuation cut before, punctuation cut after) of each whitespace-separated
    word, punctuation and symbols trimmed off its ends."""
    out = []
    for match in _TOKEN.finditer(text):
        start, end = match.span()
        while start < end and unicodedata.category(text[start])[0] in "PS":
            start += 1
        while end > start and unicodedata.category(text[end - 1])[0] in "PS":
            end -= 1
        if start < end:
            out.append((start, end, start > match.start(), end < match.end()))
    return out


def _bare(word: str, script: str, names: frozenset[str]) -> int:
    """How many characters of a clitic or title open `word` before a known name (0: none)."""
    if script == "THAI" and word.startswith(_THAI_TITLE) and word[3:] in names:
        return len(_THAI_TITLE)
    for prefix in _PREFIXES.get(script, ()):
        if word.startswith(prefix) and word not in names and word[len(prefix) :] in names:
            return len(prefix)
    return 0


def _is_pair(one: str, two: str, script: str, lists: NameLists) -> bool:
    """Two words of a spaced script that make a name: first + last (or a second first name, a
    patronymic), last + first (family name first); in a cased script a first name and a
    capitalised word; in Arabic a first name and "al-" + a first name ("محمد الأحمد")."""
    first, last = lists.first.get(script, frozenset()), lists.last.get(script, frozenset())
    if (one in first and two in last) or (one in last and two in first):
        return True
    if lists.common & {one.lower(), two.lower()}:  # a word that is also a name: both must be
        return False
    if one in first and two in first:
        return True
    if script in _CASED and one in first and two[:1].isupper():
        return True
    return script == "ARABIC" and one in first and two.startswith("ال") and two[2:] in first


def _spaced(text: str, lists: NameLists) -> Iterator[tuple[int, int]]:
    """Names of two words in the scripts that separate words with spaces (not Latin)."""
    words = _words(text)
    for (s1, e1, _, cut1), (s2, e2, cut2, _) in itertools.pairwise(words):
        script = script_of(text[s1])
        if cut1 or cut2 or script in _UNSPACED or script in ("", "LATIN"):
            continue
        if script_of(text[s2]) != script or text[e1:s2].strip(" \t"):
            continue
        one, two = text[s1:e1], text[s2:e2]
        skip = _bare(one, script, lists.first.get(script, frozenset()))
        if _is_pair(one[skip:], two, script, lists):
            yield s1 + skip, e2


def _lower_case(text: str, lists: NameLists) -> Iterator[tuple[int, int]]:
    """Two lower-case Latin words that are a known first name then a known last name, neither a
    common word of any language ("sarah connor"; not "will smith", "rose hill")."""
    pairs = _WORD_PAIR.findall(text)  # in C: most texts hold no pair of names
    if any(one in lists.lower_first and two in lists.lower_last for one, two in pairs):
        for match in _WORD_PAIR.finditer(text):
            if match.group(1) in lists.lower_first and match.group(2) in lists.lower_last:
                yield match.start(), match.end(1) + 1 + len(match.group(2))


def _han_name(run: str, lists: NameLists, titled: bool) -> bool:
    """A whole run of Han characters that is a surname and a given name of 1-2 characters: the
    given name known, or of characters of known given names; after a title ("王先生") the
    surname alone is enough."""
    for size in (2, 1):
        surname, given = run[:size], run[size:]
        if surname not in lists.han_surnames or len(given) > 2:
            continue
        if titled and (not given or set(given) <= lists.han_given_chars):
            return True
        if given in lists.han_given or (len(given) == 2 and set(given) <= lists.han_given_chars):
            return True
    return False


def _han_pieces(run: str, kana_title: bool) -> Iterator[tuple[int, str, bool]]:
    """(offset, piece, titled) of a run of Han characters cut at its titles ("王先生明天来": "王"
    before a title, "明天来" after one); a piece at the run's end is titled by a kana title
    after the run ("田中さん")."""
    at = 0
    for title in _HAN_TITLE.finditer(run):
        if title.start() > at:
            yield at, run[at : title.start()], True
        at = title.end()
    if at < len(run):
        yield at, run[at:], kana_title


def _han(text: str, lists: NameLists) -> Iterator[tuple[int, int]]:
    """Chinese and Japanese names: a run of Han characters that is a name as a whole; a name
    closing a run or a piece before a title ("请把合同发给张伟。", "王先生"); inside a run, a
    surname then a known two-character given name ("请联系王秀英明天来")."""
    for match in _HAN_RUN.finditer(text):
        run = match.group()
        kana_title = text[match.end() :].startswith(_KANA_TITLES)
        for offset, piece, titled in _han_pieces(run, kana_title):
            start = match.start() + offset
            if piece.lower() in lists.common:
                continue
            at = _han_tail(piece, lists, titled, whole=piece == run)
            if at is not None:
                yield start + at, start + len(piece)
            yield from _embedded(piece[: len(piece) if at is None else at], start, lists)


def _han_tail(piece: str, lists: NameLists, titled: bool, whole: bool) -> int | None:
    """Where the name closing `piece` starts, if one does: the whole of a run by itself
    (`_han_name`), any name before a title, else a surname and a known given name."""
    for at in range(max(0, len(piece) - 4), len(piece)):
        tail = piece[at:]
        if (at == 0 and whole) or titled:
            if _han_name(tail, lists, titled):
                return at
        elif any(
            tail[:size] in lists.han_surnames and tail[size:] in lists.han_given for size in (1, 2)
        ):
            return at
    return None


def _embedded(piece: str, start: int, lists: NameLists) -> Iterator[tuple[int, int]]:
    """A surname then a known two-character given name inside a longer run ("请联系王秀英")."""
    at = 0
    while at < len(piece) - 2:
        size = next((k for k in (2, 1) if piece[at : at + k] in lists.han_surnames), 0)
        if size and piece[at + size : at + size + 2] in lists.han_given:
            yield start + at, start + at + size + 2
            at += size + 2
        else:
            at += 1


def _hangul(text: str, lists: NameLists) -> Iterator[tuple[int, int]]:
    """Korean names: a word that is a surname syllable and a known given name, or a surname and
    two syllables before 씨/님, a particle allowed after."""
    for start, end, _, _ in _words(text):
        word = text[start:end]
        if script_of(word[0]) != "HANGUL" or len(word) < 3 or word[0] not in lists.hangul_surnames:
            continue
        rest = word[3:]
        if rest and rest not in _HANGUL_PARTICLES:
            continue
        if word[1:3] in lists.hangul_given or rest.startswith(_HANGUL_TITLES):
            yield start, start + 3


@lru_cache(maxsize=1024)
def find_names(text: str) -> tuple[tuple[int, int], ...]:
    """(start, end) of every name these rules find in `text` (normalised text: NFKC, no format
    characters). Cached for the last texts: the PII gate asks first, the recognizer then."""
    lists = name_lists()
    found = list(_lower_case(text, lists))
    if _OTHER_SCRIPT.search(text):
        found += [*_spaced(text, lists), *_han(text, lists), *_hangul(text, lists)]
    return tuple(sorted(found))
