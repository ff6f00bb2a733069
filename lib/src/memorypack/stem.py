"""A light English stemmer for the keyword channel: inflections only, so "refund", "refunds",
"refunded" and "refunding" are one term, and "charge", "charged", "charges" another.

It is the inflectional part of Porter's algorithm (M. F. Porter, "An algorithm for suffix
stripping", 1980: steps 1a, 1b, 1c, 5a and 5b): plurals, -ed, -ing, a final -y after a vowel-
bearing stem, a final -e, a final double l. Porter's steps 2 to 4 strip derivational suffixes
(-ational, -ness, -ment, …), which join words of different meanings ("general" / "generous"),
so they are left out. A token that is not plain ASCII letters (a number, an id, another script)
is returned as it is; so is a word of one or two letters.
"""

from __future__ import annotations

from functools import lru_cache

VOWELS = frozenset("aeiou")
# Porter's *o condition excludes these as the last consonant of a consonant-vowel-consonant end.
NOT_CVC_END = frozenset("wxy")


def _is_consonant(word: str, i: int) -> bool:
    letter = word[i]
    if letter in VOWELS:
        return False
    if letter == "y":
        return i == 0 or not _is_consonant(word, i - 1)
    return True


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel-consonant sequences in [C](VC)^m[V]."""
    m, previous_vowel = 0, False
    for i in range(len(stem)):
        consonant = _is_consonant(stem, i)
        if consonant and previous_vowel:
            m += 1
        previous_vowel = not consonant
    return m


def _has_vowel(stem: str) -> bool:
    return any(not _is_consonant(stem, i) for i in range(len(stem)))


def _double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _ends_cvc(word: str) -> bool:
    """Porter's *o: consonant, vowel, consonant at the end, the last not w, x or y ("hop")."""
    n = len(word)
    return (
        n >= 3
        and _is_consonant(word, n - 3)
        and not _is_consonant(word, n - 2)
        and _is_consonant(word, n - 1)
        and word[-1] not in NOT_CVC_END
    )


def _step_1a(word: str) -> str:
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("ies"):
        return word[:-2]
    if word.endswith("ss"):
        return word
    if word.endswith("s"):
        return word[:-1]
    return word


def _step_1b(word: str) -> str:
    if word.endswith("eed"):
        return word[:-1] if _measure(word[:-3]) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            return _after_1b(word[: -len(suffix)])
    return word


def _after_1b(stem: str) -> str:
    """What Porter's step 1b does once -ed or -ing is gone: restore an e, undouble a consonant."""
    if stem.endswith(("at", "bl", "iz")):
        return stem + "e"
    if _double_consonant(stem) and stem[-1] not in "lsz":
        return stem[:-1]
    if _measure(stem) == 1 and _ends_cvc(stem):
        return stem + "e"
    return stem


def _step_1c(word: str) -> str:
    if word.endswith("y") and _has_vowel(word[:-1]):
        return word[:-1] + "i"
    return word


def _step_5(word: str) -> str:
    if word.endswith("e"):
        m = _measure(word[:-1])
        if m > 1 or (m == 1 and not _ends_cvc(word[:-1])):
            word = word[:-1]
    if word.endswith("ll") and _measure(word) > 1:
        word = word[:-1]
    return word


@lru_cache(maxsize=65_536)
def stem(token: str) -> str:
    """The stem of one lower-case token (see the module's docstring for what is stripped)."""
    if len(token) <= 2 or not (token.isascii() and token.isalpha()):
        return token
    return _step_5(_step_1c(_step_1b(_step_1a(token))))
