"""LoCoMo long-term conversations → contract `memory` events, and their questions as a truth file.

Who the memory is about: the conversation. Each file is one conversation between two people
(`speaker_a`, `speaker_b`); every turn becomes a `memory` event with `contact_id` = the conversation
(`sample_id`, else the file's stem), as an assistant that kept these chats would hold one memory of
the pair. A speaker-level contact would split what is said about a person from the person: LoCoMo's
answers about Caroline are often in Melanie's turns ("Congrats on the adoption, Caroline!"), and its
questions name either speaker, so a question's conversation is the one contact that holds all of its
evidence (the measurements of issue 41 used it). The speaker stays in the text ("Caroline: …", as
the turn was said) and in `metadata.speaker`, so conflicts can tell two people's statements apart.

Turns are `confirmed_pattern` memories (base 0.8, 10 % a month): a person's own statement, to be
reconfirmed as it ages; an image turn appends its caption ("[shares a photo: …]"), as LoCoMo's
own evaluation does. Times: a session's "1:56 pm on 8 May, 2023" carries no zone and is read as
UTC; turn j of a session is j - 1 minutes after its start. Unless `keep_dates`, each conversation
is moved by whole days so that its last session falls on the latest last-session date of the files
imported together: LoCoMo asks its questions at the end of each conversation, and one tenant's pack
has one as-of date (the shift per conversation is in the truth file). event_id =
`<conversation>:<dia_id>` (e.g. `conv-26:D1:3`), stable across re-imports.

Landing: one folder per session day (each session arrives on its day), or every event in
`<out>/<load_date>/` with `load_date` (a one-night backfill). `<out>/truth.json` holds, per
question, its category, answer and the event ids of its evidence. The data is CC BY-NC: import it
for evaluation only, never into the repository.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from pipeline.errors import UserError
from pipeline.ingest.importers.bounded import json_file
from pipeline.ingest.tenant_ids import check_tenant_id

SOURCE = "locomo"
MEMORY_TYPE, CATEGORY, IMPACT = "confirmed_pattern", "other", "low"
_TURN_STEP = timedelta(minutes=1)
_SESSION = re.compile(r"session_(\d+)")
_TIME_FORMAT = "%I:%M %p on %d %B, %Y"  # "1:56 pm on 8 May, 2023"


def session_time(text: str) -> datetime:
    """A LoCoMo session time as an aware UTC datetime (the data set gives no zone)."""
    try:
        return datetime.strptime(" ".join(text.split()), _TIME_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        raise UserError(f"session time {text!r} is not like '1:56 pm on 8 May, 2023'") from None


def _ts(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _conversations(file: Path) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """(conversation id, conversation, questions) of one file: a per-conversation object, or the
    data set's `locomo10.json` (a list of {sample_id, conversation, qa})."""
    data = json_file(Path(file))
    items = data if isinstance(data, list) else [data]
    out = []
    for n, item in enumerate(items):
        body = item.get("conversation", item) if isinstance(item, dict) else None
        if not isinstance(body, dict) or "speaker_a" not in body or "session_1" not in body:
            raise UserError(
                f"{file}: item {n} is not a LoCoMo conversation (no speaker_a/session_1)"
            )
        name = str(item.get("sample_id") or (Path(file).stem if len(items) == 1 else n))
        out.append((name, body, list(item.get("qa") or [])))
    return out


def _sessions(body: dict[str, Any]) -> list[tuple[int, datetime, list[dict[str, Any]]]]:
    """(number, start, turns) of every session that has turns, in order."""
    numbers = sorted(
        int(m.group(1)) for key in body if (m := _SESSION.fullmatch(key)) and body[key]
    )
    return [
        (i, session_time(body[f"session_{i}_date_time"]), body[f"session_{i}"]) for i in numbers
    ]


def _evidence(labels: list[Any]) -> list[str]:
    """Dialogue ids of a question's evidence; a few labels hold two ("D8:6; D9:17") or a stray
    colon ("D:11:26")."""
    ids = (e.replace("D:", "D") for label in labels for e in re.split(r"[;,\s]+", str(label)))
    return [e for e in ids if e]


def end_date(files: list[Path]) -> date:
    """The latest last-session day of the conversations in `files`: where they are aligned to."""
    days = [s[-1][1].date() for _, body, _ in _many(files) if (s := _sessions(body))]
    if not days:
        raise UserError("no conversation in the files has a session with turns")
    return max(days)


def _many(files: list[Path]) -> list[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    conversations = [c for f in files for c in _conversations(Path(f))]
    names = [name for name, _, _ in conversations]
    if len(set(names)) != len(names):
        raise UserError(f"conversation ids repeat across the files: {sorted(names)}")
    return conversations


def _content(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn.get('text') or ''}".rstrip()
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def import_locomo(
    files: list[Path],
    out: Path,
    tenant_id: str = SOURCE,
    load_date: date | None = None,
    keep_dates: bool = False,
) -> dict[str, int]:
    """Write the conversations of `files` as `memory` events under `out` (see the module) and the
    questions to `out/truth.json`; returns counts. Deterministic: a re-import writes the same bytes."""
    check_tenant_id(tenant_id, "tenant id")
    parsed = [(name, body, qa, _sessions(body)) for name, body, qa in _many(files)]
    end = max(sessions[-1][1].date() for *_, sessions in parsed if sessions)
    days: dict[str, list[str]] = {}
    truth: dict[str, Any] = {"source": SOURCE, "tenant_id": tenant_id, "conversations": {}}
    questions = []
    counts = dict.fromkeys(("conversations", "sessions", "turns", "questions", "evidence"), 0)
    counts["missing_evidence"] = 0
    for name, body, qa, sessions in parsed:
        shift = timedelta() if keep_dates or not sessions else end - sessions[-1][1].date()
        ids: set[str] = set()
        for number, start, turns in sessions:
            for j, turn in enumerate(turns):
                if not isinstance(turn, dict) or not turn.get("speaker") or not turn.get("dia_id"):
                    raise UserError(f"{name}: session {number} turn {j + 1} has no speaker/dia_id")
                when = start + shift + j * _TURN_STEP
                event_id = f"{name}:{turn['dia_id']}"
                ids.add(str(turn["dia_id"]))
                event = {
                    "event_id": event_id,
                    "event_type": "memory",
                    "ts": _ts(when),
                    "tenant_id": tenant_id,
                    "contact_id": name,
                    "memory_type": MEMORY_TYPE,
                    "content": _content(turn),
                    "category": CATEGORY,
                    "impact_level": IMPACT,
                    "tags": [SOURCE, f"session:{number}"],
                    "metadata": {"speaker": turn["speaker"], "dia_id": turn["dia_id"]},
                }
                day = (load_date or (start + shift).date()).isoformat()
                days.setdefault(day, []).append(json.dumps(event, ensure_ascii=False))
                counts["turns"] += 1
            counts["sessions"] += 1
        for q in qa:
            evidence = _evidence(q.get("evidence") or [])
            found = [e for e in evidence if e in ids]
            questions.append(
                {
                    "contact_id": name,
                    "question": q["question"],
                    "answer": q.get("answer", q.get("adversarial_answer")),
                    "category": int(q["category"]),
                    "evidence": evidence,
                    "evidence_ids": [f"{name}:{e}" for e in found],
                    "missing_evidence": [e for e in evidence if e not in ids],
                }
            )
            counts["evidence"] += len(found)
            counts["missing_evidence"] += len(evidence) - len(found)
        truth["conversations"][name] = {
            "speakers": [body.get("speaker_a"), body.get("speaker_b")],
            "shift_days": shift.days,
            "first": _ts(sessions[0][1] + shift) if sessions else None,
            "last": _ts(sessions[-1][1] + shift) if sessions else None,
            "turns": len(ids),
        }
        counts["conversations"] += 1
    truth["questions"] = questions
    counts["questions"] = len(questions)
    out = Path(out)
    for day, lines in days.items():
        _write(out / day / f"{SOURCE}.jsonl", "".join(line + "\n" for line in lines))
    _write(out / "truth.json", json.dumps(truth, ensure_ascii=False, indent=1) + "\n")
    counts["load_dates"] = len(days)
    return counts


def _write(target: Path, text: str) -> None:
    """Atomically: ingest never sees a half-written `*.jsonl` (the temporary name is not one)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    tmp.replace(target)
