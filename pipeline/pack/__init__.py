"""The memory pack: its format, the light loader apps use (numpy + pyarrow only), and its records.

The writer (`pipeline.pack.writer`, `pipeline.pack.build`) is pipeline-side and is not imported here.
"""

from pipeline.pack.format import PACK_FORMAT, PackError
from pipeline.pack.loader import MemoryPack
from pipeline.pack.results import (
    Conflict,
    FewShotExample,
    ScoredMemory,
    Selection,
    SkillChoice,
    Template,
)

__all__ = [
    "PACK_FORMAT",
    "Conflict",
    "FewShotExample",
    "MemoryPack",
    "PackError",
    "ScoredMemory",
    "Selection",
    "SkillChoice",
    "Template",
]
