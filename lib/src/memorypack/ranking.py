"""Rank a pack's memories for an app: relevance × confidence plus the seed design's boosts."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np
import pyarrow as pa

from memorypack.arguments import number, optional_number, vector, whole
from memorypack.indexes import OVERRULED, PackIndexes
from memorypack.results import ScoredMemory, Selection
from memorypack.selector import Selector, SelectorFailed, call_with_timeout, parse_choices
from memorypack.tables import EMPTY, SECONDS_PER_DAY
from memorypack.text_queries import TextQueries

log = logging.getLogger("memorypack.loader")

# Relevance boosts from the seed design (000): same contact, same kind, tags, recency, feedback.
SAME_CONTACT_BOOST = 0.3
SAME_KIND_BOOST = 0.2
TAG_BOOST = 0.1
RECENCY_BOOST = 0.2
RECENCY_DECAY_PER_DAY = 0.02
POSITIVE_FEEDBACK_WEIGHT = 0.2
NEGATIVE_FEEDBACK_WEIGHT = 0.1
DEFAULT_SELECTOR_TIMEOUT_MS = 800.0
# `search` finds an inactive or archived memory that answers the query, below an equally relevant
# active one (SPEC §4.2 round 3): its relevance is multiplied by this.
INACTIVE_FACTOR = 0.95  # chosen with the fusion's constants (memorypack.keyword)


class Ranking:
    """`memories_for`, `search` and `select`: the memories an app puts in a prompt."""

    def __init__(self, indexes: PackIndexes, text: TextQueries) -> None:
        self.indexes = indexes
        self.text = text

    def _rank(
        self,
        rows: np.ndarray,
        k: int,
        contact_id: str | None,
        kind: str | None,
        tags: Sequence[str] | None,
        query_vector: Sequence[float] | np.ndarray | None,
        now: datetime | None,
        min_score: float | None = None,
        query: str | None = None,
        retrieval: str = "hybrid",
        boosts: bool = True,
    ) -> list[ScoredMemory]:
        if rows.size == 0 or k <= 0:
            return []
        confidence = self.indexes.confidence[rows]
        parts: dict[str, np.ndarray] = {"confidence": confidence}
        found = self.text.relevance(rows, query, query_vector, retrieval)
        parts.update(found)
        relevance = found.get("relevance", found.get("similarity"))
        if boosts and relevance is not None and "relevance" in found:
            # The boosts were sized against a relevance that is 0 for what does not match; the
            # fused text relevance is not, so it ranks by place: k / (k + place), 1.0 for the
            # best, 0.5 at place k, 0 without relevance (bench `conversations`: memories_for
            # all@10 0.42, not 0.23).
            place = np.empty(rows.size)
            place[np.lexsort((rows, -relevance))] = np.arange(rows.size)
            relevance = np.where(relevance > 0, k / (k + place), 0.0)
            parts["relevance_by_place"] = relevance
        parts["semantic"] = relevance * confidence if relevance is not None else confidence
        if not boosts:  # pure retrieval (`search`): the relevance, below it when not active
            del parts["semantic"]
            if relevance is None:
                return []
            parts["status_factor"] = np.where(self.indexes.active[rows], 1.0, INACTIVE_FACTOR)
            parts["age_days"] = self.indexes.age_days[rows]
            return self._scored(rows, k, relevance * parts["status_factor"], parts, min_score)
        code = self.indexes.contact_code.get(contact_id, -2) if contact_id is not None else -2
        parts["same_contact"] = SAME_CONTACT_BOOST * (self.indexes.contact_codes[rows] == code)
        kind_code = self.indexes.kind_code.get(kind, -2) if kind is not None else -2
        parts["same_kind"] = SAME_KIND_BOOST * (self.indexes.kind_codes[rows] == kind_code)
        overlap = np.zeros(rows.size)
        if tags:
            counts = np.zeros(self.indexes.n, dtype=np.int32)
            for tag in set(tags):
                counts[self.indexes.tag_rows.get(tag, EMPTY)] += 1
            overlap = counts[rows].astype(np.float64)
        parts["tags"] = TAG_BOOST * overlap
        shift = (
            (now - self.indexes.as_of).total_seconds() / SECONDS_PER_DAY if now is not None else 0.0
        )
        parts["recency"] = np.maximum(
            0.0, RECENCY_BOOST - RECENCY_DECAY_PER_DAY * (self.indexes.age_days[rows] + shift)
        )
        quality = self.indexes.quality[rows]
        parts["feedback"] = np.where(
            quality >= 0, POSITIVE_FEEDBACK_WEIGHT * quality, NEGATIVE_FEEDBACK_WEIGHT * quality
        )
        # An overruled memory's confidence counts for nothing (the part is named by the reason).
        overruled = self.indexes.overruled[rows]
        demotion = np.where(overruled > 0, -parts["semantic"], 0.0)
        total = (
            parts["semantic"]
            + parts["same_contact"]
            + parts["same_kind"]
            + parts["tags"]
            + parts["recency"]
            + parts["feedback"]
            + demotion
        )
        return self._scored(rows, k, total, parts, min_score, overruled, demotion)

    def _scored(
        self,
        rows: np.ndarray,
        k: int,
        total: np.ndarray | None,
        parts: dict[str, np.ndarray],
        min_score: float | None,
        overruled: np.ndarray | None = None,
        demotion: np.ndarray | None = None,
    ) -> list[ScoredMemory]:
        """The k best rows by `total` (ties: pack order) as records with their score parts."""
        if total is None:
            return []
        if overruled is None or demotion is None:
            overruled, demotion = np.zeros(rows.size, dtype=np.int8), np.zeros(rows.size)
        eligible = np.arange(rows.size) if min_score is None else np.flatnonzero(total >= min_score)
        best = (
            eligible[np.argpartition(-total[eligible], k - 1)[:k]]
            if eligible.size > k
            else eligible
        )
        best = best[np.lexsort((rows[best], -total[best]))]
        picked = self.indexes.memories.take(pa.array(rows[best])).to_pylist()
        relevance = parts.get("relevance", parts.get("similarity"))
        return [
            ScoredMemory(
                memory_id=row["memory_id"],
                text=row["text"] or "",
                contact_id=row["contact_id"],
                memory_type=row["memory_type"],
                kind=row.get("kind"),
                confidence=float(row["confidence"]),
                status=row["status"],
                stale=bool(row.get("stale")),
                needs_reconfirmation=bool(row.get("needs_reconfirmation")),
                has_conflict=bool(row.get("has_conflict")),
                last_confirmed=row.get("last_confirmed"),
                tags=list(row.get("tags") or []),
                score=float(total[i]),
                parts={
                    **{name: float(values[i]) for name, values in parts.items()},
                    **({OVERRULED[overruled[i]]: float(demotion[i])} if overruled[i] else {}),
                },
                overruled_by=self.indexes.overruled_by.get(int(rows[i])),
                matched=None if relevance is None else bool(relevance[i] > 0),
            )
            for row, i in zip(picked, best, strict=True)
        ]

    def _rows_for(
        self,
        contact_id: str | None,
        include_inactive: bool = False,
        include_superseded: bool = False,
        min_confidence: float = 0.0,
    ) -> np.ndarray:
        if contact_id is None:
            rows = np.arange(self.indexes.n)
        else:
            code = self.indexes.contact_code.get(contact_id)
            own = self.indexes.contact_rows.get(code, EMPTY) if code is not None else EMPTY
            # A contact's memories plus the general ones; never another person's.
            rows = np.concatenate([own, self.indexes.general_rows])
        keep = np.ones(rows.size, dtype=bool)
        if not include_inactive:
            keep &= self.indexes.active[rows]
        if not include_superseded:
            keep &= self.indexes.overruled[rows] == 0
        if min_confidence > 0:
            keep &= self.indexes.confidence[rows] >= min_confidence
        return rows[keep]

    def memories_for(
        self,
        contact_id: str | None,
        k: int = 10,
        tags: Sequence[str] | None = None,
        query_vector: Sequence[float] | np.ndarray | None = None,
        kind: str | None = None,
        include_inactive: bool = False,
        now: datetime | None = None,
        include_superseded: bool = False,
        min_confidence: float = 0.0,
        min_score: float | None = None,
        query: str | None = None,
        retrieval: str = "hybrid",
    ) -> list[ScoredMemory]:
        """The k most relevant active memories about a contact (plus general ones), with score
        parts; an unknown contact gets the general ones. Overruled memories (the losing side of
        a resolved conflict) only with `include_superseded`, ranked without their confidence.
        Floors: `confidence` ≥ min_confidence, `score` ≥ min_score.

        Relevance to a `query` text (see `search` and `retrieval`) or a `query_vector` multiplies
        the confidence (the `semantic` part); the boosts add to it."""
        k, query_vector = whole(k, "k"), vector(query_vector)
        min_confidence = number(min_confidence, "min_confidence")
        min_score = optional_number(min_score, "min_score")
        rows = self._rows_for(contact_id, include_inactive, include_superseded, min_confidence)
        return self._rank(
            rows, k, contact_id, kind, tags, query_vector, now, min_score, query, retrieval
        )

    def search(
        self,
        query: str | None = None,
        k: int = 10,
        contact_id: str | None = None,
        retrieval: str = "hybrid",
        query_vector: Sequence[float] | np.ndarray | None = None,
        include_inactive: bool = True,
        include_superseded: bool = False,
    ) -> list[ScoredMemory]:
        """Pure retrieval: the k memories most relevant to `query` (of `contact_id` plus the
        general ones, or of the whole pack), by relevance alone — no confidence, no boosts. It
        returns k memories whenever the filter holds k.

        Decay does not hide an answer (SPEC §4.2 round 3): an inactive or archived memory is
        found, its relevance × INACTIVE_FACTOR (part `status_factor`), so it ranks below an
        equally relevant active one; `status` and the `age_days` part say what it is. Pass
        `include_inactive=False` for the active ones only. Overruled memories (the losing side
        of a resolved conflict) only with `include_superseded`.

        `retrieval`: "hybrid" (default) fuses the keyword channel (BM25 over the pack's texts)
        and the vector channel (the pack's own embedding model on the query, or `query_vector`):
        each channel's scores scaled to [0, 1] over the candidates and weighted, plus a share of
        the better score of the memory's neighbours in time (see `memorypack.keyword`), so an
        exact name, order number or rare term is found when the embedding misses it, and a
        paraphrase when the words differ; "keyword" and "vector" use one channel. Without an
        encoder (`memorypack[embed]` not installed, or a pack that ships none) and without
        `query_vector`, "hybrid" runs the keyword channel alone (logged once; `encoder_error`
        says why). Parts: `keyword` (BM25), `similarity` (cosine), `keyword_rank` /
        `vector_rank` (1 = best, 0 = not in the channel's best RANK_DEPTH), `neighbours` and
        `relevance` (the channels fused, 1.0 = first in both, plus `neighbours`).

        The keyword channel matches stems (`memorypack.stem`: "refund" finds "refunds" and
        "refunded"). A memory nothing points at — no query term in its text, no neighbour that
        has one, no cosine (keyword channel alone) — has relevance 0 and `matched=False`: it is
        returned only to fill k, after every matched one; filter on `matched` for matches only."""
        k, query_vector = whole(k, "k"), vector(query_vector)
        if contact_id is None:
            rows = np.arange(self.indexes.n)
            keep = np.ones(self.indexes.n, dtype=bool)
            if not include_inactive:
                keep &= self.indexes.active
            if not include_superseded:
                keep &= self.indexes.overruled == 0
            rows = rows[keep]
        else:
            rows = self._rows_for(contact_id, include_inactive, include_superseded)
        return self._rank(
            rows, k, contact_id, None, None, query_vector, None, None, query, retrieval, False
        )

    def candidates(
        self,
        query_vector: Sequence[float] | np.ndarray,
        k: int = 50,
        contact_id: str | None = None,
        tags: Sequence[str] | None = None,
        kind: str | None = None,
    ) -> list[ScoredMemory]:
        """The broad candidate pool a custom selector chooses from (vector search + boosts)."""
        return self.memories_for(contact_id, k=k, tags=tags, query_vector=query_vector, kind=kind)

    def select(
        self,
        query_vector: Sequence[float] | np.ndarray,
        k: int = 10,
        selector: Selector | None = None,
        timeout_ms: float = DEFAULT_SELECTOR_TIMEOUT_MS,
        contact_id: str | None = None,
        tags: Sequence[str] | None = None,
        kind: str | None = None,
        pool: int = 50,
    ) -> Selection:
        """Let `selector` pick among the candidates; on error, timeout or malformed output use the ranking."""
        k, pool = whole(k, "k"), whole(pool, "pool")
        timeout_ms = number(timeout_ms, "timeout_ms", low=0)
        began = time.perf_counter()
        pooled = self.candidates(
            query_vector, k=max(pool, k), contact_id=contact_id, tags=tags, kind=kind
        )
        if selector is None:
            return Selection(pooled[:k], "algorithmic", None, (time.perf_counter() - began) * 1000)
        try:
            raw = call_with_timeout(selector, pooled, timeout_ms)
            choices = parse_choices(raw, {m.memory_id for m in pooled})
        except SelectorFailed as failure:
            log.warning("memory selector fell back to the algorithmic ranking: %s", failure)
            return Selection(
                pooled[:k], "algorithmic", str(failure), (time.perf_counter() - began) * 1000
            )
        by_id = {m.memory_id: m for m in pooled}
        chosen = []
        for choice in choices[:k]:
            memory = by_id[choice.memory_id]
            parts = dict(memory.parts)
            if choice.relevance is not None:
                parts["selector_relevance"] = choice.relevance
            chosen.append(replace(memory, parts=parts, selector_reason=choice.reason))
        return Selection(chosen, "selector", None, (time.perf_counter() - began) * 1000)
