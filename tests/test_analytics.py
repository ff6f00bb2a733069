"""The analyst snapshot: documented tables and views, atomic swap under an open analyst connection."""

import json
from datetime import date
from pathlib import Path
from unittest.mock import patch

import duckdb
import polars as pl
import pytest

from pipeline import tables
from pipeline.config import Paths
from pipeline.progress import Heartbeat
from pipeline.publish.analytics import TABLES, VIEWS, WAREHOUSE_TABLES, build_snapshot
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from pipeline.storage.warehouse import Warehouse
from tests.tenant_runs import declared
from tests.test_pack_support import AS_OF, make_lake


def _home(tmp_path: Path) -> Paths:
    paths = make_lake(tmp_path)
    Lake(paths.for_tenant("acme")).write(
        "feedback",
        declared(
            "feedback",
            pl.DataFrame(
                {
                    "tenant_id": ["acme"] * 3,
                    "event_id": ["f1", "f2", "f3"],
                    "ts": ["2026-11-02T10:00:00Z", "2026-11-02T11:00:00Z", "2026-11-03T09:00:00Z"],
                    "signal": ["thumbs_up", "thumbs_up", "thumbs_down"],
                    "target_id": ["a-i0"] * 3,
                }
            ).with_columns(pl.col("ts").str.to_datetime(time_zone="UTC")),
        ),
    )
    for tenant in ("acme", "globex"):
        publish(paths.packs, build_pack(load_inputs(Lake(paths), tenant, AS_OF)))
    return paths


def test_snapshot_has_documented_tables_and_views(tmp_path: Path) -> None:
    paths = _home(tmp_path)
    lines: list[str] = []
    with patch(
        "pipeline.publish.snapshot_redaction.Heartbeat", lambda: Heartbeat(0.0)
    ):  # each slice
        report = build_snapshot(paths, lines.append)
    # The redaction's progress, as the asset puts it in the run's log: rows so far, growing.
    assert lines and all(line.startswith("analytics: ") for line in lines)
    done = [int(line.split()[1]) for line in lines]
    assert done == sorted(done) and done[-1] >= sum(report.tables.values())
    assert report.tables["interactions"] == 8 and report.tables["pack_versions"] == 2
    missing = {
        "quarantine",
        "preference_pairs",
        "promotion_candidates",
        "pack_usage",
        "pack_uplift",
    }
    assert set(report.missing) == missing
    assert set(report.views) == set(VIEWS)
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        comments = dict(con.execute("SELECT table_name, comment FROM duckdb_tables()").fetchall())
        for name in report.tables:
            assert comments[name] == WAREHOUSE_TABLES[name]
        described = dict(
            con.execute(
                "SELECT column_name, comment FROM duckdb_columns() WHERE table_name = 'events'"
            ).fetchall()
        )
        assert described["tenant_id"] == tables.table("events").description("tenant_id")
        # Every column of every table and view of the snapshot is described (issue 54).
        undescribed = con.execute(
            "SELECT table_name, column_name FROM duckdb_columns()"
            " WHERE database_name = 'analytics' AND coalesce(comment, '') = ''"
        ).fetchall()
        assert undescribed == []
        n_columns = con.execute(
            "SELECT count(*) FROM duckdb_columns() WHERE database_name = 'analytics'"
        ).fetchall()[0][0]
        assert n_columns > 300
        view_comments = dict(
            con.execute(
                "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        )
        assert view_comments == {name: VIEWS[name][1] for name in VIEWS}
        notes = dict(con.execute("SELECT name, kind FROM snapshot_contents").fetchall())
        assert notes["preference_pairs"] == "missing" and notes["events"] == "table"
        daily = con.execute(
            "SELECT day, signal, signals FROM feedback_daily ORDER BY ALL"
        ).fetchall()
        assert daily == [
            (date(2026, 11, 2), "thumbs_up", 2),
            (date(2026, 11, 3), "thumbs_down", 1),
        ]
        coverage = con.execute(
            "SELECT system, interactions, examples, covered FROM few_shot_coverage WHERE tenant_id = 'acme' ORDER BY 1"
        ).fetchall()
        assert coverage == [("framescan", 1, 1, True), ("support", 3, 2, True)]
        latest = con.execute(
            "SELECT count(*), max(as_of) FROM latest_decay WHERE tenant_id = 'acme'"
        ).fetchall()
        assert latest[0][0] == 7


def test_rebuild_with_an_analyst_connection_open(tmp_path: Path) -> None:
    paths = _home(tmp_path)
    build_snapshot(paths)
    analyst = duckdb.connect(str(paths.analytics), read_only=True)
    try:
        assert analyst.execute("SELECT count(*) FROM interactions").fetchall() == [(8,)]
        lake = Lake(paths.for_tenant("acme"))
        more = (
            lake.read("interactions")
            .collect()
            .head(1)
            .with_columns(pl.lit("a-new").alias("event_id"))
        )
        lake.write(
            "interactions",
            declared("interactions", pl.concat([lake.read("interactions").collect(), more])),
        )
        report = build_snapshot(paths)  # must not fail while the analyst holds the old file
        assert report.tables["interactions"] == 9
        # The analyst keeps a consistent view of the snapshot they opened.
        assert analyst.execute("SELECT count(*) FROM interactions").fetchall() == [(8,)]
    finally:
        analyst.close()
    with duckdb.connect(str(paths.analytics), read_only=True) as fresh:
        assert fresh.execute("SELECT count(*) FROM interactions").fetchall() == [(9,)]
    assert sorted(p.name for p in paths.home.iterdir() if p.name.startswith(".")) == []


def test_the_snapshot_is_the_warehouse_caught_up_with_the_lake(tmp_path: Path) -> None:
    """The analytics build is the warehouse's only writer: it loads what the lake has and the
    warehouse lacks (or holds an older file of), with the registry's comments, then copies it."""
    paths = _home(tmp_path)
    lake, warehouse = Lake(paths), Warehouse(paths)
    for name in ("interactions", "memory_embeddings"):  # loaded by an earlier build
        warehouse.refresh(name, lake, comment=f"{name} in the warehouse")
    report = build_snapshot(paths)
    assert report.tables["interactions"] == 8 and report.tables["feedback"] == 3
    assert "memory_embeddings" in report.tables
    for database in (paths.analytics, paths.warehouse):
        with duckdb.connect(str(database), read_only=True) as con:
            rows = con.execute("SELECT table_name, comment FROM duckdb_tables()").fetchall()
        comments = dict(rows)
        assert comments["interactions"] == TABLES["interactions"]  # the analysts' description
        assert comments["memory_embeddings"] == WAREHOUSE_TABLES["memory_embeddings"]
        assert "feedback" in comments


def test_a_duckdb_1x_client_opens_the_snapshot(tmp_path: Path) -> None:
    """Analysts use any client (SPEC §6): the 1.5 CLI (dev extra `duckdb-cli`) reads the snapshot."""
    import shutil
    import subprocess
    import sys

    cli = Path(sys.executable).parent / "duckdb"
    if not cli.exists():
        cli = Path(shutil.which("duckdb") or "duckdb")
    version = subprocess.run([str(cli), "-version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("v1."), version.stdout
    paths = _home(tmp_path)
    report = build_snapshot(paths)
    query = (
        "SELECT count(*) FROM duckdb_tables() WHERE comment IS NOT NULL;"
        " SELECT count(*) FROM duckdb_views() WHERE NOT internal AND comment IS NOT NULL;"
        " SELECT count(*) FROM duckdb_columns() WHERE database_name = 'analytics'"
        " AND coalesce(comment, '') = '';"
    )
    out = subprocess.run(
        [str(cli), "-readonly", "-csv", "-noheader", str(paths.analytics), "-c", query],
        capture_output=True,
        text=True,
        check=True,
    )
    tables, views, undescribed = (int(n) for n in out.stdout.split())
    assert tables == len(report.tables) + 1  # + the contents table
    assert views == len(report.views)
    assert undescribed == 0  # the 1.x client reads the column comments too


@pytest.mark.parametrize("rows_at_a_time", [3, 250_000])
def test_snapshot_holds_no_planted_pii(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows_at_a_time: int
) -> None:
    """As in a pack (SPEC §5): text redacted, a PII-looking id pseudonymized, the same as the pack's
    — whether a table is redacted in one slice or in many."""
    from pipeline.pii import pii_key, pseudonym
    from pipeline.storage import warehouse
    from tests.test_pack_support import PLANTED

    monkeypatch.setattr(warehouse, "ROWS_AT_A_TIME", rows_at_a_time)
    paths = _home(tmp_path)
    acme = paths.for_tenant("acme")
    lake = Lake(acme)
    interactions = pl.read_parquet(acme.table("interactions"))
    lake.write(
        "interactions",
        declared(
            "interactions",
            interactions.with_columns(
                pl.when(pl.col("event_id") == "a-i0")
                .then(pl.lit("jane.doe@example.com"))
                .otherwise(pl.col("contact_id"))
                .alias("contact_id")
            ),
        ),
    )
    report = build_snapshot(paths)
    assert report.redactions["email"] >= 2 and report.redactions["card"] >= 1
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        dump = json.dumps(
            [con.execute(f'SELECT * FROM "{t}"').fetchall() for t in tables], default=str
        )
        contact = con.execute(
            "SELECT contact_id FROM interactions WHERE event_id = 'a-i0'"
        ).fetchone()
    for value in PLANTED.values():
        assert value not in dump and value.replace(" ", "") not in dump, value
    assert contact == (pseudonym(pii_key(paths.home), "acme", "jane.doe@example.com"),)


def test_rows_are_redacted_with_their_types_kept() -> None:
    """The base's row filter: every text column (lists too) redacted, raw bytes cleared, every
    column keeps its type, numbers and times untouched."""
    from collections import Counter

    from pipeline.pii.redactor import Redactor
    from pipeline.publish.snapshot_redaction import redacting
    from tests.test_pack_support import PLANTED

    rows = duckdb.sql(
        "SELECT 'acme' AS tenant_id, i, TIMESTAMPTZ '2026-11-02 10:00:00+00' AS ts,"
        " 'mail ' || i || ' at " + PLANTED["email"] + "' AS input,"
        " ['no pii', '" + PLANTED["card"] + "'] AS tags, 'line'::BLOB AS raw FROM range(5) r(i)"
    ).to_arrow_table()
    found: Counter[str] = Counter()

    out = redacting(Redactor(key=b"k" * 32), found)(rows)

    assert found == {"card": 5, "email": 5}
    assert out.schema == rows.schema
    assert out["i"].to_pylist() == [0, 1, 2, 3, 4] and out["ts"] == rows["ts"]
    inputs, tags = out["input"].to_pylist(), out["tags"].to_pylist()
    assert all(
        "@" not in text and text.startswith(f"mail {i} at ") for i, text in enumerate(inputs)
    )
    assert all(t[0] == "no pii" and PLANTED["card"] not in t[1] for t in tags)
    assert out["raw"].null_count == 5


def test_pack_versions_and_run_ids_are_kept_as_made() -> None:
    """A pack version is `<publish time>-<hash>`: spaCy's NER once read this one as a place, so a
    snapshot redacted it (joining to no pack) and counted a `location` in every build, whenever a
    test published at such a microsecond. The pipeline's own texts are kept verbatim."""
    from collections import Counter

    from pipeline.pii import analyse
    from pipeline.pii.redactor import Redactor
    from pipeline.publish.snapshot_redaction import redacting

    version, run = "20261126T214901341307Z-0cce0bd3", "5f4ebd6d-06b3-4119-846b-c271219ed534"
    assert analyse([version], ner=True)[0][1] == ["location"]  # what made the test flaky
    rows = pl.DataFrame({"tenant_id": ["acme"], "version": [version], "dagster_run_id": [run]})
    found: Counter[str] = Counter()

    out = redacting(Redactor(key=b"k" * 32), found)(rows.to_arrow())

    assert found == {} and out.to_pylist() == rows.to_dicts()


def test_a_build_redacts_only_what_changed_in_the_lake(tmp_path: Path) -> None:
    """The redacted parts converge like the warehouse: a build with nothing new finds nothing to
    redact and keeps the snapshot redacted; of a rewritten file only the rows it changed are
    redacted; a part made with another detector or key is rebuilt whole. The rows' digests,
    which the base matches rows by, are not in the snapshot."""
    from tests.test_pack_support import PLANTED

    paths = _home(tmp_path)
    first = build_snapshot(paths).redactions
    assert first["email"] >= 1 and first["card"] >= 1

    assert build_snapshot(paths).redactions == {}
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        dump = json.dumps(con.execute("SELECT * FROM interactions").fetchall(), default=str)
    assert PLANTED["email"] not in dump and "[EMAIL]" in dump

    acme = paths.for_tenant("acme")
    lake = Lake(acme)
    interactions = declared("interactions", pl.read_parquet(acme.table("interactions")))
    lake.write("interactions", interactions)  # the same rows in a new file
    assert build_snapshot(paths).redactions == {}
    changed = interactions.with_columns(
        input=pl.when(pl.int_range(pl.len()) == 0)
        .then(pl.lit(f"mail {PLANTED['email']} please"))
        .otherwise("input")
    )
    lake.write("interactions", changed)
    assert build_snapshot(paths).redactions == {"email": 1}
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM interactions").fetchall() == [(8,)]
        dump = json.dumps(con.execute("SELECT * FROM interactions").fetchall(), default=str)
        digests = "SELECT count(*) FROM duckdb_columns() WHERE column_name = '_row_digest'"
        assert con.execute(digests).fetchall() == [(0,)]
    assert PLANTED["email"] not in dump and "mail [EMAIL] please" in dump

    for part in (paths.local / "analytics-parts").glob("*.duckdb"):
        with duckdb.connect(str(part)) as con:
            con.execute("UPDATE _part_redaction SET identity = 'another detector'")
    assert build_snapshot(paths).redactions == first


def test_a_name_found_tonight_leaves_the_rows_of_earlier_nights(tmp_path: Path) -> None:
    """The base redacts a row when it loads it; a name the tenant's pack found later is redacted
    in the snapshot's old rows too (texts and ids holding it), and in rows of no tenant."""
    from pipeline.pii.names import TenantNames
    from pipeline.pii.redactor import Redactor
    from pipeline.publish.snapshot_names import spread_in_snapshot

    home = Paths.from_env(tmp_path / "home")
    redactor = Redactor.for_home(home)
    redactor.save_names("acme", TenantNames(frozenset({"Jolene"})))
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE interactions AS SELECT * FROM (VALUES "
        "('acme', 'Jolene liked the bowl', 'jolene_h', 1), ('acme', 'no name here', 'c1', 2), "
        "('globex', 'Jolene is another tenant''s word', 'c2', 3), "
        "(NULL, 'raw line naming jolene', 'c3', 4)) t(tenant_id, input, contact_id, n)"
    )
    replaced = spread_in_snapshot(con, Redactor.for_home(home), ["acme", "globex"])
    rows = con.execute("SELECT input, contact_id FROM interactions ORDER BY n").fetchall()
    assert rows[0][0] == "[PERSON] liked the bowl" and rows[0][1].startswith("pii-")
    assert rows[1] == ("no name here", "c1")
    assert rows[2] == ("Jolene is another tenant's word", "c2")  # globex has no such name
    assert rows[3] == ("raw line naming [PERSON]", "c3")
    assert replaced == {"interactions": 3}
