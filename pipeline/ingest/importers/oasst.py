"""OpenAssistant message-tree export → contract events (SPEC §2.1).

Every assistant reply becomes an `interaction` whose input is the conversation up to it; its `+1` /
`-1` emojis become that many `thumbs_up` / `thumbs_down` feedback events (one distinct rater per
vote); the sibling `rank` (0 = best, a human preference) is kept in `metadata` and as a `rank:<n>`
tag. Prompter messages are context only. Deleted messages (and the replies under them) are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from pipeline.errors import UserError
from pipeline.ingest.importers.bounded import json_lines
from pipeline.ingest.tenant_ids import check_tenant_id

DEFAULT_LOAD_DATE = date(2023, 2, 5)
SYSTEM, KIND = "oasst", "assistant_reply"
ROLES = {"prompter": "User", "assistant": "Assistant"}
_STEP = timedelta(milliseconds=100)  # 864,000 replies per day fit before the load date


def _trees(file: Path) -> Iterator[dict[str, Any]]:
    """Each message tree, read bounded (`bounded.json_lines`: a tree too big or too deep is one
    line naming the file, the line and the reason)."""
    for n, tree in json_lines(file):
        if not isinstance(tree, dict) or not isinstance(tree.get("prompt"), dict):
            raise UserError(f"{file}:{n}: not an OpenAssistant message tree (no `prompt`)")
        yield tree


def _ts(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S") + f".{when.microsecond // 1000:03d}Z"


class _Converter:
    def __init__(self, tenant_id: str, clock: datetime, sink: TextIO) -> None:
        self.tenant_id = tenant_id
        self.clock = clock
        self.sink = sink
        self.counts = dict.fromkeys(
            (
                "trees",
                "assistant_replies",
                "interactions",
                "thumbs_up",
                "thumbs_down",
                "ranked_replies",
                "skipped_deleted",
                "skipped_under_deleted",
                "lines",
            ),
            0,
        )

    def _emit(self, event: dict[str, Any]) -> None:
        self.sink.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
        self.counts["lines"] += 1

    def _tick(self) -> datetime:
        self.clock += _STEP
        return self.clock

    def tree(self, tree: dict[str, Any]) -> None:
        self.counts["trees"] += 1
        tree_id = str(tree.get("message_tree_id") or tree["prompt"].get("message_id"))
        self._walk(tree["prompt"], [], tree_id, siblings=1)

    def _skip(self, message: dict[str, Any]) -> None:
        for reply in message.get("replies") or []:
            self.counts["skipped_under_deleted"] += 1
            if reply.get("role") == "assistant":
                self.counts["assistant_replies"] += 1
            self._skip(reply)

    def _walk(
        self, message: dict[str, Any], history: list[str], tree_id: str, siblings: int
    ) -> None:
        role = message.get("role")
        if message.get("deleted"):
            self.counts["skipped_deleted"] += 1
            self.counts["assistant_replies"] += role == "assistant"
            self._skip(message)
            return
        text = str(message.get("text") or "")
        if role == "assistant":
            self.counts["assistant_replies"] += 1
            self._reply(message, history, tree_id, siblings)
        turn = f"{ROLES.get(str(role), str(role))}: {text}"
        replies = [r for r in message.get("replies") or [] if isinstance(r, dict)]
        for reply in replies:
            self._walk(reply, [*history, turn], tree_id, len(replies))

    def _reply(
        self, message: dict[str, Any], history: list[str], tree_id: str, siblings: int
    ) -> None:
        message_id = str(message["message_id"])
        rank = message.get("rank")
        emojis = message.get("emojis") or {}
        tags = ["oasst", f"lang:{message.get('lang') or 'und'}"]
        if rank is not None:
            tags.append(f"rank:{rank}")
            self.counts["ranked_replies"] += 1
        if message.get("synthetic"):
            tags.append("synthetic")
        when = self._tick()
        event = {
            "event_id": message_id,
            "event_type": "interaction",
            "ts": _ts(when),
            "tenant_id": self.tenant_id,
            "contact_id": tree_id,
            "system": SYSTEM,
            "kind": KIND,
            "session_id": tree_id,
            "skill_id": None,
            "input": "\n".join(history),
            "output": str(message.get("text") or ""),
            "tags": tags,
            "metadata": {
                "parent_id": message.get("parent_id"),
                "rank": rank,
                "sibling_count": siblings,
                "tree_id": tree_id,
                "emojis": emojis,
                "model_name": message.get("model_name"),
                "review_count": message.get("review_count"),
            },
        }
        if message.get("model_name"):
            event["model"] = message["model_name"]
        self._emit(event)
        self.counts["interactions"] += 1
        for emoji, signal in (("+1", "thumbs_up"), ("-1", "thumbs_down")):
            votes = emojis.get(emoji) or 0
            for i in range(int(votes)):
                self._emit(
                    {
                        "event_id": f"{message_id}:{emoji}:{i}",
                        "event_type": "feedback",
                        "ts": _ts(when + timedelta(milliseconds=1 + i)),
                        "tenant_id": self.tenant_id,
                        "contact_id": tree_id,
                        "target_id": message_id,
                        "signal": signal,
                        "user_id": f"oasst-rater-{i:04d}",
                    }
                )
                self.counts[signal] += 1


def import_oasst(
    file: Path, out: Path, load_date: date | None = None, tenant_id: str = "oasst"
) -> dict[str, int]:
    """Convert an OpenAssistant tree export into `<out>/<load_date>/oasst.jsonl`; returns counts.

    Deterministic: timestamps count up by 100 ms per reply from 00:00 UTC two days before
    `load_date` (default 2023-02-05), so a re-import writes the same bytes (and ingests as duplicates).
    Streams: the export is never held in memory; the file appears atomically when complete.
    """
    check_tenant_id(tenant_id, "tenant id")
    load = load_date or DEFAULT_LOAD_DATE
    start = datetime(load.year, load.month, load.day, tzinfo=UTC) - timedelta(days=2)
    folder = Path(out) / load.isoformat()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "oasst.jsonl"
    tmp = folder / ".oasst.jsonl.tmp"  # not `*.jsonl`: ingest never sees a half-written file
    try:
        with tmp.open("w", encoding="utf-8", newline="\n") as sink:
            converter = _Converter(tenant_id, start, sink)
            for tree in _trees(Path(file)):
                converter.tree(tree)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(target)
    return converter.counts
