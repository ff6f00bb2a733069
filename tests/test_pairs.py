"""Preference pair mining: each source on planted data, dedup, split grouping, OASST ranks."""

import json
from datetime import date
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from pipeline.ingest import contracts
from pipeline.preference.pairs import (
    PAIR_SCHEMA,
    PROMPT_KEYS,
    SCORE_SCHEMA,
    PairConfig,
    PairTexts,
    assign_split,
    correction_pairs,
    finalize_pairs,
    format_problems,
    mine_pairs,
    ranked_pairs,
    regenerate_pairs,
    same_prompt_pairs,
    split_leakage,
)
from pipeline.preference.pairs.neighbors import edge_schema

OASST = Path(__file__).resolve().parents[2] / "shared" / "data" / "oasst" / "en_100_tree.jsonl"


def interactions(rows: list[dict[str, Any]]) -> pl.DataFrame:
    base = {c: None for c in contracts.INTERACTION_COLUMNS}
    full = [{**base, "tenant_id": "acme", "skill_id": "concise_response", **r} for r in rows]
    return pl.DataFrame(full, schema=contracts.INTERACTION_SCHEMA)


def feedback(rows: list[dict[str, Any]]) -> pl.DataFrame:
    base = {c: None for c in contracts.FEEDBACK_COLUMNS}
    return pl.DataFrame(
        [{**base, "tenant_id": "acme", **r} for r in rows], schema=contracts.FEEDBACK_SCHEMA
    )


def scores(rows: list[tuple[str, float, float, int, int]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "tenant_id": "acme",
                "memory_id": m,
                "n_feedback": p + n,
                "quality_score": q,
                "quality_lower": lo,
                "n_positive": p,
                "n_negative": n,
            }
            for m, q, lo, p, n in rows
        ],
        schema=SCORE_SCHEMA,
    )


def with_texts(
    refs: pl.DataFrame, inter: pl.DataFrame, fb: pl.DataFrame | None = None
) -> pl.DataFrame:
    """A source's pairs with the texts their events hold."""
    return PairTexts.of(inter, fb).attach(refs)


def test_correction_pairs_prefer_the_corrected_output() -> None:
    inter = interactions(
        [{"event_id": "i1", "input": "Where is my order?", "output": "Long rambling text."}]
    )
    fb = feedback(
        [
            {
                "event_id": "f1",
                "target_id": "i1",
                "signal": "correction",
                "corrected_output": "It ships today.",
            },
            {"event_id": "f2", "target_id": "i1", "signal": "thumbs_down"},
            {"event_id": "f3", "target_id": "i1", "signal": "correction", "corrected_output": None},
        ]
    )
    pairs = with_texts(correction_pairs(inter, fb), inter, fb)
    assert pairs.select(
        "prompt", "chosen", "rejected", "source", "chosen_id", "rejected_id"
    ).rows() == [
        ("Where is my order?", "It ships today.", "Long rambling text.", "correction", "f1", "i1")
    ]
    assert pairs["margin"].to_list() == [1.0]


def test_regenerate_pairs_need_a_positive_regeneration() -> None:
    inter = interactions(
        [
            {"event_id": "a", "input": "Q1", "output": "bad answer"},
            {"event_id": "b", "input": "Q1", "output": "good answer", "parent_event_id": "a"},
            {"event_id": "c", "input": "Q2", "output": "meh"},
            {"event_id": "d", "input": "Q2", "output": "also meh", "parent_event_id": "c"},
            {"event_id": "e", "input": "Q3", "output": "orphan", "parent_event_id": "missing"},
        ]
    )
    sc = scores(
        [
            ("a", -0.4, -0.8, 0, 2),
            ("b", 0.5, 0.1, 3, 0),
            ("c", 0.0, 0.0, 0, 0),
            ("d", -0.2, -0.6, 0, 1),
        ]
    )
    pairs = with_texts(regenerate_pairs(inter, sc), inter)
    assert pairs.select("prompt", "chosen", "rejected", "chosen_id", "rejected_id").rows() == [
        ("Q1", "good answer", "bad answer", "b", "a")
    ]
    assert pairs["margin"].to_list() == [pytest.approx(0.9)]


def test_ranked_siblings_lower_rank_wins() -> None:
    meta = lambda rank, parent: json.dumps({"rank": rank, "parent_id": parent})  # noqa: E731
    inter = interactions(
        [
            {"event_id": "r0", "input": "P", "output": "best", "metadata": meta(0, "p1")},
            {"event_id": "r1", "input": "P", "output": "middle", "metadata": meta(1, "p1")},
            {"event_id": "r2", "input": "P", "output": "worst", "metadata": meta(2, "p1")},
            {"event_id": "lone", "input": "X", "output": "alone", "metadata": meta(0, "p2")},
            {
                "event_id": "norank",
                "input": "X",
                "output": "unranked",
                "metadata": json.dumps({"parent_id": "p2"}),
            },
        ]
    )
    pairs = with_texts(ranked_pairs(inter), inter).sort("chosen_id", "rejected_id")
    assert pairs.select("chosen", "rejected").rows() == [
        ("best", "middle"),
        ("best", "worst"),
        ("middle", "worst"),
    ]
    assert pairs["margin"].to_list() == [0.5, 1.0, 0.5]


def _prompt_hashes(rows: dict[str, str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"tenant_id": "acme", "memory_id": list(rows), "text_hash": list(rows.values())}
    )


def _edges(rows: list[tuple[str, str, str, float]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "tenant_id": "acme",
                "skill_id": s,
                "text_hash_a": a,
                "text_hash_b": b,
                "similarity": x,
            }
            for s, a, b, x in rows
        ],
        schema=edge_schema(PROMPT_KEYS),
    )


def test_same_prompt_pairs_use_near_identical_prompts_and_quality_gap() -> None:
    inter = interactions(
        [
            {
                "event_id": "a",
                "input": "How do I reset my password?",
                "output": "Click reset, check mail.",
            },
            {
                "event_id": "b",
                "input": "How do I reset my password ?",
                "output": "Passwords are complicated...",
            },
            {
                "event_id": "c",
                "input": "How do I reset my password?",
                "output": "Similar quality answer.",
            },
            {"event_id": "d", "input": "Totally different question", "output": "Other."},
            {
                "event_id": "e",
                "input": "How do I reset my password?",
                "output": "Same prompt, other skill.",
                "skill_id": "casual_chat",
            },
        ]
    )
    sc = scores(
        [
            ("a", 0.8, 0.6, 5, 0),
            ("b", -0.5, -0.7, 0, 4),
            ("c", 0.7, 0.55, 4, 0),
            ("d", -0.9, -0.9, 0, 5),
            ("e", -0.9, -0.9, 0, 5),
        ]
    )
    hashes = _prompt_hashes({"a": "h1", "b": "h2", "c": "h1", "d": "h3", "e": "h1"})
    edges = _edges(
        [
            ("concise_response", "h1", "h2", 0.97),  # near-identical
            ("concise_response", "h1", "h3", 0.85),  # below the threshold
        ]
    )
    pairs = with_texts(same_prompt_pairs(inter, sc, hashes, edges), inter)
    pairs = pairs.sort("chosen_id", "rejected_id")
    # a≻b and c≻b (gap ≥ 0.2); a vs c too close; d is far; e is another skill.
    assert pairs.select("chosen_id", "rejected_id").rows() == [("a", "b"), ("c", "b")]
    assert pairs["margin"].to_list() == [pytest.approx(1.3), pytest.approx(1.25)]
    assert set(pairs["source"]) == {"same_prompt"}
    assert pairs.select("prompt", "chosen", "rejected").rows() == [
        ("How do I reset my password?", "Click reset, check mail.", "Passwords are complicated..."),
        ("How do I reset my password?", "Similar quality answer.", "Passwords are complicated..."),
    ]


def test_a_popular_prompt_pairs_each_interaction_with_its_clearest_gaps() -> None:
    n = 40  # one prompt asked 40 times, quality rising with the index
    ids = [f"x{i:02d}" for i in range(n)]
    inter = interactions([{"event_id": i, "input": "Q", "output": f"answer {i}"} for i in ids])
    sc = scores([(i, 0.0, k / n, 1, 0) for k, i in enumerate(ids)])
    hashes = _prompt_hashes(dict.fromkeys(ids, "h"))
    config = PairConfig(max_neighbors=3, min_quality_gap=0.2)
    pairs = same_prompt_pairs(inter, sc, hashes, _edges([]), config)
    # Each interaction keeps the 3 partners farthest from it in quality (all ≥ 0.2 apart), so the
    # worst is paired with the 3 best, the best with the 3 worst, none with a close neighbour.
    assert pairs.filter(pl.col("rejected_id") == "x00")["chosen_id"].sort().to_list()[-3:] == [
        "x37",
        "x38",
        "x39",
    ]
    assert pairs.filter(pl.col("chosen_id") == "x39")["rejected_id"].sort().to_list()[:3] == [
        "x00",
        "x01",
        "x02",
    ]
    assert pairs["margin"].min() >= 0.2
    assert pairs.height <= n * 3  # at most max_neighbors per interaction, never n²


def _mined(
    prompt: str, chosen: str, rejected: str, source: str = "correction", margin: float = 1.0
) -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "prompt": prompt,
        "chosen": chosen,
        "rejected": rejected,
        "source": source,
        "margin": margin,
        "skill_id": "s",
        "chosen_id": "c",
        "rejected_id": "r",
    }


def test_finalize_drops_equal_sides_and_deduplicates_by_priority() -> None:
    mined = pl.DataFrame(
        [
            _mined("Q", "same", "same"),
            _mined("Q", "  same ", "same"),
            _mined("Q", "good", "bad", source="same_prompt", margin=0.3),
            _mined("Q", "good", "bad", source="correction", margin=1.0),
            _mined("", "good", "bad"),
            _mined("Q2", "good", "bad", source="ranked", margin=0.5),
        ]
    )
    pairs = finalize_pairs(mined)
    assert pairs.schema == pl.Schema(PAIR_SCHEMA)
    assert sorted(pairs.select("prompt", "source").rows()) == [
        ("Q", "correction"),
        ("Q2", "ranked"),
    ]
    assert pairs["pair_id"].n_unique() == 2
    assert format_problems(pairs) == {k: 0 for k in format_problems(pairs)}
    # Stable ids: the same content → the same pair_id on every run.
    assert finalize_pairs(mined)["pair_id"].sort().to_list() == pairs["pair_id"].sort().to_list()


def test_split_is_grouped_by_prompt_deterministic_and_never_leaks() -> None:
    rows = [_mined(f"Question number {i % 300}", f"good {i}", f"bad {i}") for i in range(3000)]
    # Normalization: case and whitespace variants of a prompt share its split.
    rows += [_mined(f"  QUESTION   number {i}", f"good x{i}", f"bad x{i}") for i in range(300)]
    pairs = finalize_pairs(pl.DataFrame(rows), PairConfig(eval_fraction=0.25))
    assert split_leakage(pairs) == []
    share = (pairs["split"] == "eval").mean()
    assert 0.15 < share < 0.35  # type: ignore[operator]
    again = assign_split(pairs.drop("split"), PairConfig(eval_fraction=0.25))
    assert again["split"].to_list() == pairs["split"].to_list()
    other = assign_split(pairs.drop("split"), PairConfig(eval_fraction=0.25, split_salt="other"))
    assert split_leakage(other) == [] and other["split"].to_list() != pairs["split"].to_list()


def test_mine_pairs_combines_sources() -> None:
    inter = interactions(
        [
            {"event_id": "i1", "input": "Where is my order?", "output": "Rambling."},
            {
                "event_id": "i2",
                "input": "Where is my order?",
                "output": "Tomorrow.",
                "parent_event_id": "i1",
            },
        ]
    )
    fb = feedback(
        [
            {
                "event_id": "f1",
                "target_id": "i1",
                "signal": "correction",
                "corrected_output": " Tomorrow.\n",
            }
        ]
    )
    sc = scores([("i1", -0.5, -0.8, 0, 2), ("i2", 0.5, 0.2, 2, 0)])
    pairs = mine_pairs(inter, fb, sc)
    # Both sources say Tomorrow ≻ Rambling for the same prompt (once stripped): one pair, the
    # correction kept.
    assert pairs.select("chosen", "rejected", "source").rows() == [
        ("Tomorrow.", "Rambling.", "correction")
    ]


def test_a_pair_is_dated_by_the_newer_of_its_two_events() -> None:
    inter = interactions(
        [
            {"event_id": "i1", "input": "Q1", "output": "Bad.", "load_date": date(2026, 11, 1)},
            {"event_id": "i2", "input": "Q2", "output": "Meh.", "load_date": date(2026, 11, 2)},
            {
                "event_id": "i3",
                "input": "Q2",
                "output": "Good.",
                "parent_event_id": "i2",
                "load_date": date(2026, 11, 4),
            },
        ]
    )
    fb = feedback(
        [
            {
                "event_id": "f1",
                "target_id": "i1",
                "signal": "correction",
                "corrected_output": "Fixed.",
                "load_date": date(2026, 11, 3),
            }
        ]
    )
    sc = scores([("i2", -0.2, -0.6, 0, 1), ("i3", 0.5, 0.2, 2, 0)])
    pairs = mine_pairs(inter, fb, sc).sort("source")
    # The correction came two days after its interaction; the regeneration two after its parent.
    assert pairs.select("source", "load_date").rows() == [
        ("correction", date(2026, 11, 3)),
        ("regenerate", date(2026, 11, 4)),
    ]
    assert pairs.schema["load_date"] == pl.Date


@pytest.mark.skipif(not OASST.exists(), reason="OASST sample not available")
def test_mining_by_reference_equals_finalizing_the_texts() -> None:
    """`mine_pairs` attaches texts to the kept pairs only, a chunk of ids at a time: the table is
    the one `finalize_pairs` makes of every mined pair with its texts, whatever the chunk."""
    inter = oasst_interactions(OASST)
    targets = inter["event_id"].head(60).to_list()
    fb = feedback(
        [
            {
                "tenant_id": "oasst",
                "event_id": f"fix{i}",
                "target_id": t,
                "signal": "correction",
                "corrected_output": a,
            }
            for i, (t, a) in enumerate(
                zip(targets, ["  Shorter.", "", "Shorter."] * 20, strict=True)
            )
        ]
    )
    mined = pl.concat([correction_pairs(inter, fb), ranked_pairs(inter)])
    expected = finalize_pairs(with_texts(mined, inter, fb))
    assert expected.height > 100 and set(expected["source"]) == {"correction", "ranked"}
    for chunk in (1, 97, 200_000):
        assert mine_pairs(inter, fb, scores([]), chunk=chunk).equals(expected)


def oasst_interactions(path: Path, tenant: str = "oasst") -> pl.DataFrame:
    """Assistant replies of the OASST trees as interactions (what `import_oasst` produces for ranks):
    input = the parent prompt, metadata = {rank, parent_id, message_id}."""
    rows: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        for reply in node.get("replies", []):
            if reply.get("role") == "assistant":
                meta = {"parent_id": reply["parent_id"], "message_id": reply["message_id"]}
                if reply.get("rank") is not None:
                    meta["rank"] = reply["rank"]
                rows.append(
                    {
                        "tenant_id": tenant,
                        "event_id": reply["message_id"],
                        "input": node["text"],
                        "output": reply["text"],
                        "metadata": json.dumps(meta),
                        "skill_id": None,
                    }
                )
            walk(reply)

    with path.open() as handle:
        for line in handle:
            walk(json.loads(line)["prompt"])
    return interactions(rows)


@pytest.mark.skipif(not OASST.exists(), reason="OASST sample not available")
def test_oasst_ranked_pairs_agree_with_human_ranks() -> None:
    inter = oasst_interactions(OASST)
    pairs = mine_pairs(inter, feedback([]), scores([]))
    ranks = {
        r["event_id"]: json.loads(r["metadata"]).get("rank")
        for r in inter.select("event_id", "metadata").iter_rows(named=True)
    }
    parents = {
        r["event_id"]: json.loads(r["metadata"])["parent_id"] for r in inter.iter_rows(named=True)
    }
    assert pairs.height > 100
    assert set(pairs["source"]) == {"ranked"}
    agree = [
        ranks[c] < ranks[r] and parents[c] == parents[r]
        for c, r in pairs.select("chosen_id", "rejected_id").rows()
    ]
    assert all(agree)
    assert split_leakage(pairs) == []
    # Every ranked sibling pair with distinct texts is present.
    ranked = inter.filter(pl.col("metadata").str.contains('"rank"'))
    groups = (
        ranked.with_columns(pl.col("metadata").str.json_path_match("$.parent_id").alias("p"))
        .group_by("p")
        .len()
    )
    expected = int(sum(n * (n - 1) // 2 for n in groups["len"].to_list()))
    assert pairs.height == expected
