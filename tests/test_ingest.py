"""Ingest: one reason per rejected line, conservation, dedupe, idempotent partitions."""

import gzip
import json
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.contracts import FILE_REASONS, Reason
from pipeline.ingest.folder import ingest_folder, typed_tables
from pipeline.ingest.lines import read_lines
from tests.conftest import LOAD_DATE, feedback, interaction, memory, write_landing
from tests.test_ingest_context import CONTEXT_CASES

DAY = date.fromisoformat(LOAD_DATE)


def _one(folder: Path, line: str | bytes | dict) -> tuple[str | None, pl.DataFrame]:
    write_landing(folder, [line])
    result = ingest_folder(folder, DAY)
    assert result.conserved
    reason = result.quarantine["reason"][0] if result.quarantine.height else None
    return reason, result.events


DEEP = '{"a": ' * 3000 + "1" + "}" * 3000
ERASURE = {
    "event_id": "e1",
    "event_type": "erasure",
    "ts": "2026-11-02T10:00:00Z",
    "tenant_id": "acme",
}

CASES = [
    (b'{"event_id": "i1", \xff\xfe}', "invalid_utf8"),
    ("   ", "empty_line"),
    ('{"event_id": "i1", ', "invalid_json"),
    ("[1, 2]", "not_an_object"),
    (interaction(schema_version=2), "unsupported_schema_version"),
    (interaction(schema_version="1"), "wrong_type:schema_version"),
    ({k: v for k, v in interaction().items() if k != "event_id"}, "missing_field:event_id"),
    ({k: v for k, v in interaction().items() if k != "tenant_id"}, "missing_field:tenant_id"),
    ({k: v for k, v in interaction().items() if k != "ts"}, "missing_field:ts"),
    (interaction(event_id=None), "missing_field:event_id"),
    (interaction(event_id=42), "wrong_type:event_id"),
    (interaction(event_id="x" * 129), "bad_event_id"),
    (interaction(event_id=""), "bad_event_id"),
    (interaction(tenant_id="../etc"), "bad_tenant_id"),
    (interaction(tenant_id="a b"), "bad_tenant_id"),
    (interaction(event_type="click"), "unknown_event_type"),
    (interaction(ts="2026-11-02 10:00:00"), "bad_timestamp"),
    (interaction(ts="2026-11-02T10:00:00"), "bad_timestamp"),
    (interaction(ts="yesterday"), "bad_timestamp"),
    (interaction(ts="2026-11-04T00:00:00Z"), "future_timestamp"),
    ({k: v for k, v in interaction().items() if k != "input"}, "missing_field:input"),
    (interaction(tags="urgent"), "wrong_type:tags"),
    (interaction(tags=["ok", 3]), "wrong_type:tags"),
    (interaction(importance=1.5), "out_of_range:importance"),
    (interaction(stage="dream"), "unknown_value:stage"),
    (feedback(signal="meh"), "unknown_signal"),
    ({k: v for k, v in feedback().items() if k != "target_id"}, "missing_field:target_id"),
    (feedback(rating=7), "out_of_range:rating"),
    (feedback(rating="five"), "wrong_type:rating"),
    (feedback(rating=4.5), "wrong_type:rating"),
    (feedback(reason="bored"), "unknown_value:reason"),
    (feedback(signal="correction"), "missing_field:corrected_output"),
    (memory(memory_type="rumour"), "unknown_value:memory_type"),
    (memory(category="gossip"), "unknown_value:category"),
    (memory(impact_level="huge"), "unknown_value:impact_level"),
    (memory(confidence=-0.2), "out_of_range:confidence"),
    ({k: v for k, v in memory().items() if k != "content"}, "missing_field:content"),
    (memory(supersedes="m0"), "wrong_type:supersedes"),
    (memory(contact_id="c" * 257), "too_long:contact_id"),
    (memory(content="é" * 8193), "too_long:content"),  # characters, not bytes
    (interaction(output={"text": "x" * 65_536}), "too_long:output"),  # its JSON text
    (interaction(metadata={"k": "v" * 9000}), "too_long:metadata"),
    (feedback(user_id="u" * 257), "too_long:user_id"),
    (interaction(input="y" * (1 << 20)), "line_too_long"),
    # issue 51: a valid line nested 3,000 deep is not invalid JSON, it is too deep to read again
    (
        json.dumps(interaction()).replace('"output"', '"metadata": ' + DEEP + ', "output"'),
        "too_deep",
    ),
    (interaction(contact_id="c1\u0000"), "control_character:contact_id"),
    (interaction(contact_id="pii-566439bd291a41590c7c4322"), "pseudonym_shaped_id:contact_id"),
    (ERASURE | {"contact_id": "   "}, "blank_field:contact_id"),
]


@pytest.mark.parametrize(("line", "reason"), CASES, ids=[r for _, r in CASES])
def test_each_bad_line_gets_one_reason(landing: Path, line, reason: str) -> None:
    got, events = _one(landing / LOAD_DATE, line)
    assert got == reason
    assert events.is_empty()


def test_fields_at_their_limit_are_accepted(landing: Path) -> None:
    reason, events = _one(landing / LOAD_DATE, memory(contact_id="c" * 256, content="é" * 8192))
    assert reason is None and events["content"].str.len_chars().to_list() == [8192]


def test_a_line_over_the_limit_keeps_a_prefix_and_its_size(landing: Path) -> None:
    write_landing(landing / LOAD_DATE, [interaction(input="y" * (1 << 20))])
    result = ingest_folder(landing / LOAD_DATE, DAY)
    raw = result.quarantine["raw"][0]
    assert result.conserved and len(raw) < 4200
    assert raw.startswith('{"') and raw.endswith(" bytes]") and "the line is 1048817 bytes" in raw


def test_every_reason_is_covered() -> None:
    """Line reasons here; duplicate keys, strict timestamps and file reasons in test_ingest_strict;
    erased lines in test_erasure."""
    covered = {r.split(":")[0] for _, r in CASES} | {Reason.CONFLICTING_DUPLICATE.value}
    covered |= {Reason.DUPLICATE_KEY.value, Reason.ANCIENT_TIMESTAMP.value}
    covered |= {Reason.ERASED_CONTACT.value}  # tests/test_erasure.py
    covered |= {r.split(":")[0] for _, r in CONTEXT_CASES}  # receipts
    assert covered | {r.value for r in FILE_REASONS} == {r.value for r in Reason}


@pytest.mark.parametrize(
    "line",
    [
        interaction(),
        interaction(ts="2026-11-03T23:59:59Z"),  # within one day after the load date
        interaction(ts="2025-01-01T00:00:00-05:00"),  # late arrival is normal
        interaction(output={"score": 3, "labels": ["a"]}, category="anything goes here"),
        interaction(contact_id=None, tags=[], importance=1),
        feedback(
            signal="correction", corrected_output="Better answer", rating=5, reason="too_verbose"
        ),
        memory(supersedes=["m0"], impact_level="high", confidence=0.9, tags=["x"]),
    ],
)
def test_good_lines_are_accepted(landing: Path, line: dict) -> None:
    reason, events = _one(landing / LOAD_DATE, line)
    assert reason is None
    assert events.height == 1


def test_values_are_typed_and_normalised(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(
        folder,
        [
            interaction(output={"b": 1, "a": [1, 2]}, ts="2026-11-02T12:00:00+02:00", tags=["x"]),
            feedback(comment="y" * 400, rating=2),
        ],
    )
    events = ingest_folder(folder, DAY).events.sort("event_type")
    fb, it = events.row(0, named=True), events.row(1, named=True)
    assert it["output"] == '{"b":1,"a":[1,2]}'
    assert it["ts"].isoformat() == "2026-11-02T10:00:00+00:00"
    assert it["tags"] == ["x"]
    assert it["load_date"] == DAY
    # flagged, kept whole: cut to 300 where it is published, after its redaction
    assert fb["comment_truncated"] is True and len(fb["comment"]) == 400
    assert fb["rating"] == 2 and fb["input"] is None


def test_bom_crlf_and_gzip_are_fine(landing: Path) -> None:
    folder = landing / LOAD_DATE
    folder.mkdir(parents=True)
    body = "\r\n".join(json.dumps(interaction(f"i{n}")) for n in range(3)) + "\r\n"
    (folder / "a.jsonl").write_bytes(("\ufeff" + body).encode())
    (folder / "b.jsonl.gz").write_bytes(gzip.compress(json.dumps(interaction("i9")).encode()))
    (folder / "notes.txt").write_text("not a log")
    result = ingest_folder(folder, DAY)
    assert result.stats["lines_read"] == 4 and result.events.height == 4
    assert result.quarantine.is_empty()


def test_invalid_utf8_quarantines_only_that_line(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction("i1"), b"\xc3\x28 broken", interaction("i2")])
    result = ingest_folder(folder, DAY)
    assert result.events["event_id"].to_list() == ["i1", "i2"]
    bad = result.quarantine.row(0, named=True)
    assert (bad["reason"], bad["line_no"], bad["raw_bytes"]) == (
        "invalid_utf8",
        2,
        b"\xc3\x28 broken",
    )


def test_read_lines_keeps_every_line_and_the_bytes_of_bad_ones(tmp_path: Path) -> None:
    body = (
        "\ufeffcafé ☕\r\n".encode()
        + b"\xff bad\n"
        + b"\n"  # an empty line in the middle stays a line
        + "naïve \r inside\n".encode()  # a lone CR is content, not a line break
        + b"\xc3\x28 also bad\r\n"
        + b"last, no newline"
    )
    path = tmp_path / "a.jsonl"
    path.write_bytes(body)
    lines, blank = read_lines(path)
    assert lines["line_no"].to_list() == [1, 2, 4, 5, 6]
    assert (blank.count, blank.first) == (1, [3])  # counted, not a row
    assert lines["raw"].to_list() == [
        "café ☕",
        None,
        "naïve \r inside",
        None,
        "last, no newline",
    ]
    assert lines["raw_bytes"].to_list() == [
        None,
        b"\xff bad",
        None,
        b"\xc3\x28 also bad",
        None,
    ]
    (tmp_path / "empty.jsonl").write_bytes(b"")
    assert read_lines(tmp_path / "empty.jsonl")[0].is_empty()


def test_duplicates_counted_once_and_conflicts_quarantined(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(
        folder, [interaction("i1"), interaction("i1"), interaction("i1", input="changed")]
    )
    result = ingest_folder(folder, DAY)
    assert (result.events.height, result.duplicates, result.quarantine.height) == (1, 1, 1)
    assert result.quarantine["reason"][0] == "conflicting_duplicate"
    assert result.events["input"][0] == "Where is my order?"


def test_dedupe_across_partitions(landing: Path) -> None:
    first = landing / "2026-11-01"
    write_landing(first, [interaction("i1", ts="2026-11-01T10:00:00Z")])
    earlier = ingest_folder(first, date(2026, 11, 1)).events
    second = landing / LOAD_DATE
    write_landing(second, [interaction("i1", ts="2026-11-01T10:00:00Z"), interaction("i2")])
    existing = earlier.lazy().select("tenant_id", "event_id", "content_hash")
    result = ingest_folder(second, DAY, existing)
    assert result.events["event_id"].to_list() == ["i2"]
    assert result.duplicates == 1 and result.conserved


def test_same_event_id_in_two_tenants_is_two_events(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction("i1"), interaction("i1", tenant_id="globex")])
    assert ingest_folder(folder, DAY).events.height == 2


def test_missing_folder_is_an_empty_partition(tmp_path: Path) -> None:
    result = ingest_folder(tmp_path / "nothing", DAY)
    assert result.stats["lines_read"] == 0 and result.conserved


def test_typed_tables_split_by_event_type(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction(), feedback(), memory(), memory("m2")])
    tables = typed_tables(ingest_folder(folder, DAY).events.lazy())
    assert {k: v.height for k, v in tables.items()} == {
        "interactions": 1,
        "feedback": 1,
        "memory_statements": 2,
    }
    assert "signal" in tables["feedback"].columns and "signal" not in tables["interactions"].columns
