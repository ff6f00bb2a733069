"""The analyst snapshot's redacted parts: made in the tenants' and ingest's runs, put together by a
build that analyses no text; a part not made keeps its previous rows, and the build says so."""

import hashlib
import json
from pathlib import Path

import duckdb
import polars as pl
import pytest

from pipeline.config import Paths
from pipeline.pii.detect import AnalysisPool
from pipeline.publish import analytics, snapshot_parts
from pipeline.publish.analytics import WAREHOUSE_TABLES, build_snapshot
from pipeline.publish.snapshot_parts import INGEST_PART, build_part, part_path
from pipeline.storage.lake import Lake
from tests.tenant_runs import declared
from tests.test_analytics import _home
from tests.test_pack_support import PLANTED

TENANTS = ("acme", "globex")


def _night_parts(paths: Paths) -> None:
    """What the night's runs make: ingest's part, then each tenant's."""
    for name in (INGEST_PART, *TENANTS):
        build_part(paths, name, WAREHOUSE_TABLES)


def _no_ner(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: AnalysisPool, texts: list[str], ner: bool = True) -> None:
        raise AssertionError(f"the build analysed {len(texts)} texts")

    monkeypatch.setattr(AnalysisPool, "analyse", refuse)


def _dump(paths: Paths) -> str:
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        names = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        return json.dumps(
            [con.execute(f'SELECT * FROM "{t}"').fetchall() for t in names], default=str
        )


def _acme_with_email(paths: Paths) -> None:
    """acme's interactions gain a row whose input holds an e-mail address."""
    acme = paths.for_tenant("acme")
    rows = pl.read_parquet(acme.table("interactions"))
    extra = rows.head(1).with_columns(
        event_id=pl.lit("a-new"), input=pl.lit(f"write to {PLANTED['email']} today")
    )
    Lake(acme).write("interactions", declared("interactions", pl.concat([rows, extra])))


def test_the_nightly_build_analyses_no_text_and_holds_no_pii(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _home(tmp_path)
    _night_parts(paths)
    _no_ner(monkeypatch)

    report = build_snapshot(paths, parts_made=True)

    assert report.texts_analysed == 0
    assert {p.name: p.state for p in report.parts} == dict.fromkeys(
        (INGEST_PART, *TENANTS), "current"
    )
    assert report.tables["interactions"] == 8 and report.tables["pack_versions"] == 2
    dump = _dump(paths)
    for value in PLANTED.values():
        assert value not in dump and value.replace(" ", "") not in dump, value
    assert "[EMAIL]" in dump


def test_a_part_not_made_keeps_its_rows_and_the_build_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """acme's run failed after its lake changed (its part is the previous night's: its new row is
    not in the snapshot, its old ones are); globex's part is gone and cannot be made here (its
    rows are absent). The build goes on, and its report and the snapshot's contents name both."""
    paths = _home(tmp_path)
    _night_parts(paths)
    _acme_with_email(paths)
    part_path(paths, "globex").unlink()
    _no_ner(monkeypatch)

    def disk_full(paths: Paths, name: str, *args: object) -> None:
        raise OSError(28, f"No space left on device: {name}")

    monkeypatch.setattr(analytics, "build_part", disk_full)

    report = build_snapshot(paths, parts_made=True)

    states = {p.name: (p.state, p.changed) for p in report.parts}
    assert states == {
        INGEST_PART: ("current", ()),
        "acme": ("stale", ("interactions",)),
        "globex": ("missing", ()),
    }
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        counts = con.execute(
            "SELECT tenant_id, count(*) FROM interactions GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        notes = dict(con.execute("SELECT name, kind FROM snapshot_contents").fetchall())
    assert counts == [("acme", 4)] and report.tables["interactions"] == 4
    assert notes["part acme"] == "stale part" and notes["part globex"] == "missing part"
    assert PLANTED["email"] not in _dump(paths)


def test_a_part_this_host_never_made_is_made_by_the_nightly_build(tmp_path: Path) -> None:
    """An upgrade, or a tenant whose runs ran on another host of an S3 home: the nightly build
    makes the part it does not have (its rows are in the snapshot, redacted) and analyses no
    text of the parts it has."""
    paths = _home(tmp_path)
    _night_parts(paths)
    part_path(paths, "globex").unlink()

    report = build_snapshot(paths, parts_made=True)

    assert {p.name: p.state for p in report.parts} == dict.fromkeys(
        (INGEST_PART, *TENANTS), "current"
    )
    assert report.tables["interactions"] == 8
    dump = _dump(paths)
    for value in PLANTED.values():
        assert value not in dump and value.replace(" ", "") not in dump, value


def test_a_run_whose_part_fails_leaves_its_previous_part_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A part is made on a copy and renamed over the old one: a redaction that raises leaves the
    previous part as it was and no copy behind, and another tenant's part is made as usual."""
    paths = _home(tmp_path)
    _night_parts(paths)
    _acme_with_email(paths)
    before = hashlib.sha256(part_path(paths, "acme").read_bytes()).hexdigest()
    real = snapshot_parts.redacting

    def failing(*args: object, **kwargs: object) -> object:
        def redact(rows: object) -> object:
            raise RuntimeError("the NER crashed")

        return redact

    monkeypatch.setattr(snapshot_parts, "redacting", failing)
    with pytest.raises(RuntimeError, match="the NER crashed"):
        build_part(paths, "acme", WAREHOUSE_TABLES)
    monkeypatch.setattr(snapshot_parts, "redacting", real)

    assert hashlib.sha256(part_path(paths, "acme").read_bytes()).hexdigest() == before
    assert sorted(p.name for p in part_path(paths, "acme").parent.iterdir()) == [
        f"{INGEST_PART}.duckdb",
        "acme.duckdb",
        "globex.duckdb",
    ]
    globex = build_part(paths, "globex", WAREHOUSE_TABLES)
    assert globex.texts_analysed == 0  # its rows were redacted last night: nothing new
    report = build_snapshot(paths, parts_made=True)
    assert {p.name: p.state for p in report.parts}["acme"] == "stale"

    made = build_part(paths, "acme", WAREHOUSE_TABLES)  # the next night: only the new row
    assert made.redactions == {"email": 1}
    assert build_snapshot(paths, parts_made=True).tables["interactions"] == 9


def test_a_killed_runs_part_copy_is_cleaned_by_its_own_lock_only(tmp_path: Path) -> None:
    """A run killed while making its part leaves its copy; whoever next holds that run's lock
    removes it, and no other tenant's lock touches it."""
    from pipeline.storage.homelock import clean_leftovers

    folder = tmp_path / "analytics-parts"
    folder.mkdir()
    copies = [folder / f".{name}.duckdb.0a1b.tmp" for name in ("acme", "acme2", INGEST_PART)]
    for copy in copies:
        copy.write_bytes(b"half a part")

    assert clean_leftovers(tmp_path, "acme") == [copies[0]]
    assert clean_leftovers(tmp_path, None) == [copies[2]]
    assert [p.exists() for p in copies] == [False, True, False]


def test_a_name_its_pack_found_tonight_leaves_the_tenants_older_rows(tmp_path: Path) -> None:
    """A row redacted into acme's part on an earlier night keeps a word no detector called a
    name; tonight acme's pack found it is one: acme's part spreads it into that row, and
    globex's rows keep the word (not its name)."""
    from pipeline.pii.names import TenantNames
    from pipeline.pii.redactor import Redactor

    paths = _home(tmp_path)
    for tenant in TENANTS:
        part = paths.for_tenant(tenant)
        rows = pl.read_parquet(part.table("interactions"))
        extra = rows.head(1).with_columns(
            event_id=pl.lit(f"{tenant}-zx"), input=pl.lit("a bowl for zorblax please")
        )
        Lake(part).write("interactions", declared("interactions", pl.concat([rows, extra])))
    _night_parts(paths)
    Redactor.for_home(paths).save_names("acme", TenantNames(frozenset({"Zorblax"})))

    made = build_part(paths, "acme", WAREHOUSE_TABLES)  # tonight's run of acme, after its pack
    build_snapshot(paths, parts_made=True)

    assert made.redactions == {"person": 1}
    with duckdb.connect(str(paths.analytics), read_only=True) as con:
        rows = con.execute(
            "SELECT tenant_id, input FROM interactions WHERE event_id LIKE '%-zx' ORDER BY 1"
        ).fetchall()
    assert rows == [("acme", "a bowl for [PERSON] please"), ("globex", "a bowl for zorblax please")]
