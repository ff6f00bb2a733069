"""Which entries of a landing folder are read: regular files only, inside the landing folder.

A FIFO would block `open()` forever, a device never ends (/dev/zero), a socket cannot be read, and
a symbolic link can point anywhere (`ln -s /etc/passwd x.jsonl` would put the file's lines into
the quarantine, where analysts read them). Each is refused with a reason before it is opened, and
the open itself never blocks (`O_NONBLOCK`) and checks again what it opened (`fstat`), so an entry
swapped for a FIFO in between is refused too.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from pipeline.ingest.contracts import Reason

LANDING_PATTERNS = ("*.jsonl", "*.jsonl.gz")
_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


@dataclass(frozen=True)
class Refusal:
    """Why a landing entry is not read: the quarantine reason and one line for a person."""

    reason: Reason
    detail: str

    def line(self) -> str:
        return f"{self.reason.value}: {self.detail}"


@dataclass(frozen=True)
class LandingEntry:
    path: Path
    refusal: Refusal | None = None

    @property
    def name(self) -> str:
        return self.path.name


def _within(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _kind(mode: int) -> str | None:
    """What a non-regular file is, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def refusal_of(mode: int) -> Refusal | None:
    """A file of this mode is not read: a directory is unreadable (as a read would find), any
    other non-regular file is `not_a_regular_file`."""
    kind = _kind(mode)
    if kind is None:
        return None
    if kind == "a directory":
        return Refusal(Reason.UNREADABLE_FILE, "cannot read the file: Is a directory")
    return Refusal(Reason.NOT_A_REGULAR_FILE, f"{kind}: not read")


def _refusal(path: Path, roots: tuple[Path, ...]) -> Refusal | None:
    try:
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            target = path.resolve()
            if not _within(target, roots):
                return Refusal(
                    Reason.SYMLINK_OUTSIDE_LANDING,
                    "a symbolic link to a file outside the landing folder: not read",
                )
            mode = target.stat().st_mode
    except (OSError, RuntimeError) as error:  # vanished, a link loop (RuntimeError before 3.13)
        reason = getattr(error, "strerror", None) or "a symbolic link loop"
        return Refusal(Reason.UNREADABLE_FILE, f"cannot read the file: {reason}")
    return refusal_of(mode)


def landing_entries(folder: Path, root: Path | None = None) -> list[LandingEntry]:
    """The `*.jsonl` / `*.jsonl.gz` entries of one load date's folder, sorted, each with why it is
    not read (or None). `root` is the landing folder (default: the folder's parent); a symbolic
    link may point anywhere inside it. A load-date folder that itself leads out of it is one
    refused entry."""
    root = (root or folder.parent).resolve()
    if not folder.is_dir():
        return []
    if not _within(folder.resolve(), (root,)):
        return [
            LandingEntry(
                folder,
                Refusal(
                    Reason.SYMLINK_OUTSIDE_LANDING,
                    "the load-date folder is a symbolic link leaving the landing folder: not read",
                ),
            )
        ]
    roots = (root, folder.resolve())
    found = sorted({p for pattern in LANDING_PATTERNS for p in folder.glob(pattern)})
    return [LandingEntry(path, _refusal(path, roots)) for path in found]


def landing_files(folder: Path, root: Path | None = None) -> list[Path]:
    """The entries of `landing_entries` that are read."""
    return [e.path for e in landing_entries(folder, root) if e.refusal is None]


class NotRegular(OSError):
    """What `open_regular` opened is not a regular file."""

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.detail)
        self.refusal = refusal


def open_regular(path: Path) -> int:
    """A read-only descriptor of a regular file: opening never blocks (a FIFO), and what was
    opened is checked (NotRegular), whatever the name pointed at when it was listed."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    refusal = refusal_of(os.fstat(fd).st_mode)
    if refusal is not None:
        os.close(fd)
        raise NotRegular(refusal)
    return fd
