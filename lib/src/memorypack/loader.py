"""Load a verified memory pack and answer an app's questions fast (numpy + pyarrow only, SPEC §7).

Misses are never errors: asking about something the pack does not hold (a system, a skill, a
contact, a memory) answers empty — `[]` for a list, `None` for one thing. Only a pack that cannot
be used raises (`PackError`), and a malformed argument (`ValueError`).

The pack is read and checked in `tables`; a `MemoryPack` holds its indexes (`indexes`), its text
relevance (`text_queries`), its ranking of memories (`ranking`) and the rest of its answers
(`answers`), and offers their public methods as its own (`delegated`); it loads and refreshes.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memorypack.answers import Answers
from memorypack.context import prompt_context
from memorypack.delegated import delegated
from memorypack.format import PackError, check_hash, read_latest, resolve, verify_pack, version_time
from memorypack.fs import Location
from memorypack.indexes import PackIndexes
from memorypack.questions import Question, questions_for
from memorypack.ranking import Ranking
from memorypack.receipt import HOLDOUT_SHARE, Receipt, in_holdout, receipt
from memorypack.results import FewShotExample, ScoredMemory, Template
from memorypack.seen import accept
from memorypack.tables import one_line, read_embeddings, read_table
from memorypack.text_queries import TextQueries

log = logging.getLogger(__name__)
# The tables `PackIndexes` indexes besides the memories, in its arguments' order.
INDEXED_FILES = ("few_shot", "skills", "vectors", "templates", "conflicts")


class MemoryPack:
    """One tenant's published pack, verified at load; every query runs on precomputed arrays."""

    def __init__(self, folder: Location, manifest: dict[str, Any]) -> None:
        self.path = folder
        self.manifest = manifest
        self.version: str = manifest["version"]
        self.tenant_id: str = manifest["tenant_id"]
        self.as_of = datetime.fromisoformat(manifest["as_of"].replace("Z", "+00:00"))
        self.refresh_error: str | None = None  # why the last `refreshed()` kept this pack
        self._key: str | bytes | None = None
        self._seen: str | os.PathLike[str] | None = None  # the app's seen-versions file
        # The share of sessions that get no pack content, the control of uplift (SPEC §4.9).
        self.holdout_share = HOLDOUT_SHARE
        self.memories = read_table(folder, "memories.parquet", manifest)
        self.embeddings: np.ndarray = read_embeddings(folder, self.memories.num_rows)
        self.dim = int(self.embeddings.shape[1])
        self._indexes = PackIndexes(
            self.memories,
            self.as_of,
            *(read_table(folder, f"{name}.parquet", manifest) for name in INDEXED_FILES),
        )
        self._text = TextQueries(self._indexes, self.embeddings, folder, manifest)
        self._ranking = Ranking(self._indexes, self._text)
        self._answers = Answers(self._indexes, self._text)
        self.summaries = read_table(folder, "summaries.parquet", manifest)

    # ---- the collaborators' answers, as the pack's own ----------------------------------------
    encoder = delegated("_text", TextQueries.encoder)
    embed = delegated("_text", TextQueries.embed)
    memories_for = delegated("_ranking", Ranking.memories_for)
    search = delegated("_ranking", Ranking.search)
    candidates = delegated("_ranking", Ranking.candidates)
    select = delegated("_ranking", Ranking.select)
    few_shot = delegated("_answers", Answers.few_shot)
    few_shot_systems = delegated("_answers", Answers.few_shot_systems)
    skills_of = delegated("_answers", Answers.skills_of)
    template = delegated("_answers", Answers.template)
    template_history = delegated("_answers", Answers.template_history)
    skills = delegated("_answers", Answers.skills)
    select_skill = delegated("_answers", Answers.select_skill)
    contact_memories = delegated("_answers", Answers.contact_memories)
    conflicts = delegated("_answers", Answers.conflicts)
    memory = delegated("_answers", Answers.memory)
    explain = delegated("_answers", Answers.explain)

    @property
    def encoder_error(self) -> str | None:
        """Why text queries run without the vector channel (None: they do not, or not yet known)."""
        return self._text.encoder_error

    def warm(self, keyword: bool = True, encoder: bool = True) -> MemoryPack:
        """Build the keyword index and load the encoder now rather than on the first text query
        (an encoder that cannot load is only noted in `encoder_error`)."""
        self._text.warm(keyword=keyword, encoder=encoder)
        return self

    # ---- loading ---------------------------------------------------------------------------
    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | Location,
        version: str | None = None,
        verify: bool = True,
        key: str | bytes | None = None,
        seen: str | os.PathLike[str] | None = None,
        allow_older: bool = False,
        holdout_share: float = HOLDOUT_SHARE,
    ) -> MemoryPack:
        """Resolve LATEST (or `version`), check the manifest's seal (and signature, with a `key` or
        MEMORYPACK_PACK_KEY), its fields and folder, every file's size and sha256, and index.

        `seen`: a local file where this app records the newest pack it accepted per tenant
        (`memorypack.seen`); a pack published before it, or with an older `as_of`, is refused
        unless `allow_older=True` (an operator's rollback, which becomes the new floor). Without
        it a fresh process follows whatever LATEST names, a rolled-back one included.

        Any malformed or foreign pack raises PackError with one line. `verify=False` skips only
        the data files' sha256 (the manifest, sizes and contents are still checked). The files
        are hashed on worker threads while this one reads them (hashing releases the GIL); the
        pack is returned only once every hash matched.

        `holdout_share`: the share of sessions `prompt_context` gives no pack content (the control
        uplift is measured against, `memorypack.receipt`); 0 turns the holdout off."""
        in_holdout(None, None, holdout_share)  # a share outside [0, 1] is refused before any read
        folder = resolve(path, version)
        if not folder.is_dir():
            raise PackError(f"no pack version at {folder}")
        manifest = verify_pack(folder, check_hashes=False, key=key)
        files = sorted(manifest["files"].items(), key=lambda item: -int(item[1]["bytes"]))
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="pack-verify") as pool:
            hashed = [pool.submit(check_hash, folder, n, e) for n, e in files if verify]
            try:
                pack = cls(folder, manifest)
            except Exception as error:
                for job in hashed:  # a file that does not match says so, not how it failed to read
                    job.result()
                if isinstance(error, PackError):
                    raise
                # The checks above should leave nothing to fail; if something does, the app still
                # gets one line, not a crash in the middle of indexing.
                log.debug("pack %s failed to index", folder, exc_info=True)
                raise PackError(f"pack {folder} cannot be indexed: {one_line(error)}") from None
            for job in hashed:
                job.result()
        if seen is not None:
            accept(seen, pack.tenant_id, pack.version, pack.as_of, allow_older)
        pack._key, pack._seen, pack.holdout_share = key, seen, holdout_share
        return pack

    def refreshed(self, allow_older: bool = False) -> MemoryPack:
        """The newer live pack if LATEST moved forward and it loads; on any failure keep this one,
        log why and keep the reason in `refresh_error`.

        LATEST is a plain pointer, covered by no seal: whoever can write it could point it at an
        older retained version, which verifies, and roll a running app back in time. So a LATEST
        naming a version published before this one, or a pack whose `as_of` is older, is refused
        (the publisher never moves LATEST back; an erasure's rewrite keeps the publish time and
        `as_of`, so it is followed). An operator's `memorypack pack rollback` reaches a running app
        through `refreshed(allow_older=True)` or a fresh `MemoryPack.load`."""
        tenant_dir = self.path.parent
        self.refresh_error = None
        try:
            latest = read_latest(tenant_dir)
            if latest is None or latest == self.version:
                return self
            if not allow_older and version_time(latest) < version_time(self.version):
                raise PackError(
                    f"LATEST of {tenant_dir} points back in time, at {latest}, published before "
                    f"the loaded {self.version} (a rollback: refreshed(allow_older=True) follows it)"
                )
            # The version checked above, not whatever LATEST says by the time it is read again.
            fresh = MemoryPack.load(
                tenant_dir,
                version=latest,
                key=self._key,
                seen=self._seen,
                allow_older=allow_older,
                holdout_share=self.holdout_share,
            )
            if not allow_older and fresh.as_of < self.as_of:
                raise PackError(
                    f"pack {latest} of {tenant_dir} is as of {fresh.as_of.isoformat()}, older "
                    f"than the loaded {self.version} ({self.as_of.isoformat()})"
                )
        except Exception as error:
            self.refresh_error = str(error) if isinstance(error, PackError) else one_line(error)
            log.warning(
                "keeping pack %s: %s",
                self.version,
                self.refresh_error,
                exc_info=not isinstance(error, PackError),
            )
            return self
        return fresh

    def __repr__(self) -> str:
        return (
            f"MemoryPack(tenant={self.tenant_id!r}, version={self.version!r}, memories={len(self)})"
        )

    def __len__(self) -> int:
        return self.memories.num_rows

    # ---- prompt context (memorypack.context) ------------------------------------------------
    def questions(self, contact_id: str | None, now: datetime | None = None) -> list[Question]:
        """What to ask the person (seed 004's audit, SPEC §4.2): each open conflict, each memory
        that needs reconfirmation or is older than six months, each promotion candidate —
        in that order, a memory once. `PromptContext.ask` bundles them into one question."""
        return questions_for(self, contact_id, now or datetime.now(UTC))

    prompt_context = prompt_context  # memorypack.context.prompt_context, the pack as `pack`

    # ---- receipts (memorypack.receipt) -------------------------------------------------------
    def in_holdout(self, session_id: str | None, contact_id: str | None = None) -> bool:
        """Whether a call of this session (else contact) belongs to the holdout: an app that
        builds its prompt from `few_shot`, `memories_for` and `template` itself asks this first
        and, when True, uses no pack content."""
        return in_holdout(session_id, contact_id, self.holdout_share)

    def receipt(
        self,
        *,
        template: Template | str | None = None,
        memories: Sequence[ScoredMemory] = (),
        examples: Sequence[FewShotExample] = (),
        holdout: bool = False,
    ) -> Receipt:
        """The receipt (SPEC §2 `context`) of a prompt an app built from these pieces itself.
        `template` may name a skill (its current template); one the pack does not hold, or any
        piece that is not what the pack answered, is a ValueError."""
        if isinstance(template, str):
            found = self.template(template)
            if found is None:
                known = ", ".join(self.skills()[:20]) or "none"
                raise ValueError(f"no template {template!r:.60} in this pack (skills: {known})")
            template = found
        return receipt(
            self.tenant_id,
            self.version,
            template=template,
            memories=memories,
            examples=examples,
            holdout=holdout,
        )
