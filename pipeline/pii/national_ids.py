"""National identity and tax numbers (SPEC §5 round 4): candidates by each format's shape,
validated by python-stdnum's checksums (and date rules), GB National Insurance numbers by pattern.

One rule for the redactor (pipeline.pii.engine wraps `find_national_ids` as a recognizer) and the
publish guard (pipeline.pii.guard): what is an id and what is a look-alike is decided here.
A candidate counts when it is valid for its format and
- it is written in the id's own shape: its grouping (`2345 6789 0124`, `390.533.447-05`,
  `880320-0016`) or letters where the format has them (`12345678Z`, `RSSMRA85T10A562S`), or
- it is a bare run of digits (or a shape other numbers share: `123 456 782`, `211062-5629`) and a
  context word is near (`PESEL 44051401359`, "my SIN is …"): a bare 11-digit number that passes
  a mod-11 check is as likely an order or ticket number;
and never right after an order, invoice, ticket… word (`rules.not_pii_before`).
US SSNs keep their own kind and placeholder (`[SSN]`, presidio finds the dashed ones); a US SSN
written with spaces (`123 45 6789`) counts by its shape alone, whatever stdnum says of it.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from pipeline.pii.rules import not_pii_before

NATIONAL_ID = "national_id"
SSN = "ssn"
# Not inside a longer number or word: no letter, digit, + or digit group right before or after.
_BEFORE = r"(?<![\w+])(?<!\d[ .-])"
_AFTER = r"(?![\w])(?![ .-]?\d)"


@dataclass(frozen=True)
class IdFormat:
    """One id format: `pattern` finds candidates (optional separators where the format groups),
    `module` is the stdnum module validating them (None: the pattern alone)."""

    name: str
    pattern: str
    module: str | None
    # Whether a candidate written with separators (or letters) still needs a context word: a
    # grouping other numbers share (3-3-3 like Spanish phones), or no checksum (DK CPR).
    shape_needs_context: bool = False
    kind: str = NATIONAL_ID
    # The format has a shape of its own whatever its separators: letters (a bare digit run never
    # matches `pattern`), a century sign.
    lettered: bool = False


_SEP = r"[ .-]?"
FORMATS: tuple[IdFormat, ...] = (
    IdFormat("us.ssn", r"\d{3} \d{2} \d{4}", None, kind=SSN),  # spaces; presidio: dashes
    IdFormat("us.itin", r"9\d{2}[- ]\d{2}[- ]\d{4}", "stdnum.us.itin"),
    IdFormat("es.dni", r"\d{8}[ -]?[A-Za-z]", "stdnum.es.dni", lettered=True),
    IdFormat("es.nie", r"[XYZxyz][ -]?\d{7}[ -]?[A-Za-z]", "stdnum.es.nie", lettered=True),
    IdFormat(
        "fr.nir", r"[12] ?\d{2} ?\d{2} ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2}", "stdnum.fr.nir"
    ),
    IdFormat("in.aadhaar", r"[2-9]\d{3}[ -]?\d{4}[ -]?\d{4}", "stdnum.in_.aadhaar"),
    IdFormat("in.pan", r"[A-Z]{3}[ABCFGHLJPT][A-Z]\d{4}[A-Z]", "stdnum.in_.pan", lettered=True),
    IdFormat("de.idnr", r"[1-9]\d ?\d{3} ?\d{3} ?\d{3}", "stdnum.de.idnr"),
    IdFormat(
        "it.codicefiscale",
        r"[A-Za-z]{6}\d{2}[A-Za-z]\d{2}[A-Za-z]\d{3}[A-Za-z]",
        "stdnum.it.codicefiscale",
        lettered=True,
    ),
    IdFormat("nl.bsn", r"\d{4}[. ]?\d{2}[. ]?\d{3}", "stdnum.nl.bsn"),
    IdFormat("be.nn", r"\d{2}\.?\d{2}\.?\d{2}[ -]?\d{3}\.?\d{2}", "stdnum.be.nn"),
    IdFormat("br.cpf", r"\d{3}\.?\d{3}\.?\d{3}-?\d{2}", "stdnum.br.cpf"),
    IdFormat("cn.ric", r"\d{17}[\dXx]", "stdnum.cn.ric"),
    IdFormat("pl.pesel", r"\d{11}", "stdnum.pl.pesel"),
    IdFormat("se.personnummer", r"(?:\d{2})?\d{6}[-+]?\d{4}", "stdnum.se.personnummer"),
    IdFormat("dk.cpr", r"\d{6}-?\d{4}", "stdnum.dk.cpr", shape_needs_context=True),
    IdFormat(  # the century sign between date and number is its shape
        "fi.hetu", r"\d{6}[-+A-FU-Ya-fu-y]\d{3}[0-9A-Ya-y]", "stdnum.fi.hetu", lettered=True
    ),
    IdFormat("no.fodselsnummer", r"\d{6} ?\d{5}", "stdnum.no.fodselsnummer"),
    IdFormat("ca.sin", r"\d{3}[ -]?\d{3}[ -]?\d{3}", "stdnum.ca.sin", shape_needs_context=True),
    IdFormat("mx.curp", r"[A-Z]{4}\d{6}[HMX][A-Z]{5}[A-Z\d]\d", "stdnum.mx.curp", lettered=True),
    IdFormat("kr.rrn", r"\d{6}-?\d{7}", "stdnum.kr.rrn"),
    IdFormat("za.idnr", r"\d{6} ?\d{4} ?\d{2} ?\d", "stdnum.za.idnr"),
    IdFormat("ch.ssn", r"756\.?\d{4}\.?\d{4}\.?\d{2}", "stdnum.ch.ssn"),
    IdFormat("ie.pps", r"\d{7}[A-Wa-w][ABHWabhw]?", "stdnum.ie.pps", lettered=True),
    IdFormat("ro.cnp", r"[1-9]\d{12}", "stdnum.ro.cnp"),
    # GB National Insurance number: stdnum has no module. Two prefix letters (not D, F, I, U, V
    # first; not D, F, I, O, U, V second; QQ, the documentation prefix, included), six digits
    # in pairs, a suffix A-D.
    IdFormat(
        "gb.nino",
        r"(?!BG|GB|KN|NK|NT|TN|ZZ)[A-CEGHJ-TW-Z][A-CEGHJ-NP-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D]",
        None,
        lettered=True,
    ),
)
_CANDIDATES = tuple((f, re.compile(_BEFORE + "(?:" + f.pattern + ")" + _AFTER)) for f in FORMATS)
# Words that say a number near them is an identity or tax number (within CONTEXT_BEFORE
# characters before it or CONTEXT_AFTER after: "PESEL: 44051401359", "44051401359 (PESEL)").
CONTEXT_BEFORE, CONTEXT_AFTER = 48, 24
_CONTEXT = re.compile(
    r"\b(?:ssn|social security|itin|taxpayer|tax ?(?:id|number|no|code)|tin|nino|"
    r"national insurance|dni|nie|nif|nir|insee|s[ée]curit[ée] sociale|aadhaa?r|uidai|pan|"
    r"idnr|steuer-?id|steuer-?identifikationsnummer|identifikationsnummer|codice fiscale|bsn|"
    r"burgerservicenummer|rijksregisternummer|national (?:id|number|identity)|num[ée]ro national|"
    r"cpf|ric|resident id|pesel|personnummer|personal (?:id|number|code)|cpr|hetu|"
    r"henkil[öo]tunnus|f[øo]dselsnummer|sin|social insurance|curp|rrn|resident registration|"
    r"ppsn?|cnp|ahv|avs|id ?(?:number|no|card|nr)|identity (?:number|card)|"
    r"identification number)\b|身份证|주민등록번호|マイナンバー",
    re.IGNORECASE,
)
_SEPARATORS = frozenset(" .-+")


@cache
def _validator(module: str) -> Any:
    return importlib.import_module(module).is_valid


def _context_near(text: str, start: int, end: int) -> bool:
    window = text[max(0, start - CONTEXT_BEFORE) : start] + " " + text[end : end + CONTEXT_AFTER]
    return _CONTEXT.search(window) is not None


def _counts(form: IdFormat, candidate: str, text: str, start: int, end: int) -> bool:
    """Whether a candidate of `form` at text[start:end] is an id (see the module's docstring)."""
    if form.module is not None and not _validator(form.module)(candidate):
        return False
    shaped = form.lettered or any(c in _SEPARATORS for c in candidate)
    if shaped and not form.shape_needs_context:
        return True
    return _context_near(text, start, end)


# Six digits at most three characters apart, or a PAN's four: every format has them (a cheap test
# first: most texts hold no number that long).
_DIGITS = re.compile(r"\d(?:\D{0,3}\d){5}|[A-Z]{5}\d{4}")


def find_national_ids(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of every national id in `text` (kind `national_id`, or `ssn` for a US
    SSN), the first format to claim a stretch keeping it."""
    if not _DIGITS.search(text):
        return []
    found: list[tuple[int, int, str]] = []
    for form, pattern in _CANDIDATES:
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(s < end and start < e for s, e, _ in found):
                continue
            if not_pii_before(text, start):
                continue
            if _counts(form, match.group(), text, start, end):
                found.append((start, end, form.kind))
    return sorted(found)


def names_an_id(value: str) -> bool:
    """Whether `value` is nothing but the name of an id ("My National Insurance", "Steuer-ID"),
    which the NER sometimes takes for a person."""
    from spacy.lang.en.stop_words import STOP_WORDS

    words = " ".join(w for w in value.split() if w.lower() not in STOP_WORDS)
    return _CONTEXT.fullmatch(words) is not None


def formats() -> list[str]:
    """The formats covered, by name (`cc.id`)."""
    return [f.name for f in FORMATS]
