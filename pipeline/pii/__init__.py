"""PII redaction (SPEC §5): presidio + a spaCy English NER model + phonenumbers find what to redact
in texts; identifiers that look like PII become keyed pseudonyms; each distinct text is analysed
once (the redaction is cached in the lake).

Modules, in the order a text goes through them: `normalise` (the text every detector reads: NFKC,
no format characters, percent escapes decoded, with a map back), `rules` (what counts as PII),
`national_ids`, `phones`, `postcodes` and `scripts` (national ids by their checksums, phones of
every region, postcodes beside places, names in every script), `words` (words that are or are not
names), `ner_gate` (which texts the NER reads), `engine` (presidio and spaCy, built once),
`detect` (spans and placeholders), `keys` (pseudonyms), `redactor` (the cached redactor over
frames), `names` (a tenant's names), and `guard`: the pack guards' own detector, a second opinion
the redactor's output must pass. Everything public is importable from `pipeline.pii`, except the
redactor (`pipeline.pii.redactor`): it needs polars and the rest does not, so the fork server that
worker processes are forked from builds the engine without polars (jobs/forked.py).
"""

from pipeline.pii.detect import Span, analyse, analysis_engine, detect, redact_text
from pipeline.pii.keys import KEY_ENV, PSEUDONYM, PSEUDONYM_PREFIX, pii_key, pseudonym
from pipeline.pii.rules import PLACEHOLDER, SCORE_THRESHOLD, SPACY_MODEL, detector_version

__all__ = [
    "KEY_ENV",
    "PLACEHOLDER",
    "PSEUDONYM",
    "PSEUDONYM_PREFIX",
    "SCORE_THRESHOLD",
    "SPACY_MODEL",
    "Span",
    "analyse",
    "analysis_engine",
    "detect",
    "detector_version",
    "pii_key",
    "pseudonym",
    "redact_text",
]
