"""Erasure rules on tiny inputs: the erasure event in the contract, tombstones at ingest, the
row matcher, and the command line's one-line errors."""

from __future__ import annotations

import io
import json
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from jobs.cli import main
from pipeline.config import Paths
from pipeline.erasure.lake import scrub_lake
from pipeline.erasure.packs import _kept_blocks
from pipeline.erasure.scrub import Needles, scrub_frame
from pipeline.erasure.subject import Subject
from pipeline.erasure.tombstones import record_tombstone
from pipeline.ingest.folder import ingest_folder
from pipeline.ingest.tombstones import Tombstones, tombstone_hash
from pipeline.pii import pseudonym
from pipeline.publish.content import write_npy
from tests.conftest import feedback, interaction, memory, write_landing

DAY = date(2026, 11, 2)
KEY = b"k" * 32


def _request(event_id: str = "req-1", **fields: object) -> dict[str, object]:
    return {
        "event_id": event_id,
        "event_type": "erasure",
        "ts": "2026-11-02T08:00:00Z",
        "tenant_id": "acme",
        "contact_id": "jane@example.com",
        **fields,
    }


def test_an_erasure_event_is_accepted_without_the_id_it_names(landing: Path) -> None:
    write_landing(landing / "2026-11-02", [_request(), interaction("i1")])
    result = ingest_folder(landing / "2026-11-02", DAY)
    assert result.erasures == [("acme", "jane@example.com")]
    assert result.conserved and result.events.height == 2
    request = result.events.filter(pl.col("event_type") == "erasure").row(0, named=True)
    assert request["contact_id"] is None and request["event_id"] == "req-1"
    assert "jane" not in json.dumps(request, default=str)


def test_an_erasure_event_needs_a_contact(landing: Path) -> None:
    line = _request()
    del line["contact_id"]
    write_landing(landing / "2026-11-02", [line])
    result = ingest_folder(landing / "2026-11-02", DAY)
    assert result.quarantine["reason"].to_list() == ["missing_field:contact_id"]
    assert result.erasures == []


def _tombstones(tmp_path: Path, contact: str, events: list[str]) -> Tombstones:
    paths = Paths(tmp_path / "home")
    paths.home.mkdir(parents=True)
    frame = pl.DataFrame({"event_id": events, "event_type": ["interaction"] * len(events)})
    subject = Subject("acme", contact, frame, pl.DataFrame(), Needles("acme"))
    record_tombstone(paths, KEY, subject, "cli", datetime(2026, 11, 2, tzinfo=UTC))
    return Tombstones(KEY, *_pairs(paths))


def _pairs(paths: Paths) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]]:
    frame = pl.read_parquet(paths.table("tombstones"))
    by_kind = {
        kind: frozenset(
            frame.filter(pl.col("kind") == kind).select("tenant_id", "subject_hash").iter_rows()
        )
        for kind in ("contact", "event")
    }
    return by_kind["contact"], by_kind["event"]


def test_tombstoned_lines_are_counted_as_erased_without_their_text(
    landing: Path, tmp_path: Path
) -> None:
    tombstones = _tombstones(tmp_path, "c9", ["i9"])
    lines = [
        interaction("i1"),  # someone else
        interaction("i2", contact_id="c9"),  # the erased contact
        feedback("f1", "i1", user_id="c9"),  # the erased person as the user
        feedback("f2", "i9"),  # about one of their erased events
        memory("m1", contact_id="c9", tenant_id="globex"),  # another tenant's c9: kept
        json.dumps(feedback("f3", "i1", contact_id="c9", rating=9)),  # bad line of theirs
        _request("req-2", contact_id="c9"),  # a request stays (it names nobody once stored)
    ]
    write_landing(landing / "2026-11-02", lines)
    result = ingest_folder(landing / "2026-11-02", DAY, tombstones=tombstones)
    assert result.conserved
    assert sorted(result.events["event_id"].to_list()) == ["i1", "m1", "req-2"]
    erased = result.quarantine.filter(pl.col("reason") == "erased_contact")
    assert sorted(erased["line_no"].to_list()) == [2, 3, 4, 6]
    assert erased["raw"].null_count() == 4 and erased["event_id"].null_count() == 4
    assert result.stats["quarantined"] == 4


def test_a_tombstone_is_not_the_pseudonym_packs_carry(tmp_path: Path) -> None:
    hashed = tombstone_hash(KEY, "acme", "contact", "jane@example.com")
    assert pseudonym(KEY, "acme", "jane@example.com")[4:] not in hashed
    assert hashed != tombstone_hash(KEY, "globex", "contact", "jane@example.com")
    tombstones = _tombstones(tmp_path, "jane@example.com", [])
    assert tombstones.erased("acme", "jane@example.com")
    assert not tombstones.erased("globex", "jane@example.com")
    assert b"jane" not in (tmp_path / "home/lake/tombstones/data.parquet").read_bytes()


NEEDLES = Needles(
    "acme",
    ids=frozenset({"c00006", "i_1", "pii-0123456789abcdef01234567"}),
    texts=frozenset({"ok"}),
    fragments=("my snorkelwaffle order",),
    hashes=frozenset({"h1"}),
    global_ids=frozenset({"c00006"}),
)


def test_rows_are_matched_by_whole_ids_texts_and_fragments_in_their_tenant_only() -> None:
    frame = pl.DataFrame(
        {
            "tenant_id": ["acme", "acme", "acme", "acme", "globex", "acme", None],
            "text": [
                "c00006",
                "c000061",
                "re: my snorkelwaffle order!",
                "ok",
                "c00006",
                "okay",
                "x c00006",
            ],
        }
    )
    scrubbed = scrub_frame(frame, NEEDLES)
    assert scrubbed.frame["text"].to_list() == ["c000061", "c00006", "okay"]
    assert scrubbed.removed.height == 4


def test_a_raw_line_naming_another_tenant_readably_is_not_theirs() -> None:
    """Before: `forget --tenant nosuch` took acme's quarantined lines (their tenant column empty)."""
    long_id = "pii-0123456789abcdef01234567"  # matched inside texts in their tenant only
    raws = [
        '{"tenant_id":"globex","contact_id":"c00006", "cut',  # another tenant's: kept
        f'{{"tenant_id":"globex","contact_id":"{long_id}", "cut',  # kept
        f'{{"tenant_id":"acme","contact_id":"{long_id}", "cut',  # theirs, by a scoped id
        '{"contact_id":"c00006"}',  # no tenant named: found by a global id
        '{"tenant_id":"ac\\u006de","contact_id":"c00006"',  # escaped: unknown, global id
    ]
    frame = pl.DataFrame(
        {"tenant_id": [None] * 5, "raw": raws},
        schema=dict.fromkeys(["tenant_id", "raw"], pl.String),
    )
    assert scrub_frame(frame, NEEDLES).frame["raw"].to_list() == raws[:2]


def test_another_tenants_folder_is_never_scrubbed(tmp_path: Path) -> None:
    """A cache laid out by tenant has no tenant column: its folder says whose rows they are."""
    paths = Paths(tmp_path / "home")
    for tenant in ("acme", "globex"):
        folder = paths.lake / "embedding_cache" / f"tenant_id={tenant}" / "model"
        folder.mkdir(parents=True)
        pl.DataFrame({"text": ["c00006 asked", "other"]}).write_parquet(folder / "part-1.parquet")
    assert scrub_lake(paths, NEEDLES) == {"embedding_cache": 1}
    kept = pl.read_parquet(paths.lake / "embedding_cache/tenant_id=globex/model/part-1.parquet")
    assert kept.height == 2


def test_list_items_are_stripped_and_members_recounted() -> None:
    frame = pl.DataFrame(
        {
            "tenant_id": ["acme", "acme", "globex"],
            "summary": ["a", "b", "c"],
            "member_ids": [["i_1", "i_2"], ["i_3"], ["i_1"]],
            "n_members": [2, 1, 1],
        }
    )
    scrubbed = scrub_frame(frame, NEEDLES)
    assert scrubbed.frame["member_ids"].to_list() == [["i_2"], ["i_3"], ["i_1"]]
    assert scrubbed.frame["n_members"].to_list() == [1, 1, 1]
    assert scrubbed.stripped == 1 and scrubbed.removed.height == 0


def test_caches_without_a_tenant_are_matched_by_any_needle() -> None:
    frame = pl.DataFrame(
        {"text_hash": ["h1", "h2", "h3", "h4"], "redacted": ["a", "b", "i_1", "c00006 x"]}
    )
    assert scrub_frame(frame, NEEDLES).frame["text_hash"].to_list() == ["h2"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["forget", "--tenant", "a b", "--contact", "x"], "is not a tenant id"),
        (["forget", "--tenant", "acme", "--contact", " "], "--contact must name the person"),
        (
            ["export", "--tenant", "acme", "--contact", "x", "--home", "/nonexistent/h"],
            "does not exist",
        ),
    ],
)
def test_bad_requests_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("memorypack: ") and message in err and "\n" not in err


def test_a_tombstoned_raw_line_stays_out_even_when_no_field_names_the_person(
    landing: Path, tmp_path: Path
) -> None:
    hidden = json.dumps(json.dumps(interaction("i5", contact_id="c9")))  # JSON in a JSON string
    paths = Paths(tmp_path / "home")
    paths.home.mkdir(parents=True)
    lines = pl.DataFrame({"raw": [hidden]})
    subject = Subject("acme", "c9", pl.DataFrame({"event_id": []}), lines, Needles("acme"))
    record_tombstone(paths, KEY, subject, "cli", datetime(2026, 11, 2, tzinfo=UTC))
    frame = pl.read_parquet(paths.table("tombstones"))
    tombstones = Tombstones(
        KEY, *_pairs(paths), frozenset(frame.filter(pl.col("kind") == "line")["subject_hash"])
    )
    write_landing(landing / "2026-11-02", [hidden, json.dumps(json.dumps(interaction("i6")))])
    result = ingest_folder(landing / "2026-11-02", DAY, tombstones=tombstones)
    assert result.quarantine["reason"].to_list() == ["erased_contact", "not_an_object"]
    assert result.quarantine["raw"].null_count() == 1 and result.conserved


def test_landing_and_dagster_history_lose_the_person(tmp_path: Path) -> None:
    """Landing lines of theirs go (plain and gzip, other tenants' same id stays); Dagster's
    SQLite run history and compute logs keep no byte of their ids or texts, even JSON-escaped."""
    import gzip
    import json
    import sqlite3

    from pipeline.erasure.files import scrub_dagster_history, scrub_landing
    from pipeline.erasure.scrub import Needles

    needles = Needles(
        "acme", ids=frozenset({"zelda-42"}), texts=frozenset({"Zelda's café on Rue Nord"})
    )
    day = tmp_path / "landing" / "2026-11-01"
    day.mkdir(parents=True)
    mine = {"tenant_id": "acme", "contact_id": "zelda-42", "input": "hi"}
    other_tenant = {"tenant_id": "globex", "contact_id": "zelda-42", "input": "hello"}
    someone = {"tenant_id": "acme", "contact_id": "yorick-7", "input": "Zelda's café on Rue Nord"}
    keep = {"tenant_id": "acme", "contact_id": "yorick-7", "input": "fine"}
    lines = [json.dumps(x) for x in (mine, other_tenant, someone, keep)]
    (day / "a.jsonl").write_text("\n".join(lines) + "\n")
    (day / "b.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    removed = scrub_landing(tmp_path / "landing", needles).removed
    assert removed == {"2026-11-01/a.jsonl": 2, "2026-11-01/b.jsonl.gz": 2}
    expected = [json.dumps(other_tenant), json.dumps(keep)]
    assert (day / "a.jsonl").read_text().splitlines() == expected
    assert gzip.decompress((day / "b.jsonl.gz").read_bytes()).decode().splitlines() == expected

    history = tmp_path / "dagster" / "history"
    history.mkdir(parents=True)
    con = sqlite3.connect(history / "runs.db")
    con.execute("CREATE TABLE event_logs (id INTEGER PRIMARY KEY, event TEXT, step VARCHAR(255))")
    preview = json.dumps({"preview": "| zelda-42 | Zelda's café on Rue Nord |"})  # ASCII-escaped
    con.executemany("INSERT INTO event_logs (event, step) VALUES (?, ?)", [(preview, "s")] * 50)
    con.commit()
    con.close()
    logs = tmp_path / "dagster" / "storage" / "run1" / "compute_logs"
    logs.mkdir(parents=True)
    (logs / "step.err").write_text("loaded contact zelda-42\n")
    changed = scrub_dagster_history(tmp_path / "dagster", needles)
    # 50 rows, each holding the id and the text: 100 replacements.
    assert changed == {"history/runs.db": 100, "storage/run1/compute_logs/step.err": 1}
    for path in (history / "runs.db", logs / "step.err"):
        data = path.read_bytes()
        for needle in ("zelda-42", "Zelda's caf", "Zelda's caf\\u00e9"):
            assert needle.encode() not in data, (path, needle)
    with sqlite3.connect(history / "runs.db") as con:
        assert con.execute("SELECT count(*) FROM event_logs").fetchone() == (50,)


def test_an_erasure_keeps_embedding_rows_a_block_at_a_time(tmp_path: Path) -> None:
    """The rewritten embeddings.npy is np.save of the kept rows, read and written in blocks."""
    matrix = np.arange(40, dtype=np.float32).reshape(10, 4)
    np.save(tmp_path / "all.npy", matrix)
    keep = np.array([1, 0, 1, 1, 0, 0, 1, 1, 1, 0], dtype=bool)
    kept = _kept_blocks(tmp_path / "all.npy", keep, size=3)
    write_npy(tmp_path / "kept.npy", kept, int(keep.sum()), 4)
    expected = io.BytesIO()
    np.save(expected, matrix[keep], allow_pickle=False)
    assert (tmp_path / "kept.npy").read_bytes() == expected.getvalue()


def test_a_quarantine_partition_written_before_rows_were_counted_is_scrubbed(
    tmp_path: Path,
) -> None:
    """Partitions from before issue 51 have no `lines`/`line_nos`: each row is one line."""
    from pipeline.erasure.lake import scrub_lake
    from pipeline.erasure.scrub import Needles

    paths = Paths(tmp_path / "home")
    path = paths.partition("quarantine", "2026-11-02")
    path.parent.mkdir(parents=True)
    old = pl.DataFrame(
        {
            "load_date": [date(2026, 11, 2)] * 2,
            "file": ["a.jsonl"] * 2,
            "line_no": [3, 4],
            "reason": ["invalid_json"] * 2,
            "raw": ['{"contact_id": "zelda-42", ', '{"contact_id": "yorick-7", '],
            "raw_bytes": [None, None],
            "tenant_id": ["acme", "acme"],
            "event_id": [None, None],
        },
        schema_overrides={"raw_bytes": pl.Binary, "event_id": pl.String},
    )
    old.write_parquet(path)
    assert scrub_lake(paths, Needles("acme", ids=frozenset({"zelda-42"}))) == {"quarantine": 1}
    rows = pl.read_parquet(path).sort("line_no").select("reason", "lines", "line_nos").rows()
    assert rows == [("erased_contact", 1, [3]), ("invalid_json", 1, [4])]


def test_the_erased_persons_names_leave_the_tenants_lexicon(tmp_path: Path) -> None:
    """The names the snapshot redacts with are kept beside the redaction cache; after an erasure
    only those a text or id of the tenant still holds stay."""
    from pipeline.erasure.lake import sweep_names
    from pipeline.pii.names import TenantNames
    from pipeline.pii.redactor import Redactor
    from pipeline.storage.lake import write_parquet_atomic

    paths = Paths.from_env(tmp_path / "home")
    write_parquet_atomic(
        pl.DataFrame({"input": ["Ask Jolene", None], "contact_id": ["c1", "nate_k"]}),
        paths.for_tenant("acme").table("interactions"),
    )
    redactor = Redactor.for_home(paths)
    redactor.save_names("acme", TenantNames(frozenset({"Jolene", "Nate", "Zelda"})))
    assert sweep_names(paths, "acme") == 1
    assert redactor.names("acme").words == {"Jolene", "Nate"}
    assert sweep_names(paths, "globex") == 0  # no lexicon: nothing to do
