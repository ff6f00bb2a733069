"""Load a verified memory pack and answer an app's questions fast (numpy + pyarrow only, SPEC §7).

Misses are never errors: asking about something the pack does not hold (a system, a skill, a
contact, a memory) answers empty — `[]` for a list, `None` for one thing. Only a pack that cannot
be used raises (`PackError`), and a malformed argument (`ValueError`)."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from memorypack import keyword as _channels
from memorypack.context import (
    STALE_AFTER_DAYS,
    PromptContext,
    Question,
    prompt_context,
    questions_for,
)
from memorypack.encoder import EncoderUnavailable, TextEncoder, encoder_spec
from memorypack.format import (
    EMBEDDINGS,
    MAX_FIELD_CHARS,
    PackError,
    check_hash,
    read_latest,
    resolve,
    verify_pack,
    version_time,
)
from memorypack.fs import Location, load_matrix, read_parquet
from memorypack.keyword import LazyKeywordIndex, fuse, top_ranks
from memorypack.results import (
    Conflict,
    FewShotExample,
    ScoredMemory,
    Selection,
    SkillChoice,
    Template,
)
from memorypack.seen import accept
from memorypack.selector import Selector, SelectorFailed, call_with_timeout, parse_choices

log = logging.getLogger(__name__)

# Relevance boosts from the seed design (000): same contact, same kind, tags, recency, feedback.
SAME_CONTACT_BOOST = 0.3
SAME_KIND_BOOST = 0.2
TAG_BOOST = 0.1
RECENCY_BOOST = 0.2
RECENCY_DECAY_PER_DAY = 0.02
POSITIVE_FEEDBACK_WEIGHT = 0.2
NEGATIVE_FEEDBACK_WEIGHT = 0.1
# Skill selection (SPEC §4.8).
CONFIDENCE_WEIGHT = 0.7
ALIGNMENT_WEIGHT = 0.3
UNKNOWN_SKILL_CONFIDENCE = 0.5  # the pipeline's SkillConfig.initial_confidence is this value
# Cold start: the tenant's confidence in a skill is its votes' positive share over all users,
# smoothed toward UNKNOWN_SKILL_CONFIDENCE by this many votes; a user's confidence starts there
# and moves to their own as their votes arrive: (votes·own + PRIOR·tenant) / (votes + PRIOR).
SKILL_SMOOTHING_VOTES = 2.0
TENANT_PRIOR_VOTES = 5.0
# Why a memory is overruled (the score part naming it), by the reason of the conflict it lost.
SUPERSEDED, NOT_PREFERRED = "superseded", "not_preferred"
_OVERRULED = {1: SUPERSEDED, 2: NOT_PREFERRED}
DEFAULT_SELECTOR_TIMEOUT_MS = 800.0
_EMPTY = np.zeros(0, dtype=np.int64)
RETRIEVALS = ("hybrid", "keyword", "vector")
_SECONDS_PER_DAY = 86400.0


def _text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _list_of(item: Any) -> Any:
    def check(kind: pa.DataType) -> bool:
        is_list = pa.types.is_list(kind) or pa.types.is_large_list(kind)
        return bool(is_list and item(kind.value_type))

    return check


_texts, _floats = _list_of(_text), _list_of(pa.types.is_floating)


def _time(kind: pa.DataType) -> bool:
    return bool(pa.types.is_timestamp(kind) and kind.unit == "us")


_FLOAT, _INT, _BOOL = pa.types.is_floating, pa.types.is_integer, pa.types.is_boolean
# Columns of memories.parquet that packs published before them lack (read as nulls).
OPTIONAL_MEMORY_COLUMNS = ("impact_level", "category", "promotion_to", "promotion_reason")
# The columns the loader reads from each file and the Arrow type each must have. memories.parquet
# must hold all of its own; another file may lack any (read as nulls) but not hold it retyped.
COLUMNS: dict[str, dict[str, Any]] = {
    "memories.parquet": {
        **dict.fromkeys(("tenant_id", "memory_id", "contact_id", "kind", "memory_type"), _text),
        "status": _text,
        **dict.fromkeys(("text", "skill_id"), _text),
        **dict.fromkeys(("confidence", "quality_score"), _FLOAT),
        **dict.fromkeys(("last_confirmed", "ts"), _time),
        **dict.fromkeys(("stale", "needs_reconfirmation"), _BOOL),
        "n_feedback": _INT,
        "tags": _texts,
        **dict.fromkeys(OPTIONAL_MEMORY_COLUMNS, _text),
    },
    "few_shot.parquet": {
        **dict.fromkeys(("memory_id", "system", "kind", "skill_id", "input", "output"), _text),
        "rank": _INT,
        "quality_lower": _FLOAT,
        "is_corrected": _BOOL,
    },
    "skills.parquet": {
        **dict.fromkeys(("user_id", "skill_id"), _text),
        "ema_confidence": _FLOAT,
        **dict.fromkeys(("n_positive", "n_negative"), _INT),
    },
    "vectors.parquet": {"owner": _text, "owner_id": _text, "vector": _floats},
    "templates.parquet": {
        **dict.fromkeys(("skill_id", "template", "policy_id"), _text),
        **dict.fromkeys(("eval_accuracy", "eval_margin"), _FLOAT),
        "is_current": _BOOL,
    },
    "conflicts.parquet": dict.fromkeys(
        ("contact_id", "memory_id_a", "memory_id_b", "preferred_id", "reason", "subject"), _text
    ),
}
NOT_NULL = {"memories.parquet": ("memory_id", "confidence")}
# Columns the index combines, which must therefore share one type.
SAME_TYPE = (("kind", "memory_type"), ("last_confirmed", "ts"))
# Python datetimes span years 1..9999: a timestamp outside cannot be handed to an app.
_TIME_RANGE_US = (-62135596800 * 10**6, 253402300799 * 10**6)


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200]}" if text else type(error).__name__


def _check_table(table: pa.Table, name: str, where: str, tenant: str) -> None:
    """PackError unless the table has the columns and types the loader reads, only the tenant's
    rows, no text over MAX_FIELD_CHARS and no time a Python datetime cannot hold."""
    expected = COLUMNS.get(name, {})
    if name == "memories.parquet":
        missing = sorted(set(expected) - set(table.column_names) - set(OPTIONAL_MEMORY_COLUMNS))
        if missing:
            raise PackError(f"{where}: {name} lacks columns {missing}")
    for column, kind in expected.items():
        if column in table.column_names and not kind(table.schema.field(column).type):
            raise PackError(
                f"{where}: {name} column {column} has type {table.schema.field(column).type}"
            )
    for column in NOT_NULL.get(name, ()):
        if table.column(column).null_count:
            raise PackError(f"{where}: {name} column {column} has nulls")
    for a, b in SAME_TYPE if name == "memories.parquet" else ():
        if table.schema.field(a).type != table.schema.field(b).type:
            raise PackError(f"{where}: {name} columns {a} and {b} differ in type")
    if "tenant_id" in table.column_names:
        if not _text(table.schema.field("tenant_id").type):
            raise PackError(f"{where}: {name} column tenant_id is not text")
        own = pc.sum(pc.equal(table.column("tenant_id"), tenant)).as_py() or 0
        if own != table.num_rows:
            raise PackError(f"{where}: {name} holds {table.num_rows - own} rows of other tenants")
    for column, field in zip(table.column_names, table.schema, strict=True):
        values = _array(table.column(column))
        if _texts(field.type):
            values = pc.list_flatten(values)
        if _text(values.type):
            longest = pc.max(pc.utf8_length(values)).as_py() or 0
            if longest > MAX_FIELD_CHARS:
                raise PackError(
                    f"{where}: {name} column {column} holds a text of {longest} characters "
                    f"(the limit is {MAX_FIELD_CHARS})"
                )
        elif pa.types.is_timestamp(field.type):
            low, high = pc.min_max(values.cast(pa.int64())).values()
            if not _time(field.type) or (
                low.is_valid
                and (low.as_py() < _TIME_RANGE_US[0] or high.as_py() > _TIME_RANGE_US[1])
            ):
                raise PackError(
                    f"{where}: {name} column {column} holds times out of range or not in µs"
                )


def _read(folder: Location, name: str, manifest: dict[str, Any]) -> pa.Table:
    """A listed Parquet file, checked (`_check_table`); an empty table when it is not listed."""
    entry = manifest["files"].get(name)
    if entry is None:
        return pa.table({})
    where = f"pack {folder}"
    try:
        table = read_parquet(folder / name).combine_chunks()
        table.validate(full=True)  # offsets and UTF-8, so no value fails later in an app's query
    except (pa.ArrowException, OSError, ValueError) as error:
        raise PackError(
            f"{where}: {name} is not a readable Parquet file ({_one_line(error)})"
        ) from None
    if table.num_rows != entry["rows"]:
        raise PackError(
            f"{where}: {name} has {table.num_rows} rows, the manifest says {entry['rows']}"
        )
    _check_table(table, name, where, manifest["tenant_id"])
    return table


def _embeddings(folder: Location, rows: int) -> np.ndarray:
    """The float32 matrix, memory-mapped: one row per memory."""
    try:
        matrix = load_matrix(folder / EMBEDDINGS)
    except (OSError, ValueError, EOFError) as error:
        raise PackError(
            f"pack {folder}: {EMBEDDINGS} is not a readable array ({_one_line(error)})"
        ) from None
    if not isinstance(matrix, np.ndarray) or matrix.dtype != np.float32 or matrix.ndim != 2:
        raise PackError(f"pack {folder}: {EMBEDDINGS} is not a 2-D float32 matrix")
    if matrix.shape[0] != rows:
        raise PackError(f"pack {folder}: {matrix.shape[0]} embedding rows for {rows} memories")
    return matrix


def _numbers(table: pa.Table, name: str, default: float = 0.0) -> np.ndarray:
    """A numeric column as float64, nulls (and a missing column) as `default`."""
    if name not in table.column_names:
        return np.full(table.num_rows, default)
    values = pc.fill_null(table.column(name).cast(pa.float64()), default)
    return np.asarray(values.to_numpy(), dtype=np.float64)


def _strings(table: pa.Table, name: str) -> pa.Array:
    """A text column as one large_string array (all nulls when the file lacks it)."""
    if name not in table.column_names:
        return pa.nulls(table.num_rows, pa.large_string())
    return _array(table.column(name)).cast(pa.large_string())


def _column(table: pa.Table, name: str, default: Any = None) -> list[Any]:
    if name in table.column_names:
        return list(table.column(name).to_pylist())
    return [default] * table.num_rows


def _group_rows(codes: np.ndarray) -> dict[int, np.ndarray]:
    """Code → the row indices holding it (one argsort, no Python loop over rows)."""
    if not codes.size:  # e.g. a pack whose memories carry no tags
        return {}
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    ends = np.r_[starts[1:], codes.size]
    return {int(sorted_codes[s]): order[s:e] for s, e in zip(starts, ends, strict=True)}


def _array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    return values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values


def _encode(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, dict[str, int]]:
    encoded = pc.dictionary_encode(_array(values))
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
    return codes, {value: i for i, value in enumerate(encoded.dictionary.to_pylist())}


def _has_text(query: str | None) -> bool:
    return isinstance(query, str) and bool(query.strip())


def _unit(vector: Any, dim: int) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float32).ravel()
    if array.shape[0] != dim:
        raise ValueError(f"query vector has {array.shape[0]} dimensions, the pack has {dim}")
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else array


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
        self.memories = _read(folder, "memories.parquet", manifest)
        self.embeddings: np.ndarray = _embeddings(folder, self.memories.num_rows)
        self.dim = int(self.embeddings.shape[1])
        self._index_memories()
        self._index_few_shot(_read(folder, "few_shot.parquet", manifest))
        self._index_skills(
            _read(folder, "skills.parquet", manifest),
            _read(folder, "vectors.parquet", manifest),
            _read(folder, "templates.parquet", manifest),
        )
        self._index_conflicts(_read(folder, "conflicts.parquet", manifest))
        self.summaries = _read(folder, "summaries.parquet", manifest)
        self._init_text_queries()

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
        pack is returned only once every hash matched."""
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
                raise PackError(f"pack {folder} cannot be indexed: {_one_line(error)}") from None
            for job in hashed:
                job.result()
        if seen is not None:
            accept(seen, pack.tenant_id, pack.version, pack.as_of, allow_older)
        pack._key, pack._seen = key, seen
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
                tenant_dir, version=latest, key=self._key, seen=self._seen, allow_older=allow_older
            )
            if not allow_older and fresh.as_of < self.as_of:
                raise PackError(
                    f"pack {latest} of {tenant_dir} is as of {fresh.as_of.isoformat()}, older "
                    f"than the loaded {self.version} ({self.as_of.isoformat()})"
                )
        except Exception as error:
            self.refresh_error = str(error) if isinstance(error, PackError) else _one_line(error)
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

    # ---- indexes ---------------------------------------------------------------------------
    def _index_memories(self) -> None:
        table = self.memories
        n = table.num_rows
        ids = _column(table, "memory_id")
        self._row_of = {memory_id: i for i, memory_id in enumerate(ids)}
        contact_codes, self._contact_code = _encode(table.column("contact_id"))
        self._contact_rows = _group_rows(contact_codes)
        self._general_rows = self._contact_rows.pop(-1, _EMPTY)
        self._contact_codes = contact_codes
        kinds = pc.coalesce(table.column("kind"), table.column("memory_type"))
        self._kind_codes, self._kind_code = _encode(kinds)
        self._confidence = (
            table.column("confidence").to_numpy(zero_copy_only=False).astype(np.float64)
        )
        self._quality = (
            pc.fill_null(table.column("quality_score"), 0.0).to_numpy().astype(np.float64)
        )
        self._active = pc.equal(table.column("status"), "active").to_numpy(zero_copy_only=False)
        confirmed = pc.coalesce(table.column("last_confirmed"), table.column("ts"))
        confirmed_us = pc.fill_null(
            pc.cast(confirmed, pa.int64()), int(self.as_of.timestamp() * 1e6)
        )
        as_of_us = self.as_of.timestamp() * 1e6
        self._age_days = (as_of_us - confirmed_us.to_numpy()) / (1e6 * _SECONDS_PER_DAY)
        tags = _array(table.column("tags"))
        flat = pc.list_flatten(tags)
        parents = pc.list_parent_indices(tags).to_numpy()
        tag_codes, tag_of = _encode(flat) if len(flat) else (_EMPTY, {})
        groups = _group_rows(tag_codes)
        self._tag_rows = {
            tag: parents[groups[code]] for tag, code in tag_of.items() if code in groups
        }
        self._skill_tags: dict[str, set[str]] | None = None
        self._n = n

    def _index_few_shot(self, table: pa.Table) -> None:
        rows = table.to_pylist()
        memory_rows = [self._row_of.get(row.get("memory_id"), -1) for row in rows]
        self._examples = []
        for row, at in zip(rows, memory_rows, strict=True):
            corrected = bool(row.get("is_corrected"))
            quality = float(self._quality[at]) if at >= 0 else row.get("quality_score")
            self._examples.append(
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
                    confidence=float(self._confidence[at]) if at >= 0 else None,
                    is_corrected=corrected,
                )
            )
        self._example_rows = np.array(memory_rows, dtype=np.int64)

        def figure(values: list[float | None]) -> np.ndarray:
            return np.array([np.nan if v is None else v for v in values], dtype=np.float64)

        self._example_quality = figure([e.quality for e in self._examples])
        self._example_confidence = figure([e.confidence for e in self._examples])
        groups: dict[tuple[str | None, str | None, str | None], list[int]] = {}
        for i, e in enumerate(self._examples):
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
            e = self._examples[i]
            group_rank = e.group_rank if e.group_rank is not None else 1 << 30
            return (group_rank, -(e.quality_lower or 0.0))

        self._example_groups: dict[tuple[str | None, str | None, str | None], np.ndarray] = {}
        for key, members in groups.items():
            seen: set[str] = set()
            unique = []
            for i in sorted(members, key=order):
                if self._examples[i].memory_id not in seen:
                    seen.add(self._examples[i].memory_id)
                    unique.append(i)
            self._example_groups[key] = np.array(unique, dtype=np.int64)

    def _index_skills(self, skills: pa.Table, vectors: pa.Table, templates: pa.Table) -> None:
        # Per user and skill: (own confidence, votes). Per skill: the tenant's confidence.
        votes = _numbers(skills, "n_positive") + _numbers(skills, "n_negative")
        self._user_skills: dict[str, dict[str, tuple[float, int]]] = {}
        for user, skill, confidence, n in zip(
            _column(skills, "user_id"),
            _column(skills, "skill_id"),
            _column(skills, "ema_confidence"),
            votes.tolist(),
            strict=True,
        ):
            if user is not None and skill is not None:
                value = UNKNOWN_SKILL_CONFIDENCE if confidence is None else float(confidence)
                self._user_skills.setdefault(user, {})[skill] = (value, int(n))
        self._tenant_skills: dict[str, float] = {}
        if skills.num_rows:
            codes, code_of = _encode(_strings(skills, "skill_id"))
            known = codes >= 0
            size = len(code_of)
            positive = np.bincount(
                codes[known], _numbers(skills, "n_positive")[known], minlength=size
            )
            total = np.bincount(codes[known], votes[known], minlength=size)
            share = (positive + SKILL_SMOOTHING_VOTES * UNKNOWN_SKILL_CONFIDENCE) / (
                total + SKILL_SMOOTHING_VOTES
            )
            self._tenant_skills = {skill: float(share[c]) for skill, c in code_of.items()}
        self._user_vectors: dict[str, np.ndarray] = {}
        self._skill_vectors: dict[str, np.ndarray] = {}
        for owner, owner_id, vector in zip(
            _column(vectors, "owner"),
            _column(vectors, "owner_id"),
            _column(vectors, "vector"),
            strict=True,
        ):
            if owner_id is None or not vector:
                continue
            array = np.asarray(vector, dtype=np.float32)
            norm = float(np.linalg.norm(array))
            target = self._user_vectors if owner == "user" else self._skill_vectors
            target[owner_id] = array / norm if norm > 0 else array
        self._templates: dict[str, list[Template]] = {}
        for row in templates.to_pylist():
            if row.get("skill_id") is None:
                continue
            self._templates.setdefault(row["skill_id"], []).append(
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
        self._all_skills = sorted(
            set(self._tenant_skills) | set(self._skill_vectors) | set(self._templates)
        )

    def _index_conflicts(self, table: pa.Table) -> None:
        """The conflicts, and the memories on the losing side of a resolved one (overruled)."""
        self._conflicts = table.to_pylist()
        self._overruled = np.zeros(self._n, dtype=np.int8)  # 0, or a key of _OVERRULED
        self._overruled_by: dict[int, str] = {}
        if not table.num_rows or not self._n:
            return
        a, b, preferred, reason = (
            _strings(table, c) for c in ("memory_id_a", "memory_id_b", "preferred_id", "reason")
        )
        a_won = pc.fill_null(pc.equal(preferred, a), False)
        decided = pc.or_(a_won, pc.fill_null(pc.equal(preferred, b), False))
        losers = pc.index_in(
            pc.if_else(a_won, b, a), value_set=_strings(self.memories, "memory_id")
        )
        keep = pc.and_(decided, pc.is_valid(losers))
        rows = pc.filter(losers, keep).to_numpy(zero_copy_only=False).astype(np.int64)
        winners = np.asarray(pc.filter(preferred, keep).to_pylist(), dtype=object)
        linked = pc.fill_null(pc.equal(pc.filter(reason, keep), "supersedes"), False)
        linked = np.asarray(linked.to_numpy(zero_copy_only=False), dtype=bool)
        # A memory that lost several conflicts: a supersedes link names it before a preference.
        self._overruled[rows[~linked]] = 2
        self._overruled[rows[linked]] = 1
        order = np.argsort(linked, kind="stable")  # links last: the dict keeps their winner
        self._overruled_by = dict(zip(rows[order].tolist(), winners[order].tolist(), strict=True))

    # ---- few-shot ---------------------------------------------------------------------------
    def few_shot(
        self,
        system: str | None,
        kind: str | None = None,
        skill_id: str | None = None,
        k: int = 3,
        query_vector: Sequence[float] | np.ndarray | None = None,
        min_confidence: float = 0.0,
        min_score: float | None = None,
        query: str | None = None,
        retrieval: str = "hybrid",
    ) -> list[FewShotExample]:
        """The best examples of a system (× kind × skill); with a query text or vector, the most
        relevant inputs first (`retrieval` as in `search`; `similarity` is the cosine when the
        vector channel ran). Floors: the memory's `confidence` ≥ min_confidence, the example's
        `quality` ≥ min_score. `rank` is the position in this answer."""
        rows = self._example_groups.get((system, kind, skill_id), _EMPTY)
        if min_confidence > 0:
            rows = rows[self._example_confidence[rows] >= min_confidence]
        if min_score is not None:
            rows = rows[self._example_quality[rows] >= min_score]
        similarity = np.full(rows.size, np.nan)
        if (query_vector is not None or _has_text(query)) and rows.size:
            memory_rows = self._example_rows[rows]
            known = memory_rows >= 0
            found = self._relevance(memory_rows[known], query, query_vector, retrieval)
            relevance = np.full(rows.size, -2.0)
            if "similarity" in found:
                similarity[known] = found["similarity"]
            if found:
                relevance[known] = found.get("relevance", found.get("similarity"))
            # Stable sort: among equally relevant examples the quality order stands.
            order = np.argsort(-relevance, kind="stable")
            rows, similarity = rows[order], similarity[order]
        return [
            replace(
                self._examples[row],
                rank=position + 1,
                similarity=None if np.isnan(value) else float(value),
            )
            for position, (row, value) in enumerate(zip(rows[:k], similarity[:k], strict=True))
        ]

    def few_shot_systems(self) -> list[str]:
        """Systems that have few-shot examples, the best covered first."""
        counts: dict[str, int] = {}
        for example in self._examples:
            if example.system:
                counts[example.system] = counts.get(example.system, 0) + 1
        return sorted(counts, key=lambda s: (-counts[s], s))

    # ---- memories ---------------------------------------------------------------------------
    def _similarities(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        # Gathering a few rows is cheaper than a full scan; past a quarter of the pack it is not.
        if rows.size * 4 > self._n:
            return np.asarray(self.embeddings @ q)[rows]
        return np.asarray(self.embeddings[rows] @ q)

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
        confidence = self._confidence[rows]
        parts: dict[str, np.ndarray] = {"confidence": confidence}
        found = self._relevance(rows, query, query_vector, retrieval)
        parts.update(found)
        relevance = found.get("relevance", found.get("similarity"))
        parts["semantic"] = relevance * confidence if relevance is not None else confidence
        if not boosts:  # pure retrieval (`search`): the relevance alone
            del parts["semantic"]
            return self._scored(rows, k, relevance, parts, min_score)
        code = self._contact_code.get(contact_id, -2) if contact_id is not None else -2
        parts["same_contact"] = SAME_CONTACT_BOOST * (self._contact_codes[rows] == code)
        kind_code = self._kind_code.get(kind, -2) if kind is not None else -2
        parts["same_kind"] = SAME_KIND_BOOST * (self._kind_codes[rows] == kind_code)
        overlap = np.zeros(rows.size)
        if tags:
            counts = np.zeros(self._n, dtype=np.int32)
            for tag in set(tags):
                counts[self._tag_rows.get(tag, _EMPTY)] += 1
            overlap = counts[rows].astype(np.float64)
        parts["tags"] = TAG_BOOST * overlap
        shift = (now - self.as_of).total_seconds() / _SECONDS_PER_DAY if now is not None else 0.0
        parts["recency"] = np.maximum(
            0.0, RECENCY_BOOST - RECENCY_DECAY_PER_DAY * (self._age_days[rows] + shift)
        )
        quality = self._quality[rows]
        parts["feedback"] = np.where(
            quality >= 0, POSITIVE_FEEDBACK_WEIGHT * quality, NEGATIVE_FEEDBACK_WEIGHT * quality
        )
        # An overruled memory's confidence counts for nothing (the part is named by the reason).
        overruled = self._overruled[rows]
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
        picked = self.memories.take(pa.array(rows[best])).to_pylist()
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
                    **({_OVERRULED[overruled[i]]: float(demotion[i])} if overruled[i] else {}),
                },
                overruled_by=self._overruled_by.get(int(rows[i])),
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
            rows = np.arange(self._n)
        else:
            code = self._contact_code.get(contact_id)
            own = self._contact_rows.get(code, _EMPTY) if code is not None else _EMPTY
            # A contact's memories plus the general ones; never another person's.
            rows = np.concatenate([own, self._general_rows])
        keep = np.ones(rows.size, dtype=bool)
        if not include_inactive:
            keep &= self._active[rows]
        if not include_superseded:
            keep &= self._overruled[rows] == 0
        if min_confidence > 0:
            keep &= self._confidence[rows] >= min_confidence
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
        include_inactive: bool = False,
        include_superseded: bool = False,
    ) -> list[ScoredMemory]:
        """Pure retrieval: the k memories most relevant to `query` (of `contact_id` plus the
        general ones, or of the whole pack), by relevance alone — no confidence, no boosts.

        `retrieval`: "hybrid" (default) fuses the keyword channel (BM25 over the pack's texts)
        and the vector channel (the pack's own embedding model on the query, or `query_vector`)
        by reciprocal rank fusion, so an exact name, order number or rare term is found when the
        embedding misses it, and a paraphrase when the words differ; "keyword" and "vector" use
        one channel. Without an encoder (`memorypack[embed]` not installed, or a pack that ships
        none) and without `query_vector`, "hybrid" runs the keyword channel alone (logged once;
        `encoder_error` says why). Parts: `keyword` (BM25), `similarity` (cosine),
        `keyword_rank` / `vector_rank` (1 = best, 0 = not in the channel's best RRF_DEPTH) and
        `relevance` (the fused score, 1.0 = first in every channel); a fused search returns only
        memories some channel ranked."""
        if contact_id is None:
            rows = np.arange(self._n)
            keep = np.ones(self._n, dtype=bool)
            if not include_inactive:
                keep &= self._active
            if not include_superseded:
                keep &= self._overruled == 0
            rows = rows[keep]
        else:
            rows = self._rows_for(contact_id, include_inactive, include_superseded)
        fused = retrieval != "vector" and _has_text(query)
        return self._rank(
            rows,
            k,
            contact_id,
            None,
            None,
            query_vector,
            None,
            1e-12 if fused else None,
            query,
            retrieval,
            boosts=False,
        )

    # ---- text queries ------------------------------------------------------------------------
    def _init_text_queries(self) -> None:
        self._keyword = LazyKeywordIndex(_strings(self.memories, "text"))
        self._encoder: TextEncoder | None = None
        self.encoder_error: str | None = None  # why text queries run without the vector channel
        self._encoder_lock = threading.Lock()

    def encoder(self) -> TextEncoder:
        """The pack's embedding model (loaded and sha256-checked on first use, then kept).

        EncoderUnavailable (a PackError) when the pack ships none or `memorypack[embed]` is not
        installed; PackError when a model file does not match the manifest."""
        with self._encoder_lock:
            if self._encoder is None:
                if self.encoder_error is not None:
                    raise EncoderUnavailable(self.encoder_error)
                spec = encoder_spec(self.manifest)
                try:
                    if spec is None:
                        raise EncoderUnavailable(
                            f"pack {self.version} ships no embedding model (published before "
                            "text queries, or its model could not be exported)"
                        )
                    self._encoder = TextEncoder(self.path.parent, spec, self.dim)
                except EncoderUnavailable as error:
                    self.encoder_error = str(error)
                    raise
            return self._encoder

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length vectors of `texts` by the pack's model, comparable to `embeddings`."""
        return self.encoder().encode(list(texts))

    def warm(self, keyword: bool = True, encoder: bool = True) -> MemoryPack:
        """Build the keyword index and load the encoder now rather than on the first text query
        (an encoder that cannot load is only noted in `encoder_error`)."""
        if keyword:
            self._keyword.get()
        if encoder:
            with contextlib.suppress(EncoderUnavailable):
                self.encoder()
        return self

    def _query_vector(self, query: str, required: bool) -> np.ndarray | None:
        try:
            encoder = self.encoder()
        except EncoderUnavailable as error:
            if required:
                raise
            if not self._warned_keyword_only:
                log.warning("text queries use the keyword channel only: %s", error)
                self._warned_keyword_only = True
            return None
        return encoder.encode([query])[0]

    _warned_keyword_only = False

    def _relevance(
        self,
        rows: np.ndarray,
        query: str | None,
        query_vector: Sequence[float] | np.ndarray | None,
        retrieval: str,
    ) -> dict[str, np.ndarray]:
        """The relevance parts of `rows` for a query (see `search`); {} without a query."""
        if retrieval not in RETRIEVALS:
            raise ValueError(f"retrieval must be one of {', '.join(RETRIEVALS)}, not {retrieval!r}")
        if query is not None and not isinstance(query, str):
            raise ValueError(f"query must be text, not {type(query).__name__}")
        text = query if _has_text(query) else None
        if text is None and query_vector is None:
            return {}
        parts: dict[str, np.ndarray] = {}
        if retrieval != "keyword" and self.dim:
            vector = (
                _unit(query_vector, self.dim)
                if query_vector is not None
                else self._query_vector(str(text), required=retrieval == "vector")
            )
            if vector is not None:
                parts["similarity"] = self._similarities(rows, vector).astype(np.float64)
        if text is None or retrieval == "vector":
            return parts  # the cosine is the relevance, as before text queries
        keyword = self._keyword.get().scores(text)[rows].astype(np.float64)
        best = float(keyword.max()) if keyword.size else 0.0
        ranks = [top_ranks(keyword, (keyword > 0) & (keyword >= _channels.KEYWORD_FLOOR * best))]
        parts["keyword"] = keyword
        parts["keyword_rank"] = ranks[0].astype(np.float64)
        if "similarity" in parts:
            # A memory without an embedding has a zero row: no cosine to rank it by.
            similarity = parts["similarity"]
            ceiling = float(similarity.max()) if similarity.size else 0.0
            ranks.append(
                top_ranks(
                    similarity,
                    (similarity != 0) & (similarity >= ceiling - _channels.VECTOR_MARGIN),
                )
            )
            parts["vector_rank"] = ranks[1].astype(np.float64)
        parts["relevance"] = fuse(ranks)
        return parts

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

    # ---- templates, skills, conflicts, explanations ----------------------------------------
    def template(self, skill_id: str, version: Any = None) -> Template | None:
        """The current template of a skill (or a given version); None when the pack has none."""
        history = self._templates.get(skill_id, [])
        if version is not None:
            return next((t for t in history if str(t.version) == str(version)), None)
        current = [t for t in history if t.is_current]
        candidates = current or history
        return candidates[-1] if candidates else None

    def template_history(self, skill_id: str) -> list[Template]:
        return list(self._templates.get(skill_id, []))

    def skills(self) -> list[str]:
        return list(self._all_skills)

    def _tags_by_skill(self) -> dict[str, set[str]]:
        if self._skill_tags is None:
            found: dict[str, set[str]] = {}
            for skill, tags in zip(
                _column(self.memories, "skill_id"), _column(self.memories, "tags"), strict=True
            ):
                if skill is not None and tags:
                    found.setdefault(skill, set()).update(tags)
            self._skill_tags = found
        return self._skill_tags

    def select_skill(
        self,
        user_id: str | None,
        context_tags: Sequence[str] | None = None,
        epsilon: float = 0.0,
        rng: np.random.Generator | int | None = None,
        min_confidence: float = 0.0,
        min_score: float | None = None,
    ) -> SkillChoice | None:
        """0.7·confidence + 0.3·alignment(user preference, skill vector); ε-greedy when asked.

        The confidence starts at the tenant's (every user's votes on the skill) and moves to the
        user's own as their votes arrive, so a new user gets the skills that work for the tenant.
        Floors: `confidence` ≥ min_confidence, `score` ≥ min_score; None when no skill passes."""
        known = self._user_skills.get(user_id or "", {})
        candidates = self._all_skills
        if context_tags:
            wanted = set(context_tags)
            tagged = self._tags_by_skill()
            candidates = [s for s in candidates if tagged.get(s, set()) & wanted] or candidates
        preference = self._user_vectors.get(user_id or "")
        ranking: list[SkillChoice] = []
        for skill in candidates:
            tenant = self._tenant_skills.get(skill, UNKNOWN_SKILL_CONFIDENCE)
            own, votes = known.get(skill, (tenant, 0))
            confidence = (
                (votes * own + TENANT_PRIOR_VOTES * tenant) / (votes + TENANT_PRIOR_VOTES)
                if votes
                else tenant
            )
            vector = self._skill_vectors.get(skill)
            alignment = (
                float(np.dot(preference, vector))
                if preference is not None
                and vector is not None
                and preference.shape == vector.shape
                else 0.0
            )
            score = CONFIDENCE_WEIGHT * confidence + ALIGNMENT_WEIGHT * alignment
            if confidence >= min_confidence and (min_score is None or score >= min_score):
                ranking.append(
                    SkillChoice(skill, score, confidence, alignment, tenant, votes, False)
                )
        if not ranking:
            return None
        ranking.sort(key=lambda c: (-c.score, c.skill_id))
        generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        explored = epsilon > 0 and len(ranking) > 1 and generator.random() < epsilon
        pick = ranking[int(generator.integers(len(ranking)))] if explored else ranking[0]
        return replace(pick, explored=explored, ranking=[(c.skill_id, c.score) for c in ranking])

    def contact_memories(self, contact_id: str, include_inactive: bool = False) -> pa.Table:
        """The rows of memories.parquet about one contact (active ones unless asked), pack order."""
        code = self._contact_code.get(contact_id)
        rows = self._contact_rows.get(code, _EMPTY) if code is not None else _EMPTY
        if not include_inactive:
            rows = rows[self._active[rows]]
        return self.memories.take(pa.array(np.sort(rows), type=pa.int64()))

    def questions(self, contact_id: str | None, now: datetime | None = None) -> list[Question]:
        """What to ask the person (seed 004's audit, SPEC §4.2): each open conflict, each memory
        that needs reconfirmation or is older than six months, each promotion candidate —
        in that order, a memory once. `PromptContext.ask` bundles them into one question."""
        return questions_for(self, contact_id, now or datetime.now(UTC))

    def prompt_context(
        self,
        contact_id: str | None,
        query: str | None = None,
        system: str | None = None,
        budget_chars: int = 4000,
        *,
        kind: str | None = None,
        skill_id: str | None = None,
        user_id: str | None = None,
        tags: Sequence[str] | None = None,
        query_vector: Sequence[float] | np.ndarray | None = None,
        k_memories: int = 8,
        k_examples: int = 3,
        now: datetime | None = None,
    ) -> PromptContext:
        """The prompt pieces for one call about `contact_id`: the current template (of `skill_id`,
        else of the skill `select_skill(user_id, tags)` picks), the person's memories ranked for
        `query` with their trust lines and age warnings, open conflicts, the questions to ask the
        person, and `system`'s few-shot examples — trimmed to `budget_chars` in the priority
        order documented in `memorypack.context`. `.text` is the rendering; the fields are the
        pieces that fitted, `dropped` counts the rest. `now` (default: the clock) dates ages."""
        return prompt_context(
            self,
            contact_id,
            query,
            system,
            budget_chars,
            kind=kind,
            skill_id=skill_id,
            user_id=user_id,
            tags=tags,
            query_vector=query_vector,
            k_memories=k_memories,
            k_examples=k_examples,
            now=now,
        )

    def conflicts(self, contact_id: str | None = None) -> list[Conflict]:
        return [
            Conflict(
                contact_id=row.get("contact_id"),
                memory_id_a=row.get("memory_id_a"),
                memory_id_b=row.get("memory_id_b"),
                preferred_id=row.get("preferred_id"),
                reason=row.get("reason"),
                subject=row.get("subject"),
                text_a=row.get("text_a"),
                text_b=row.get("text_b"),
            )
            for row in self._conflicts
            if contact_id is None or row.get("contact_id") == contact_id
        ]

    def memory(self, memory_id: str) -> dict[str, Any] | None:
        """A memory's row as the pack holds it; None when the pack does not hold it."""
        row = self._row_of.get(memory_id)
        return None if row is None else dict(self.memories.slice(row, 1).to_pylist()[0])

    def explain(self, memory_id: str) -> str | None:
        """Why an app acted: "because of this memory …, last confirmed <date>, confidence <x>";
        None when the pack does not hold the memory."""
        m = self.memory(memory_id)
        if m is None:
            return None
        confirmed = m.get("last_confirmed")
        when = (
            confirmed.astimezone(UTC).date().isoformat()
            if isinstance(confirmed, datetime)
            else "never"
        )
        about = f", about {m['contact_id']}" if m.get("contact_id") else ""
        text = f'because of this memory: "{m.get("text") or ""}" ({m["memory_type"]}{about}), '
        text += f"last confirmed {when}, confidence {float(m['confidence']):.2f}"
        notes = []
        if m.get("n_feedback"):
            quality = m.get("quality_score")
            score = f", quality {float(quality):+.2f}" if quality is not None else ""
            notes.append(f"{m['n_feedback']} feedback signals{score}")
        if m.get("stale"):
            notes.append(
                f"stale: older than {STALE_AFTER_DAYS:.0f} days, mention its age before acting on it"
            )
        if m.get("needs_reconfirmation"):
            notes.append("needs reconfirmation")
        row = self._row_of[memory_id]
        if self._overruled[row]:
            why = "superseded" if self._overruled[row] == 1 else "not preferred"
            notes.append(f"{why}: the pack prefers {self._overruled_by[row]}")
        for c in self._conflicts:
            if memory_id in (c.get("memory_id_a"), c.get("memory_id_b")):
                other = (
                    c.get("memory_id_b")
                    if c.get("memory_id_a") == memory_id
                    else c.get("memory_id_a")
                )
                notes.append(
                    f"conflicts with {other} (preferred: {c.get('preferred_id')}); ask the person"
                )
        if m.get("status") != "active":
            notes.append(f"status {m.get('status')}")
        return text + "".join(f"; {note}" for note in notes)
