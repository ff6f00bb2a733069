"""memorypack: load a tenant's published memory pack in an app and ask it questions.

Needs numpy and pyarrow only. The pipeline that builds and publishes packs is the separate
`memorypack-pipeline` distribution; nothing here imports it.

    from memorypack import MemoryPack
    pack = MemoryPack.load("data/packs/acme")
"""

from memorypack.context import PromptContext
from memorypack.encoder import EncoderUnavailable
from memorypack.format import PACK_FORMAT, PackError
from memorypack.loader import MemoryPack
from memorypack.questions import Question
from memorypack.receipt import HOLDOUT_SHARE, Receipt
from memorypack.results import (
    Conflict,
    FewShotExample,
    ScoredMemory,
    Selection,
    SkillChoice,
    Template,
)
from memorypack.selector import Selector

__version__ = "0.1.0"

__all__ = [
    "HOLDOUT_SHARE",
    "PACK_FORMAT",
    "Conflict",
    "EncoderUnavailable",
    "FewShotExample",
    "MemoryPack",
    "PackError",
    "PromptContext",
    "Question",
    "Receipt",
    "ScoredMemory",
    "Selection",
    "Selector",
    "SkillChoice",
    "Template",
    "__version__",
]
