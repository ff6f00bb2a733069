"""A tenant's names (pipeline.pii.names): found in one of its texts, redacted in all of them."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from pipeline.pii.keys import pseudonym
from pipeline.pii.names import TenantNames, found_people, tenant_names
from pipeline.pii.redactor import Redactor
from pipeline.publish.content import PackInputs
from pipeline.publish.redaction import declared_speakers, spread_names


def _findings(rows: list[tuple[str, str]]) -> pl.DataFrame:
    """(text, redacted) pairs as the redactor's table: kinds from the placeholders left."""
    return pl.DataFrame(
        {
            "text": [t for t, _ in rows],
            "redacted": [r for _, r in rows],
            "kinds": [(["person"] if "[PERSON]" in r else []) for _, r in rows],
        }
    )


def _names(rows: list[tuple[str, str]]) -> TenantNames:
    table = _findings(rows)
    return tenant_names(table, table["text"])


ACME = [
    ("Priya Raghunathan booked the room.", "[PERSON] booked the room."),
    ("Raghunathan said Friday works.", "Raghunathan said Friday works."),
    ("Priyanka Raghunathan will join too.", "Priyanka Raghunathan will join too."),
    ("Send the notes to Tom.", "Send the notes to [PERSON]."),
    ("Tom: the notes are in.", "[PERSON]: the notes are in."),
    ("Hey Tom, thanks!", "Hey Tom, thanks!"),
]


def test_found_people_are_read_off_the_redaction() -> None:
    assert found_people(_findings(ACME)) == ["Priya Raghunathan", "Tom", "Tom"]


def test_a_name_found_in_one_text_is_redacted_in_every_text_of_its_tenant_only() -> None:
    names = _names(ACME)
    assert names.words == {"Priya", "Raghunathan", "Tom"}
    assert names.surnames == {"Raghunathan"}
    texts, n = names.redact(pl.Series([r for _, r in ACME]))
    assert texts.to_list() == [
        "[PERSON] booked the room.",
        "[PERSON] said Friday works.",
        "[PERSON] will join too.",  # the first name before a found surname goes with it
        "Send the notes to [PERSON].",
        "[PERSON]: the notes are in.",
        "Hey [PERSON], thanks!",
    ]
    assert n == 3
    # Another tenant's texts are redacted with its own names: acme's do not reach it.
    other = _names([("Ask Raghunathan about Tom.", "Ask Raghunathan about Tom.")])
    assert other.words == set()
    kept, n = other.redact(pl.Series(["Ask Raghunathan about Tom."]))
    assert kept.to_list() == ["Ask Raghunathan about Tom."] and n == 0


def test_derived_text_is_redacted_too_and_ids_holding_a_name_are_pseudonymized() -> None:
    """A lower-cased conflict subject and a token list hold the names as well; an identifier that
    holds one ("tom-1") gets its keyed pseudonym; enumerations stay as they are."""
    conflicts = pl.DataFrame(
        {
            "tenant_id": ["acme"],
            "memory_id_a": ["tom-1"],
            "memory_id_b": ["m00042"],
            "reason": ["opposite_polarity"],
            "subject": ["tom prefers calls from raghunathan"],
            "tags": [["tom", "calls"]],
        }
    )
    out, n = spread_names(conflicts, _names(ACME), b"key", "acme")
    assert out.row(0) == (
        "acme",
        pseudonym(b"key", "acme", "tom-1"),
        "m00042",
        "opposite_polarity",
        "[PERSON] prefers calls from [PERSON]",
        [pseudonym(b"key", "acme", "tom"), "calls"],  # tags are labels: pseudonymized
    )
    assert n == 4


def test_a_common_word_or_product_the_ner_once_called_a_person_is_not_spread() -> None:
    rows = [
        ("Safari crashed again.", "[PERSON] crashed again."),
        ("Safari froze on login.", "[PERSON] froze on login."),
        *[(f"Open it in Safari, step {i}.", f"Open it in Safari, step {i}.") for i in range(23)],
        ("Will you call me?", "[PERSON] you call me?"),
        ("Will said yes.", "[PERSON] said yes."),
        ("Grace Hopper wrote it.", "[PERSON] wrote it."),
        ("Accept it with grace.", "Accept it with grace."),
    ]
    names = _names(rows)
    # Safari: found in 2 of its 25 uses; Will: a common word; Grace: used in lower case too.
    assert names.words == {"Hopper"}
    texts, n = names.redact(pl.Series(["Open it in Safari.", "Grace will do it with grace."]))
    assert texts.to_list() == ["Open it in Safari.", "Grace will do it with grace."] and n == 0


def test_a_speaker_the_detector_rarely_finds_is_a_name_by_its_turns() -> None:
    """A transcript's "Gina: …" turns: the NER found Gina twice in 52 capitalised uses (4 %, under
    MIN_SHARE), but she opens 20 turns; "Note:" and "Agent:" open turns too and are neither found as
    a person nor a given name; Nate, whom the NER never finds, is a known nickname; Zorblax, who
    opens turns too, is in no list, never found and never addressed: only a log can declare him."""
    turns = [
        (f"Gina: day {i} went well, thanks.", f"Gina: day {i} went well, thanks.")
        for i in range(20)
    ]
    turns += [(f"I told Gina about plan {i}.", f"I told Gina about plan {i}.") for i in range(30)]
    turns += [("Ask Gina first.", "Ask [PERSON] first."), ("Gina agreed.", "[PERSON] agreed.")]
    turns += [(f"Note: item {i} is done.", f"Note: item {i} is done.") for i in range(5)]
    turns += [(f"Agent: ticket {i} closed.", f"Agent: ticket {i} closed.") for i in range(5)]
    turns += [(f"Nate: round {i} done.", f"Nate: round {i} done.") for i in range(4)]
    turns += [(f"Zorblax: step {i} done.", f"Zorblax: step {i} done.") for i in range(4)]
    assert _names(turns).words == {"Gina", "Nate"}
    table = _findings(turns)
    names = tenant_names(table, table["text"], declared=["Zorblax"])
    assert names.words == {"Gina", "Nate", "Zorblax"}
    texts, n = names.redact(pl.Series(["Gina: see you", "Note: bring Gina's book"]))
    assert texts.to_list() == ["[PERSON]: see you", "Note: bring [PERSON]'s book"] and n == 2
    # Without her turns, found in too few of her uses, she is still a given name used as one.
    assert _names(turns[20:50]).words == {"Gina"}
    zorblax = [(f"I told Zorblax about plan {i}.",) * 2 for i in range(30)]
    assert _names(zorblax).words == set()  # a word in no list, never found nor addressed


def test_the_speakers_a_log_declares_are_read_off_its_statements() -> None:
    statements = pl.DataFrame(
        {
            "tenant_id": ["acme", "acme", "acme"],
            "metadata": ['{"speaker": "Nate"}', '{"speaker": " "}', None],
        }
    )
    inputs = PackInputs(
        "acme",
        datetime(2026, 11, 3, tzinfo=UTC),
        {"memory_statements": statements.lazy()},
        [],
        None,
    )
    assert declared_speakers(inputs) == ["Nate"]
    assert declared_speakers(PackInputs("acme", inputs.as_of, {}, [], None)) == []


LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo"


def _locomo_turns() -> tuple[list[str], set[str]]:
    """Every turn of the shared LoCoMo conversations as the importer writes it ("Nate: …"), and
    their speakers' names (not given to the redactor: read from the texts alone)."""
    texts, speakers = [], set()
    for file in sorted(LOCOMO.glob("conv-*.json")):
        data = json.loads(file.read_text())
        body = data.get("conversation", data)
        speakers |= {body["speaker_a"], body["speaker_b"]}
        for key, turns in body.items():
            if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                texts += [f"{t['speaker']}: {t.get('text') or ''}".rstrip() for t in turns]
    return texts, speakers


@pytest.mark.slow
def test_locomo_speaker_names_are_found_in_the_texts_alone() -> None:
    """Issue 50's bar: ≤ 1 % of the speakers' name mentions left, without `metadata.speaker`
    (most apps' logs do not carry one). Measured: 0 of 3,843 (the lexicon's speaker labels,
    greetings and name lists find "Nate", whom the NER never tags); before: 451 (11.7 %)."""
    if not LOCOMO.is_dir():
        pytest.skip(f"LoCoMo data not in {LOCOMO}")
    texts, speakers = _locomo_turns()
    frame = pl.DataFrame({"tenant_id": ["locomo"] * len(texts), "text": texts})
    findings: list[pl.DataFrame] = []
    redacted, _ = Redactor(key=b"k").frame(frame, findings=findings)
    table = pl.concat(findings)
    names = tenant_names(table, table["text"])
    spread, _ = spread_names(redacted, names, b"k", "locomo")
    pattern = r"(?i)\b(?:" + "|".join(sorted(speakers)) + r")\b"
    mentions = int(frame["text"].str.count_matches(pattern).sum())
    left = int(spread["text"].str.count_matches(pattern).sum())
    assert mentions > 3000 and left <= 0.01 * mentions, (left, mentions)
    # No greeting, interjection or nationality became a name (the lexicon's look-alike guards).
    assert not names.words & {"Yeah", "Aww", "Woah", "Yep", "Agreed", "German", "English", "Fri"}


def test_a_conflicts_subject_is_made_again_from_the_redacted_text() -> None:
    """Issue 50: `subject` read "cc [PERSON] oyelaran [PERSON] on invoices" when it was derived
    from the original text and then redacted; made from the redacted text, nothing is left."""
    from pipeline.publish.redaction import _subjects_again, with_subject_side

    conflicts = pl.DataFrame(
        {
            "text_a": ["Always cc Xiomara Oyelaran on invoices", "a"],
            "text_b": ["Never cc Xiomara Oyelaran on invoices", "b"],
            "subject": ["cc xiomara oyelaran on invoices", "set by hand"],
        }
    )
    sided = with_subject_side(conflicts).with_columns(
        pl.col("text_a").str.replace("Xiomara Oyelaran", "[PERSON]"),
        pl.col("text_b").str.replace("Xiomara Oyelaran", "[PERSON]"),
    )
    assert _subjects_again(sided)["subject"].to_list() == [
        "cc person on invoices",
        "set by hand",  # made of neither side: kept, redacted as text like any other
    ]
