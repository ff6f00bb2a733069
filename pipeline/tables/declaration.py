"""What a lake table declaration is (`Table`), and the columns several tables share: the typed
columns of an event (SPEC §2) and the count columns per feedback signal and memory type."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import polars as pl
import pyarrow as pa

from memorypack.columns import FILE_COLUMNS

TIMESTAMP = pl.Datetime("us", "UTC")
STR = pl.String()
INT = pl.Int64()
FLOAT = pl.Float64()
BOOL = pl.Boolean()

# What a table is for: `data` is loaded into the warehouse and the analyst snapshot;
# `bookkeeping` is the memo of incremental nights (an asset, lake only); `record` is erasure's
# (written by `memorypack forget` and the night's erasure events, not an asset); `cache` is an
# append-only folder of part files keyed by model or detector version (not read through `Lake`).
Role = Literal["data", "bookkeeping", "record", "cache"]

TENANT = "tenant_id"
LOAD_DATE = "load_date"


# What the key columns mean wherever they appear (SPEC §3): a table's own description of a
# column wins over these.
KEY_DESCRIPTIONS: dict[str, str] = {
    "tenant_id": "the tenant (one app customer) the row belongs to; no read crosses tenants",
    "event_id": "the event's id, unique per tenant (SPEC §2)",
    "memory_id": "the memory: the event id of its statement or interaction",
    "memory_id_a": "one memory of the pair (the smaller id)",
    "memory_id_b": "the other memory of the pair",
    "contact_id": "the person the memory is about (a keyed pseudonym in packs and snapshots)",
    "user_id": "the app user who made the call or gave the feedback",
    "skill_id": "the app skill the call used",
    "system": "the app system that made the call",
    "kind": "the kind of call within its system",
    "load_date": "the UTC day the landing file was ingested",
    "file": "the landing file the line came from",
    "line_no": "the line's number in its file, from 1",
    "snapshot_date": "the day the snapshot is of (as_of is the next 00:00 UTC)",
    "cluster_id": "the cluster of near-duplicate memories, stable while its members are",
    "rank": "the example's place in its set, from 1 (best first)",
    "pair_id": "digest of the pair's prompt, chosen and rejected texts",
    "policy_id": "the DPO policy (its training run)",
    "pack_version": "the pack version the calls' receipts name",
    "version": "the pack version: `<publish time UTC>-<8 hex of the content hash>`",
    "run_at": "when the run happened (UTC)",
    "text_hash": "digest of the text (the key of its cached vector or redaction)",
    "text_hash_b": "digest of the pair's other text",
    "template_sha": "digest of the template text",
    "eval_sha": "digest of the evaluation sample",
    "model": "the embedding model the vector is of",
}

# What other columns mean wherever they appear, unless the table says otherwise. A number that is
# not a probability says its range.
COMMON_DESCRIPTIONS: dict[str, str] = {
    "ts": "when the event happened, UTC (it may arrive on a later load date)",
    "as_of": "the instant the snapshot is of: 00:00 UTC after its day",
    "memory_kind": "interaction (an AI call) | statement (a memory event)",
    "memory_type": "explicit_instruction | correction | confirmed_pattern | inferred_pattern | "
    "single_inference | temporary, or interaction for an AI call",
    "impact_level": "high | medium | low (SPEC §2)",
    "category": "communication | scheduling | money | relationships | preferences | other",
    "content": "the statement's text",
    "input": "what the AI was asked",
    "output": "what the AI answered (a JSON value as canonical JSON text)",
    "tags": "the app's tags of the event",
    "status": "active | inactive | archived (SPEC §4.2)",
    "n_feedback": "votes about the memory (validations are not votes)",
    "n_positive": "votes whose signal is positive (thumbs_up, action_taken, follow_up, copy)",
    "n_negative": "votes whose signal is negative (thumbs_down, correction, user_override, "
    "user_edit, action_ignored, regenerate)",
    "quality_score": "SPEC §4.1 quality, −1 to 1: the votes' positive and negative weight "
    "through a Beta(2, 2) prior, 2a / (a + b) − 1; 0 without votes, +0.2 after one up-vote",
    "quality_lower": "95 % lower bound of quality_score, on its −1 to 1 scale (2 × the Wilson "
    "lower bound of the positive share with the prior − 1): −0.70 without votes, −0.54 after one "
    "up-vote, so below 0 even for a liked memory with few votes; rank by it, it is no probability",
    "confidence": "SPEC §4.2 confidence, 0 to the type's cap: reinforced_confidence × "
    "decay_factor × reputation",
    "reputation": "1 + 0.2 × quality_score, 0.8 to 1.2; exactly 1.0 without votes",
    "age_days": "days from last_confirmed to as_of",
    "last_confirmed": "the latest of created, last validated and last reinforced: age counts "
    "from it",
    "reinforcement_count": "other non-conflicting members of the memory's cluster (repeats); "
    "each adds 0.1 confidence, up to the type's cap",
    "last_reinforced_at": "when the latest repeat was said",
    "last_validated_at": "the latest `validate` feedback: a person confirmed the memory",
    "last_feedback_at": "the latest feedback's ts",
    "created_at": "when it was made (UTC)",
    "eval_accuracy": "share of the held-out pairs whose chosen reply the DPO policy's implicit "
    "reward ranks above the rejected one, 0 to 1",
    "eval_margin": "mean implicit reward margin, β·(log π/π_ref) of chosen minus of rejected, "
    "over the held-out pairs (unbounded; above 0 favours chosen)",
    "n_eval": "held-out pairs scored",
    "n": "statements in the group when it was fingerprinted",
    "digest": "hash of the group's sorted statement ids: a changed group has another",
    "salt": "the embedding model and stage config the group was processed with",
}


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

    def description(self, column: str) -> str | None:
        """What `column` holds: the table's own description, else the key columns' meaning, else
        the common one."""
        return (
            self.descriptions.get(column)
            or KEY_DESCRIPTIONS.get(column)
            or COMMON_DESCRIPTIONS.get(column)
        )


# --- the typed columns of an event (SPEC §2): events holds all, each typed table its share ---

EVENT_COLUMNS: dict[str, pl.DataType] = {
    "tenant_id": STR,
    "event_id": STR,
    "event_type": STR,
    "ts": TIMESTAMP,
    "load_date": pl.Date(),
    "contact_id": STR,
    "schema_version": pl.Int32(),
    "system": STR,
    "kind": STR,
    "session_id": STR,
    "skill_id": STR,
    "input": STR,
    "output": STR,
    "summary": STR,
    "tags": pl.List(STR),
    "importance": FLOAT,
    "model": STR,
    "stage": STR,
    "category": STR,
    "parent_event_id": STR,
    "context_pack_version": STR,
    "context_items": pl.List(STR),
    "context_holdout": BOOL,
    "target_id": STR,
    "signal": STR,
    "rating": pl.Int8(),
    "reason": STR,
    "comment": STR,
    "comment_truncated": BOOL,
    "corrected_output": STR,
    "user_id": STR,
    "memory_type": STR,
    "content": STR,
    "impact_level": STR,
    "confidence": FLOAT,
    "supersedes": pl.List(STR),
    "metadata": STR,
    "content_hash": STR,
    "source_file": STR,
    "line_no": INT,
}
_COMMON = ["tenant_id", "event_id", "ts", "load_date", "contact_id"]
INTERACTION_COLUMNS = [
    *_COMMON,
    *("system", "kind", "session_id", "skill_id", "input", "output", "summary", "tags"),
    *("importance", "model", "stage", "category", "parent_event_id", "user_id", "metadata"),
    *("context_pack_version", "context_items", "context_holdout"),
]
# What each field of an event means (SPEC §2), for every table that holds events' columns.
EVENT_DESCRIPTIONS: dict[str, str] = {
    "event_type": "interaction | feedback | memory",
    "schema_version": "the raw contract's version the line declared (1)",
    "system": "the app system that made the call (e.g. support)",
    "kind": "the kind of call within its system (e.g. support_reply)",
    "session_id": "the app session the call belongs to",
    "summary": "the app's short summary of the call",
    "importance": "the app's importance of the call, 0 to 1: its memory's base confidence",
    "model": "the AI model the app called",
    "stage": "classify | route | gather | draft | validate",
    "category": "the app's category of the call or statement",
    "parent_event_id": "the interaction this one regenerates",
    "target_id": "the event the feedback is about (an interaction or a statement)",
    "signal": "thumbs_up | thumbs_down | correction | follow_up | user_override | user_edit | "
    "action_taken | action_ignored | regenerate | copy | validate",
    "rating": "1 to 5 stars (maps to (rating − 3) / 2)",
    "reason": "too_verbose | too_brief | wrong_tone | not_helpful | incorrect_info | other",
    "comment": "the person's comment, at most 300 characters",
    "comment_truncated": "the comment was longer and was cut to 300 characters",
    "corrected_output": "the output a person wrote instead (a correction)",
    "memory_type": "explicit_instruction | correction | confirmed_pattern | inferred_pattern | "
    "single_inference | temporary (memory events)",
    "confidence": "the confidence the app stated, 0 to 1 (null: the type's base, SPEC §4.2)",
    "supersedes": "ids of the statements this one replaces",
    "metadata": "the line's other fields, as JSON text",
    "content_hash": "hash of the event's content: a re-sent line is a duplicate",
    "source_file": "the landing file the event came from",
    "line_no": "the event's line in its file, from 1",
}
# The receipt's columns (SPEC §2 `context`), described once for every table that holds them.
CONTEXT_DESCRIPTIONS = {
    "context_pack_version": "the pack version the call's receipt names (null: no receipt)",
    "context_items": "ids of the pack items in the prompt, in order (memory ids, <skill>@<version>)",
    "context_holdout": "the call deliberately used no pack content: uplift's control",
}
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


def event_descriptions(columns: Iterable[str]) -> dict[str, str]:
    """EVENT_DESCRIPTIONS of these columns (a typed event table holds its share of them)."""
    return {c: EVENT_DESCRIPTIONS[c] for c in columns if c in EVENT_DESCRIPTIONS}


def pick(columns: Iterable[str]) -> dict[str, pl.DataType]:
    return {c: EVENT_COLUMNS[c] for c in columns}


def pack_file_columns(name: str) -> dict[str, pl.DataType]:
    """The columns pack file `name` always has (declared by the app library, which reads them),
    as polars types: the lake table the file is cut from starts with them."""
    empty = pa.schema(list(FILE_COLUMNS[name].items())).empty_table()
    return dict(pl.from_arrow(empty).schema)  # type: ignore[union-attr]
