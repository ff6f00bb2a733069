"""Landing files written as a stream, and the tally of what ingest must find in them."""

from __future__ import annotations

import gzip
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

BOM = "\ufeff".encode()
_FLUSH_EVERY = 4096


@dataclass
class DayStats:
    files: int = 0
    lines_read: int = 0
    accepted: int = 0
    duplicates: int = 0
    quarantined: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "files": self.files,
            "lines_read": self.lines_read,
            "accepted": self.accepted,
            "duplicates": self.duplicates,
            "quarantined": self.quarantined,
        }


@dataclass
class Tally:
    """Expected ingest outcome of every line written (ingest runs the dates in order)."""

    per_date: dict[str, DayStats] = field(default_factory=dict)
    by_reason: Counter[str] = field(default_factory=Counter)
    by_type: Counter[str] = field(default_factory=Counter)
    signals: Counter[str] = field(default_factory=Counter)

    def ingest(self) -> dict[str, Any]:
        days = list(self.per_date.values())
        return {
            "lines_read": sum(d.lines_read for d in days),
            "accepted": sum(d.accepted for d in days),
            "duplicates": sum(d.duplicates for d in days),
            "quarantined": sum(d.quarantined for d in days),
            "quarantine_by_reason": dict(sorted(self.by_reason.items())),
            "per_date": {k: v.as_dict() for k, v in self.per_date.items()},
        }


class LandingFile:
    """One `*.jsonl` / `*.jsonl.gz` file: every line is counted as accepted, duplicate or bad."""

    def __init__(
        self, path: Path, stats: DayStats, tally: Tally, *, crlf: bool = False, bom: bool = False
    ) -> None:
        self.path = path
        self._stats, self._tally = stats, tally
        self._raw: IO[bytes] = path.open("wb")
        self._out: IO[bytes] | gzip.GzipFile = self._raw
        if path.name.endswith(".gz"):  # mtime=0 and no name in the header: identical bytes per seed
            self._out = gzip.GzipFile(
                filename="", mode="wb", fileobj=self._raw, mtime=0, compresslevel=6
            )
        self._nl = b"\r\n" if crlf else b"\n"
        self._buf: list[bytes] = [BOM] if bom else []
        self._lines = 0
        stats.files += 1

    def _put(self, line: bytes) -> None:
        self._buf.append(line)
        self._buf.append(self._nl)
        self._stats.lines_read += 1
        self._lines += 1
        if len(self._buf) >= _FLUSH_EVERY:
            self._out.write(b"".join(self._buf))
            self._buf.clear()

    def accepted(self, line: bytes, event_type: str, signal: str | None = None) -> None:
        self._put(line)
        self._stats.accepted += 1
        self._tally.by_type[event_type] += 1
        if signal:
            self._tally.signals[signal] += 1

    def duplicate(self, line: bytes) -> None:
        self._put(line)
        self._stats.duplicates += 1

    def bad(self, line: bytes, reason: str) -> None:
        self._put(line)
        self._stats.quarantined += 1
        self._tally.by_reason[reason] += 1

    @property
    def lines(self) -> int:
        return self._lines

    def close(self) -> None:
        self._out.write(b"".join(self._buf))
        self._buf.clear()
        if self._out is not self._raw:
            self._out.close()
        self._raw.close()


def split_total(total: int, weights: list[float]) -> list[int]:
    """Integers proportional to `weights` that add up to `total` exactly (cumulative rounding)."""
    out, acc, done, s = [], 0.0, 0, sum(weights) or 1.0
    for w in weights:
        acc += total * w / s
        n = round(acc) - done
        out.append(n)
        done += n
    return out
