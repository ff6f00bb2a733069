"""Index a loaded pack's tables once into the arrays and dicts every query runs on."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memorypack.results import FewShotExample, Template
from memorypack.tables import (
    EMPTY,
    SECONDS_PER_DAY,
    column_values,
    combined,
    encode,
    group_rows,
    numbers,
    strings,
)

UNKNOWN_SKILL_CONFIDENCE = 0.5  # the pipeline's SkillConfig.initial_confidence is this value
# Cold start: the tenant's confidence in a skill is its votes' positive share over all users,
# smoothed toward UNKNOWN_SKILL_CONFIDENCE by this many votes; a user's confidence starts there
# and moves to their own as their votes arrive: (votes·own + PRIOR·tenant) / (votes + PRIOR).
SKILL_SMOOTHING_VOTES = 2.0
TENANT_PRIOR_VOTES = 5.0
# Why a memory is overruled (the score part naming it), by the reason of the conflict it lost.
SUPERSEDED, NOT_PREFERRED = "superseded", "not_preferred"
OVERRULED = {1: SUPERSEDED, 2: NOT_PREFERRED}


class PackIndexes:
    """A pack's tables indexed once into the arrays and dicts every query runs on (row numbers
    are those of `memories`)."""

    def __init__(
        self,
        memories: pa.Table,
        as_of: datetime,
        few_shot: pa.Table,
        skills: pa.Table,
        vectors: pa.Table,
        templates: pa.Table,
        conflicts: pa.Table,
    ) -> None:
        self.memories = memories
        self.as_of = as_of
        self._index_memories()
        self._index_few_shot(few_shot)
        self._index_skills(skills, vectors, templates)
        self._index_conflicts(conflicts)

    def _index_memories(self) -> None:
        table = self.memories
        n = table.num_rows
        ids = column_values(table, "memory_id")
        self.row_of = {memory_id: i for i, memory_id in enumerate(ids)}
        contact_codes, self.contact_code = encode(table.column("contact_id"))
        self.contact_rows = group_rows(contact_codes)
        self.general_rows = self.contact_rows.pop(-1, EMPTY)
        self.contact_codes = contact_codes
        kinds = pc.coalesce(table.column("kind"), table.column("memory_type"))
        self.kind_codes, self.kind_code = encode(kinds)
        self.confidence = (
            table.column("confidence").to_numpy(zero_copy_only=False).astype(np.float64)
        )
        self.quality = (
            pc.fill_null(table.column("quality_score"), 0.0).to_numpy().astype(np.float64)
        )
        self.active = pc.equal(table.column("status"), "active").to_numpy(zero_copy_only=False)
        confirmed = pc.coalesce(table.column("last_confirmed"), table.column("ts"))
        confirmed_us = pc.fill_null(
            pc.cast(confirmed, pa.int64()), int(self.as_of.timestamp() * 1e6)
        )
        as_of_us = self.as_of.timestamp() * 1e6
        self.age_days = (as_of_us - confirmed_us.to_numpy()) / (1e6 * SECONDS_PER_DAY)
        tags = combined(table.column("tags"))
        flat = pc.list_flatten(tags)
        parents = pc.list_parent_indices(tags).to_numpy()
        tag_codes, tag_of = encode(flat) if len(flat) else (EMPTY, {})
        groups = group_rows(tag_codes)
        self.tag_rows = {
            tag: parents[groups[code]] for tag, code in tag_of.items() if code in groups
        }
        self.n = n
        self._index_neighbours(pc.fill_null(pc.cast(table.column("ts"), pa.int64()), 0))

    def _index_neighbours(self, ts_us: pa.Array) -> None:
        """Each memory's neighbours in time among its contact's memories of its kind (the turns
        of one conversation; `self.n` where none, general memories have none): the rows just
        before and after it by `ts`."""
        n, codes, kinds = self.n, self.contact_codes, self.kind_codes
        order = np.lexsort((np.arange(n), ts_us.to_numpy(zero_copy_only=False), kinds, codes))
        linked = (codes[order[1:]] == codes[order[:-1]]) & (codes[order[1:]] >= 0)
        linked &= kinds[order[1:]] == kinds[order[:-1]]
        self.previous = np.full(n, n, dtype=np.int64)
        self.next = np.full(n, n, dtype=np.int64)
        self.previous[order[1:][linked]] = order[:-1][linked]
        self.next[order[:-1][linked]] = order[1:][linked]

    def _index_few_shot(self, table: pa.Table) -> None:
        rows = table.to_pylist()
        memory_rows = [self.row_of.get(row.get("memory_id"), -1) for row in rows]
        self.examples = []
        for row, at in zip(rows, memory_rows, strict=True):
            corrected = bool(row.get("is_corrected"))
            quality = float(self.quality[at]) if at >= 0 else row.get("quality_score")
            self.examples.append(
                FewShotExample(
                    memory_id=row.get("memory_id"),
                    system=row.get("system"),
                    kind=row.get("kind"),
                    skill_id=row.get("skill_id"),
                    input=row.get("input") or "",
                    output=row.get("output") or "",
                    rank=0,  # set per answer
                    group_rank=row.get("rank"),
                    # A person wrote a corrected output: the top of the scale, as the pipeline ranks it.
                    quality=1.0 if corrected else quality,
                    quality_lower=1.0 if corrected else row.get("quality_lower"),
                    n_feedback=int(row.get("n_feedback") or 0),
                    confidence=float(self.confidence[at]) if at >= 0 else None,
                    is_corrected=corrected,
                )
            )
        self.example_rows = np.array(memory_rows, dtype=np.int64)

        def figure(values: list[float | None]) -> np.ndarray:
            return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

        self.example_quality = figure([e.quality for e in self.examples])
        self.example_confidence = figure([e.confidence for e in self.examples])
        groups: dict[tuple[str | None, str | None, str | None], list[int]] = {}
        for i, e in enumerate(self.examples):
            for key in {
                (e.system, None, None),
                (e.system, e.kind, None),
                (e.system, None, e.skill_id),
                (e.system, e.kind, e.skill_id),
                (None, None, None),
            }:
                groups.setdefault(key, []).append(i)

        # Within one (system, kind, skill) set the pipeline's rank; across sets, the best of each
        # set first (then the second of each, …), by quality_lower, then in the pack's order.
        def order(i: int) -> tuple[int, float]:
            e = self.examples[i]
            group_rank = e.group_rank if e.group_rank is not None else 1 << 30
            return (group_rank, -(e.quality_lower or 0.0))

        self.example_groups: dict[tuple[str | None, str | None, str | None], np.ndarray] = {}
        for key, members in groups.items():
            seen: set[str] = set()
            unique = []
            for i in sorted(members, key=order):
                if self.examples[i].memory_id not in seen:
                    seen.add(self.examples[i].memory_id)
                    unique.append(i)
            self.example_groups[key] = np.array(unique, dtype=np.int64)

    def _index_skills(self, skills: pa.Table, vectors: pa.Table, templates: pa.Table) -> None:
        # Per user and skill: (own confidence, votes). Per skill: the tenant's confidence.
        votes = numbers(skills, "n_positive") + numbers(skills, "n_negative")
        self.user_skills: dict[str, dict[str, tuple[float, int]]] = {}
        for user, skill, confidence, n in zip(
            column_values(skills, "user_id"),
            column_values(skills, "skill_id"),
            column_values(skills, "ema_confidence"),
            votes.tolist(),
            strict=True,
        ):
            if user is not None and skill is not None:
                value = UNKNOWN_SKILL_CONFIDENCE if confidence is None else float(confidence)
                self.user_skills.setdefault(user, {})[skill] = (value, int(n))
        self.tenant_skills: dict[str, float] = {}
        if skills.num_rows:
            codes, code_of = encode(strings(skills, "skill_id"))
            known = codes >= 0
            size = len(code_of)
            positive = np.bincount(
                codes[known], numbers(skills, "n_positive")[known], minlength=size
            )
            total = np.bincount(codes[known], votes[known], minlength=size)
            share = (positive + SKILL_SMOOTHING_VOTES * UNKNOWN_SKILL_CONFIDENCE) / (
                total + SKILL_SMOOTHING_VOTES
            )
            self.tenant_skills = {skill: float(share[c]) for skill, c in code_of.items()}
        self.user_vectors: dict[str, np.ndarray] = {}
        self.skill_vectors: dict[str, np.ndarray] = {}
        for owner, owner_id, vector in zip(
            column_values(vectors, "owner"),
            column_values(vectors, "owner_id"),
            column_values(vectors, "vector"),
            strict=True,
        ):
            if owner_id is None or not vector:
                continue
            array = np.asarray(vector, dtype=np.float32)
            norm = float(np.linalg.norm(array))
            target = self.user_vectors if owner == "user" else self.skill_vectors
            target[owner_id] = array / norm if norm > 0 else array
        self.templates: dict[str, list[Template]] = {}
        for row in templates.to_pylist():
            if row.get("skill_id") is None:
                continue
            self.templates.setdefault(row["skill_id"], []).append(
                Template(
                    skill_id=row["skill_id"],
                    version=row.get("version"),
                    template=row.get("template") or "",
                    is_current=bool(row.get("is_current")),
                    eval_accuracy=row.get("eval_accuracy"),
                    eval_margin=row.get("eval_margin"),
                    policy_id=row.get("policy_id"),
                    created_at=row.get("created_at"),
                    evidence=row.get("evidence"),
                )
            )
        self.all_skills = sorted(
            set(self.tenant_skills) | set(self.skill_vectors) | set(self.templates)
        )

    def _index_conflicts(self, table: pa.Table) -> None:
        """The conflicts, and the memories on the losing side of a resolved one (overruled)."""
        self.conflicts = table.to_pylist()
        self.overruled = np.zeros(self.n, dtype=np.int8)  # 0, or a key of OVERRULED
        self.overruled_by: dict[int, str] = {}
        if not table.num_rows or not self.n:
            return
        a, b, preferred, reason = (
            strings(table, c) for c in ("memory_id_a", "memory_id_b", "preferred_id", "reason")
        )
        a_won = pc.fill_null(pc.equal(preferred, a), False)
        decided = pc.or_(a_won, pc.fill_null(pc.equal(preferred, b), False))
        losers = pc.index_in(pc.if_else(a_won, b, a), value_set=strings(self.memories, "memory_id"))
        keep = pc.and_(decided, pc.is_valid(losers))
        rows = pc.filter(losers, keep).to_numpy(zero_copy_only=False).astype(np.int64)
        winners = np.asarray(pc.filter(preferred, keep).to_pylist(), dtype=object)
        linked = pc.fill_null(pc.equal(pc.filter(reason, keep), "supersedes"), False)
        linked = np.asarray(linked.to_numpy(zero_copy_only=False), dtype=bool)
        # A memory that lost several conflicts: a supersedes link names it before a preference.
        self.overruled[rows[~linked]] = 2
        self.overruled[rows[linked]] = 1
        order = np.argsort(linked, kind="stable")  # links last: the dict keeps their winner
        self.overruled_by = dict(zip(rows[order].tolist(), winners[order].tolist(), strict=True))
