"""A landing file's bytes: all that can be read, and where and why the rest could not be."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from pipeline.ingest.contracts import Reason

GZIP_MAGIC = b"\x1f\x8b"
# Damage is located by replaying the stream in chunks of this size, then byte by byte inside the
# failing chunk: the happy path is one C call per gzip member, the replay only runs on damage.
REPLAY_CHUNK = 1 << 16
# At most this much of a corrupt member's unverified output is kept in quarantine (one Parquet
# cell); the landing file itself stays where it is.
UNVERIFIED_KEPT_BYTES = 1 << 20


@dataclass(frozen=True)
class Damage:
    """Why the rest of a file is unreadable, and the compressed byte offset where that was seen.

    `unverified` is what a corrupt gzip member decompressed to before zlib saw the damage: deflate
    has no checksum before the member's CRC, so those bytes may already be wrong (a flipped byte
    can decode to valid JSON with altered values); they are kept for a person, never ingested.
    """

    reason: Reason
    compressed_offset: int
    detail: str
    unverified: bytes = b""


def read_landing_bytes(path: Path) -> tuple[bytes, Damage | None]:
    """The file's (decompressed) bytes up to any damage; never raises for a bad or unreadable file."""
    try:
        data = path.read_bytes()
    except OSError as exc:  # permission denied, a directory named x.jsonl, a vanished file
        return b"", Damage(Reason.UNREADABLE_FILE, 0, f"cannot read the file: {exc.strerror}")
    if not path.name.endswith(".gz"):
        return data, None
    return gunzip(data)


def gunzip(data: bytes) -> tuple[bytes, Damage | None]:
    """Every gzip member in turn (as `gzip.decompress`), stopping at the first damage.

    What comes back is exact: the members that passed their CRC, and for a truncated last member
    what it decompressed to before the file ended (no error: nothing was altered, the end is
    missing). A corrupt member gives nothing (see `Damage.unverified`). Zero bytes after the last
    member are padding (the gzip module accepts them too); any other trailing bytes are damage.
    """
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        if data[pos : pos + 2] != GZIP_MAGIC:
            if pos and not data[pos:].strip(b"\0"):
                break
            what = "not a gzip file" if pos == 0 else "trailing bytes after the gzip stream"
            return b"".join(out), Damage(Reason.CORRUPT_GZIP, pos, what)
        member = zlib.decompressobj(wbits=31)
        try:
            out.append(member.decompress(data[pos:]))
        except zlib.error as exc:
            unverified, at = _replay(data, pos)
            detail = (
                f"corrupt gzip stream ({exc}): {len(unverified)} decompressed bytes of the member"
                " not verifiable, not ingested"
            )
            kept = unverified[:UNVERIFIED_KEPT_BYTES]
            return b"".join(out), Damage(Reason.CORRUPT_GZIP, at, detail, kept)
        if not member.eof:
            out.append(member.flush())
            return b"".join(out), Damage(
                Reason.CORRUPT_GZIP, len(data), "truncated gzip stream: the file ends inside it"
            )
        pos = len(data) - len(member.unused_data)
    return b"".join(out), None


def _replay(data: bytes, start: int) -> tuple[bytes, int]:
    """The output of the member at `start` before zlib fails, and the compressed offset it fails at."""
    member = zlib.decompressobj(wbits=31)
    out: list[bytes] = []
    pos = start
    while pos < len(data):  # the caller saw this member fail: the loop breaks at the failure
        before = member.copy()
        try:
            out.append(member.decompress(data[pos : pos + REPLAY_CHUNK]))
        except zlib.error:
            member = before
            break
        pos += REPLAY_CHUNK
    for at in range(pos, min(pos + REPLAY_CHUNK, len(data))):
        try:
            out.append(member.decompress(data[at : at + 1]))
        except zlib.error:
            return b"".join(out), at
    return b"".join(out), len(data)
