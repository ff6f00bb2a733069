"""The pipeline side of the memory pack: build, guards, writer, store, commands, showcase.

Apps load packs with the `memorypack` library (`from memorypack import MemoryPack`), which also
holds the pack format. The names apps imported from here before still resolve for one release,
with a DeprecationWarning; nothing is imported until one is asked for.
"""

from __future__ import annotations

import warnings
from typing import Any

_MOVED = frozenset(
    {
        "PACK_FORMAT",
        "Conflict",
        "FewShotExample",
        "MemoryPack",
        "PackError",
        "ScoredMemory",
        "Selection",
        "SkillChoice",
        "Template",
    }
)


def __getattr__(name: str) -> Any:
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"pipeline.pack.{name} moved to the memorypack library: use "
        f"`from memorypack import {name}` (pipeline.pack stops re-exporting it in the next release)",
        DeprecationWarning,
        stacklevel=2,
    )
    import memorypack

    return getattr(memorypack, name)
