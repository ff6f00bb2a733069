"""Lines a careless or hostile app could send (issue 51): control characters in identifiers, ids
shaped like the pipeline's own pseudonyms, seconds that do not exist, reserved tenant names, JSON
nested too deep for any reader — each one reason, in ingest and wherever a raw line is read
again (erasure, export, the importers)."""

from __future__ import annotations

import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from jobs.cli import main
from pipeline.ingest.contracts import FIELDS, MAX_JSON_DEPTH, JsonKind
from pipeline.ingest.folder import ingest_folder
from pipeline.ingest.rawjson import RawJsonError, json_depth, read_json
from pipeline.pii.keys import PSEUDONYM
from tests.conftest import LOAD_DATE, feedback, interaction, memory, write_landing

DAY = date.fromisoformat(LOAD_DATE)
# Each identifier field, in an event of a type it belongs to.
EVENT_OF = {"interaction": interaction, "feedback": feedback, "memory": memory}
IDENTIFIERS = [
    (f.name, kind)
    for f in FIELDS
    if f.identifier and f.name != "tenant_id"
    for kind in ([t.value for t in f.event_types] or ["interaction"])
    if kind in EVENT_OF
]
SPOOFED = "pii-566439bd291a41590c7c4322"  # issue 50's: shaped like a pseudonym of this pipeline


def _reason(landing: Path, line: str | dict[str, Any]) -> str | None:
    folder = landing / LOAD_DATE
    write_landing(folder, [line])
    result = ingest_folder(folder, DAY)
    assert result.conserved
    return result.quarantine["reason"][0] if result.quarantine.height else None


def _with(field: str, kind: str, value: str) -> dict[str, Any]:
    listed = next(f for f in FIELDS if f.name == field).kind is JsonKind.STRING_LIST
    return EVENT_OF[kind](**{field: [value] if listed else value})


@pytest.mark.parametrize(("field", "kind"), IDENTIFIERS, ids=[f"{k}.{f}" for f, k in IDENTIFIERS])
@pytest.mark.parametrize(
    "char", ["\u0000", "\u001f", "\u007f", "\u0085", "\u200b", "\u202e", "\u2028"]
)
def test_a_control_or_format_character_in_any_identifier(
    landing: Path, field: str, kind: str, char: str
) -> None:
    """An escaped `\\u0000` once reached contact_id, system and event_id, and then packs."""
    value = f"id{char}x"
    assert _reason(landing, _with(field, kind, value)) == f"control_character:{field}"


@pytest.mark.parametrize(("field", "kind"), IDENTIFIERS, ids=[f"{k}.{f}" for f, k in IDENTIFIERS])
def test_an_identifier_shaped_like_a_pseudonym(landing: Path, field: str, kind: str) -> None:
    assert re.fullmatch(PSEUDONYM, SPOOFED)
    assert _reason(landing, _with(field, kind, SPOOFED)) == f"pseudonym_shaped_id:{field}"


def test_look_alikes_of_a_pseudonym_and_plain_unicode_ids_are_accepted(landing: Path) -> None:
    for value in ("pii-566439BD291A41590C7C4322", "pii-566439bd291a41590c7c432", "Zoë-Ärger"):
        assert _reason(landing, interaction(contact_id=value)) is None


def test_control_characters_in_a_receipt_item(landing: Path) -> None:
    context = {"pack_version": "acme/20261101T000000Z-0a1b2c3d", "items": ["m\u00001"]}
    line = interaction(context=context | {"holdout": False})
    assert _reason(landing, line) == "control_character:context.items"


@pytest.mark.parametrize(
    "ts",
    [
        "2026-11-02T10:00:60Z",  # no such second
        "2016-12-31T23:59:60Z",  # a real leap second: still refused (UTC here has none)
        "2026-11-02T23:59:60+01:00",  # a leap second on a day without one
        "2026-11-02T24:00:00Z",
        "2026-11-02T10:60:00Z",
    ],
)
def test_seconds_60_and_other_impossible_times_are_bad_timestamps(landing: Path, ts: str) -> None:
    assert _reason(landing, interaction(ts=ts)) == "bad_timestamp"


def test_the_last_second_of_a_day_is_fine(landing: Path) -> None:
    assert _reason(landing, interaction(ts="2026-11-02T23:59:59.999999Z")) is None


@pytest.mark.parametrize("tenant", ["__HIVE_DEFAULT_PARTITION__", "__x", "__"])
def test_tenant_names_the_lake_reserves_are_bad_tenant_ids(landing: Path, tenant: str) -> None:
    assert _reason(landing, interaction(tenant_id=tenant)) == "bad_tenant_id"


@pytest.mark.parametrize("contact", ["", "   ", " \u3000 "])
def test_an_erasure_request_must_name_someone(landing: Path, contact: str) -> None:
    request = {"event_id": "e1", "event_type": "erasure", "ts": "2026-11-02T10:00:00Z"}
    line = request | {"tenant_id": "acme", "contact_id": contact}
    assert _reason(landing, line) == "blank_field:contact_id"


def _nested(depth: int, inside: str = "1") -> str:
    return '{"a": ' * depth + inside + "}" * depth


def test_depth_is_bounded_at_the_limit_and_strings_do_not_count(landing: Path) -> None:
    """The line is one level; `metadata` holds the rest."""
    fits = json.dumps(interaction()).replace('"output"', f'"metadata": {_nested(63)}, "output"')
    assert json_depth(fits) == MAX_JSON_DEPTH and _reason(landing, fits) is None
    over = json.dumps(interaction()).replace('"output"', f'"metadata": {_nested(64)}, "output"')
    assert _reason(landing, over) == "too_deep"
    brackets = interaction(input="[{" * 5000)  # inside a string: no nesting at all
    assert _reason(landing, brackets) is None


def test_the_bounded_reader_never_recurses() -> None:
    for text in (_nested(3000), "[" * 100_000 + "]" * 100_000, "[" * 100_000):
        with pytest.raises(RawJsonError) as caught:
            read_json(text)
        assert caught.value.reason.value == "too_deep"
    with pytest.raises(RawJsonError, match="duplicate_key"):
        read_json('{"a": 1, "a": 2}')
    with pytest.raises(RawJsonError, match="invalid_json"):
        read_json('{"a": NaN}')
    assert read_json(_nested(10)) == json.loads(_nested(10))


def _tree(depth: int) -> dict[str, Any]:
    """An OpenAssistant message tree whose replies nest `depth` deep."""
    message: dict[str, Any] = {"message_id": f"m{depth}", "role": "assistant", "text": "end"}
    for level in range(depth - 1, 0, -1):
        role = "prompter" if level % 2 else "assistant"
        message = {"message_id": f"m{level}", "role": role, "text": "hi", "replies": [message]}
    return {"message_tree_id": "t1", "prompt": message}


def test_importing_a_tree_2000_levels_deep_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memorypack import oasst` on it once ended in a RecursionError traceback."""
    source = tmp_path / "deep.jsonl"
    shallow = json.dumps(_tree(5))
    deep = '{"message_tree_id": "t2", "prompt": ' + ('{"replies": [' * 2000) + "{}"
    deep += "]}" * 2000 + "}"
    source.write_text(shallow + "\n" + deep + "\n")
    assert main(["import", "oasst", str(source), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"memorypack: {source}:2: not a JSON line (too_deep")
    assert "Traceback" not in capsys.readouterr().err


def test_every_reason_is_in_the_documented_table() -> None:
    from pipeline.ingest.contracts import Reason
    from tests.conftest import ROOT

    table = (ROOT / "docs" / "INPUT.md").read_text().split("## Quarantine reasons")[1]
    assert [r.value for r in Reason if f"`{r.value}" not in table] == []
