"""The OpenAssistant importer on the real sample export: counts, votes, ranks, contract basics."""

import json
import re
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from pipeline.errors import UserError
from pipeline.ingest.contracts import EVENT_ID_MAX_CHARS, TENANT_ID_PATTERN
from pipeline.ingest.folder import ingest_folder
from pipeline.ingest.importers import import_oasst

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "oasst" / "en_100_tree.jsonl"
REQUIRED = {
    "interaction": (
        "event_id",
        "event_type",
        "ts",
        "tenant_id",
        "system",
        "kind",
        "input",
        "output",
    ),
    "feedback": ("event_id", "event_type", "ts", "tenant_id", "target_id", "signal"),
}


def _messages(path: Path) -> list[dict[str, Any]]:
    out = []

    def walk(m: dict[str, Any]) -> None:
        out.append(m)
        for r in m.get("replies", []):
            walk(r)

    for line in path.read_text().splitlines():
        walk(json.loads(line)["prompt"])
    return out


def read_table(out: Path, day: str = "2023-02-05") -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / day / "oasst.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    if not SAMPLE.exists():
        pytest.skip("OpenAssistant sample not available")
    out = tmp_path_factory.mktemp("oasst")
    return out, import_oasst(SAMPLE, out)


def test_counts_match_the_export(imported: tuple[Path, dict[str, int]]) -> None:
    out, counts = imported
    assistant = [m for m in _messages(SAMPLE) if m["role"] == "assistant"]
    alive = [m for m in assistant if not m.get("deleted")]
    ups = sum(m.get("emojis", {}).get("+1", 0) for m in alive)
    downs = sum(m.get("emojis", {}).get("-1", 0) for m in alive)
    assert counts["trees"] == 100
    assert counts["assistant_replies"] == len(assistant) == 687
    assert counts["interactions"] == len(alive)
    assert (counts["thumbs_up"], counts["thumbs_down"]) == (ups, downs)
    assert counts["ranked_replies"] == sum(m.get("rank") is not None for m in alive)
    events = read_table(out)
    assert counts["lines"] == len(events) == len(alive) + ups + downs
    by_signal = [e.get("signal") for e in events if e["event_type"] == "feedback"]
    assert by_signal.count("thumbs_up") == ups and by_signal.count("thumbs_down") == downs


def test_events_follow_the_contract(imported: tuple[Path, dict[str, int]]) -> None:
    out, _ = imported
    events = read_table(out)
    ids = [e["event_id"] for e in events]
    assert len(ids) == len(set(ids))
    interactions = {e["event_id"]: e for e in events if e["event_type"] == "interaction"}
    for e in events:
        for field in REQUIRED[e["event_type"]]:
            assert e.get(field) is not None, (field, e["event_id"])
        assert re.fullmatch(TENANT_ID_PATTERN, e["tenant_id"])
        assert 1 <= len(e["event_id"]) <= EVENT_ID_MAX_CHARS
        assert e["ts"].endswith("Z") and e["ts"] < "2023-02-05"
        if e["event_type"] == "feedback":
            assert e["target_id"] in interactions
    raters = {}
    for e in events:
        if e["event_type"] == "feedback":
            key = (e["target_id"], e["signal"])
            raters.setdefault(key, []).append(e["user_id"])
    assert all(len(users) == len(set(users)) for users in raters.values())
    assert {e["system"] for e in interactions.values()} == {"oasst"}


def test_ranks_and_conversation_are_kept(imported: tuple[Path, dict[str, int]]) -> None:
    out, _ = imported
    interactions = {e["event_id"]: e for e in read_table(out) if e["event_type"] == "interaction"}
    messages = {m["message_id"]: m for m in _messages(SAMPLE)}
    for mid, e in interactions.items():
        m = messages[mid]
        assert e["output"] == m["text"]
        assert e["metadata"]["rank"] == m.get("rank")
        assert e["metadata"]["parent_id"] == m["parent_id"]
        assert e["metadata"]["tree_id"] == e["session_id"] == e["contact_id"]
        if m.get("rank") is not None:
            assert f"rank:{m['rank']}" in e["tags"]
        parent = messages[m["parent_id"]]
        assert e["input"].startswith("User: ")
        assert e["input"].endswith(f"User: {parent['text']}")
        siblings = parent["replies"]
        assert e["metadata"]["sibling_count"] == len(siblings)


def test_ingest_accepts_every_line_and_reimport_is_identical(
    imported: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    out, counts = imported
    result = ingest_folder(out / "2023-02-05", date(2023, 2, 5))
    assert result.stats["accepted"] == counts["lines"] and result.quarantine.height == 0
    import_oasst(SAMPLE, tmp_path)
    assert (tmp_path / "2023-02-05" / "oasst.jsonl").read_bytes() == (
        out / "2023-02-05" / "oasst.jsonl"
    ).read_bytes()


def _msg(mid: str, role: str, text: str, parent: str | None = None, **kw: Any) -> dict[str, Any]:
    return {
        "message_id": mid,
        "parent_id": parent,
        "role": role,
        "text": text,
        "deleted": False,
        "replies": [],
        **kw,
    }


def test_deleted_messages_and_their_replies_are_skipped(tmp_path: Path) -> None:
    root = _msg("p1", "prompter", "Hi?")
    good = _msg(
        "a1", "assistant", "Hello!", "p1", rank=0, emojis={"+1": 2, "-1": 1, "_skip_reply": 4}
    )
    gone = _msg("a2", "assistant", "spam", "p1", rank=1, deleted=True)
    good["replies"] = [
        _msg(
            "p2",
            "prompter",
            "More?",
            "a1",
            deleted=True,
            replies=[_msg("a3", "assistant", "Sure.", "p2")],
        )
    ]
    root["replies"] = [good, gone]
    src = tmp_path / "trees.jsonl"
    src.write_text(json.dumps({"message_tree_id": "t1", "prompt": root}) + "\n")
    counts = import_oasst(src, tmp_path / "out", load_date=date(2024, 1, 2), tenant_id="oa_1")
    assert counts["interactions"] == 1 and counts["assistant_replies"] == 3
    assert counts["skipped_deleted"] == 2 and counts["skipped_under_deleted"] == 1
    assert (counts["thumbs_up"], counts["thumbs_down"]) == (2, 1)
    events = read_table(tmp_path / "out", "2024-01-02")
    assert [e["event_id"] for e in events] == ["a1", "a1:+1:0", "a1:+1:1", "a1:-1:0"]
    assert events[0]["input"] == "User: Hi?" and events[0]["tenant_id"] == "oa_1"


def test_bad_input_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="tenant id"):
        import_oasst(SAMPLE, tmp_path, tenant_id="../x")
    bad = tmp_path / "flat.jsonl"
    bad.write_text(json.dumps({"message_id": "m1", "text": "hi"}) + "\n")
    with pytest.raises(UserError, match="message tree"):
        import_oasst(bad, tmp_path / "out")
    assert not list((tmp_path / "out").glob("*/*.jsonl"))
    with pytest.raises(UserError, match="does not exist"):
        import_oasst(tmp_path / "missing.jsonl", tmp_path / "out")
