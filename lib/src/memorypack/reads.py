"""What the prompt context (`memorypack.context`) reads of a loaded pack, as a protocol: the
context module does not import the loader that calls it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pyarrow as pa

    from memorypack.results import Conflict, FewShotExample, ScoredMemory, SkillChoice, Template


class Pack(Protocol):
    """What a prompt context reads of a loaded pack (`memorypack.MemoryPack` is one): named
    here so this module does not import the loader that calls it. The arguments are the pack's
    own, documented on `MemoryPack`."""

    tenant_id: str
    version: str
    holdout_share: float

    def conflicts(self, contact_id: str | None = None) -> list[Conflict]: ...
    def contact_memories(self, *args: Any, **kwargs: Any) -> pa.Table: ...
    def template(self, *args: Any, **kwargs: Any) -> Template | None: ...
    def skills_of(self, *args: Any, **kwargs: Any) -> list[str]: ...
    def select_skill(self, *args: Any, **kwargs: Any) -> SkillChoice | None: ...
    def memories_for(self, *args: Any, **kwargs: Any) -> list[ScoredMemory]: ...
    def few_shot(self, *args: Any, **kwargs: Any) -> list[FewShotExample]: ...
