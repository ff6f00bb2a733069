"""The bookkeeping of a night's model-bound floor (bench/floor.py) and of its path (packs, the
analytics build, the trainings after them). Functional only: nothing here times anything."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest

from bench import floor
from bench.sections_scale import night_path
from tests.tenant_runs import declared, tenant_lake

VERSION = "20261102T000000000000Z-0a1b2c3d"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _packed(rows: list[tuple[str, str, str, bool]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=floor.PACKED, orient="row")


def test_a_tenant_needs_one_vector_per_distinct_text() -> None:
    """Pack texts alike after normalisation count once; a memory without an embedding needs
    none; one the pack leaves out (archived) needs its embedded text; tenants never share."""
    packed = _packed(
        [
            ("acme", "m1", "Prefers  [PERSON] mornings", True),
            ("acme", "m2", "prefers [person] mornings", True),  # the same text, normalised
            ("acme", "m3", "No vector for this one", False),
            ("globex", "m9", "prefers [person] mornings", True),  # another tenant's own
        ]
    )
    embedded = pl.DataFrame(
        {
            "tenant_id": ["acme", "acme", "acme"],
            "memory_id": ["m1", "m4", "m5"],  # m4, m5: archived, out of the pack
            "text_hash": ["h-original-m1", "h-archived", "h-archived"],
        }
    )
    texts = floor.memory_texts(packed, embedded)
    assert sorted(texts.rows()) == sorted(
        [
            ("acme", _sha("prefers [person] mornings")),
            ("acme", "h-archived"),
            ("globex", _sha("prefers [person] mornings")),
        ]
    )


def test_an_incremental_night_counts_only_what_the_night_before_did_not_hold() -> None:
    first = {
        "memory_texts": pl.DataFrame({"tenant_id": ["a", "a"], "text_hash": ["x", "y"]}),
        "analysed": pl.DataFrame({"cache": [".", "tenant_id=a"], "text_hash": ["x", "x"]}),
        "encoded": pl.DataFrame({"cache": ["tenant_id=a"] * 2, "text_hash": ["x", "y"]}),
    }
    second = {name: pl.concat([frame, frame.head(1)]) for name, frame in first.items()}
    second["memory_texts"] = pl.concat(
        [first["memory_texts"], pl.DataFrame({"tenant_id": ["a"], "text_hash": ["z"]})]
    )
    assert floor.night_counts(first, None) == {
        "texts_to_encode": 2,
        "texts_analysed": 2,  # one text analysed by the pack and by the analytics build
        "texts_encoded": 2,
    }
    assert floor.night_counts(second, first) == {
        "texts_to_encode": 1,
        "texts_analysed": 0,
        "texts_encoded": 0,
    }


def test_the_floor_adds_the_parse_and_each_model_at_its_machine_wide_cost() -> None:
    costs = floor.Costs(
        encode_s=0.004, analyse_s=0.001, cores=2, encoded_sample=10, analysed_sample=10
    )
    counts = {"texts_to_encode": 1_000, "texts_analysed": 3_000, "texts_encoded": 1_500}
    found = floor.floor_of(counts, costs, parse_s=1.5)
    assert (found.encode_s, found.analyse_s, found.seconds) == pytest.approx((4.0, 3.0, 8.5))
    (figure,) = floor.night_floor_figures(
        {
            "incremental": {
                "seconds": 17.0,
                "floor_counts": counts,
                "floor_costs": vars(costs),
                "parse_s": 1.5,
            }
        }
    )
    assert figure.name == "incremental night ÷ its model-bound floor"
    assert (figure.value, figure.baseline_value, figure.goal_met) == (2.0, 8.5, False)
    assert figure.details["counts"]["texts_encoded"] == 1_500


def _part(folder: Path, hashes: list[str], name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"text_hash": hashes}).write_parquet(folder / f"part-{name}.parquet")


def test_a_homes_snapshot_reads_its_packs_lake_and_caches(tmp_path: Path) -> None:
    from memorypack.format import LATEST
    from pipeline.pii.rules import detector_version

    pack = tmp_path / "packs" / "acme" / VERSION
    pack.mkdir(parents=True)
    _packed([("acme", "m1", "Hello", True), ("acme", "m2", "hello", True)]).drop(
        "tenant_id"
    ).write_parquet(pack / "memories.parquet")
    (pack.parent / LATEST).write_text(VERSION)
    (tmp_path / "packs" / "globex").mkdir()  # a tenant whose first pack is not published yet
    rows = pl.DataFrame({"tenant_id": ["acme"] * 2, "memory_id": ["m1", "m3"]})
    tenant_lake(tmp_path).write(
        "memory_embeddings", declared("memory_embeddings", rows.with_columns(text_hash=pl.lit("h")))
    )
    key = detector_version()
    pii = tmp_path / "lake" / "pii_cache"
    _part(pii / key, ["t1", "t2"], "home")
    _part(pii / "tenant_id=acme" / key, ["t1"], "acme")
    _part(pii / f"{key}+guard+identifiers2", ["id1"], "ids")  # identifiers: not texts
    _part(tmp_path / "lake" / "embedding_cache" / "tenant_id=acme" / "model-x", ["e1"], "a")
    snap = floor.snapshot(tmp_path)
    assert sorted(snap["memory_texts"].rows()) == [("acme", _sha("hello")), ("acme", "h")]
    assert sorted(snap["analysed"].rows()) == [
        (".", "t1"),
        (".", "t2"),
        ("tenant_id=acme", "t1"),
    ]
    assert snap["encoded"].rows() == [("tenant_id=acme", "e1")]


def test_the_night_path_ends_with_the_analytics_build_and_trainings_follow_it() -> None:
    night = {
        "runs": {
            "ingest": {"start": 100.0, "end": 110.0},
            "tenants": {"a": {"start": 111.0, "end": 150.0}, "b": {"start": 111.0, "end": 170.0}},
            "analytics": {"start": 171.0, "end": 200.0},
            "trainings": {"a": {"start": 151.0, "end": 260.0}},
        },
    }
    assert night_path(night) == {
        "packs_done_s": 70.0,
        "packs_and_build_s": 100.0,
        "trainings": 1,
        "trainings_summed_s": 109.0,
        "trainings_done_s": 160.0,
    }
