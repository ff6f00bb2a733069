"""A landing file's bytes as a stream: all that can be read, where and why the rest could not be,
and which of it is verified. Memory is bounded by a chunk, whatever the file decompresses to (a
100 MB gzip of blank lines is 100 GB of newlines)."""

from __future__ import annotations

import os
import zlib
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from pipeline.ingest.contracts import Reason
from pipeline.ingest.listing import NotRegular, open_regular

GZIP_MAGIC = b"\x1f\x8b"
# Compressed bytes fed to zlib at a time, and decompressed bytes it may hand back per call.
IN_CHUNK = 1 << 20
OUT_CHUNK = 4 << 20
PLAIN_CHUNK = 4 << 20
# At most this much of a corrupt member's unverified output is kept in quarantine (one Parquet
# cell); the landing file itself stays where it is.
UNVERIFIED_KEPT_BYTES = 1 << 20


@dataclass(frozen=True)
class Damage:
    """Why the rest of a file is unreadable, and the compressed byte offset where that was seen.

    `corrupt` marks a gzip member zlib found corrupt: deflate has no checksum before the member's
    CRC, so the member's output streamed so far may already be wrong (a flipped byte can decode
    to valid JSON with altered values); it is kept for a person, never ingested."""

    reason: Reason
    compressed_offset: int
    detail: str
    corrupt: bool = False


class Verified:
    """Every byte streamed before this is exact (a gzip member passed its CRC, or a plain file's
    bytes were read): lines ending before it may be ingested."""


VERIFIED = Verified()
Piece = bytes | Verified | Damage


def landing_pieces(path: Path) -> Iterator[Piece]:
    """The file's (decompressed) bytes in chunks, `VERIFIED` wherever what came before is exact,
    and a last `Damage` when the rest cannot be read. Never raises for a bad or unreadable file,
    never blocks on one that is not a regular file."""
    try:
        fd = open_regular(path)
    except NotRegular as refused:
        yield Damage(refused.refusal.reason, 0, refused.refusal.detail)
        return
    except OSError as exc:  # permission denied, a vanished file
        yield Damage(Reason.UNREADABLE_FILE, 0, f"cannot read the file: {exc.strerror}")
        return
    try:
        read = _reader(fd)
        if path.name.endswith(".gz"):
            yield from gunzip_stream(read)
        else:
            yield from _plain(read)
    finally:
        os.close(fd)


class _Unreadable(Exception):
    def __init__(self, offset: int, error: OSError) -> None:
        self.offset, self.error = offset, error


def _reader(fd: int) -> Callable[[int], bytes]:
    position = 0

    def read(size: int) -> bytes:
        nonlocal position
        try:
            data = os.read(fd, size)
        except OSError as error:  # EIO on a failing disk, a file that became a directory
            raise _Unreadable(position, error) from None
        position += len(data)
        return data

    return read


def _plain(read: Callable[[int], bytes]) -> Iterator[Piece]:
    offset = 0
    try:
        while chunk := read(PLAIN_CHUNK):
            offset += len(chunk)
            yield chunk
            yield VERIFIED
    except _Unreadable as failed:
        yield Damage(Reason.UNREADABLE_FILE, offset, f"cannot read the file: {failed.error}")


def gunzip(data: bytes) -> tuple[bytes, Damage | None]:
    """A whole gzip file in memory (tests, small files): its output and damage, as streamed."""
    chunks = [data[i : i + IN_CHUNK] for i in range(0, len(data), IN_CHUNK)]
    pieces = list(gunzip_stream(lambda _size: chunks.pop(0) if chunks else b""))
    damage = next((p for p in pieces if isinstance(p, Damage)), None)
    return b"".join(p for p in pieces if isinstance(p, bytes)), damage


class _Compressed:
    """The compressed input, read ahead a chunk at a time; `offset` is where `buffer` starts."""

    def __init__(self, read: Callable[[int], bytes]) -> None:
        self.read, self.buffer, self.offset, self.ended = read, b"", 0, False

    def fill(self) -> bytes:
        while len(self.buffer) < IN_CHUNK and not self.ended:
            more = self.read(IN_CHUNK)
            self.ended = not more
            self.buffer += more
        return self.buffer

    def consume(self, n: int) -> None:
        self.buffer, self.offset = self.buffer[n:], self.offset + n

    def only_zeros_left(self) -> bool:
        """Zero bytes up to the end (padding the gzip module accepts too); consumes them."""
        while self.fill():
            if self.buffer.strip(b"\0"):
                return False
            self.consume(len(self.buffer))
        return True


def gunzip_stream(read: Callable[[int], bytes]) -> Iterator[Piece]:
    """Every gzip member in turn (as `gzip.decompress`), stopping at the first damage.

    What comes back is exact up to each VERIFIED: the members that passed their CRC, and for a
    truncated last member what it decompressed to before the file ended (no error: nothing was
    altered, the end is missing). A corrupt member's output is followed by a `corrupt` Damage,
    never by VERIFIED. Zero bytes after the last member are padding; other trailing bytes are
    damage."""
    source = _Compressed(read)
    first = True
    try:
        while source.fill():
            if source.buffer[:2] != GZIP_MAGIC:
                at = source.offset
                if not first and source.only_zeros_left():
                    return
                what = "not a gzip file" if first else "trailing bytes after the gzip stream"
                yield Damage(Reason.CORRUPT_GZIP, at, what)
                return
            damage = yield from _member(source)
            if damage is not None:
                yield damage
                return
            yield VERIFIED
            first = False
    except _Unreadable as failed:
        yield Damage(Reason.UNREADABLE_FILE, failed.offset, f"cannot read the file: {failed.error}")


def _member(source: _Compressed) -> Generator[Piece, None, Damage | None]:
    """One member's output; returns the damage that ended it early, or None at its end."""
    member = zlib.decompressobj(wbits=31)
    while not member.eof:
        chunk = source.fill()[:IN_CHUNK]
        if not chunk:
            yield member.flush()
            yield VERIFIED  # truncated, not altered: what it decompressed to is exact
            return Damage(
                Reason.CORRUPT_GZIP, source.offset, "truncated gzip stream: the file ends inside it"
            )
        before, produced = member.copy(), 0
        try:
            out = member.decompress(chunk, OUT_CHUNK)
            while True:
                produced += len(out)
                yield out
                if member.eof or not (member.unconsumed_tail or len(out) == OUT_CHUNK):
                    break
                out = member.decompress(member.unconsumed_tail, OUT_CHUNK)
        except zlib.error as exc:
            at, replayed = _locate(before, chunk, produced + UNVERIFIED_KEPT_BYTES)
            yield replayed[produced:]
            return Damage(
                Reason.CORRUPT_GZIP, source.offset + at, f"corrupt gzip stream ({exc})", True
            )
        # At the member's end zlib leaves what follows it in both `unused_data` and
        # `unconsumed_tail`; before it, all of the chunk was taken.
        rest = member.unused_data if member.eof else member.unconsumed_tail
        source.consume(len(chunk) - len(rest))
    return None


def _locate(member: zlib._Decompress, chunk: bytes, wanted: int) -> tuple[int, bytes]:
    """Where in `chunk` zlib fails, fed to `member` (its state before the chunk) byte by byte,
    and the first `wanted` bytes it decompressed to before (the rest is never ingested, only a
    head of it is kept). Runs only on damage."""
    out = bytearray()
    for at in range(len(chunk)):
        try:
            data = member.decompress(chunk[at : at + 1])
        except zlib.error:
            return at, bytes(out)
        if len(out) < wanted:
            out += data[: wanted - len(out)]
    return len(chunk), bytes(out)
