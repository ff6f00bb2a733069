"""A landing folder read as a careless or hostile user would fill it (issue 51): entries that are
not regular files, links out of the folder, floods of blank or identical lines, lines that are too
long or too deep — each a reason in quarantine, never a hang, never memory that grows with them."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import zlib
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from pipeline.ingest.contracts import LINE_MAX_BYTES
from pipeline.ingest.folder import IngestResult, ingest_folder
from pipeline.ingest.landing import Damage, landing_pieces
from tests.conftest import LOAD_DATE, ROOT, SOURCE_PATH, interaction, write_landing

DAY = date.fromisoformat(LOAD_DATE)


pytestmark = pytest.mark.usefixtures("no_hang")  # tests/conftest.py: a hang fails, never hangs


def _ingest(folder: Path) -> IngestResult:
    result = ingest_folder(folder, DAY)
    assert result.conserved, result.stats
    return result


def _reasons(result: IngestResult) -> dict[str, str]:
    return {r["file"]: r["reason"] for r in result.quarantine.iter_rows(named=True)}


# --- entries that are not regular files, links that leave the folder ---------------------------


def test_a_fifo_is_refused_not_waited_on(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction("i1")])
    os.mkfifo(folder / "pipe.jsonl")  # nobody ever writes to it: open() would block forever
    result = _ingest(folder)
    assert result.events["event_id"].to_list() == ["i1"]
    row = result.quarantine.row(0, named=True)
    assert (row["file"], row["line_no"], row["reason"]) == ("pipe.jsonl", 1, "not_a_regular_file")
    assert row["raw"] == "a FIFO (named pipe): not read"
    assert result.files_not_read == {
        "pipe.jsonl": "not_a_regular_file: a FIFO (named pipe): not read"
    }


def test_a_fifo_swapped_in_after_the_listing_is_refused_when_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "late.jsonl"
    os.mkfifo(fifo)
    (damage,) = list(landing_pieces(fifo))  # opened without blocking, checked after the open
    assert isinstance(damage, Damage) and damage.reason.value == "not_a_regular_file"


def test_a_socket_and_a_device_are_refused(landing: Path) -> None:
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction("i1")])
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(folder / "sock.jsonl"))
    try:
        os.mknod(folder / "zero.jsonl", 0o600 | 0o020000, os.makedev(1, 5))  # /dev/zero's node
        device = True
    except PermissionError:  # not root: the device case cannot be set up here
        device = False
    try:
        result = _ingest(folder)
    finally:
        server.close()
    reasons = _reasons(result)
    assert reasons["sock.jsonl"] == "not_a_regular_file"
    assert result.files_not_read["sock.jsonl"].endswith("a socket: not read")
    if device:
        assert result.files_not_read["zero.jsonl"].endswith("a character device: not read")
    assert result.events.height == 1


def test_symlinks_out_of_the_landing_folder_are_never_followed(landing: Path) -> None:
    """`ln -s /etc/passwd landing/<day>/passwd.jsonl` once put the file's lines into the
    quarantine (and the analysts' snapshot); a link to /dev/zero never ends."""
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction("i1")])
    (folder / "passwd.jsonl").symlink_to("/etc/passwd")
    (folder / "zero.jsonl.gz").symlink_to("/dev/zero")
    (folder / "loop.jsonl").symlink_to(folder / "loop.jsonl")
    result = _ingest(folder)
    reasons = _reasons(result)
    assert reasons["passwd.jsonl"] == "symlink_outside_landing"
    assert reasons["zero.jsonl.gz"] == "symlink_outside_landing"
    assert reasons["loop.jsonl"] == "unreadable_file"
    assert not result.quarantine["raw"].str.contains("root:").any()
    assert result.stats["lines_read"] == 4  # one line, and one per refused entry


def test_a_symlink_inside_the_landing_folder_is_read(landing: Path) -> None:
    write_landing(landing / "shared", [interaction("i9")], name="late.jsonl")
    folder = landing / LOAD_DATE
    write_landing(folder, [interaction("i1")])
    (folder / "late.jsonl").symlink_to(landing / "shared" / "late.jsonl")
    assert sorted(_ingest(folder).events["event_id"].to_list()) == ["i1", "i9"]


def test_a_load_date_folder_leading_out_of_the_landing_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    write_landing(outside, [interaction("i1")])
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / LOAD_DATE).symlink_to(outside)
    result = _ingest(landing / LOAD_DATE)
    assert result.events.is_empty()
    assert _reasons(result) == {LOAD_DATE: "symlink_outside_landing"}


# --- floods: blank lines, identical bad lines ----------------------------------------------------


def _newlines_gzip(path: Path, mebibytes: int) -> int:
    """A gzip of `mebibytes` MiB of newlines (about 1 KB per MiB); returns the line count."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\n" * (1 << 20)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        for _ in range(mebibytes):
            out.write(packer.compress(chunk))
        out.write(packer.flush())
    return mebibytes << 20


def test_blank_lines_are_one_counted_row_per_file(landing: Path) -> None:
    folder = landing / LOAD_DATE
    lines = _newlines_gzip(folder / "blank.jsonl.gz", 64)
    mixed = [json.dumps(interaction("i1")), "", "   ", "\t", json.dumps(interaction("i2")), ""]
    (folder / "mixed.jsonl").write_text("\r\n".join(mixed) + "\r\n")
    result = _ingest(folder)
    rows = {r["file"]: r for r in result.quarantine.iter_rows(named=True)}
    assert (rows["blank.jsonl.gz"]["reason"], rows["blank.jsonl.gz"]["lines"]) == (
        "empty_line",
        lines,
    )
    assert rows["blank.jsonl.gz"]["line_nos"] == [1, 2, 3, 4, 5]
    assert (rows["mixed.jsonl"]["lines"], rows["mixed.jsonl"]["line_nos"]) == (4, [2, 3, 4, 6])
    assert result.quarantine.height == 2 and result.stats["quarantined"] == lines + 4
    assert sorted(result.events["event_id"].to_list()) == ["i1", "i2"]


def test_gzip_members_larger_than_a_read_chunk_are_all_read(landing: Path) -> None:
    """Members whose output passes the decompressed chunk (4 MiB), back to back: each is read
    from where the last ended."""
    folder = landing / LOAD_DATE
    folder.mkdir(parents=True)
    member = gzip.compress(b"\n" * (10 << 20) + json.dumps(interaction("i1")).encode() + b"\n")
    (folder / "members.jsonl.gz").write_bytes(member * 3)
    result = _ingest(folder)
    assert result.events["event_id"].to_list() == ["i1"] and result.duplicates == 2
    assert result.quarantine.rows() and result.quarantine["lines"].to_list() == [3 * (10 << 20)]


def test_identical_rejected_lines_are_counted_distinct_ones_kept(landing: Path) -> None:
    folder = landing / LOAD_DATE
    flood = ['{"event_id": "x"}'] * 100_000  # missing_field:tenant_id, the same line again
    write_landing(folder, [*flood, '{"event_id": "y"}', interaction("i1"), '{"event_id": "x"}'])
    result = _ingest(folder)
    rows = result.quarantine.sort("line_no").rows(named=True)
    assert [(r["raw"], r["lines"], r["line_nos"]) for r in rows] == [
        ('{"event_id": "x"}', 100_001, [1, 2, 3, 4, 5]),
        ('{"event_id": "y"}', 1, [100_001]),
    ]
    assert result.stats["quarantined"] == 100_002


def test_a_gzip_of_a_gibibyte_of_newlines_stays_small(tmp_path: Path) -> None:
    """A 5 KB gzip of blank lines once took 3.8 GB (a quarantine row per line); 1 GiB of them (a
    1 MB gzip) now costs the chunk being read: measured in a fresh process, 65 MB over what
    the imports take."""
    folder = tmp_path / "landing" / LOAD_DATE
    lines = _newlines_gzip(folder / "blank.jsonl.gz", 1024)
    code = f"""
import json, resource
from datetime import date
from pathlib import Path
from pipeline.ingest.folder import ingest_folder
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
result = ingest_folder(Path({str(folder)!r}), date.fromisoformat({LOAD_DATE!r}))
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(json.dumps({{"grown_kib": grown, "stats": result.stats, "rows": result.quarantine.height}}))
"""
    env = {**os.environ, "PYTHONPATH": SOURCE_PATH}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["rows"] == 1 and found["stats"]["quarantined"] == lines
    assert found["grown_kib"] < 256 * 1024, found  # < 256 MiB; 1 GiB of rows before


def test_a_corrupt_member_after_blank_lines_revokes_its_own_lines_only(landing: Path) -> None:
    folder = landing / LOAD_DATE
    folder.mkdir(parents=True)
    good = gzip.compress(b"\n" * 1000 + json.dumps(interaction("i1")).encode() + b"\n", mtime=0)
    body = b"".join(json.dumps(interaction(f"j{k}")).encode() + b"\n\n" for k in range(300))
    bad = bytearray(gzip.compress(body, mtime=0))
    bad[len(bad) // 2] ^= 0xFF
    (folder / "two.jsonl.gz").write_bytes(good + bytes(bad))
    result = _ingest(folder)
    assert result.events["event_id"].to_list() == ["i1"]
    rows = result.quarantine.sort("line_no").rows(named=True)
    assert [(r["reason"], r["line_no"], r["lines"]) for r in rows] == [
        ("empty_line", 1, 1000),
        ("corrupt_gzip", 1002, 1),
    ]
    assert result.stats["lines_read"] == 1002


def test_a_line_longer_than_a_chunk_is_cut_as_it_streams(landing: Path) -> None:
    folder = landing / LOAD_DATE
    huge = json.dumps(interaction("big", input="y" * (5 * LINE_MAX_BYTES)))
    write_landing(folder, [interaction("i1"), huge, interaction("i2")])
    result = _ingest(folder)
    assert sorted(result.events["event_id"].to_list()) == ["i1", "i2"]
    row = result.quarantine.row(0, named=True)
    assert (row["line_no"], row["reason"]) == (2, "line_too_long")
    assert row["raw"].startswith('{"event_id": "big"') and len(row["raw"]) < 4200
    assert f"the line is {len(huge)} bytes" in row["raw"]


def test_quarantine_rows_of_a_counted_line_say_how_many(landing: Path) -> None:
    """The invariant counts lines: Σ lines over the quarantine, not its rows."""
    folder = landing / LOAD_DATE
    write_landing(folder, ["", "", interaction("i1"), "nope", "nope"])
    result = _ingest(folder)
    assert result.quarantine.height == 2
    assert result.quarantine.select(pl.col("lines").sum()).item() == 4
