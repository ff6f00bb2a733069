"""The LoCoMo importer: its mapping on a tiny conversation written here, and one real file."""

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from jobs.cli import main
from pipeline.errors import UserError
from pipeline.ingest.folder import ingest_folder
from pipeline.ingest.importers import import_locomo
from pipeline.ingest.importers.locomo import end_date, session_time

LOCOMO = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo"

TINY = {
    "speaker_a": "Ana",
    "speaker_b": "Ben",
    "session_1_date_time": "1:56 pm on 8 May, 2023",
    "session_1": [
        {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a dog named Rex."},
        {
            "speaker": "Ben",
            "dia_id": "D1:2",
            "text": "Congrats, Ana!",
            "img_url": ["https://example.org/x.jpg"],
            "blip_caption": "a photo of a puppy",
        },
    ],
    "session_2_date_time": "11:50 pm on 10 May, 2023",
    "session_2": [{"speaker": "Ana", "dia_id": "D2:1", "text": "Rex chewed my shoes."}],
    "session_3_date_time": "9:00 am on 1 June, 2023",  # annotated, but no turns: skipped
    "session_1_summary": "not part of the conversation",
    "qa": [
        {
            "question": "What is the dog's name?",
            "answer": "Rex",
            "evidence": ["D1:1"],
            "category": 4,
        },
        {"question": "What did Rex do?", "answer": "x", "evidence": ["D2:1; D1:2"], "category": 1},
        {
            "question": "Unanswerable?",
            "adversarial_answer": "y",
            "evidence": ["D:1:1", "D9:9"],
            "category": 5,
        },
    ],
}
OTHER = {
    "speaker_a": "Cy",
    "speaker_b": "Di",
    "session_1_date_time": "10:00 am on 20 May, 2023",
    "session_1": [{"speaker": "Di", "dia_id": "D1:1", "text": "Hello Cy."}],
    "qa": [],
}


def _write(folder: Path, name: str, body: dict[str, Any]) -> Path:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(body))
    return path


def _events(landing: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(landing.glob("*/*.jsonl")) for line in f.open()]


def test_turns_become_memories_about_the_conversation(tmp_path: Path) -> None:
    files = [_write(tmp_path, "conv-a", TINY), _write(tmp_path, "conv-b", OTHER)]
    counts = import_locomo(files, tmp_path / "landing")
    assert counts | {"load_dates": 0} == {
        "conversations": 2,
        "sessions": 3,
        "turns": 4,
        "questions": 3,
        "evidence": 4,
        "missing_evidence": 1,
        "load_dates": 0,
    }
    events = {e["event_id"]: e for e in _events(tmp_path / "landing")}
    assert sorted(events) == ["conv-a:D1:1", "conv-a:D1:2", "conv-a:D2:1", "conv-b:D1:1"]
    photo = events["conv-a:D1:2"]
    assert photo["content"] == "Ben: Congrats, Ana! [shares a photo: a photo of a puppy]"
    assert (photo["contact_id"], photo["event_type"], photo["memory_type"]) == (
        "conv-a",
        "memory",
        "confirmed_pattern",
    )
    assert photo["metadata"] == {"speaker": "Ben", "dia_id": "D1:2"}
    # conv-b ends on 20 May: conv-a's last session (10 May) moves 10 days, to end on the same day;
    # times are read as UTC, a turn one minute after the one before.
    assert events["conv-a:D1:1"]["ts"] == "2023-05-18T13:56:00Z"
    assert photo["ts"] == "2023-05-18T13:57:00Z"
    assert events["conv-a:D2:1"]["ts"] == "2023-05-20T23:50:00Z"
    assert events["conv-b:D1:1"]["ts"] == "2023-05-20T10:00:00Z"
    assert sorted(p.name for p in (tmp_path / "landing").iterdir()) == [
        "2023-05-18",
        "2023-05-20",
        "truth.json",
    ]
    truth = json.loads((tmp_path / "landing" / "truth.json").read_text())
    assert truth["conversations"]["conv-a"]["shift_days"] == 10
    assert truth["conversations"]["conv-b"]["speakers"] == ["Cy", "Di"]
    assert [
        (q["category"], q["evidence_ids"], q["missing_evidence"]) for q in truth["questions"]
    ] == [
        (4, ["conv-a:D1:1"], []),
        (1, ["conv-a:D2:1", "conv-a:D1:2"], []),
        (5, ["conv-a:D1:1"], ["D9:9"]),
    ]


def test_one_load_date_keep_dates_and_ingest(tmp_path: Path) -> None:
    files = [_write(tmp_path, "conv-a", TINY)]
    assert end_date(files) == date(2023, 5, 10)
    landing = tmp_path / "landing"
    code = main(["import", "locomo", str(files[0]), "--out", str(landing)])
    code += main(["import", "locomo", str(files[0]), "--out", str(tmp_path / "one")])
    assert code == 0
    assert (landing / "2023-05-08" / "locomo.jsonl").read_bytes() == (
        tmp_path / "one" / "2023-05-08" / "locomo.jsonl"
    ).read_bytes()  # a re-import writes the same bytes
    import_locomo(files, tmp_path / "all", load_date=date(2023, 5, 11), keep_dates=True)
    result = ingest_folder(tmp_path / "all" / "2023-05-11", date(2023, 5, 11))
    assert result.quarantine.height == 0 and result.stats["accepted"] == 3
    assert sorted(result.events["ts"].dt.date().to_list()) == [
        date(2023, 5, 8),
        date(2023, 5, 8),
        date(2023, 5, 10),
    ]


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not a JSON file"):
        import_locomo([bad], tmp_path / "out")
    with pytest.raises(UserError, match="not a LoCoMo conversation"):
        import_locomo([_write(tmp_path, "x", {"qa": []})], tmp_path / "out")
    with pytest.raises(UserError, match="is not like"):
        session_time("8 May 2023")
    with pytest.raises(UserError, match="repeat"):
        import_locomo([_write(tmp_path, "conv-a", TINY)] * 2, tmp_path / "out")
    assert main(["import", "locomo", str(tmp_path / "absent.json"), "--out", "x"]) == 2


def test_a_real_conversation(tmp_path: Path) -> None:
    source = LOCOMO / "conv-30.json"
    if not source.exists():
        pytest.skip(f"LoCoMo data not in {LOCOMO}")
    counts = import_locomo([source], tmp_path, load_date=date(2023, 7, 23))
    raw = json.loads(source.read_text())
    turns = [
        t for k, v in raw.items() if k.startswith("session_") and isinstance(v, list) for t in v
    ]
    assert counts["turns"] == len(turns) == 369
    result = ingest_folder(tmp_path / "2023-07-23", date(2023, 7, 23))
    assert result.quarantine.height == 0 and result.stats["accepted"] == len(turns)
    ids = set(result.events["event_id"].to_list())
    truth = json.loads((tmp_path / "truth.json").read_text())
    scored = [q for q in truth["questions"] if q["category"] != 5]
    assert len(scored) == 81 and all(
        q["evidence_ids"] and set(q["evidence_ids"]) <= ids for q in scored
    )
    assert truth["conversations"]["conv-30"]["shift_days"] == 0  # alone, it ends on its own day
