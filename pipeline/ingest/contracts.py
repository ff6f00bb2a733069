"""The raw-log contract (SPEC §2, version 1) and the typed tables it becomes: one place for every rule."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import pandera.polars as pa

from pipeline import tables
from pipeline.ingest.tenant_ids import TENANT_ID_PATTERN

SUPPORTED_SCHEMA_VERSIONS = (1,)
EVENT_ID_MAX_CHARS = 128
COMMENT_MAX_CHARS = 300
# Field size limits: one line must not blow up memory, the lake or a pack. A line over
# LINE_MAX_BYTES is quarantined before its JSON is parsed (`line_too_long`, its raw cut to
# RAW_KEPT_CHARS: the landing file keeps the rest); a field over its `max_chars` is `too_long:<field>`.
LINE_MAX_BYTES = 1 << 20
RAW_KEPT_CHARS = 4096
ID_MAX_CHARS = 256  # contact, session, skill, target, user ids; system, kind, model
TEXT_MAX_CHARS = 65_536  # input, output, corrected_output: a long LLM exchange fits
NOTE_MAX_CHARS = 8192  # summary, memory content, metadata, tags, supersedes
# How deeply arrays and objects may nest in a line (`too_deep`): far beyond what an app logs, and
# below every parser that reads a line again (Python's json recurses, polars' stops at 128).
MAX_JSON_DEPTH = 64
# What an identifier may never hold (`control_character:<field>`): C0 and C1 control characters
# (NUL included) and DEL, Unicode format characters (zero-width, bidi controls: an id that looks
# like another) and the line and paragraph separators. A regex for polars.
CONTROL_CHARACTERS = r"[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]"
# `context` (round 3): the receipt of the pack items a call used (SPEC §2, memorypack.receipt).
# Its pack is named `<tenant_id>/<version>`: a version alone cannot say whose pack it is.
CONTEXT_KEYS = ("pack_version", "items", "holdout")
CONTEXT_MAX_ITEMS = 256  # an item id is at most ID_MAX_CHARS
CONTEXT_PACK_PATTERN = (
    rf"^({TENANT_ID_PATTERN.strip('^$')})/([0-9]{{8}}T[0-9]{{6}}(?:[0-9]{{6}})?Z-[0-9a-f]{{8}})$"
)
# An event may be stamped up to one day after its load date (clock skew, time zones); more is an error.
FUTURE_TOLERANCE_DAYS = 1
# Nothing this product logs predates 2000: an older `ts` (year 0000 included) is a bad clock or
# an attack, and breaks every Python date conversion downstream.
EARLIEST_TS_YEAR = 2000


class EventType(StrEnum):
    INTERACTION = "interaction"
    FEEDBACK = "feedback"
    MEMORY = "memory"
    # A person asks to be forgotten (GDPR art. 17): `contact_id` names them. Never stored with
    # that id; the run erases them (pipeline.erasure.person) and tombstones the id.
    ERASURE = "erasure"


class Signal(StrEnum):
    THUMBS_UP = "thumbs_up"
    THUMBS_DOWN = "thumbs_down"
    CORRECTION = "correction"
    FOLLOW_UP = "follow_up"
    USER_OVERRIDE = "user_override"
    USER_EDIT = "user_edit"
    ACTION_TAKEN = "action_taken"
    ACTION_IGNORED = "action_ignored"
    REGENERATE = "regenerate"
    COPY = "copy"
    VALIDATE = "validate"


class FeedbackReason(StrEnum):
    TOO_VERBOSE = "too_verbose"
    TOO_BRIEF = "too_brief"
    WRONG_TONE = "wrong_tone"
    NOT_HELPFUL = "not_helpful"
    INCORRECT_INFO = "incorrect_info"
    OTHER = "other"


class MemoryType(StrEnum):
    EXPLICIT_INSTRUCTION = "explicit_instruction"
    CORRECTION = "correction"
    CONFIRMED_PATTERN = "confirmed_pattern"
    INFERRED_PATTERN = "inferred_pattern"
    SINGLE_INFERENCE = "single_inference"
    TEMPORARY = "temporary"


class MemoryCategory(StrEnum):
    COMMUNICATION = "communication"
    SCHEDULING = "scheduling"
    MONEY = "money"
    RELATIONSHIPS = "relationships"
    PREFERENCES = "preferences"
    OTHER = "other"


class ImpactLevel(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Stage(StrEnum):
    CLASSIFY = "classify"
    ROUTE = "route"
    GATHER = "gather"
    DRAFT = "draft"
    VALIDATE = "validate"


class Reason(StrEnum):
    """Machine-readable quarantine reasons. Field-specific ones are `<reason>:<field>`."""

    INVALID_UTF8 = "invalid_utf8"
    EMPTY_LINE = "empty_line"  # counted per file: one row stands for them (its `lines`)
    # RFC 8259: also NaN/Infinity, trailing commas, whitespace but space, tab, LF and CR
    INVALID_JSON = "invalid_json"
    DUPLICATE_KEY = "duplicate_key"  # the same key twice in one object, at any depth
    TOO_DEEP = "too_deep"  # arrays and objects nested deeper than MAX_JSON_DEPTH: not parsed
    NOT_AN_OBJECT = "not_an_object"
    UNSUPPORTED_SCHEMA_VERSION = "unsupported_schema_version"
    MISSING_FIELD = "missing_field"  # missing_field:<field>
    WRONG_TYPE = "wrong_type"  # wrong_type:<field>
    BAD_EVENT_ID = "bad_event_id"
    BAD_TENANT_ID = "bad_tenant_id"
    UNKNOWN_EVENT_TYPE = "unknown_event_type"
    # Not RFC 3339, or a time that does not exist: hour 24, minute or second 60 (a leap second
    # included: UTC as stored here has none).
    BAD_TIMESTAMP = "bad_timestamp"
    FUTURE_TIMESTAMP = "future_timestamp"
    ANCIENT_TIMESTAMP = "ancient_timestamp"  # before EARLIEST_TS_YEAR
    UNKNOWN_SIGNAL = "unknown_signal"
    UNKNOWN_VALUE = "unknown_value"  # unknown_value:<field> for the other enumerations
    OUT_OF_RANGE = "out_of_range"  # out_of_range:<field>
    TOO_LONG = "too_long"  # too_long:<field>: over the field's max_chars
    # control_character:<field>: an identifier holding one of CONTROL_CHARACTERS.
    CONTROL_CHARACTER = "control_character"
    # pseudonym_shaped_id:<field>: an identifier shaped like the pipeline's own pseudonyms
    # (pipeline.pii.keys.PSEUDONYM): it could name another person in a pack.
    PSEUDONYM_SHAPED_ID = "pseudonym_shaped_id"
    # blank_field:<field>: empty or only whitespace where the value names something (an erasure
    # request's contact_id).
    BLANK_FIELD = "blank_field"
    LINE_TOO_LONG = "line_too_long"  # over LINE_MAX_BYTES: not parsed
    CONFLICTING_DUPLICATE = "conflicting_duplicate"  # same (tenant, event_id), different content
    # The line names an erased person (a tombstone, see pipeline.erasure.person): counted here, with
    # neither its raw text nor its event id kept.
    ERASED_CONTACT = "erased_contact"
    # A receipt (`context`): a key the contract does not know (`unknown_key:context`), a pack
    # name that is not `<tenant_id>/<version>`, a pack of another tenant.
    UNKNOWN_KEY = "unknown_key"
    BAD_PACK_VERSION = "bad_pack_version"
    FOREIGN_PACK = "foreign_pack"
    # File-level: the unreadable rest of a file is one quarantined "line" (see pipeline.ingest.folder).
    CORRUPT_GZIP = "corrupt_gzip"
    UNREADABLE_FILE = "unreadable_file"
    # A landing folder is read as regular files only (pipeline.ingest.listing): a FIFO, device,
    # socket or directory named `*.jsonl`, and a symbolic link that leaves the landing folder,
    # are never opened.
    NOT_A_REGULAR_FILE = "not_a_regular_file"
    SYMLINK_OUTSIDE_LANDING = "symlink_outside_landing"


# Reasons about a whole file rather than one line: no generated line can plant them.
FILE_REASONS = (
    Reason.CORRUPT_GZIP,
    Reason.UNREADABLE_FILE,
    Reason.NOT_A_REGULAR_FILE,
    Reason.SYMLINK_OUTSIDE_LANDING,
)


class JsonKind(StrEnum):
    """What a field must hold in the JSON line."""

    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    STRING_LIST = "string_list"
    ANY = "any"  # any JSON value; non-strings are stored as canonical JSON text
    OBJECT = "object"


@dataclass(frozen=True)
class Field:
    name: str
    kind: JsonKind
    event_types: tuple[EventType, ...]  # empty = every event type
    required: bool = False
    allowed: tuple[str, ...] | None = None  # enumeration, when the field has one
    low: float | None = None
    high: float | None = None
    max_chars: int | None = None  # of its text (JSON text for objects, lists and non-strings)
    # An identifier or label (every string of a list, for a list): no CONTROL_CHARACTERS, never
    # shaped like a pseudonym.
    identifier: bool = False
    # Longer values are kept cut to this, never quarantined (`comment`: cut again when published).
    kept_chars: int | None = None


INT, FLOAT, _M = EventType.INTERACTION, EventType.FEEDBACK, EventType.MEMORY

# Every field of the contract, in the order the rules check them (the first failure is the reason).
FIELDS: tuple[Field, ...] = (
    Field("schema_version", JsonKind.INTEGER, ()),
    Field("event_id", JsonKind.STRING, (), required=True, identifier=True),
    Field("tenant_id", JsonKind.STRING, (), required=True, identifier=True),
    Field("event_type", JsonKind.STRING, (), required=True, allowed=tuple(EventType)),
    Field("ts", JsonKind.STRING, (), required=True),
    Field("contact_id", JsonKind.STRING, (), max_chars=ID_MAX_CHARS, identifier=True),
    Field("metadata", JsonKind.OBJECT, (), max_chars=NOTE_MAX_CHARS),
    # interaction
    Field(
        "system", JsonKind.STRING, (INT,), required=True, max_chars=ID_MAX_CHARS, identifier=True
    ),
    Field("kind", JsonKind.STRING, (INT,), required=True, max_chars=ID_MAX_CHARS, identifier=True),
    Field("session_id", JsonKind.STRING, (INT,), max_chars=ID_MAX_CHARS, identifier=True),
    Field("skill_id", JsonKind.STRING, (INT,), max_chars=ID_MAX_CHARS, identifier=True),
    Field("input", JsonKind.STRING, (INT,), required=True, max_chars=TEXT_MAX_CHARS),
    Field("output", JsonKind.ANY, (INT,), required=True, max_chars=TEXT_MAX_CHARS),
    Field("summary", JsonKind.STRING, (INT,), max_chars=NOTE_MAX_CHARS),
    Field("tags", JsonKind.STRING_LIST, (INT, _M), max_chars=NOTE_MAX_CHARS, identifier=True),
    Field("importance", JsonKind.NUMBER, (INT,), low=0.0, high=1.0),
    Field("model", JsonKind.STRING, (INT,), max_chars=ID_MAX_CHARS, identifier=True),
    Field("stage", JsonKind.STRING, (INT,), allowed=tuple(Stage)),
    Field("parent_event_id", JsonKind.STRING, (INT,), max_chars=ID_MAX_CHARS, identifier=True),
    # Checked key by key in pipeline.ingest.rules; stored as context_pack_version/_items/_holdout.
    Field("context", JsonKind.OBJECT, (INT,), max_chars=TEXT_MAX_CHARS),
    # feedback
    Field(
        "target_id",
        JsonKind.STRING,
        (FLOAT,),
        required=True,
        max_chars=ID_MAX_CHARS,
        identifier=True,
    ),
    Field("signal", JsonKind.STRING, (FLOAT,), required=True, allowed=tuple(Signal)),
    Field("rating", JsonKind.INTEGER, (FLOAT,), low=1, high=5),
    Field("reason", JsonKind.STRING, (FLOAT,), allowed=tuple(FeedbackReason)),
    Field("comment", JsonKind.STRING, (FLOAT,), kept_chars=NOTE_MAX_CHARS),
    Field("corrected_output", JsonKind.ANY, (FLOAT,), max_chars=TEXT_MAX_CHARS),
    Field("user_id", JsonKind.STRING, (INT, FLOAT), max_chars=ID_MAX_CHARS, identifier=True),
    # memory
    Field("memory_type", JsonKind.STRING, (_M,), required=True, allowed=tuple(MemoryType)),
    Field("content", JsonKind.STRING, (_M,), required=True, max_chars=NOTE_MAX_CHARS),
    Field("impact_level", JsonKind.STRING, (_M,), allowed=tuple(ImpactLevel)),
    Field("confidence", JsonKind.NUMBER, (_M,), low=0.0, high=1.0),
    Field("supersedes", JsonKind.STRING_LIST, (_M,), max_chars=NOTE_MAX_CHARS, identifier=True),
    # `category` is free text on interactions and an enumeration on memories.
    Field("category", JsonKind.STRING, (INT, _M), identifier=True),
)
MEMORY_CATEGORIES = tuple(MemoryCategory)

# The `events` table (every accepted event, all contract fields as typed columns), the quarantine
# and the typed tables (SPEC §3, the columns each keeps from `events`): declared in pipeline.tables.
EVENT_SCHEMA = tables.schema("events")
QUARANTINE_SCHEMA = tables.schema("quarantine")
INTERACTION_COLUMNS = tables.INTERACTION_COLUMNS
FEEDBACK_COLUMNS = tables.FEEDBACK_COLUMNS
MEMORY_COLUMNS = tables.MEMORY_COLUMNS
INTERACTION_SCHEMA = tables.schema("interactions")
FEEDBACK_SCHEMA = tables.schema("feedback")
MEMORY_SCHEMA = tables.schema("memory_statements")


# The event type of each typed table (its name in pipeline.tables); `events` holds every type.
TABLE_EVENT_TYPES: dict[str, EventType | None] = {
    "events": None,
    "interactions": INT,
    "feedback": FLOAT,
    "memory_statements": _M,
}


def contract_checks(table: str) -> pa.DataFrameSchema:
    """The contract's rules on a typed table's stored rows, generated from FIELDS (beyond what
    `tables.checks` generates from the table's declaration: types, primary key): allowed values,
    ranges, lengths as stored, a field the table's event type requires never null, and well-formed
    tenant and event ids. Ingest quarantines every line that breaks one, so every row holds them."""
    kind = TABLE_EVENT_TYPES[table]
    declared = tables.schema(table)
    checks: dict[str, list[pa.Check]] = {
        "tenant_id": [pa.Check.str_matches(TENANT_ID_PATTERN)],
        "event_id": [pa.Check.str_length(1, EVENT_ID_MAX_CHARS)],
    }
    required = {"tenant_id", "event_id"}
    for f in FIELDS:
        if f.name not in declared:
            continue
        found = checks.setdefault(f.name, [])
        # `category` is free text on interactions and an enumeration on memories.
        allowed = MEMORY_CATEGORIES if f.name == "category" and kind is _M else f.allowed
        if allowed is not None:
            found.append(pa.Check.isin(list(allowed)))
        if f.low is not None and f.high is not None:
            found.append(pa.Check.in_range(f.low, f.high))
        stored = f.kept_chars or f.max_chars
        if stored is not None and f.kind is JsonKind.STRING:
            found.append(pa.Check.str_length(max_value=stored))
        if f.required and (not f.event_types or kind in f.event_types):
            required.add(f.name)
    return pa.DataFrameSchema(
        {c: pa.Column(None, found, nullable=c not in required) for c, found in checks.items()},
        name=f"{table} (contract)",
    )
