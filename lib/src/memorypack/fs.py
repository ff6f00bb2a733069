"""Where packs live: a local folder or an `s3://bucket/prefix` URL, both read through one small API.

A local location is a `pathlib.Path`; an object-store location is an `ObjectPath`, which offers
the few `Path` methods the pack format, the loader and the publisher use (`/`, `name`, `parent`,
`exists`, `is_file`, `is_dir`, `iterdir`, `open`, `stat`, …) on top of `pyarrow.fs` — pyarrow is
already the app library's one heavy dependency, so reading packs from S3 needs nothing new.

S3 settings come from the standard AWS environment variables (`memorypack.environment`):
credentials, region, and an endpoint for an S3-compatible store (e.g. `http://127.0.0.1:8333`
for a local SeaweedFS).
"""

from __future__ import annotations

import fnmatch
import io
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import urlsplit

from memorypack.environment import s3_settings

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa
    import pyarrow.fs as pafs

SCHEMES = ("s3",)


class StorageError(ValueError):
    """A packs location that cannot be used (a malformed URL, an unknown scheme): one line."""


@dataclass(frozen=True)
class ObjectStat:
    st_size: int
    st_mtime: float


class ObjectPath:
    """A key (or key prefix) in an object store, shown as its URL (`s3://bucket/key`).

    "Folders" are key prefixes: one exists while some object lies under it. A write is one PUT,
    which a reader sees whole or not at all (S3 is strongly consistent, read-after-write)."""

    __slots__ = ("filesystem", "key", "scheme")

    def __init__(self, filesystem: pafs.FileSystem, key: str, scheme: str = "s3") -> None:
        self.filesystem = filesystem
        self.key = key.strip("/")
        self.scheme = scheme

    # ---- names -----------------------------------------------------------------------------
    def __truediv__(self, name: str) -> ObjectPath:
        return ObjectPath(self.filesystem, f"{self.key}/{name}", self.scheme)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(self.filesystem, self.key.rsplit("/", 1)[0], self.scheme)

    @property
    def bucket(self) -> str:
        return self.key.split("/", 1)[0]

    def __str__(self) -> str:
        return f"{self.scheme}://{self.key}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and (self.scheme, self.key) == (
            other.scheme,
            other.key,
        )

    def __hash__(self) -> int:
        return hash((self.scheme, self.key))

    # ---- reading ---------------------------------------------------------------------------
    def _info(self) -> pafs.FileInfo:
        return self.filesystem.get_file_info(self.key)

    def exists(self) -> bool:
        import pyarrow.fs as pafs

        return bool(self._info().type != pafs.FileType.NotFound)

    def is_file(self) -> bool:
        import pyarrow.fs as pafs

        return bool(self._info().type == pafs.FileType.File)

    def is_dir(self) -> bool:
        import pyarrow.fs as pafs

        return bool(self._info().type == pafs.FileType.Directory)

    def iterdir(self) -> Iterator[ObjectPath]:
        """The objects and prefixes directly under this one (nothing when there are none)."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.key, recursive=False, allow_not_found=True)
        for info in self.filesystem.get_file_info(selector):
            yield ObjectPath(self.filesystem, info.path, self.scheme)

    def walk_files(self) -> Iterator[ObjectPath]:
        """Every object under this prefix, at any depth (one recursive listing)."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.key, recursive=True, allow_not_found=True)
        for info in self.filesystem.get_file_info(selector):
            if info.type == pafs.FileType.File:
                yield ObjectPath(self.filesystem, info.path, self.scheme)

    def glob(self, pattern: str) -> Iterator[ObjectPath]:
        """Objects and prefixes below this one whose relative key matches `pattern` (`*` within
        one level, `**/` any levels), as `Path.glob` matches names."""
        depth = pattern.count("/") + 1
        found: set[ObjectPath] = set()
        for obj in self.walk_files():
            parts = obj.relative_to(self).split("/")
            # the object itself and every prefix above it that lies below this one
            for n in range(1, len(parts) + 1):
                candidate = "/".join(parts[:n])
                if _glob_match(candidate, pattern, depth):
                    found.add(self / candidate)
        yield from sorted(found, key=lambda p: p.key)

    def rglob(self, pattern: str) -> Iterator[ObjectPath]:
        return self.glob(f"**/{pattern}")

    def relative_to(self, other: ObjectPath) -> str:
        """This key below `other`'s, as a `/`-separated string."""
        if self.key == other.key:
            return ""
        if not self.key.startswith(other.key + "/"):
            raise ValueError(f"{self} is not below {other}")
        return self.key[len(other.key) + 1 :]

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def resolve(self) -> ObjectPath:
        return self

    def etag(self) -> str:
        """The store's version tag of this object (one HEAD request): it changes whenever the
        object's bytes do, which an object's mtime (whole seconds) does not promise."""
        with self.filesystem.open_input_file(self.key) as handle:
            meta = handle.metadata()
        tag = meta.get("ETag") or meta.get(b"ETag") if isinstance(meta, dict) else None
        if tag is None:
            stat = self.stat()
            return f"{stat.st_size}:{stat.st_mtime}"
        return (tag.decode() if isinstance(tag, bytes) else str(tag)).strip('"')

    def stat(self) -> ObjectStat:
        import pyarrow.fs as pafs

        info = self._info()
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(f"{self} is not an object")
        mtime = info.mtime.timestamp() if info.mtime is not None else 0.0
        return ObjectStat(int(info.size or 0), mtime)

    def open(self, mode: str = "rb") -> Any:
        """A binary stream: "rb" reads the object, "wb" writes it (one PUT, done when closed)."""
        if mode == "rb":
            return self.filesystem.open_input_stream(self.key)
        if mode == "wb":
            return self.filesystem.open_output_stream(self.key)
        raise ValueError(f"ObjectPath.open does not support mode {mode!r} (binary only)")

    def read_bytes(self) -> bytes:
        with self.filesystem.open_input_stream(self.key) as stream:
            return bytes(stream.read())

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    # ---- writing (the publisher) -----------------------------------------------------------
    def write_bytes(self, data: bytes) -> int:
        with self.filesystem.open_output_stream(self.key) as stream:
            stream.write(data)
        return len(data)

    def write_text(self, text: str, encoding: str = "utf-8") -> int:
        return self.write_bytes(text.encode(encoding))

    def upload(self, source: Path, chunk: int = 8 << 20) -> None:
        """Copy a local file here; an upload error raises (on close, for the last part)."""
        with source.open("rb") as reader, self.filesystem.open_output_stream(self.key) as stream:
            while data := reader.read(chunk):
                stream.write(data)

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Prefixes need no creating; only a missing bucket is made (when the store allows it)."""
        import pyarrow.fs as pafs

        if self.filesystem.get_file_info(self.bucket).type == pafs.FileType.NotFound:
            self.filesystem.create_dir(self.bucket)

    def unlink(self, missing_ok: bool = False) -> None:
        try:
            self.filesystem.delete_file(self.key)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def remove_tree(self) -> None:
        """Delete every object under this prefix (not atomic: callers order what goes first)."""
        import pyarrow.fs as pafs

        if self._info().type != pafs.FileType.NotFound:
            self.filesystem.delete_dir(self.key)


Location = Path | ObjectPath


def _glob_match(candidate: str, pattern: str, depth: int) -> bool:
    """`Path.glob` semantics for the patterns the pipeline uses: `**/x` matches x at any depth,
    otherwise each `/`-separated level of the pattern matches one level of the key."""
    if pattern.startswith("**/"):
        rest = pattern[3:]
        levels = candidate.split("/")
        width = rest.count("/") + 1
        return len(levels) >= width and _glob_match("/".join(levels[-width:]), rest, width)
    levels = candidate.split("/")
    return len(levels) == depth and all(
        fnmatch.fnmatchcase(level, part)
        for level, part in zip(levels, pattern.split("/"), strict=True)
    )


def is_url(where: str | os.PathLike[str]) -> bool:
    return "://" in os.fspath(where)


def location(where: str | os.PathLike[str] | ObjectPath) -> Location:
    """A local path, or an `s3://bucket/prefix` URL (`file://` URLs are local paths)."""
    if isinstance(where, ObjectPath | Path):
        return where
    text = os.fspath(where)
    if not is_url(text):
        return Path(text)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return Path(parts.path)
    if scheme not in SCHEMES:
        raise StorageError(
            f"{text!r}: unsupported storage scheme {scheme!r} (use a local path or s3://bucket/prefix)"
        )
    if not parts.netloc:
        raise StorageError(f"{text!r} names no bucket (expected s3://bucket/prefix)")
    if parts.query or parts.fragment:
        raise StorageError(
            f"{text!r}: put S3 settings in the environment (AWS_ENDPOINT_URL, AWS_REGION, …), "
            "not in the URL"
        )
    key = f"{parts.netloc}/{parts.path.strip('/')}".strip("/")
    return ObjectPath(s3_filesystem(*s3_settings()), key, scheme)


@lru_cache(maxsize=8)
def s3_filesystem(endpoint: str | None, region: str) -> pafs.S3FileSystem:
    """One S3 client per endpoint and region (credentials: pyarrow reads the AWS environment)."""
    import pyarrow.fs as pafs

    options: dict[str, Any] = {"region": region, "allow_bucket_creation": True}
    if endpoint:
        parts = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        if not parts.netloc:
            raise StorageError(f"S3 endpoint {endpoint!r} is not a URL such as http://host:port")
        options.update(endpoint_override=parts.netloc, scheme=parts.scheme or "https")
    return pafs.S3FileSystem(**options)


class Unreadable(Exception):
    """Why a file cannot be read as a regular file, as the end of a sentence about it."""


# What a local path that is not a regular file is, in words.
_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


class LocalFiles:
    """The reads that differ for a local file: arrays memory-mapped, a file opened without
    blocking and checked on what was opened (a link to /dev/zero is a device, a FIFO)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def absolute(self) -> Path:
        """Made absolute, so `.parent.name` means something."""
        return Path(os.path.abspath(self.path))

    def read_parquet(self) -> pa.Table:
        import pyarrow.parquet as pq

        return pq.read_table(self.path)

    def load_matrix(self) -> np.ndarray:
        import numpy as np

        return np.load(self.path, mmap_mode="r", allow_pickle=False)

    def open_regular(self) -> tuple[BinaryIO, int]:
        """The open file and its size; Unreadable unless it is a regular file."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise Unreadable("is missing") from None
        except OSError as error:
            raise Unreadable(f"is unreadable: {error.strerror or error}") from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise Unreadable(f"is not a file ({_KINDS.get(stat.S_IFMT(info.st_mode))})")
        return os.fdopen(fd, "rb"), info.st_size


class ObjectFiles:
    """The same reads of an object: it is a file of a known size or nothing, read into memory."""

    def __init__(self, path: ObjectPath) -> None:
        self.path = path

    def absolute(self) -> ObjectPath:
        return self.path

    def read_parquet(self) -> pa.Table:
        import pyarrow.parquet as pq

        with self.path.filesystem.open_input_file(self.path.key) as source:
            return pq.read_table(source)

    def load_matrix(self) -> np.ndarray:
        import numpy as np

        return np.load(io.BytesIO(self.path.read_bytes()), allow_pickle=False)

    def open_regular(self) -> tuple[BinaryIO, int]:
        if not self.path.is_file():
            raise Unreadable("is not a file" if self.path.exists() else "is missing")
        size = self.path.stat().st_size
        return self.path.open("rb"), size


def files(where: Location) -> LocalFiles | ObjectFiles:
    """The reads of a location: the one place the library tells a local file from an object."""
    return ObjectFiles(where) if isinstance(where, ObjectPath) else LocalFiles(where)


def absolute(where: Location) -> Location:
    """A local path made absolute (so `.parent.name` means something); an object path as it is."""
    return files(where).absolute()


def read_parquet(where: Location) -> pa.Table:
    """A whole Parquet file, local or in the object store."""
    return files(where).read_parquet()


def load_matrix(where: Location) -> np.ndarray:
    """A `.npy` array: memory-mapped from a local file, read into memory from an object store."""
    return files(where).load_matrix()
