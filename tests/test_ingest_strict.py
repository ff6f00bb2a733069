"""Strict input: RFC 8259 JSON, RFC 3339 timestamps, and damaged or unreadable landing files."""

import gzip
import hashlib
import json
import os
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.contracts import FILE_REASONS, Reason
from pipeline.ingest.folder import ingest_folder, typed_tables
from pipeline.ingest.landing import gunzip
from tests.conftest import LOAD_DATE, interaction, write_landing

DAY = date.fromisoformat(LOAD_DATE)
GOOD = json.dumps(interaction())[:-1]  # an accepted line without its closing brace


def _reason(folder: Path, line: str) -> str | None:
    write_landing(folder, [line])
    result = ingest_folder(folder, DAY)
    assert result.conserved
    return result.quarantine["reason"][0] if result.quarantine.height else None


STRICT_CASES = [
    (GOOD + ', "tenant_id": "globex"}', "duplicate_key"),
    (GOOD + ', "tenant_id" : "globex"}', "duplicate_key"),
    (GOOD + ', "tenant\\u005fid": "globex"}', "duplicate_key"),
    (GOOD + ', "metadata": {"app": "web", "app": "ios"}}', "duplicate_key"),
    (GOOD + ', "metadata": {"a": [{"x": 1, "x": 2}]}}', "duplicate_key"),
    (GOOD + ', "importance": NaN}', "invalid_json"),
    (GOOD + ', "importance": Infinity}', "invalid_json"),
    (GOOD + ', "importance": -Infinity}', "invalid_json"),
    (GOOD + ', "importance": nan}', "invalid_json"),
    (GOOD + ",}", "invalid_json"),
    (GOOD + ', "tags": ["a",]}', "invalid_json"),
    # RFC 8259 whitespace is space, tab, LF and CR only.
    (GOOD + ',\f"tags": ["a"]}', "invalid_json"),
    (GOOD + ', "tags":\v["a"]}', "invalid_json"),
    (GOOD + ', "tags": ["a",\u00a0"b"]}', "invalid_json"),
    (GOOD + ', "tags": ["a"]\u3000}', "invalid_json"),
    (GOOD + ', "tags": [\u2028"a"]}', "invalid_json"),
    ("\f" + GOOD + "}", "invalid_json"),
    (GOOD + "}\u00a0", "invalid_json"),
    (GOOD + ', "tags": ["a\x01"]}', "invalid_json"),  # a raw control character in a string
    (json.dumps(interaction(schema_version=2**80)), "unsupported_schema_version"),
    (json.dumps(interaction(schema_version=-1)), "unsupported_schema_version"),
    (json.dumps(interaction(schema_version=1.0)), "wrong_type:schema_version"),
    (json.dumps(interaction(schema_version=True)), "wrong_type:schema_version"),
    (json.dumps(interaction(ts="0000-01-01T00:00:00Z")), "ancient_timestamp"),
    (json.dumps(interaction(ts="1999-12-31T23:59:59Z")), "ancient_timestamp"),
    (json.dumps(interaction(ts="2000-01-01T00:30:00+01:00")), "ancient_timestamp"),
    (json.dumps(interaction(ts="-0001-01-01T00:00:00Z")), "bad_timestamp"),
    (json.dumps(interaction(ts="2026-11-02T10:00:00+0100")), "bad_timestamp"),
    (json.dumps(interaction(ts="2026-11-02 10:00:00Z")), "bad_timestamp"),
    (json.dumps(interaction(ts="2026-11-02T10:00Z")), "bad_timestamp"),
    (json.dumps(interaction(ts="2026-11-02T10:00:00+24:00")), "bad_timestamp"),
    (json.dumps(interaction(ts="2026-11-02T10:00:00+01")), "bad_timestamp"),
    (json.dumps(interaction(ts="２０２６-11-02T10:00:00Z")), "bad_timestamp"),
    (json.dumps(interaction(ts="2026-11-02T10:00:00Z ")), "bad_timestamp"),
]


@pytest.mark.parametrize(
    ("line", "reason"), STRICT_CASES, ids=[f"{r}-{n}" for n, (_, r) in enumerate(STRICT_CASES)]
)
def test_strict_json_and_timestamps_get_a_reason(landing: Path, line: str, reason: str) -> None:
    assert _reason(landing / LOAD_DATE, line) == reason


def test_other_whitespace_inside_strings_and_rfc_whitespace_between_tokens_are_accepted(
    landing: Path,
) -> None:
    folder = landing / LOAD_DATE
    text = "12\u00a0€, de 9\u202fh à 10\u3000h,\u00a0merci"
    line = json.dumps(interaction(input=text), ensure_ascii=False, separators=(" ,\t", ":\r "))
    write_landing(folder, [line.replace("{", "{ \t", 1)])
    result = ingest_folder(folder, DAY)
    assert result.quarantine.height == 0
    assert result.events["input"].to_list() == [text]


@pytest.mark.parametrize(
    ("ts", "stored"),
    [
        ("2026-11-02t10:00:00z", "2026-11-02T10:00:00+00:00"),  # RFC 3339 §5.6 NOTE
        ("2026-11-02T10:00:00.123456-00:00", "2026-11-02T10:00:00.123456+00:00"),
        ("1999-12-31T23:00:00-02:00", "2000-01-01T01:00:00+00:00"),  # 2000 in UTC
        ("2026-11-03T23:59:59Z", "2026-11-03T23:59:59+00:00"),
    ],
)
def test_rfc3339_timestamps_are_accepted(landing: Path, ts: str, stored: str) -> None:
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction(ts=ts)])
    events = ingest_folder(folder, DAY).events
    assert events["ts"][0].isoformat() == stored


@pytest.mark.parametrize(
    "line",
    [
        # a key name used again in another object is not a duplicate
        json.dumps(interaction(summary="s", output={"summary": "x", "tags": ["a"]})),
        # what looks like keys, NaN or a trailing comma inside a string is text
        json.dumps(interaction(input='{"tenant_id": "globex", "x": NaN, "y": [1,]}')),
        json.dumps(interaction(input="Infinity and NaN, }")),
        json.dumps(interaction(input='say "hi" : now', output='a \\"b\\": c')),
        json.dumps(interaction(importance=1e-3, schema_version=1)),
    ],
)
def test_strict_lookalikes_are_accepted(landing: Path, line: str) -> None:
    assert _reason(landing / LOAD_DATE, line) is None


def test_year_zero_never_reaches_the_typed_tables(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(
        folder,
        [
            interaction("i0", ts="0000-06-01T00:00:00Z"),
            interaction("i1"),
            GOOD.replace('"i1"', '"i2"') + ', "tenant_id": "globex"}',
        ],
    )
    result = ingest_folder(folder, DAY)
    assert result.events["event_id"].to_list() == ["i1"]
    assert result.quarantine["reason"].to_list() == ["ancient_timestamp", "duplicate_key"]
    rows = typed_tables(result.events.lazy())["interactions"].rows(named=True)  # to Python dates
    assert [r["ts"].year for r in rows] == [2026]


def _body(prefix: str, n: int = 300) -> bytes:
    """n accepted lines, made of hashes so that the gzip stream is long (little to compress)."""
    lines = [
        json.dumps(interaction(f"{prefix}{k:03d}", input=hashlib.sha256(bytes(k)).hexdigest()))
        for k in range(n)
    ]
    return "".join(line + "\n" for line in lines).encode()


def _flip_middle(data: bytes) -> bytes:
    mid = len(data) // 2
    return data[:mid] + bytes([data[mid] ^ 0xFF]) + data[mid + 1 :]


N = 300
BODIES = {name: _body(name[0]) for name in ("truncated", "flipped", "garbage", "plain")}
GZ = {name: gzip.compress(body, mtime=0) for name, body in BODIES.items()}
HALF = len(b"".join(BODIES["flipped"].splitlines(keepends=True)[: N // 2]))
DAMAGED = {
    "truncated": GZ["truncated"][:-20],
    # two gzip members (valid gzip); the second has a byte flipped in its middle
    "flipped": gzip.compress(BODIES["flipped"][:HALF], mtime=0)
    + _flip_middle(gzip.compress(BODIES["flipped"][HALF:], mtime=0)),
    "garbage": GZ["garbage"] + b"not gzip at all",
    "plain": BODIES["plain"],
}


def test_each_damaged_gzip_keeps_its_good_lines_and_quarantines_the_rest(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction("ok1"), interaction("ok2")], name="good.jsonl")
    for name, data in DAMAGED.items():
        (folder / f"{name}.jsonl.gz").write_bytes(data)
    result = ingest_folder(folder, DAY)
    assert result.conserved
    assert result.lines_read == result.events.height + result.quarantine.height  # no duplicates
    bad = {r["file"].removesuffix(".jsonl.gz"): r for r in result.quarantine.iter_rows(named=True)}
    assert sorted(bad) == sorted(DAMAGED)
    assert {r["reason"] for r in bad.values()} == {"corrupt_gzip"}
    kept = dict(result.events.group_by("source_file").len().iter_rows())
    assert kept.pop("good.jsonl") == 2
    kept = {k.removesuffix(".jsonl.gz"): v for k, v in kept.items()}
    assert kept == {"truncated": kept["truncated"], "flipped": N // 2, "garbage": N}
    assert 0 < kept["truncated"] < N
    for name, row in bad.items():
        whole, body = kept.get(name, 0), BODIES[name]
        mine = result.events.filter(pl.col("source_file") == f"{name}.jsonl.gz").sort("event_id")
        assert mine["event_id"].to_list() == [f"{name[0]}{k:03d}" for k in range(whole)]
        assert mine["input"].to_list() == [
            hashlib.sha256(bytes(k)).hexdigest() for k in range(whole)
        ]
        assert row["line_no"] == whole + 1
        offset = len(b"".join(body.splitlines(keepends=True)[:whole]))
        assert f"unreadable from decompressed byte {offset};" in row["raw"]
        if name != "flipped":  # the cut line, kept and not ingested
            assert body[offset:].startswith(row["raw_bytes"] or b"")
    assert bad["truncated"]["raw"].startswith("truncated gzip stream")
    assert b"\n" not in bad["truncated"]["raw_bytes"]
    # the corrupt member decoded to altered but valid-looking lines before zlib saw it: kept aside
    assert bad["flipped"]["raw"].startswith("corrupt gzip stream (Error -3")
    unverified = bad["flipped"]["raw_bytes"]
    assert len(unverified) > 1000 and unverified != BODIES["flipped"][HALF:][: len(unverified)]
    assert bad["garbage"]["raw"].startswith("trailing bytes after the gzip stream")
    assert f"compressed byte {len(GZ['garbage'])})" in bad["garbage"]["raw"]
    assert bad["plain"]["raw"].startswith("not a gzip file")
    assert "decompressed byte 0; damage at compressed byte 0)" in bad["plain"]["raw"]


def test_multi_member_gzip_and_zero_padding_are_whole() -> None:
    one, two = b'{"a": 1}\n', b'{"b": 2}\n'
    assert gunzip(gzip.compress(one) + gzip.compress(two) + b"\0" * 8) == (one + two, None)
    assert gunzip(b"") == (b"", None)


def test_a_directory_named_jsonl_is_quarantined_not_a_crash(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction()])
    (folder / "dir.jsonl").mkdir()
    result = ingest_folder(folder, DAY)
    assert result.conserved and result.events.height == 1
    row = result.quarantine.row(0, named=True)
    assert (row["file"], row["line_no"], row["reason"]) == ("dir.jsonl", 1, "unreadable_file")
    assert row["raw"] == "cannot read the file: Is a directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_quarantined(landing: Path) -> None:
    folder = landing / LOAD_DATE
    path = write_landing(folder, [interaction()])
    path.chmod(0)
    try:
        result = ingest_folder(folder, DAY)
    finally:
        path.chmod(0o644)
    assert result.quarantine["reason"].to_list() == ["unreadable_file"] and result.conserved


def test_file_reasons_are_reasons() -> None:
    assert {r.value for r in FILE_REASONS} <= {r.value for r in Reason}
