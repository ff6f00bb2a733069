"""Memories are embedded by their redacted text (issue 53: one vector per distinct redacted text,
for every stage and the pack; SPEC §5: the pack's vectors are of the redacted text)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from pipeline.pii import PLACEHOLDER
from pipeline.pii.redactor import Redactor
from pipeline.semantic.embed import (
    MemoryRedaction,
    memory_redaction,
    memory_texts,
    normalise_text,
    text_hashes,
)
from tests.test_conflicts import no_interactions, statement, statements_frame

SAID = json.dumps({"speaker": "Jolene"})


def _statements() -> pl.DataFrame:
    """Two tenants' rows interleaved; acme's conversation names its speaker, Jolene, who no
    detector finds in "Jolene likes tea"."""
    return statements_frame(
        [
            statement("a1", "I finished the pottery class", metadata=SAID),
            statement("g1", "Jolene likes tea", tenant="globex"),
            statement("a2", "Jolene likes tea"),
            statement("a3", "Mail me at jane.doe@example.com"),
        ]
    )


def test_memory_texts_are_the_redacted_texts_keys(tmp_path: Path) -> None:
    redactor = Redactor(b"k" * 32, names_root=tmp_path / "names")
    statements = _statements()
    texts = memory_texts(
        no_interactions(),
        statements,
        redact=memory_redaction(redactor, no_interactions(), statements),
    )
    by_id = dict(texts.select("memory_id", "text").iter_rows())
    email = PLACEHOLDER["email"].lower()
    assert by_id == {
        "a1": "i finished the pottery class",
        "a2": f"{PLACEHOLDER['person'].lower()} likes tea",  # the tenant's own speaker
        "a3": f"mail me at {email}",
        "g1": "jolene likes tea",  # another tenant's name is not globex's
    }
    expected = text_hashes(pl.Series(list(by_id.values())))
    assert dict(texts.select("memory_id", "text_hash").iter_rows()) == dict(
        zip(by_id, expected, strict=True)
    )


def test_a_later_stage_redacts_with_the_names_the_embedding_kept(tmp_path: Path) -> None:
    """memory_conflicts' subjects: the detector's redaction and the names memory_embeddings
    found, kept for the tenant, so the same statement gets the same text (and vector)."""
    redactor = Redactor(b"k" * 32, names_root=tmp_path / "names")
    statements = _statements()
    rows = statements.select("tenant_id", raw="content")
    first = memory_redaction(redactor, no_interactions(), statements)(rows)
    later = MemoryRedaction(Redactor(b"k" * 32, names_root=tmp_path / "names"))(rows)
    assert later["raw"].to_list() == first["raw"].to_list()  # in the rows' order
    assert first["raw"].to_list() == [
        "I finished the pottery class",
        "Jolene likes tea",
        f"{PLACEHOLDER['person']} likes tea",
        f"Mail me at {PLACEHOLDER['email']}",
    ]
    assert redactor.names("acme").words == frozenset({"Jolene"})
    assert not redactor.names("globex").words
    normalised = first.select(normalise_text(pl.col("raw")))["raw"]
    assert normalised.n_unique() == 4
