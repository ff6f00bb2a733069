"""The sample-data generator: deterministic, exact truth counts, every quarantine reason planted."""

import gzip
import json
import re
import subprocess
import sys
from collections import Counter
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.generate import generate
from pipeline.ingest.contracts import FILE_REASONS, TENANT_ID_PATTERN, Reason, Signal
from pipeline.ingest.folder import ingest_folder

ARGS: dict[str, Any] = {"days": 3, "interactions": 400, "tenants": 3, "seed": 7}


@pytest.fixture(scope="module")
def landing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("landing")
    generate(out, **ARGS)
    return out


@pytest.fixture(scope="module")
def truth(landing: Path) -> dict[str, Any]:
    return json.loads((landing / "truth.json").read_text())


def _files(landing: Path) -> list[Path]:
    return sorted(p for p in landing.glob("*/*") if p.name.endswith((".jsonl", ".jsonl.gz")))


def _lines(path: Path) -> list[bytes]:
    """The lines ingest reads: gunzipped, BOM and CRLF removed, no extra line for the last newline."""
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    data = data.removeprefix(b"\xef\xbb\xbf").replace(b"\r\n", b"\n")
    return data.removesuffix(b"\n").split(b"\n") if data else []


def _events(landing: Path) -> list[tuple[str, dict[str, Any]]]:
    """(load date, object) for every line that is a JSON object (valid or not)."""
    out = []
    for path in _files(landing):
        for line in _lines(path):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append((path.parent.name, obj))
    return out


def test_deterministic_for_a_seed(landing: Path, tmp_path: Path) -> None:
    again = generate(tmp_path, **ARGS)
    assert [p.relative_to(landing) for p in _files(landing)] == [
        p.relative_to(tmp_path) for p in _files(tmp_path)
    ]
    for path in _files(landing):
        assert path.read_bytes() == (tmp_path / path.relative_to(landing)).read_bytes(), path
    assert (tmp_path / "truth.json").read_bytes() == (landing / "truth.json").read_bytes()
    assert again["ingest"] == json.loads((landing / "truth.json").read_text())["ingest"]
    other = generate(tmp_path / "other", **{**ARGS, "seed": 8})
    assert other["ingest"] != again["ingest"] or other["pii"] != again["pii"]


def test_line_counts_match_an_independent_count(landing: Path, truth: dict[str, Any]) -> None:
    per_date = truth["ingest"]["per_date"]
    start = date.fromisoformat(truth["start"])
    assert list(per_date) == [(start + timedelta(days=i)).isoformat() for i in range(ARGS["days"])]
    for day, stats in per_date.items():
        files = [p for p in _files(landing) if p.parent.name == day]
        assert stats["files"] == len(files)
        assert stats["lines_read"] == sum(len(_lines(p)) for p in files)
        assert stats["lines_read"] == stats["accepted"] + stats["duplicates"] + stats["quarantined"]
    ingest = truth["ingest"]
    assert ingest["lines_read"] == sum(s["lines_read"] for s in per_date.values())
    assert ingest["quarantined"] == sum(ingest["quarantine_by_reason"].values())
    assert ingest["accepted"] == sum(truth["accepted_by_type"].values())
    assert 0.01 < ingest["quarantined"] / ingest["lines_read"] < 0.05


def test_duplicates_are_byte_identical_resends(landing: Path, truth: dict[str, Any]) -> None:
    seen: set[bytes] = set()
    duplicates = 0
    for path in _files(landing):
        for line in _lines(path):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and "event_id" in obj:
                duplicates += line in seen
                seen.add(line)
    assert duplicates == truth["ingest"]["duplicates"] > 0


def test_every_quarantine_reason_is_planted(truth: dict[str, Any]) -> None:
    planted = {r.split(":")[0] for r in truth["ingest"]["quarantine_by_reason"]}
    # erased_contact comes from a tombstone (an erasure), never from a malformed line.
    # The receipt's reasons (unknown_key:context, bad_pack_version, foreign_pack) are covered by
    # tests/test_ingest_context.py: planting them would change the generated stream that the
    # usage end-to-end test's measured nights depend on.
    receipts = {Reason.UNKNOWN_KEY, Reason.BAD_PACK_VERSION, Reason.FOREIGN_PACK}
    # Issue 51's reasons are covered by tests/test_ingest.py and tests/test_hostile_lines.py, for
    # the same reason.
    hostile = {
        Reason.TOO_DEEP,
        Reason.CONTROL_CHARACTER,
        Reason.PSEUDONYM_SHAPED_ID,
        Reason.BLANK_FIELD,
    }
    not_malformed = {*FILE_REASONS, Reason.ERASED_CONTACT, *receipts, *hostile}
    assert planted == {r.value for r in Reason} - {r.value for r in not_malformed}
    for field in ("event_id", "tenant_id", "ts", "target_id", "content", "corrected_output"):
        assert truth["ingest"]["quarantine_by_reason"].get(f"missing_field:{field}", 0) >= 1
    for key in (
        "wrong_type:rating",
        "wrong_type:tags",
        "out_of_range:rating",
        "out_of_range:importance",
        "out_of_range:confidence",
        "unknown_value:memory_type",
        "unknown_value:category",
        "unknown_value:reason",
        "unknown_value:stage",
        "unknown_value:impact_level",
    ):
        assert truth["ingest"]["quarantine_by_reason"].get(key, 0) >= 1, key


def test_truth_matches_the_ingest_of_the_files(landing: Path, truth: dict[str, Any]) -> None:
    existing: pl.DataFrame | None = None
    reasons: Counter[str] = Counter()
    types: Counter[str] = Counter()
    for day, expected in truth["ingest"]["per_date"].items():
        result = ingest_folder(
            landing / day,
            date.fromisoformat(day),
            existing.lazy() if existing is not None else None,
        )
        assert {k: result.stats[k] for k in expected} == expected, day
        for reason, lines in result.quarantine.select("reason", "lines").iter_rows():
            reasons[reason] += lines  # a counted row stands for its lines
        types.update(result.events["event_type"].to_list())
        keys = result.events.select("tenant_id", "event_id", "content_hash")
        existing = keys if existing is None else pl.concat([existing, keys])
    assert dict(reasons) == truth["ingest"]["quarantine_by_reason"]
    assert dict(types) == truth["accepted_by_type"]


def test_feedback_per_interaction_raises_the_feedback_volume(
    truth: dict[str, Any], tmp_path: Path
) -> None:
    """The bench's 3 feedback events per interaction: the files still match their truth."""
    dense = generate(tmp_path, **{**ARGS, "feedback_per_interaction": 3.0})
    base = truth["accepted_by_type"]
    per_interaction = (
        dense["accepted_by_type"]["feedback"] / dense["accepted_by_type"]["interaction"]
    )
    assert 2.7 < per_interaction < 3.3
    assert dense["accepted_by_type"]["feedback"] > 1.5 * base["feedback"]  # planted feedback too
    existing: pl.DataFrame | None = None
    for day, expected in dense["ingest"]["per_date"].items():
        result = ingest_folder(
            tmp_path / day,
            date.fromisoformat(day),
            existing.lazy() if existing is not None else None,
        )
        assert {k: result.stats[k] for k in expected} == expected, day
        keys = result.events.select("tenant_id", "event_id", "content_hash")
        existing = keys if existing is None else pl.concat([existing, keys])
    with pytest.raises(ValueError, match="feedback_per_interaction"):
        generate(tmp_path / "x", **{**ARGS, "feedback_per_interaction": 0.5})


def test_special_files_gz_crlf_bom(landing: Path) -> None:
    names = [p.name for p in _files(landing)]
    assert any(n.endswith(".jsonl.gz") for n in names)
    raw = [p.read_bytes() for p in _files(landing) if not p.name.endswith(".gz")]
    assert sum(data.startswith(b"\xef\xbb\xbf") for data in raw) == 1
    assert sum(b"\r\n" in data for data in raw) == 1
    every = raw + [
        gzip.decompress(p.read_bytes()) for p in _files(landing) if p.name.endswith(".gz")
    ]
    assert any(b"\n\n" in data or b"\r\n\r\n" in data for data in every)  # a blank line mid-file


def test_content_is_rich(landing: Path, truth: dict[str, Any]) -> None:
    events = _events(landing)
    valid = [(d, e) for d, e in events if str(e.get("event_id", "")).startswith(("i_", "f_", "m_"))]
    tenants = {e["tenant_id"] for _, e in valid}
    assert tenants == set(truth["tenants"])
    assert all(re.fullmatch(TENANT_ID_PATTERN, t) for t in tenants)
    interactions = {e["event_id"]: (d, e) for d, e in valid if e["event_type"] == "interaction"}
    assert {e["system"] for _, e in interactions.values()} == {
        "support",
        "little_lord",
        "framescan",
    }
    assert all(
        isinstance(e["output"], dict)
        for _, e in interactions.values()
        if e["system"] == "framescan"
    )
    assert len({e["skill_id"] for _, e in interactions.values()}) == 10
    assert len({e["input"] for _, e in interactions.values()}) > 0.5 * len(interactions)
    feedback = [(d, e) for d, e in valid if e["event_type"] == "feedback"]
    assert {e["signal"] for _, e in feedback} == {s.value for s in Signal}
    assert set(truth["signals"]) == {s.value for s in Signal}
    assert any(len(e.get("comment", "")) > 300 for _, e in feedback)
    late = [
        e
        for d, e in feedback
        if e["target_id"] in interactions and interactions[e["target_id"]][0] < d
    ]
    assert late, "some feedback lands days after its target"
    memories = [e for _, e in valid if e["event_type"] == "memory"]
    assert {e["memory_type"] for e in memories} >= {
        "explicit_instruction",
        "correction",
        "confirmed_pattern",
        "inferred_pattern",
        "single_inference",
        "temporary",
    }
    assert any(e.get("supersedes") for e in memories)
    ages = [
        (date.fromisoformat(d) - date.fromisoformat(e["ts"][:10])).days
        for d, e in valid
        if e["event_type"] == "memory"
    ]
    assert max(ages) > 180 and min(ages) <= 1


def _luhn(number: str) -> bool:
    digits = [int(c) for c in number if c.isdigit()][::-1]
    total = sum(
        d if i % 2 == 0 else (d * 2 - 9 if d * 2 > 9 else d * 2) for i, d in enumerate(digits)
    )
    return total % 10 == 0


def test_pii_is_planted_in_texts(landing: Path, truth: dict[str, Any]) -> None:
    text = b"".join(b"\n".join(_lines(p)) for p in _files(landing)).decode("utf-8", "replace")
    assert truth["pii"]
    for value in truth["pii"]:
        assert value in text, value
    kinds = {"email": r"@", "card": r"^[\d ]{15,19}$", "iban": r"^[A-Z]{2}\d\d", "phone": r"^[+(]"}
    for kind, pattern in kinds.items():
        assert any(re.search(pattern, v) for v in truth["pii"]), kind
    cards = [v for v in truth["pii"] if re.fullmatch(r"[\d ]{15,19}", v)]
    assert cards and all(_luhn(c) for c in cards)


def test_planted_cases_are_in_the_files(landing: Path, truth: dict[str, Any]) -> None:
    by_id = {
        (e["tenant_id"], e["event_id"]): (d, e)
        for d, e in _events(landing)
        if isinstance(e.get("event_id"), str) and "tenant_id" in e
    }
    feedback_on: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _, e in by_id.values():
        if e.get("event_type") == "feedback" and "target_id" in e and "signal" in e:
            feedback_on.setdefault((e["tenant_id"], e["target_id"]), []).append(e)

    def signals(tenant: str, target: str) -> Counter[str]:
        return Counter(f["signal"] for f in feedback_on.get((tenant, target), []))

    for o in truth["score_orderings"]:
        better, worse = (
            signals(o["tenant_id"], o["better_id"]),
            signals(o["tenant_id"], o["worse_id"]),
        )
        assert better["thumbs_up"] + better["copy"] > worse["thumbs_up"] + worse["copy"]
    for c in truth["corrections"]:
        fbs = feedback_on[(c["tenant_id"], c["interaction_id"])]
        assert [f["corrected_output"] for f in fbs if f["signal"] == "correction"] == [
            c["corrected_output"]
        ]
    for r in truth["regenerations"]:
        _, regen = by_id[(r["tenant_id"], r["regenerated_id"])]
        assert regen["parent_event_id"] == r["original_id"]
        assert regen["input"] == by_id[(r["tenant_id"], r["original_id"])][1]["input"]
        assert signals(r["tenant_id"], r["original_id"])["regenerate"] == 1
        assert signals(r["tenant_id"], r["regenerated_id"])["thumbs_up"] >= 1
    for n in truth["negative_interactions"]:
        s = signals(n["tenant_id"], n["memory_id"])
        assert s["thumbs_down"] >= 4 and s["thumbs_up"] == 0
    for case in truth["decay_cases"]:
        d, m = by_id[(case["tenant_id"], case["memory_id"])]
        assert m["memory_type"] == case["memory_type"] and "confidence" not in m
        assert d <= case["snapshot_date"]
        as_of = datetime.fromisoformat(case["snapshot_date"]) + timedelta(days=1)
        age = as_of - datetime.fromisoformat(m["ts"].replace("Z", "+00:00")).replace(tzinfo=None)
        assert abs(age.total_seconds() / 86400 - case["age_days"]) < 1e-3
        assert not feedback_on.get((case["tenant_id"], case["memory_id"]))
    assert {c["status"] for c in truth["decay_cases"]} == {"active", "inactive", "archived"}
    assert any(c["stale"] for c in truth["decay_cases"])
    assert any(c["needs_reconfirmation"] for c in truth["decay_cases"])
    for g in truth["paraphrase_groups"]:
        members = [by_id[(g["tenant_id"], i)][1] for i in g["memory_ids"]]
        assert len(members) == 3 and {m["contact_id"] for m in members} == {g["contact_id"]}
        assert len({m["content"] for m in members}) == 3
    assert {c["kind"] for c in truth["conflicts"]} == {"supersedes", "polarity", "correction"}
    for c in truth["conflicts"]:
        a, b = (by_id[(c["tenant_id"], i)][1] for i in c["memory_ids"])
        assert a["contact_id"] == b["contact_id"] == c["contact_id"]
        assert c["preferred_id"] in c["memory_ids"]
        if c["kind"] == "supersedes":
            assert b["supersedes"] == [a["event_id"]]
    for key in (
        "score_orderings",
        "decay_cases",
        "paraphrase_groups",
        "conflicts",
        "corrections",
        "regenerations",
        "negative_interactions",
    ):
        assert 0 < len(truth[key]) <= 50, key


SCALE_SCRIPT = """
import json, resource, sys
from pathlib import Path
from pipeline.generate import generate
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
truth = generate(Path(sys.argv[1]), days=2, interactions=20_000, tenants=4, seed=1)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"growth_kb": after - before, "truth": truth}))
"""


def test_scale_smoke_memory_stays_bounded(tmp_path: Path) -> None:
    # A fresh process, so the peak resident size measures the generator alone.
    done = subprocess.run(
        [sys.executable, "-c", SCALE_SCRIPT, str(tmp_path)],
        check=True,
        capture_output=True,
        text=True,
    )
    report = json.loads(done.stdout)
    truth = report["truth"]
    assert truth["accepted_by_type"]["interaction"] >= 20_000
    assert truth["ingest"]["lines_read"] > 40_000
    assert report["growth_kb"] < 30 * 1024  # streaming: a few MB of state, never the data set
    for key in ("score_orderings", "decay_cases", "conflicts"):
        assert len(truth[key]) <= 50
    # planted PII: fixed value lists plus at most six PII-looking ids per tenant
    assert len(truth["pii"]) <= 50 + 6 * 4
