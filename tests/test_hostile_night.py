"""One night over a landing folder filled as a careless or hostile user would (issue 51), end to
end: nothing in it stops the night, every tenant whose data is sound publishes, each bad entry or
line is a reason in quarantine and the run's report, and what reaches analysts and packs holds
none of it. Then the sensors, evaluated on the home's Dagster instance afterwards (what a first
`make ui` does), launch nothing."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import polars as pl
import pytest

import pipeline.erasure.requests
from jobs.nightly import analytics_sensor, landing_sensor, tenant_sensor
from jobs.runner import RunOutcome, run_nightly
from memorypack import MemoryPack
from memorypack.format import read_latest
from pipeline.config import Paths
from pipeline.erasure.person import export, forget
from pipeline.ingest.tombstones import Tombstones
from pipeline.pii import pii_key, pseudonym
from pipeline.storage.owed import owed
from pipeline.storage.withheld import withheld
from tests.conftest import feedback, interaction, memory

pytestmark = pytest.mark.slow

DAY = "2026-11-04"
NO_DPO = {"dpo": {"min_pairs": 10_000}}
TS = f"{DAY}T10:00:00Z"
DEEP = '{"a": ' * 3000 + "1" + "}" * 3000
JANE = "jane.doe@example.com"  # an id the pack pseudonymizes (it looks like PII)


@dataclass
class Night:
    home: Path
    landing: Path
    paths: Paths
    key: bytes
    outcome: RunOutcome


def _erasure(event_id: str, tenant: str, contact: str) -> dict[str, Any]:
    return {"event_id": event_id, "event_type": "erasure", "ts": TS, "tenant_id": tenant} | {
        "contact_id": contact
    }


def _deep(event_id: str, contact: str) -> str:
    line = json.dumps(interaction(event_id, ts=TS, contact_id=contact, input=f"deep of {contact}"))
    return line.replace('"output"', f'"metadata": {DEEP}, "output"')


def _lines(key: bytes) -> list[str]:
    good = [
        interaction("i1", ts=TS, contact_id=JANE),
        interaction("i2", ts=TS, contact_id="c2", input="Can I change my delivery slot?"),
        feedback("f1", "i1", ts=TS),
        memory("m1", ts=TS, contact_id=JANE, content="Prefers email over phone calls"),
        interaction("g1", ts=TS, tenant_id="globex", contact_id="gc1"),
        memory("gm1", ts=TS, tenant_id="globex", contact_id="gc1", content="Likes short answers"),
    ]
    hostile = [
        _erasure("req-blank", "acme", ""),  # once: the night failed for every tenant, exit 2
        _erasure("req-spaces", "globex", "   "),
        _deep("deep-1-line", "deep-1"),  # once: invalid_json, then RecursionError in erasure
        _erasure("req-deep", "acme", "deep-1"),
        _deep("deep-2-line", "deep-2"),
        interaction("hive", ts=TS, tenant_id="__HIVE_DEFAULT_PARTITION__"),
        interaction("nul-contact", ts=TS, contact_id="c1\u0000"),
        interaction("nul-system", ts=TS, system="sup\u0000port"),
        interaction("e\u0000", ts=TS),
        interaction("leap", ts=f"{DAY}T23:59:60Z"),
        interaction("sixty", ts=f"{DAY}T10:00:60Z"),
        # issue 50: a raw id shaped like Jane's pseudonym merged a stranger into her memories
        memory("spoof", ts=TS, contact_id=pseudonym(key, "acme", JANE), content="Owns a red kayak"),
        _erasure("req-fails", "globex", "g-fail"),  # carried out by a forget that raises
    ]
    return [line if isinstance(line, str) else json.dumps(line) for line in good + hostile]


def _failing_for_globex(paths: Paths, tenant: str, contact: str, **options: Any) -> Any:
    if tenant == "globex":
        raise RuntimeError("the object store went away")
    return forget(paths, tenant, contact, **options)


@pytest.fixture(scope="module")
def night(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Night]:
    root = tmp_path_factory.mktemp("hostile")
    home, landing = root / "home", root / "landing"  # the run's landing is not the home's
    key = pii_key(home)
    day = landing / DAY
    day.mkdir(parents=True)
    (day / "events.jsonl").write_text("\n".join(_lines(key)) + "\n")
    (day / "blank.jsonl.gz").write_bytes(gzip.compress(b"\n" * (8 << 20)))
    os.mkfifo(day / "pipe.jsonl")
    (day / "passwd.jsonl").symlink_to("/etc/passwd")
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("DAGSTER_HOME", raising=False)  # the home's own instance, as make ui's
        patch.setattr(pipeline.erasure.requests, "forget", _failing_for_globex)
        outcome = run_nightly(home, landing, DAY, DAY, settings=NO_DPO, fast=True)
    yield Night(home, landing, Paths(home), key, outcome)


def test_the_night_ends_and_a_bad_erasure_stops_only_its_tenant(night: Night) -> None:
    outcome = night.outcome
    assert outcome.success, f"{outcome.failed_step}: {outcome.error}"
    assert sorted(outcome.tenants) == ["acme", "globex"]
    assert read_latest(night.paths.packs / "acme") is not None
    assert read_latest(night.paths.packs / "globex") is None  # withheld: its erasure failed
    assert list(outcome.not_published) == ["globex"]
    (held,) = withheld(night.paths, "globex").values()
    assert held in outcome.not_published["globex"]
    assert held.startswith("an erasure request could not be carried out (RuntimeError: the obj")
    assert owed(night.paths) == {"globex": [DAY]}  # acme's settled; globex's waits


def test_every_hostile_entry_and_line_has_its_reason(night: Night) -> None:
    quarantine = pl.read_parquet(night.paths.partition("quarantine", DAY))
    lines = dict(quarantine.group_by("reason").agg(pl.col("lines").sum()).iter_rows())
    assert lines == {
        "blank_field:contact_id": 2,
        "too_deep": 1,  # deep-2's; deep-1's line is erased with them (its request)
        "erased_contact": 1,
        "bad_tenant_id": 1,
        "control_character:contact_id": 1,
        "control_character:system": 1,
        "control_character:event_id": 1,
        "bad_timestamp": 2,
        "pseudonym_shaped_id:contact_id": 1,
        "empty_line": 8 << 20,  # the gzip's newlines: one row
        "not_a_regular_file": 1,
        "symlink_outside_landing": 1,
    }
    stats = pl.read_parquet(night.paths.partition("ingest_stats", DAY)).row(0, named=True)
    assert stats["lines_read"] == stats["accepted"] + stats["duplicates"] + stats["quarantined"]
    assert any("passwd.jsonl not read: symlink_outside_landing" in n for n in night.outcome.notices)
    assert any("pipe.jsonl not read: not_a_regular_file" in n for n in night.outcome.notices)


def test_nothing_of_it_reaches_the_analysts_snapshot(night: Night) -> None:
    with duckdb.connect(str(night.paths.analytics), read_only=True) as con:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        nulls = {}
        for table in tables:
            columns = [r[0] for r in con.execute(f'DESCRIBE "{table}"').fetchall()]
            if "tenant_id" in columns and table != "quarantine":  # a bad line may name none
                query = f'SELECT count(*) FROM "{table}" WHERE tenant_id IS NULL'
                nulls[table] = con.execute(query).fetchall()[0][0]
        raw = [r[0] or "" for r in con.execute("SELECT raw FROM quarantine").fetchall()]
    assert nulls and set(nulls.values()) == {0}, nulls
    passwd = Path("/etc/passwd").read_text().splitlines()[0]
    assert not any(passwd in text for text in raw)


def test_a_spoofed_pseudonym_never_joins_another_persons_memories(night: Night) -> None:
    pack = MemoryPack.load(night.paths.packs / "acme")
    jane = pseudonym(night.key, "acme", JANE)
    assert JANE not in pack.memories["contact_id"].to_pylist()  # the pack holds her pseudonym
    texts = [m.text for m in pack.memories_for(jane, k=50) if m.contact_id == jane]
    assert any("Prefers email" in text for text in texts)
    assert not any("kayak" in text for text in texts)


def test_the_deep_line_was_erased_with_its_person_in_the_landing_folder_read(night: Night) -> None:
    assert Tombstones.load(night.paths).erased("acme", "deep-1")
    text = (night.landing / DAY / "events.jsonl").read_text()
    assert "deep-1" not in text and "deep-2" in text


def test_the_sensors_of_a_fresh_make_ui_launch_nothing(
    night: Night, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a night, starting the UI once re-ran every tenant and published a second pack
    version for each: the tenant sensor, with no cursor, replayed the night's ingest."""
    monkeypatch.setenv("MEMORYPACK_HOME", str(night.home))
    monkeypatch.setenv("MEMORYPACK_LANDING", str(night.landing))
    versions = sorted(p.name for p in (night.paths.packs / "acme").iterdir())
    instance = dg.DagsterInstance.from_config(str(night.paths.local / "dagster"))
    with instance:
        runs = len(instance.get_runs())
        for sensor in (landing_sensor, tenant_sensor, analytics_sensor):
            first = sensor(dg.build_sensor_context(instance=instance))
            assert isinstance(first, dg.SensorResult) and first.run_requests == [], sensor.name
            again = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
            assert not getattr(again, "run_requests", None), sensor.name
        assert len(instance.get_runs()) == runs
    assert sorted(p.name for p in (night.paths.packs / "acme").iterdir()) == versions


def test_export_and_forget_of_a_person_with_a_deep_line_work(night: Night) -> None:
    """`export`/`forget` of that contact died with RecursionError in erasure/subject.py."""
    document = export(night.paths, "acme", "deep-2")
    assert [r["reason"] for r in document["quarantined_lines"]] == ["too_deep"]
    report = forget(night.paths, "acme", "deep-2", landing=night.landing)
    assert report.quarantined == 1
    assert str(night.landing.resolve()) in report.landing_folders
    assert sum(report.landing.values()) == 1
    assert "deep-2" not in (night.landing / DAY / "events.jsonl").read_text()


def test_the_withheld_tenant_publishes_once_its_erasure_is_done(night: Night) -> None:
    forget(night.paths, "globex", "g-fail", landing=night.landing)
    assert withheld(night.paths, "globex") == {}
    again = run_nightly(night.home, night.landing, DAY, DAY, settings=NO_DPO, fast=True)
    assert again.success and again.not_published == {}
    assert read_latest(night.paths.packs / "globex") is not None
    assert owed(night.paths) == {}
