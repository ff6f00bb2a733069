"""The receipt contract (issue 42 item 2, SPEC §2 `context`): checked strictly, one reason per
line, stored as three typed columns; a receipt naming another tenant's pack is quarantined."""

import json
from datetime import date
from pathlib import Path

import polars as pl

from pipeline.ingest.contracts import CONTEXT_MAX_ITEMS
from pipeline.ingest.folder import ingest_folder, typed_tables
from tests.conftest import LOAD_DATE, feedback, interaction, write_landing

DAY = date.fromisoformat(LOAD_DATE)
VERSION = "20261101T020000123456Z-0123abcd"
GOOD = {
    "pack_version": f"acme/{VERSION}",
    "items": ["concise_response@3", "m1", "i9"],
    "holdout": False,
}


def _with(**context: object) -> dict:
    return interaction(context={**GOOD, **context})


def _without(key: str) -> dict:
    return interaction(context={k: v for k, v in GOOD.items() if k != key})


CONTEXT_CASES = [
    (interaction(context=["acme/x"]), "wrong_type:context"),
    (interaction(context={**GOOD, "extra": 1}), "unknown_key:context"),
    (interaction(context={**GOOD, "nested": {"holdout": True}}), "unknown_key:context"),
    (_without("pack_version"), "missing_field:context.pack_version"),
    (_without("items"), "missing_field:context.items"),
    (_without("holdout"), "missing_field:context.holdout"),
    (_with(pack_version=7), "wrong_type:context.pack_version"),
    (_with(items="m1"), "wrong_type:context.items"),
    (_with(items=["m1", 2]), "wrong_type:context.items"),
    (_with(items=[["m1"]]), "wrong_type:context.items"),
    (_with(holdout="no"), "wrong_type:context.holdout"),
    (_with(holdout=None), "wrong_type:context.holdout"),
    (_with(items=["m"] * (CONTEXT_MAX_ITEMS + 1)), "too_long:context.items"),
    (_with(items=["m" * 257]), "too_long:context.items"),
    (_with(pack_version=VERSION), "bad_pack_version"),
    (_with(pack_version="acme/latest"), "bad_pack_version"),
    (_with(pack_version=f"globex/{VERSION}"), "foreign_pack"),
    # A value that looks like a key inside a string is a value: the pack is still globex's.
    (_with(pack_version=f'globex/{VERSION}","holdout":true'), "bad_pack_version"),
]


def _ingest(folder: Path, lines: list) -> tuple[pl.DataFrame, pl.DataFrame]:
    write_landing(folder, lines)
    result = ingest_folder(folder, DAY)
    assert result.conserved
    return result.events, result.quarantine


def test_each_bad_receipt_gets_one_reason(landing: Path) -> None:
    lines = [{**line, "event_id": f"i{n}"} for n, (line, _) in enumerate(CONTEXT_CASES)]
    events, quarantine = _ingest(landing / LOAD_DATE, lines)
    assert events.is_empty()
    got = quarantine.sort("line_no")["reason"].to_list()
    assert got == [reason for _, reason in CONTEXT_CASES]


def test_good_receipts_are_stored_as_typed_columns(landing: Path) -> None:
    lines = [
        _with(),
        interaction(
            "i2", context={"holdout": True, "items": [], "pack_version": f"acme/{VERSION}"}
        ),
        # Unknown item ids and spacing are kept as they are; the usage stage counts them.
        interaction("i3", context={**GOOD, "items": ["no-such-item", 'a "quoted", id']}),
        interaction("i4"),  # an app that does not report: nothing inferred
        # Only interactions carry a receipt; anything else's `context` is not read.
        feedback("f1", target_id="i1", signal="thumbs_up", context={"any": 1}),
    ]
    events, quarantine = _ingest(landing / LOAD_DATE, lines)
    assert quarantine.is_empty()
    interactions = typed_tables(events.lazy())["interactions"].sort("event_id")
    assert interactions.select(
        "event_id", "context_pack_version", "context_items", "context_holdout"
    ).rows() == [
        ("i1", VERSION, GOOD["items"], False),
        ("i2", VERSION, [], True),
        ("i3", VERSION, ["no-such-item", 'a "quoted", id'], False),
        ("i4", None, None, None),
    ]
    assert events.filter(pl.col("event_id") == "f1")["context_items"].to_list() == [None]


def test_a_receipt_in_any_json_spacing_is_read_the_same(landing: Path) -> None:
    spaced = json.dumps(_with(), indent=2).replace("\n", " ")
    events, quarantine = _ingest(landing / LOAD_DATE, [spaced])
    assert quarantine.is_empty() and events["context_items"].to_list() == [GOOD["items"]]
