"""Privacy end to end (issue 50): a night over logs that carry the labelled PII corpus in their
texts and personal data in every identifier and label of the contract leaves none of it in any
pack, in the analyst snapshot or in Dagster's run history (its previews and log lines), and keeps
the look-alikes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pytest

from jobs.runner import RunOutcome, run_nightly
from memorypack import MemoryPack
from pipeline.generate.pii_corpus import LOOK_ALIKES, corpus
from tests.conftest import feedback, interaction, memory, write_landing
from tests.test_erasure_end_to_end import _decoded_cells

pytestmark = pytest.mark.slow

DAY = "2026-11-02"
TENANT = "acme"
# Issue 50's reproductions: personal data in the contract's identifiers and labels.
IDENTIFIERS = {
    "contact_id": "Siobhan O'Callaghan",
    "user_id": "Gwendolyn Featherstonehaugh",
    "system": "Bartholomew Quigley desk",
    "kind": "reply for tel 020 7946 0123",
    "category": "card 4111 1111 1111 1111",
    "model": "gpt-jane.doe@example.com",
    "session_id": "sess-mo.farah@example.org",
    "skill_id": "skill-+44 20 7946 0958",
}
# Names no detector tags on their own, used as people use them: the tenant's lexicon finds them.
LEXICON_NAMES = ("Jolene", "Nate", "Xiomara", "Oyelaran")
COMMENT_EMAIL = "jane.doe@example.com"


def _lexicon_lines() -> list[dict[str, Any]]:
    """Jolene and Nate in a chat's turns, addressed and mentioned; Xiomara Oyelaran in two
    statements that conflict (their subject is derived text); a comment whose e-mail straddles
    its 300-character cut; a summary preview's question with a full name."""
    said = [
        "Nate: I finally finished the pottery class today.",
        "Jolene: That's wonderful! Hey Nate, send me a picture?",
        "Nate: Thanks, Jolene! I will after dinner.",
        "Jolene: I told my sister about the class and she wants to join.",
        "Nate: I met Jolene's sister at the market, she is lovely.",
        "Jolene: Nate keeps surprising everyone with his bowls.",
    ]
    lines: list[dict[str, Any]] = [
        memory(f"chat-{i}", content=text, contact_id="conv-1", memory_type="confirmed_pattern")
        for i, text in enumerate(said * 2)
    ]
    lines += [
        memory(
            "x1",
            content="Always cc Xiomara Oyelaran on invoices",
            contact_id="c-x",
            memory_type="explicit_instruction",
            ts="2026-10-01T09:00:00Z",
        ),
        memory(
            "x2",
            content="Never cc Xiomara Oyelaran on invoices",
            contact_id="c-x",
            memory_type="explicit_instruction",
            ts="2026-11-01T09:00:00Z",
        ),
        interaction("q1", input="Can I transfer ownership of the workspace to James Lopez?"),
        feedback("fb1", "q1", comment="x" * 290 + f" mail {COMMENT_EMAIL} please"),
    ]
    return lines


def _lines() -> tuple[list[dict[str, Any]], list[str]]:
    """The landing's events and the look-alike texts that must come out unchanged."""
    rows = corpus()
    lines: list[dict[str, Any]] = []
    for n, row in enumerate(rows):
        lines.append(
            interaction(f"p{n}", input=row.text, output="Noted, thanks.", contact_id=f"c{n}")
        )
        lines.append(feedback(f"pf{n}", f"p{n}", signal="thumbs_up", user_id=f"u{n % 7}"))
    ids = interaction(
        "ids-1",
        input="Please summarise my last ticket.",
        tags=["Xiomara"],
        **{k: v for k, v in IDENTIFIERS.items() if k != "user_id"},
    )
    lines += [ids, feedback("ids-f", "ids-1", user_id=IDENTIFIERS["user_id"])]
    return lines + _lexicon_lines(), list(LOOK_ALIKES)


def _needles() -> list[str]:
    """Every planted value, and each word of a planted person's name; not one a look-alike holds
    ("10.0.0.1" is a release there, "grace" a period: the look-alike test judges those)."""
    values = {value for row in corpus() for _, value in row.values}
    values |= set(IDENTIFIERS.values()) | set(LEXICON_NAMES) | {COMMENT_EMAIL, "James Lopez"}
    people = {value for row in corpus() for kind, value in row.values if kind == "person"}
    values |= {word for name in people for word in name.split() if len(word) > 2}
    return sorted(v for v in values if not any(_found(text, v) for text in LOOK_ALIKES))


def _json_forms(needle: str) -> list[str]:
    return sorted({needle, json.dumps(needle)[1:-1], json.dumps(needle, ensure_ascii=False)[1:-1]})


@dataclass
class Night:
    home: Path
    outcome: RunOutcome
    look_alikes: list[str]


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Night:
    root = tmp_path_factory.mktemp("pii-night")
    home, landing = root / "home", root / "landing"
    lines, look_alikes = _lines()
    write_landing(landing / DAY, lines)
    (home / "dagster").mkdir(parents=True)
    with dg.DagsterInstance.local_temp(str(home / "dagster")) as instance:
        outcome = run_nightly(home, landing, DAY, DAY, instance=instance, fast=True)
    return Night(home, outcome, look_alikes)


def _found(text: str, needle: str) -> bool:
    """A planted value in a text: a name as a whole word in any case, the rest verbatim."""
    if re.fullmatch(r"[^\W\d_]+", needle):
        return re.search(rf"(?i)(?<!\w){re.escape(needle)}(?!\w)", text) is not None
    return any(form in text for form in _json_forms(needle))


def _leaks(files: list[Path]) -> list[str]:
    needles = _needles()
    hits = []
    for path in files:
        if path.suffix in (".parquet", ".duckdb"):
            text = "\n".join(_decoded_cells(path))
        else:
            text = path.read_bytes().decode("utf-8", "replace")
        hits += [f"{path.name}: {n}" for n in needles if _found(text, n)]
    return hits


def test_the_night_succeeds(night: Night) -> None:
    assert night.outcome.success and not night.outcome.not_published, night.outcome


def test_no_planted_value_reaches_a_pack(night: Night) -> None:
    packs = sorted(p for p in (night.home / "packs").rglob("*.parquet"))
    assert packs
    leaks = _leaks(packs)
    assert not leaks, leaks


def test_no_planted_value_reaches_the_analyst_snapshot(night: Night) -> None:
    leaks = _leaks([night.home / "analytics.duckdb"])
    assert not leaks, leaks


def test_no_planted_value_reaches_dagster_run_history(night: Night) -> None:
    """Run records, event logs (metadata previews, log lines) and compute logs."""
    files = [p for p in (night.home / "dagster").rglob("*") if p.is_file()]
    assert any(p.suffix == ".db" for p in files)
    leaks = _leaks(files)
    assert not leaks, leaks


def test_look_alikes_stay_in_the_pack(night: Night) -> None:
    pack = MemoryPack.load(night.home / "packs" / TENANT)
    texts = set(pl.read_parquet(Path(str(pack.path)) / "memories.parquet")["text"].to_list())
    kept = [text for text in night.look_alikes if any(text in t for t in texts)]
    assert len(kept) >= 0.95 * len(night.look_alikes), set(night.look_alikes) - set(kept)


def test_ids_holding_pii_are_pseudonyms_that_still_join(night: Night) -> None:
    pack = MemoryPack.load(night.home / "packs" / TENANT)
    memories = pl.read_parquet(Path(str(pack.path)) / "memories.parquet")
    row = memories.filter(pl.col("text").str.contains("summarise my last ticket"))
    assert row.height == 1 and row["contact_id"][0].startswith("pii-")
    assert len(pack.memories_for(contact_id=row["contact_id"][0], k=5)) >= 1


def test_the_guard_finds_nothing_the_redactor_left(night: Night) -> None:
    """The publish guard (an independent detector) reads what the redactor read, normalised the
    same way: on this corpus it has nothing left to mask (`pii_masked` in the manifest)."""
    pack = MemoryPack.load(night.home / "packs" / TENANT)
    redactions = json.loads((Path(str(pack.path)) / "manifest.json").read_text())["redactions"]
    assert redactions["total"] > 0 and redactions["pii_masked"] == {}, redactions


def test_each_redacted_memory_text_is_encoded_once(night: Night) -> None:
    """Issue 53: memory_embeddings embeds the redacted text, the pack's own (SPEC §5), so the pack
    encodes none of its texts again; the embedding cache holds one vector for each distinct
    redacted memory text and conflict subject, and none for a text before its redaction."""
    from pipeline.config import Paths
    from pipeline.semantic.conflicts import subject_texts
    from pipeline.semantic.embed import normalise_text, text_hashes
    from pipeline.storage.lake import Lake

    lake = Lake(Paths.from_env(night.home).for_tenant(TENANT))
    embedded = set(lake.read("memory_embeddings").collect()["text_hash"].to_list())
    pack = MemoryPack.load(night.home / "packs" / TENANT)
    memories = pl.read_parquet(Path(str(pack.path)) / "memories.parquet")
    texts = memories.filter(pl.col("has_embedding")).select(
        "memory_id", "text", normalise_text(pl.col("text")).alias("key")
    )
    assert set(text_hashes(texts["key"]).to_list()) <= embedded  # the pack encoded none
    parts = sorted((night.home / "lake").glob("**/embedding_cache/**/part-*.parquet"))
    by_model: dict[str, list[pl.DataFrame]] = {}
    for part in parts:
        by_model.setdefault(part.parent.name, []).append(
            pl.read_parquet(part, columns=["text_hash"])
        )
    # The night's model (int8), and fp32 for the texts near a decision (issue 52).
    assert len(by_model) == 2, sorted(by_model)
    int8, fp32 = (
        pl.concat(frames)["text_hash"]
        for _, frames in sorted(by_model.items(), key=lambda item: "int8" not in item[0])
    )
    for cached in (int8, fp32):
        assert cached.len() == cached.n_unique()  # each text encoded once by each
    cached = int8
    statements = lake.read("memory_statements").collect()
    redacted = statements.join(
        texts.select(event_id="memory_id", pack_text="text"), on="event_id"
    ).with_columns(content=pl.col("pack_text"))
    subjects = set(subject_texts(redacted)["text_hash"].to_list())
    assert set(cached.to_list()) == embedded | subjects
    originals = pl.concat(
        [
            lake.read("interactions").collect().select(memory_id="event_id", raw="input"),
            statements.select(memory_id="event_id", raw="content"),
        ]
    ).join(texts, on="memory_id")
    changed = originals.filter(normalise_text(pl.col("raw")) != pl.col("key"))
    assert changed.height >= 40  # the corpus's texts with PII, the lexicon's names
    raw_keys = text_hashes(changed.select(normalise_text(pl.col("raw")))["raw"])
    assert not set(raw_keys.to_list()) & set(cached.to_list())  # no vector of an original
    assert fp32.len() > 0 and set(fp32.to_list()) <= set(cached.to_list())
