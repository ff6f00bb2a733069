"""Every table of the lake, declared once, in the order data flows (ingest → … → publish): its
columns and polars types, primary key, partitioning, owning asset and the comment the warehouse,
the analyst snapshot and the Dagster catalog show for it.

What reads this registry (the way pudl's `metadata/resources` drives its IO and checks):
`pipeline.storage.Lake` refuses a frame that does not match its table on write and returns the
declared columns on read (also for a table not yet written); `assets.partitions` gives every
asset its `dagster/column_schema`; `pipeline.analytics` takes the comments; `checks(name)` is the
pandera schema of a table (types, primary key unique and not null). A stage that needs a
table's schema asks here: `schema("memory_conflicts")`.

Every table an asset writes is an asset of the same name (ingest's `events` is the asset
`raw_events`), so the lineage the catalog shows is the one the code reads and writes. This
module imports nothing of the pipeline: every other module may import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import polars as pl

_TS = pl.Datetime("us", "UTC")
_S = pl.String()
_I = pl.Int64()
_F = pl.Float64()
_B = pl.Boolean()

# What a table is for: `data` is loaded into the warehouse and the analyst snapshot;
# `bookkeeping` is the memo of incremental nights (an asset, lake only); `record` is erasure's
# (written by `memorypack forget` and the night's erasure events, not an asset); `cache` is an
# append-only folder of part files keyed by model or detector version (not read through `Lake`).
Role = Literal["data", "bookkeeping", "record", "cache"]

TENANT = "tenant_id"
LOAD_DATE = "load_date"


@dataclass(frozen=True)
class Table:
    """One lake table. `partition` is the hive column of its daily partitions (None: one file);
    `by_tenant` says it lives in tenant folders (`tenant_id=<id>/`), otherwise every tenant's
    rows share its files; `asset` is the Dagster asset that writes it (None: not an asset)."""

    name: str
    comment: str
    columns: Mapping[str, pl.DataType]
    primary_key: tuple[str, ...]
    asset: str | None
    partition: str | None = None
    by_tenant: bool = True
    role: Role = "data"
    descriptions: Mapping[str, str] = field(default_factory=dict)

    @property
    def hive_columns(self) -> tuple[str, ...]:
        """Columns a file's folder names carry: a frame may leave them out when it is written.
        (The caches' tenant folders name no column of theirs.)"""
        folders = ((TENANT,) if self.by_tenant else ()) + (
            (self.partition,) if self.partition else ()
        )
        return tuple(c for c in folders if c in self.columns)


# --- the typed columns of an event (SPEC §2): events holds all, each typed table its share ---

EVENT_COLUMNS: dict[str, pl.DataType] = {
    "tenant_id": _S,
    "event_id": _S,
    "event_type": _S,
    "ts": _TS,
    "load_date": pl.Date(),
    "contact_id": _S,
    "schema_version": pl.Int32(),
    "system": _S,
    "kind": _S,
    "session_id": _S,
    "skill_id": _S,
    "input": _S,
    "output": _S,
    "summary": _S,
    "tags": pl.List(_S),
    "importance": _F,
    "model": _S,
    "stage": _S,
    "category": _S,
    "parent_event_id": _S,
    "target_id": _S,
    "signal": _S,
    "rating": pl.Int8(),
    "reason": _S,
    "comment": _S,
    "comment_truncated": _B,
    "corrected_output": _S,
    "user_id": _S,
    "memory_type": _S,
    "content": _S,
    "impact_level": _S,
    "confidence": _F,
    "supersedes": pl.List(_S),
    "metadata": _S,
    "content_hash": _S,
    "source_file": _S,
    "line_no": _I,
}
_COMMON = ["tenant_id", "event_id", "ts", "load_date", "contact_id"]
INTERACTION_COLUMNS = [
    *_COMMON,
    *("system", "kind", "session_id", "skill_id", "input", "output", "summary", "tags"),
    *("importance", "model", "stage", "category", "parent_event_id", "user_id", "metadata"),
]
FEEDBACK_COLUMNS = [
    *_COMMON,
    *("target_id", "signal", "rating", "reason", "comment", "comment_truncated"),
    *("corrected_output", "user_id", "metadata"),
]
MEMORY_COLUMNS = [
    *_COMMON,
    *("memory_type", "content", "category", "impact_level", "confidence", "supersedes"),
    *("tags", "metadata"),
]

# One count column per feedback signal and per memory type (contracts.Signal, MemoryType; a test
# keeps these lists equal to the enumerations, which import this module).
SIGNALS = (
    *("thumbs_up", "thumbs_down", "correction", "follow_up", "user_override", "user_edit"),
    *("action_taken", "action_ignored", "regenerate", "copy", "validate"),
)
TYPE_COUNT_FIELDS = (
    *("explicit_instruction", "correction", "confirmed_pattern", "inferred_pattern"),
    *("single_inference", "temporary", "interaction"),
)


def _pick(columns: Iterable[str]) -> dict[str, pl.DataType]:
    return {c: EVENT_COLUMNS[c] for c in columns}


_DPO_RUN_COLUMNS: dict[str, pl.DataType] = {
    "tenant_id": _S,
    "policy_id": _S,
    "status": _S,
    "skipped_reason": _S,
    "n_train": _I,
    "n_eval": _I,
    "eval_accuracy": _F,
    "eval_margin": _F,
    "eval_accuracy_low": _F,
    "eval_accuracy_high": _F,
    "reference_accuracy": _F,
    "length_rule_accuracy": _F,
    "verdict": _S,
    "train_loss": _F,
    "steps": _I,
    "seconds": _F,
    "model_dir": _S,
    "n_sft": _I,
    "sft_loss": _F,
    "base_model": _S,
    "beta": _F,
    "reused": _B,
    "run_at": _TS,
    "is_latest": _B,
}
_FINGERPRINT: dict[str, pl.DataType] = {
    "tenant_id": _S,
    "contact_id": _S,
    "n": _I,
    "digest": pl.UInt64(),
    "salt": _S,
}

_TABLES: tuple[Table, ...] = (
    # ingest
    Table(
        "events",
        "Every accepted event, one row per (tenant_id, event_id), partitioned by load_date.",
        EVENT_COLUMNS,
        ("tenant_id", "event_id"),
        asset="raw_events",
        partition=LOAD_DATE,
        by_tenant=False,
        descriptions={"content_hash": "hash of the event's content: a re-sent line is a duplicate"},
    ),
    Table(
        "quarantine",
        "Rejected raw lines with file, line number, load date and machine-readable reason.",
        {
            "load_date": pl.Date(),
            "file": _S,
            "line_no": _I,
            "reason": _S,
            "raw": _S,
            "raw_bytes": pl.Binary(),
            "tenant_id": _S,
            "event_id": _S,
        },
        ("load_date", "file", "line_no"),
        asset="quarantine",
        partition=LOAD_DATE,
        by_tenant=False,
        descriptions={
            "reason": "machine-readable: missing_field:<f>, bad_type:<f>, corrupt_gzip, …",
            "raw_bytes": "the bytes not ingested of an unreadable file's rest",
        },
    ),
    Table(
        "ingest_stats",
        "Per load date: files, lines read, accepted, duplicates, quarantined.",
        {
            "load_date": pl.Date(),
            "files": _I,
            "lines_read": _I,
            "accepted": _I,
            "duplicates": _I,
            "quarantined": _I,
        },
        ("load_date",),
        asset="ingest_stats",
        partition=LOAD_DATE,
        by_tenant=False,
    ),
    Table(
        "interactions",
        "AI calls: what was asked (input), what it answered (output); one memory each.",
        _pick(INTERACTION_COLUMNS),
        ("tenant_id", "event_id"),
        asset="interactions",
        partition=LOAD_DATE,
    ),
    Table(
        "feedback",
        "Signals about interactions and memories (votes, corrections, validations).",
        _pick(FEEDBACK_COLUMNS),
        ("tenant_id", "event_id"),
        asset="feedback",
        partition=LOAD_DATE,
    ),
    Table(
        "memory_statements",
        "Statements learned about a person: instructions, patterns, inferences.",
        _pick(MEMORY_COLUMNS),
        ("tenant_id", "event_id"),
        asset="memory_statements",
        partition=LOAD_DATE,
    ),
    # feedback
    Table(
        "feedback_scores",
        "Per memory: votes per signal, smoothed quality_score, Wilson quality_lower (rank by it), "
        "reputation.",
        {
            "tenant_id": _S,
            "memory_id": _S,
            "memory_kind": _S,
            **{f"n_{signal}": _I for signal in SIGNALS},
            "n_feedback": _I,
            "n_positive": _I,
            "n_negative": _I,
            "rating_mean": _F,
            "positive_mass": _F,
            "negative_mass": _F,
            "quality_score": _F,
            "quality_lower": _F,
            "naive_score": _F,
            "has_correction": _B,
            "last_feedback_at": _TS,
            "last_validated_at": _TS,
            "reputation": _F,
        },
        ("tenant_id", "memory_id"),
        asset="feedback_scores",
        descriptions={
            "memory_kind": "interaction | statement",
            "quality_lower": "Wilson lower bound of the positive share: rank by it",
            "reputation": "exactly 1.0 without feedback",
        },
    ),
    # semantic
    Table(
        "memory_embeddings",
        "Which vector each memory has: its text_hash in the embedding cache, and the model.",
        {"tenant_id": _S, "memory_id": _S, "memory_kind": _S, "text_hash": _S, "model": _S},
        ("tenant_id", "memory_id"),
        asset="memory_embeddings",
        descriptions={"text_hash": "key of the vector in embedding_cache"},
    ),
    Table(
        "memory_conflicts",
        "Pairs of memories that cannot both be true; both stay, preferred_id by the source "
        "hierarchy.",
        {
            "tenant_id": _S,
            "contact_id": _S,
            "memory_id_a": _S,
            "memory_id_b": _S,
            "preferred_id": _S,
            "reason": _S,
            "subject": _S,
            "memory_type_a": _S,
            "memory_type_b": _S,
            "subject_similarity": pl.Float32(),
        },
        ("tenant_id", "memory_id_a", "memory_id_b"),
        asset="memory_conflicts",
    ),
    Table(
        "conflict_groups",
        "Fingerprint of each contact's statements when memory_conflicts last looked at them: "
        "unchanged contacts keep their rows.",
        _FINGERPRINT,
        ("tenant_id", "contact_id"),
        asset="conflict_groups",
        role="bookkeeping",
    ),
    Table(
        "consolidated_summaries",
        "One row per cluster of near-duplicate memories: representative text, members, counts.",
        {
            "tenant_id": _S,
            "scope": _S,
            "contact_id": _S,
            "system": _S,
            "kind": _S,
            "cluster_id": _S,
            "summary": _S,
            "representative_id": _S,
            "member_ids": pl.List(_S),
            "n_members": _I,
            "n_by_type": pl.Struct({name: _I for name in TYPE_COUNT_FIELDS}),
            "confidence": _F,
            "tags": pl.List(_S),
            "first_seen": _TS,
            "last_seen": _TS,
        },
        ("tenant_id", "cluster_id"),
        asset="consolidated_summaries",
        descriptions={"scope": "statement | interaction"},
    ),
    Table(
        "memory_reinforcement",
        "Per statement: other non-conflicting members of its cluster (repeats) and the latest.",
        {
            "tenant_id": _S,
            "memory_id": _S,
            "cluster_id": _S,
            "reinforcement_count": _I,
            "last_reinforced_at": _TS,
            "reinforced_at": pl.List(_TS),
        },
        ("tenant_id", "memory_id"),
        asset="memory_reinforcement",
        descriptions={
            "reinforced_at": "every repeat dated: decay as of an earlier day counts only the "
            "repeats known by then"
        },
    ),
    Table(
        "consolidation_groups",
        "Fingerprint of each statement group when it was last clustered: unchanged groups keep "
        "their clusters.",
        _FINGERPRINT,
        ("tenant_id", "contact_id"),
        asset="consolidation_groups",
        role="bookkeeping",
    ),
    # memory
    Table(
        "decay_snapshots",
        "Point-in-time confidence, status and flags of every memory, one partition per day "
        "(as_of = next 00:00 UTC).",
        {
            "as_of": _TS,
            "tenant_id": _S,
            "memory_id": _S,
            "memory_kind": _S,
            "memory_type": _S,
            "contact_id": _S,
            "impact_level": _S,
            "category": _S,
            "created_at": _TS,
            "base_confidence": _F,
            "reinforcement_count": _I,
            "reinforced_confidence": _F,
            "last_reinforced_at": _TS,
            "last_validated_at": _TS,
            "last_confirmed": _TS,
            "age_days": _F,
            "decay_factor": _F,
            "reputation": _F,
            "quality_score": _F,
            "n_feedback": _I,
            "confidence": _F,
            "status": _S,
            "needs_reconfirmation": _B,
            "stale": _B,
            "snapshot_date": pl.Date(),
        },
        ("tenant_id", "snapshot_date", "memory_id"),
        asset="decay_snapshots",
        partition="snapshot_date",
        descriptions={"status": "active | inactive | archived"},
    ),
    Table(
        "memory_audit",
        "Monthly review findings of the latest snapshot: re-check, stale patterns, archive "
        "summary, conflicts, promotions.",
        {
            "as_of": _TS,
            "tenant_id": _S,
            "contact_id": _S,
            "check": _S,
            "memory_id": _S,
            "memory_type": _S,
            "confidence": _F,
            "status": _S,
            "age_days": _F,
            "n_memories": _I,
            "detail": _S,
        },
        # Findings, not entities: a summary finding has no memory, a memory may have several.
        (),
        asset="memory_audit",
    ),
    Table(
        "promotion_candidates",
        "Inferred patterns that could become confirmed ones: listed for a person to confirm, "
        "never applied.",
        {
            "as_of": _TS,
            "tenant_id": _S,
            "contact_id": _S,
            "memory_id": _S,
            "memory_type": _S,
            "proposed_type": _S,
            "evidence_confidence": _F,
            "confidence": _F,
            "repeats": _I,
            "last_confirmed": _TS,
            "content": _S,
            "reason": _S,
        },
        ("tenant_id", "memory_id"),
        asset="promotion_candidates",
    ),
    # examples
    Table(
        "skill_stats",
        "Per tenant × user × skill: usage, votes, positive share, EMA confidence (rate 0.1), "
        "mean reward.",
        {
            "tenant_id": _S,
            "user_id": _S,
            "skill_id": _S,
            "usage": _I,
            "n_feedback": _I,
            "n_positive": _I,
            "n_negative": _I,
            "positive_share": _F,
            "ema_confidence": _F,
            "mean_reward": _F,
            "last_used_at": _TS,
            "last_feedback_at": _TS,
        },
        ("tenant_id", "user_id", "skill_id"),
        asset="skill_stats",
    ),
    Table(
        "user_preferences",
        "Per tenant × user: preference vector in the skill-vector space, moved by votes "
        "(rate 0.1), unit length.",
        {
            "tenant_id": _S,
            "user_id": _S,
            "preference_vector": pl.List(pl.Float32()),
            "n_updates": _I,
        },
        ("tenant_id", "user_id"),
        asset="user_preferences",
    ),
    Table(
        "skill_vectors",
        "Per tenant × skill: mean embedding of its interactions (one-hot when no embeddings), "
        "unit length.",
        {
            "tenant_id": _S,
            "skill_id": _S,
            "vector": pl.List(pl.Float32()),
            "n_interactions": _I,
            "n_embedded": _I,
            "vector_source": _S,
        },
        ("tenant_id", "skill_id"),
        asset="skill_vectors",
    ),
    Table(
        "few_shot_sets",
        "Few-shot examples per tenant × system × kind × skill, ranked, with why.",
        {
            "tenant_id": _S,
            "system": _S,
            "kind": _S,
            "skill_id": _S,
            "rank": _I,
            "memory_id": _S,
            "input": _S,
            "output": _S,
            "is_corrected": _B,
            "quality_lower": _F,
            "quality_score": _F,
            "n_feedback": _I,
            "n_positive": _I,
            "n_negative": _I,
            "selection_score": _F,
            "mmr": _F,
            "ts": _TS,
            "why": _S,
        },
        ("tenant_id", "system", "kind", "skill_id", "rank"),
        asset="few_shot_sets",
    ),
    # preference
    Table(
        "preference_pairs",
        "(prompt, chosen, rejected) pairs for DPO with source, margin and split.",
        {
            "tenant_id": _S,
            "pair_id": _S,
            "prompt": _S,
            "chosen": _S,
            "rejected": _S,
            "source": _S,
            "margin": _F,
            "skill_id": _S,
            "split": _S,
            "chosen_id": _S,
            "rejected_id": _S,
        },
        ("tenant_id", "pair_id"),
        asset="preference_pairs",
        descriptions={
            "margin": "how clearly chosen beats rejected: corrections a fixed margin; "
            "regenerations and near-identical prompts the quality gap (0–2); ranked siblings "
            "the rank gap / (siblings − 1)",
            "split": "train | eval",
        },
    ),
    Table(
        "prompt_index",
        "Distinct prompts per tenant × skill already searched for near-identical ones.",
        {"tenant_id": _S, "skill_id": _S, "text_hash": _S, "model": _S},
        ("tenant_id", "skill_id", "text_hash"),
        asset="prompt_index",
        role="bookkeeping",
    ),
    Table(
        "prompt_neighbors",
        "Near-identical prompt pairs per tenant × skill, with their similarity.",
        {
            "tenant_id": _S,
            "skill_id": _S,
            "text_hash_a": _S,
            "text_hash_b": _S,
            "similarity": pl.Float32(),
        },
        ("tenant_id", "skill_id", "text_hash_a", "text_hash_b"),
        asset="prompt_neighbors",
        role="bookkeeping",
        descriptions={"text_hash_a": "text_hash_a < text_hash_b"},
    ),
    Table(
        "dpo_runs",
        "DPO policy outcomes per tenant: status, eval accuracy with its 95 % interval beside the "
        "reference model's and the length rule's, verdict, margin, loss, steps; a night that "
        "reuses the recorded policy adds no row.",
        _DPO_RUN_COLUMNS,
        ("tenant_id", "run_at"),
        asset="dpo_runs",
        descriptions={
            "eval_accuracy_low": "95 % Wilson interval of eval_accuracy",
            "reference_accuracy": "the model before DPO: Σ log-prob of chosen > of rejected",
            "length_rule_accuracy": "the longer reply wins, a tie counts half",
            "is_latest": "the tenant's newest row",
        },
    ),
    Table(
        "policy_withdrawals",
        "DPO policies withdrawn because an erased person's data trained them.",
        {"tenant_id": _S, "policy_id": _S, "withdrawn_at": _TS, "reason": _S},
        ("tenant_id", "policy_id"),
        asset=None,
        by_tenant=False,
        role="record",
    ),
    Table(
        "template_history",
        "Every prompt template version per tenant × skill, with its DPO score and evidence; "
        "is_current marks the live one.",
        {
            "tenant_id": _S,
            "skill_id": _S,
            "version": _I,
            "template": _S,
            "is_current": _B,
            "eval_accuracy": _F,
            "eval_margin": _F,
            "evidence": _S,
            "policy_id": _S,
            "created_at": _TS,
            "source": _S,
            "base_version": _I,
            "eval_n": _I,
            "win_p_value": _F,
            "gain_low": _F,
            "gain_high": _F,
        },
        ("tenant_id", "skill_id", "version"),
        asset="template_history",
        descriptions={
            "evidence": "JSON text: why this version exists",
            "source": "registry | refined",
            "base_version": "the registry version this template derives from",
            "gain_low": "95 % interval of the accuracy gain over the version it replaced",
        },
    ),
    Table(
        "template_scores",
        "Memo of candidate template scores under a policy and eval sample: a night scores only "
        "what it has not scored.",
        {
            "tenant_id": _S,
            "skill_id": _S,
            "policy_id": _S,
            "template_sha": _S,
            "eval_sha": _S,
            "eval_accuracy": _F,
            "eval_margin": _F,
            "n_eval": _I,
            "pair_diffs": pl.List(_F),
            "scored_at": _TS,
        },
        ("tenant_id", "skill_id", "policy_id", "template_sha", "eval_sha"),
        asset="template_scores",
        role="bookkeeping",
        descriptions={"pair_diffs": "per eval pair, in canonical order"},
    ),
    # erasure (memorypack forget, erasure events)
    Table(
        "tombstones",
        "Erased people and their event ids, as keyed hashes only: ingest keeps them out.",
        {"tenant_id": _S, "kind": _S, "subject_hash": _S, "erased_at": _TS, "source": _S},
        ("tenant_id", "kind", "subject_hash"),
        asset=None,
        by_tenant=False,
        role="record",
        descriptions={
            "kind": "contact (the erased identifier) | event (one of their event ids)",
            "subject_hash": "HMAC with the PII key, domain erasure",
            "source": "cli | log (an erasure event)",
        },
    ),
    # publish
    Table(
        "pack_versions",
        "Every kept memory pack version per tenant; is_latest marks the live one.",
        {
            "tenant_id": _S,
            "version": _S,
            "as_of": _TS,
            "created_at": _TS,
            "n_memories": _I,
            "bytes": _I,
            "is_latest": _B,
            "redacted": _I,
            "dagster_run_id": _S,
        },
        ("tenant_id", "version"),
        asset="pack_versions",
    ),
    # caches: part files under <table>/tenant_id=<id>/<model or detector version>/
    Table(
        "embedding_cache",
        "Vectors of distinct texts per model, append-only (written by memory_embeddings).",
        {
            "text_hash": _S,
            # The shape is the model's dimension (384 for all-MiniLM-L6-v2): `cache_schema(dim)`.
            "embedding": pl.Array(pl.Float32(), 384),
            "model": _S,
            "dim": pl.Int32(),
            "embedded_at": _TS,
        },
        ("model", "text_hash"),
        asset=None,
        role="cache",
    ),
    Table(
        "pii_cache",
        "Redactions of distinct texts per detector version, append-only (written by the pack "
        "and the analytics snapshot).",
        {"text_hash": _S, "redacted": _S, "kinds": pl.List(_S)},
        ("text_hash",),
        asset=None,
        role="cache",
        descriptions={"text_hash": "HMAC-SHA256 of the text with the home key"},
    ),
)

TABLES: dict[str, Table] = {t.name: t for t in _TABLES}


class SchemaMismatch(ValueError):
    """A frame written to a lake table does not have the table's declared columns and types."""


class KeyViolation(ValueError):
    """A frame written to a lake table holds two rows with one primary key."""


def table(name: str) -> Table:
    """The declaration of lake table `name`."""
    try:
        return TABLES[name]
    except KeyError:
        raise KeyError(f"{name!r} is not a lake table declared in pipeline.tables") from None


def schema(name: str, columns: Sequence[str] | None = None) -> dict[str, pl.DataType]:
    """The declared columns of `name` (or just `columns`, in that order) and their types."""
    declared = table(name).columns
    return dict(declared) if columns is None else {c: declared[c] for c in columns}


def empty(name: str) -> pl.DataFrame:
    """No rows, the declared columns: what a table is before its stage has run."""
    return pl.DataFrame(schema=schema(name))


# The comment of every table, and the tables of each role, as the warehouse and analytics use them.
COMMENTS: dict[str, str] = {t.name: t.comment for t in _TABLES}
BOOKKEEPING: tuple[str, ...] = tuple(t.name for t in _TABLES if t.role == "bookkeeping")
PARTITION_COLUMNS: dict[str, str] = {t.name: t.partition for t in _TABLES if t.partition}
SHARED_TABLES: frozenset[str] = frozenset(t.name for t in _TABLES if not t.by_tenant)
# The one lake table whose asset has another name: ingest's events are the asset raw_events.
ASSET_OF_TABLE: dict[str, str] = {t.name: t.asset for t in _TABLES if t.asset and t.asset != t.name}


def asset_name(table: str) -> str:
    """The asset whose materialization writes lake table `table`."""
    return ASSET_OF_TABLE.get(table, table)


def table_name(asset: str) -> str:
    """The lake table asset `asset` writes (its own name but for raw_events)."""
    return {a: t for t, a in ASSET_OF_TABLE.items()}.get(asset, asset)


def table_of_asset(asset: str) -> Table | None:
    """The lake table an asset is (None for an asset without one, e.g. dpo_policy)."""
    found = TABLES.get(table_name(asset))
    return found if found is not None and found.asset == asset else None


def table_with_columns(columns: Iterable[str]) -> Table | None:
    """The table whose rows a frame with these columns holds (all its declared columns, the hive
    ones of its folders optional), if any: tables with the same columns have the same
    declaration (conflict_groups, consolidation_groups)."""
    names = set(columns)
    for declared in _TABLES:
        full = set(declared.columns)
        if names <= full and full - names <= set(declared.hive_columns):
            return declared
    return None


# --- enforcement: what `Lake` does with a frame on write and on read ---


def _only_nulls(dtype: pl.DataType) -> bool:
    """A type that holds nothing but nulls (`pl.lit(None)`, `[]` lists): any declared type fits."""
    if dtype == pl.Null():
        return True
    inner = getattr(dtype, "inner", None)
    return isinstance(dtype, pl.List | pl.Array) and inner is not None and _only_nulls(inner)


def conform(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with table `name`'s declared columns in their order, or `SchemaMismatch` naming the
    table and column. The one cast it makes: a column that holds only nulls (typed Null, or a list
    of Null, as `pl.lit(None)` and empty lists make them) takes its declared type. The hive
    columns of the folder (tenant_id of a tenant table, the partition column) may be left out."""
    declared = table(name)
    present = frame.schema
    hive = set(declared.hive_columns)
    missing = [c for c in declared.columns if c not in present and c not in hive]
    extra = [c for c in present if c not in declared.columns]
    if missing or extra:
        what = [f"column {c!r} is missing ({declared.columns[c]})" for c in missing]
        what += [f"column {c!r} ({present[c]}) is not declared" for c in extra]
        raise SchemaMismatch(f"lake table {name!r}: " + "; ".join(what))
    wrong = [
        f"column {c!r} is {present[c]}, declared {dtype}"
        for c, dtype in declared.columns.items()
        if c in present and present[c] != dtype and not _only_nulls(present[c])
    ]
    if wrong:
        raise SchemaMismatch(f"lake table {name!r}: " + "; ".join(wrong))
    _check_key(declared, frame)
    kept = [c for c in declared.columns if c in present]
    return frame.select(
        pl.col(c) if present[c] == declared.columns[c] else pl.col(c).cast(declared.columns[c])
        for c in kept
    )


def _check_key(declared: Table, frame: pl.DataFrame) -> None:
    """`KeyViolation` when two rows share the primary key (nulls compare equal). A hive column of
    the key the frame leaves out, or holds only nulls, is the folder's: one value for every row."""
    hive = set(declared.hive_columns)
    key = [
        c
        for c in declared.primary_key
        if c not in hive or (c in frame.columns and frame[c].null_count() < frame.height)
    ]
    if not key or frame.height < 2:
        return
    repeated = frame.height - frame.select(key).n_unique()
    if repeated:
        raise KeyViolation(
            f"lake table {declared.name!r}: {repeated} row(s) repeat a key ({', '.join(key)})"
        )


def as_declared(name: str, frame: pl.LazyFrame) -> pl.LazyFrame:
    """A read of table `name` with exactly its declared columns and types: a column a file lacks
    (written before it was declared, or all null in every file) comes back null, an undeclared
    one is left out."""
    present = frame.collect_schema()

    def column(c: str, dtype: pl.DataType) -> pl.Expr:
        if c not in present:
            return pl.lit(None, dtype=dtype).alias(c)
        return pl.col(c) if present[c] == dtype else pl.col(c).cast(dtype)

    return frame.select(column(c, dtype) for c, dtype in table(name).columns.items())


# --- Dagster and pandera: generated from the declarations ---


def checks(name: str):  # type: ignore[no-untyped-def]
    """The pandera schema of table `name`: every declared column with its type, the primary key
    not null and unique together. (pandera is imported here: the registry itself needs polars
    only.)"""
    import pandera.polars as pa

    declared = table(name)
    key = set(declared.primary_key)
    return pa.DataFrameSchema(
        {
            column: pa.Column(dtype, nullable=column not in key)
            for column, dtype in declared.columns.items()
        },
        unique=list(declared.primary_key) or None,
        name=name,
        strict=True,
    )
