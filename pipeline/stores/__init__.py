"""Where the home's files live: one store interface (`base.Store`) with two backends, a local
folder (`local`) and an S3-compatible object store (`objects`). A location is a `pathlib.Path` or
a `memorypack.fs.ObjectPath`, parsed once from the home's path or URL; `store_of` is the one place
that maps it to its backend, so no caller asks which one it has."""

from __future__ import annotations

from collections.abc import Sequence

from memorypack.fs import Location, ObjectPath
from pipeline.stores.base import Store
from pipeline.stores.local import LocalStore
from pipeline.stores.objects import ObjectStore

LOCAL = LocalStore()
OBJECTS = ObjectStore()


def store_of(where: Location) -> Store:
    """The backend of a location."""
    return OBJECTS if isinstance(where, ObjectPath) else LOCAL


def store_of_all(files: Sequence[Location]) -> Store:
    """The backend of a list of locations (one list never mixes them; local when empty)."""
    return store_of(files[0]) if files else LOCAL
