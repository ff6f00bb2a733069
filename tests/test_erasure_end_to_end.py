"""Erasure end to end: a planted person is forgotten everywhere under the home (every byte of every
file, Parquet and DuckDB decoded), others stay, packs still load, and old files never bring them
back; the same through an `erasure` event in the log channel."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import polars as pl
import pytest

from jobs.cli import main
from jobs.runner import RunOutcome, run_nightly
from memorypack import MemoryPack
from memorypack.format import read_latest, read_manifest, verify_pack
from pipeline.config import Paths
from pipeline.erasure.person import export
from pipeline.generate import generate
from pipeline.pii import pii_key, pseudonym
from tests.conftest import feedback, interaction, memory, write_landing

START = date(2026, 11, 1)
DAYS = 2
TENANT = "acme"


@dataclass(frozen=True)
class Person:
    contact: str  # an e-mail: packs and the snapshot carry it as a pii- pseudonym
    prefix: str  # of their event ids
    words: tuple[str, ...]  # distinctive words planted in their texts

    def event(self, n: int, day: int = 0) -> str:
        return f"{self.prefix}-{n}-d{day}"


ZELDA = Person(
    "zelda.quixote@example.org", "zq-evt", ("snorkelwaffle", "bramblequartz", "vexillarious")
)
YORICK = Person(
    "yorick.plumtree@example.net", "yp-evt", ("quokkalantern", "marzipanorbit", "tessellent")
)
# Her events and her erasure request arrive the same night: its metadata previews showed her.
WANDA = Person(
    "wanda.lastnight@example.com", "wl-evt", ("gloamingkettle", "plinthorama", "zephyrquill")
)


def _lines(p: Person, day: str, d: int) -> list[dict[str, Any] | str]:
    """Interactions with feedback (thumbs, a correction: a preference pair, template evidence),
    memory statements, feedback by someone else on their answer, and one quarantined line."""
    a, b, c = p.words
    base = {"tenant_id": TENANT, "contact_id": p.contact}
    return [
        interaction(
            p.event(1, d),
            **base,
            ts=f"{day}T09:00:00Z",
            user_id=p.contact,
            input=f"My {a} order for the {b} festival has not arrived yet, can you check?",
            output=f"Your {a} parcel left the {b} depot this morning and arrives tomorrow.",
        ),
        feedback(
            f"{p.event(2, d)}", p.event(1, d), ts=f"{day}T09:05:00Z", **base, user_id=p.contact
        ),
        interaction(
            p.event(3, d),
            **base,
            ts=f"{day}T10:00:00Z",
            input=f"Please rebook the {c} {a} tasting for next week, thanks",
            output=f"I could not find any {c} booking on your account, sorry.",
        ),
        feedback(
            p.event(4, d),
            p.event(3, d),
            ts=f"{day}T10:05:00Z",
            **base,
            signal="correction",
            corrected_output=f"Your {c} {a} tasting is rebooked for Tuesday at 6 pm.",
        ),
        feedback(
            p.event(5, d), p.event(3, d), ts=f"{day}T10:06:00Z", tenant_id=TENANT, user_id="u00001"
        ),
        memory(
            p.event(6, d),
            **base,
            ts=f"{day}T11:00:00Z",
            memory_type="explicit_instruction",
            content=f"Always send {a} updates by post, never about the {b} club",
        ),
        memory(
            p.event(7, d),
            **base,
            ts=f"{day}T11:30:00Z",
            memory_type="inferred_pattern",
            content=f"Seems to collect {c} figurines from the {b} shop",
        ),
        # Quarantined: JSON inside a JSON string (no field reader finds the contact), and a
        # rating out of range.
        json.dumps(
            json.dumps(feedback(p.event(8, d), p.event(1, d), **base, rating=9, comment=f"{a} bad"))
        ),
        feedback(p.event(9, d), p.event(1, d), **base, rating=9, comment=f"{b} was fine"),
    ]


def _plant(landing: Path, people: list[Person]) -> None:
    for d, day in enumerate(("2026-11-01", "2026-11-02")):
        for person in people:
            write_landing(landing / day, _lines(person, day, d), name=f"zz-{person.prefix}.jsonl")


def _run(home: Path, landing: Path, start: str, end: str) -> RunOutcome:
    # The run history lives under the home, as with `memorypack run`: forget must scrub it too.
    (home / "dagster").mkdir(parents=True, exist_ok=True)
    with dg.DagsterInstance.local_temp(str(home / "dagster")) as instance:
        return run_nightly(home, landing, start, end, instance=instance)


def _decoded_cells(path: Path) -> list[str]:
    """Every value of a Parquet file or of every table of a DuckDB file, as text."""
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        cells = []
        for column in frame.columns:
            series = frame[column]
            while isinstance(series.dtype, pl.List | pl.Array):
                series = series.explode()
            cells += [str(v) for v in series.drop_nulls().to_list()]
        return cells
    with duckdb.connect(str(path), read_only=True) as con:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return [
            str(row[0])
            for table in tables
            for row in con.execute(f'SELECT CAST(t AS VARCHAR) FROM "{table}" t').fetchall()
        ]


def find_anywhere(home: Path, needles: list[str]) -> list[str]:
    """Where any needle is found under the home: raw bytes of every file, plus the decoded
    contents of Parquet and DuckDB files (Parquet pages are compressed)."""
    hits = []
    for path in sorted(p for p in home.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits += [f"{path} (bytes): {n}" for n in needles if n.encode() in data]
        if path.suffix in (".parquet", ".duckdb") and not path.name.startswith("."):
            text = "\n".join(_decoded_cells(path))
            hits += [f"{path} (decoded): {n}" for n in needles if n in text]
    return hits


def _needles(home: Path, person: Person, days: tuple[int, ...] = (0, 1)) -> list[str]:
    key = pii_key(home)
    ids = [person.contact] + [person.event(n, d) for n in range(1, 10) for d in days]
    return [*person.words, *ids, *(pseudonym(key, TENANT, i) for i in ids)]


@dataclass
class World:
    home: Path
    landing: Path
    runs: dict[str, dg.ExecuteInProcessResult] = field(default_factory=dict)
    hits: dict[str, list[str]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


def _others(paths: Paths) -> pl.DataFrame:
    """Everyone else's accepted events (their ids and texts), to compare before and after."""
    events = pl.read_parquet(paths.lake / "events" / "*" / "data.parquet")
    mine = pl.col("event_id").str.starts_with("zq-") | pl.col("event_id").str.starts_with("yp-")
    return (
        events.filter(~mine)
        .select("tenant_id", "event_id", "input", "content")
        .sort("tenant_id", "event_id")
    )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("erasure")
    home, landing = root / "home", root / "landing"
    generate(landing, days=DAYS, interactions=150, tenants=2, seed=5, start=START)
    _plant(landing, [ZELDA, YORICK])
    w = World(home, landing)
    paths = Paths(home)
    w.runs["first"] = _run(home, landing, "2026-11-01", "2026-11-02")
    w.hits["before"] = find_anywhere(home, _needles(home, ZELDA))
    w.facts["others_before"] = _others(paths)
    w.facts["latest_before"] = {t: read_latest(paths.packs / t) for t in ("acme", "globex")}
    w.facts["export_before"] = export(paths, TENANT, ZELDA.contact)
    w.facts["forget_exit"] = main(
        ["forget", "--home", str(home), "--tenant", TENANT, "--contact", ZELDA.contact]
    )
    w.hits["after_forget"] = find_anywhere(home, _needles(home, ZELDA))
    w.facts["others_after"] = _others(paths)
    w.facts["latest_after"] = {t: read_latest(paths.packs / t) for t in ("acme", "globex")}
    w.facts["manifest_after"] = read_manifest(
        paths.packs / TENANT / w.facts["latest_after"][TENANT]
    )
    w.facts["packs_after"] = {t: MemoryPack.load(paths.packs / t) for t in ("acme", "globex")}
    w.facts["export_after"] = export(paths, TENANT, ZELDA.contact)
    # Old landing files ingested again: the tombstone keeps Zelda out.
    w.runs["reingest"] = _run(home, landing, "2026-11-01", "2026-11-02")
    w.hits["after_reingest"] = find_anywhere(home, _needles(home, ZELDA))
    w.facts["erased_rows"] = (
        pl.read_parquet(paths.lake / "quarantine" / "*" / "data.parquet")
        .filter(pl.col("reason") == "erased_contact")
        .height
    )
    # Yorick asks through the apps' log channel: an `erasure` event in the next landing folder.
    w.hits["yorick_before"] = find_anywhere(home, _needles(home, YORICK))
    request = {
        "event_id": "req-0001",
        "event_type": "erasure",
        "ts": "2026-11-03T08:00:00Z",
        "tenant_id": TENANT,
        "contact_id": YORICK.contact,
    }
    write_landing(landing / "2026-11-03", [request], name="requests.jsonl")
    wanda = {**request, "event_id": "req-0002", "contact_id": WANDA.contact}
    write_landing(landing / "2026-11-03", [*_lines(WANDA, "2026-11-03", 2), wanda], name="w.jsonl")
    w.runs["request"] = _run(home, landing, "2026-11-03", "2026-11-03")
    w.hits["yorick_after"] = find_anywhere(home, _needles(home, YORICK))
    w.hits["wanda_after"] = find_anywhere(home, _needles(home, WANDA, days=(2,)))
    return w


def test_every_run_succeeds(world: World) -> None:
    for name, result in world.runs.items():
        failures = [
            e.step_failure_data.error.message
            for e in result.all_events
            if e.event_type_value == "STEP_FAILURE" and e.step_failure_data.error
        ]
        assert result.success, (name, failures)


def test_the_person_was_everywhere_before(world: World) -> None:
    hits = "\n".join(world.hits["before"])
    for where in ("lake/events", "lake/quarantine", "warehouse.duckdb", "analytics.duckdb"):
        assert where in hits
    assert "packs/acme" in hits  # as a pseudonym
    assert pseudonym(pii_key(world.home), TENANT, ZELDA.contact) in hits


def test_forget_leaves_no_byte_of_the_person(world: World) -> None:
    assert world.facts["forget_exit"] == 0
    assert world.hits["after_forget"] == []


def test_others_are_intact_and_packs_load(world: World) -> None:
    before, after = world.facts["others_before"], world.facts["others_after"]
    assert after.height > 100
    assert after.equals(before)
    latest_before, latest_after = world.facts["latest_before"], world.facts["latest_after"]
    assert latest_after["globex"] == latest_before["globex"]  # another tenant: untouched
    assert latest_after["acme"] != latest_before["acme"]  # rewritten, same publish time
    assert latest_after["acme"].split("-")[0] == latest_before["acme"].split("-")[0]
    for tenant, pack in world.facts["packs_after"].items():
        assert pack.version == latest_after[tenant]
        assert pack.memories_for("c00001", k=5)
    paths = Paths(world.home)
    for tenant in ("acme", "globex"):  # and after the later nights
        MemoryPack.load(paths.packs / tenant)
        verify_pack(paths.packs / tenant / str(read_latest(paths.packs / tenant)))


def test_rewritten_pack_keeps_as_of_and_says_it_was_rewritten(world: World) -> None:
    manifest = world.facts["manifest_after"]
    rewrite = manifest["erasures"]["rewrites"][-1]
    assert rewrite["from_version"] == world.facts["latest_before"]["acme"]
    assert rewrite["rows_removed"]["memories.parquet"] >= 4
    assert manifest["counts"]["memories"] == world.facts["packs_after"]["acme"].memories.num_rows


def test_export_lists_the_person_then_nothing(world: World) -> None:
    before, after = world.facts["export_before"], world.facts["export_after"]
    assert before["erased"] is False
    ids = {e["event_id"] for e in before["events"]}
    assert {ZELDA.event(1, 0), ZELDA.event(5, 1), ZELDA.event(6, 0)} <= ids
    text = json.dumps(before, default=str)
    assert all(word in text for word in ZELDA.words)
    assert before["quarantined_lines"] and before["packs"]
    pack_rows = next(iter(before["packs"].values()))["memories.parquet"]
    assert {r["contact_id"] for r in pack_rows} == {
        pseudonym(pii_key(world.home), TENANT, ZELDA.contact)
    }
    assert after["erased"] is True
    assert after["events"] == [] and after["derived"] == {} and after["packs"] == {}


def test_reingesting_old_files_does_not_bring_the_person_back(world: World) -> None:
    assert world.hits["after_reingest"] == []
    assert world.facts["erased_rows"] == 18  # 9 lines a day, counted as erased_contact


def test_an_erasure_event_in_the_log_forgets_the_person(world: World) -> None:
    assert world.hits["yorick_before"]
    assert world.hits["yorick_after"] == []
    # Run history included (`dagster/history/runs/<run>.db`, `index.db`: raw_events' previews).
    assert world.hits["wanda_after"] == []
    assert (world.home / "dagster" / "history" / "runs" / "index.db").is_file()
    events = pl.read_parquet(Paths(world.home).partition("events", "2026-11-03"))
    request = events.filter(pl.col("event_type") == "erasure").row(0, named=True)
    assert request["event_id"] == "req-0001" and request["contact_id"] is None
