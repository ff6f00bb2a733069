"""Malformed lines, one clear quarantine reason each (the first rule of contracts.FIELDS that fails)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from pipeline.ingest.contracts import ID_MAX_CHARS, LINE_MAX_BYTES, NOTE_MAX_CHARS, Reason

Event = dict[str, Any]
CONFLICT = Reason.CONFLICTING_DUPLICATE.value


def dumps(event: Event) -> bytes:
    """The one serialisation used for every line: compact, UTF-8, key order as built."""
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode()


@dataclass(frozen=True)
class Variant:
    """One way to break a line: the base event type it starts from and what it does to it."""

    reason: str
    base: str  # interaction | feedback | correction | memory | none
    mutate: Callable[[Event, date], Event | bytes]


def _drop(field: str) -> Callable[[Event, date], Event]:
    return lambda e, _d: {k: v for k, v in e.items() if k != field}


def _set(field: str, value: Any) -> Callable[[Event, date], Event]:
    return lambda e, _d: {**e, field: value}


def _raw(data: bytes) -> Callable[[Event, date], bytes]:
    return lambda _e, _d: data


def _bad_utf8(e: Event, _d: date) -> bytes:
    return dumps(e).replace(b'"input":"', b'"input":"caf\xe9 \xff ', 1)


def _truncated(e: Event, _d: date) -> bytes:
    line = dumps(e)
    return line[: len(line) // 2]


def _append(text: bytes) -> Callable[[Event, date], bytes]:
    """The event's JSON with `text` spliced in before its closing brace (what json.dumps cannot write)."""
    return lambda e, _d: dumps(e)[:-1] + text + b"}"


def _future(e: Event, d: date) -> Event:
    return {**e, "ts": f"{(d + timedelta(days=3)).isoformat()}T10:00:00Z"}


_M, _W, _U, _O = Reason.MISSING_FIELD, Reason.WRONG_TYPE, Reason.UNKNOWN_VALUE, Reason.OUT_OF_RANGE

VARIANTS: tuple[Variant, ...] = (
    Variant(Reason.INVALID_UTF8.value, "interaction", _bad_utf8),
    Variant(Reason.EMPTY_LINE.value, "none", _raw(b"")),
    Variant(Reason.EMPTY_LINE.value, "none", _raw(b"   \t")),
    Variant(Reason.INVALID_JSON.value, "interaction", _truncated),
    Variant(
        Reason.INVALID_JSON.value, "none", _raw(b"{'event_id': 'x', 'event_type': 'interaction'}")
    ),
    Variant(Reason.NOT_AN_OBJECT.value, "none", _raw(b"[1,2]")),
    Variant(Reason.NOT_AN_OBJECT.value, "none", _raw(b'"thumbs_up"')),
    Variant(Reason.UNSUPPORTED_SCHEMA_VERSION.value, "interaction", _set("schema_version", 2)),
    Variant(f"{_W}:schema_version", "interaction", _set("schema_version", "1")),
    Variant(f"{_M}:event_id", "interaction", _drop("event_id")),
    Variant(f"{_M}:tenant_id", "feedback", _drop("tenant_id")),
    Variant(f"{_M}:event_type", "memory", _drop("event_type")),
    Variant(f"{_M}:ts", "interaction", _drop("ts")),
    Variant(f"{_M}:ts", "feedback", _set("ts", None)),
    Variant(f"{_M}:system", "interaction", _drop("system")),
    Variant(f"{_M}:kind", "interaction", _drop("kind")),
    Variant(f"{_M}:input", "interaction", _drop("input")),
    Variant(f"{_M}:output", "interaction", _drop("output")),
    Variant(f"{_M}:target_id", "feedback", _drop("target_id")),
    Variant(f"{_M}:signal", "feedback", _drop("signal")),
    Variant(f"{_M}:memory_type", "memory", _drop("memory_type")),
    Variant(f"{_M}:content", "memory", _drop("content")),
    Variant(f"{_M}:corrected_output", "correction", _drop("corrected_output")),
    Variant(f"{_W}:event_id", "interaction", _set("event_id", 12345)),
    Variant(f"{_W}:contact_id", "memory", _set("contact_id", 7)),
    Variant(f"{_W}:metadata", "interaction", _set("metadata", "app=web")),
    Variant(f"{_W}:input", "interaction", _set("input", 42)),
    Variant(f"{_W}:tags", "interaction", _set("tags", "x")),
    Variant(f"{_W}:tags", "memory", _set("tags", [1, 2])),
    Variant(f"{_W}:importance", "interaction", _set("importance", "0.8")),
    Variant(f"{_W}:rating", "feedback", _set("rating", "five")),
    Variant(f"{_W}:supersedes", "memory", _set("supersedes", "m_00000001")),
    Variant(Reason.BAD_EVENT_ID.value, "interaction", _set("event_id", "evt_" + "0" * 140)),
    Variant(Reason.BAD_TENANT_ID.value, "interaction", _set("tenant_id", "../etc")),
    Variant(Reason.BAD_TENANT_ID.value, "feedback", _set("tenant_id", "a b")),
    Variant(Reason.UNKNOWN_EVENT_TYPE.value, "interaction", _set("event_type", "click")),
    Variant(Reason.BAD_TIMESTAMP.value, "interaction", lambda e, d: {**e, "ts": f"{d}T10:00:00"}),
    Variant(Reason.BAD_TIMESTAMP.value, "feedback", _set("ts", "yesterday")),
    Variant(Reason.BAD_TIMESTAMP.value, "memory", _set("ts", "2026-13-45T99:00:00Z")),
    Variant(Reason.FUTURE_TIMESTAMP.value, "interaction", _future),
    Variant(Reason.FUTURE_TIMESTAMP.value, "feedback", _future),
    Variant(Reason.UNKNOWN_SIGNAL.value, "feedback", _set("signal", "heart")),
    Variant(f"{_U}:memory_type", "memory", _set("memory_type", "rumor")),
    Variant(f"{_U}:reason", "feedback", _set("reason", "too_long")),
    Variant(f"{_U}:stage", "interaction", _set("stage", "deploy")),
    Variant(f"{_U}:impact_level", "memory", _set("impact_level", "critical")),
    Variant(f"{_U}:category", "memory", _set("category", "hobbies")),
    Variant(f"{_O}:rating", "feedback", _set("rating", 7)),
    Variant(f"{_O}:rating", "feedback", _set("rating", 0)),
    Variant(f"{_O}:importance", "interaction", _set("importance", 1.5)),
    Variant(f"{_O}:confidence", "memory", _set("confidence", -0.2)),
    Variant(Reason.DUPLICATE_KEY.value, "interaction", _append(b',"tenant_id":"globex"')),
    Variant(Reason.DUPLICATE_KEY.value, "memory", _append(b',"metadata":{"a":1,"a":2}')),
    Variant(Reason.INVALID_JSON.value, "interaction", _append(b',"importance":NaN')),
    Variant(Reason.INVALID_JSON.value, "memory", _append(b',"confidence":-Infinity')),
    Variant(Reason.INVALID_JSON.value, "feedback", _append(b",")),
    Variant(Reason.UNSUPPORTED_SCHEMA_VERSION.value, "memory", _set("schema_version", 2**80)),
    Variant(Reason.ANCIENT_TIMESTAMP.value, "interaction", _set("ts", "0000-01-01T00:00:00Z")),
    Variant(Reason.ANCIENT_TIMESTAMP.value, "memory", _set("ts", "1999-12-31T23:59:59Z")),
    Variant(Reason.BAD_TIMESTAMP.value, "feedback", lambda e, d: {**e, "ts": f"{d}T10:00:00+0100"}),
    Variant(Reason.BAD_TIMESTAMP.value, "interaction", _set("ts", "-0001-01-01T00:00:00Z")),
    Variant(
        f"{Reason.TOO_LONG}:contact_id", "memory", _set("contact_id", "c" * (ID_MAX_CHARS + 1))
    ),
    Variant(f"{Reason.TOO_LONG}:content", "memory", _set("content", "x" * (NOTE_MAX_CHARS + 1))),
    Variant(Reason.LINE_TOO_LONG.value, "interaction", _set("input", "y" * LINE_MAX_BYTES)),
    Variant(CONFLICT, "none", _raw(b"")),  # built by the generator from an accepted event
)
# Drawn again at random once every variant is planted: not the 1 MiB line (once is enough).
REPEATABLE = tuple(v for v in VARIANTS if v.reason != Reason.LINE_TOO_LONG.value)


def base_event(kind: str, tenant: str, ts: str, event_id: str, contact: str) -> Event:
    """A valid event of `kind` that one mutation turns into exactly one quarantine reason."""
    common: Event = {"event_id": event_id, "tenant_id": tenant, "ts": ts, "contact_id": contact}
    if kind == "interaction":
        return {
            **common,
            "event_type": "interaction",
            "system": "support",
            "kind": "support_reply",
            "skill_id": "concise_response",
            "input": "Where is my refund?",
            "output": "It was issued yesterday.",
            "tags": ["billing"],
            "importance": 0.5,
            "stage": "draft",
            "user_id": "u00001",
        }
    if kind in ("feedback", "correction"):
        event: Event = {
            **common,
            "event_type": "feedback",
            "target_id": "i_00000001",
            "signal": "thumbs_down",
            "rating": 2,
            "reason": "too_verbose",
            "user_id": "u00001",
        }
        if kind == "correction":
            event.update(signal="correction", corrected_output="It was issued on Monday.")
        return event
    return {
        **common,
        "event_type": "memory",
        "memory_type": "inferred_pattern",
        "content": "Prefers email over phone calls.",
        "category": "communication",
        "impact_level": "medium",
        "confidence": 0.6,
        "supersedes": [],
        "tags": ["communication"],
    }


def build(variant: Variant, tenant: str, load_date: date, ts: str, event_id: str) -> bytes:
    event = base_event(variant.base, tenant, ts, event_id, "c00001")
    out = variant.mutate(event, load_date)
    return out if isinstance(out, bytes) else dumps(out)
