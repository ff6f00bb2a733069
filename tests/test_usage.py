"""Usage, item effects and uplift (issue 42 item 3, SPEC §4.9) on tiny frames with known answers."""

import math
from datetime import UTC, datetime

import polars as pl
import pytest

from pipeline import tables
from pipeline.publish.content import PackInputs
from pipeline.publish.memories import judged_in_use
from pipeline.usage import USAGE_CONFIG, UsageConfig, calls, demoted, pack_uplift, pack_usage

Z = USAGE_CONFIG.z
ROUND_3 = UsageConfig(joint=False)


def _interactions(rows: list[tuple]) -> pl.DataFrame:
    """rows: (event_id, skill, version or None, items, holdout)."""
    return pl.DataFrame(
        {
            "tenant_id": ["acme"] * len(rows),
            "event_id": [r[0] for r in rows],
            "skill_id": [r[1] for r in rows],
            "context_pack_version": [r[2] for r in rows],
            "context_items": [r[3] for r in rows],
            "context_holdout": [r[4] for r in rows],
        },
        schema_overrides={
            "context_items": pl.List(pl.String),
            "skill_id": pl.String,
            "context_pack_version": pl.String,
            "context_holdout": pl.Boolean,
        },
    )


def _scores(outcomes: dict[str, float]) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "memory_id": list(outcomes),
            "quality_score": list(outcomes.values()),
            "n_feedback": [1] * len(outcomes),
        }
    )


KNOWN = pl.DataFrame({"item_id": ["good", "x"], "item_kind": ["interaction", "statement"]})


def test_uplift_is_pack_calls_minus_holdout_with_welch_interval() -> None:
    rows = [(f"p{i}", "s", "v1", ["s@2"], False) for i in range(4)]
    rows += [("h0", "s", "v1", [], True), ("h1", "s", "v1", [], True)]
    rows += [("n0", "s", None, None, None)]  # no receipt: not counted anywhere
    outcomes = {"p0": 0.5, "p1": 0.5, "p2": 0.1, "p3": 0.1, "h0": 0.0, "h1": 0.2, "n0": 1.0}
    uplift = pack_uplift(calls(_interactions(rows), _scores(outcomes)))
    assert uplift.height == 1
    row = uplift.row(0, named=True)
    se = math.sqrt((0.16 / 3) / 4 + 0.02 / 2)
    assert (row["n_pack_calls"], row["n_holdout_calls"]) == (4, 2)
    assert row["pack_mean"] == pytest.approx(0.3) and row["holdout_mean"] == pytest.approx(0.1)
    assert row["uplift"] == pytest.approx(0.2)
    assert row["uplift_lower"] == pytest.approx(0.2 - Z * se)
    assert row["uplift_upper"] == pytest.approx(0.2 + Z * se)


def test_raw_effects_are_stratified_differences_and_give_the_prior() -> None:
    rows = [
        ("p1", "s", "v1", ["good", "x", "s@2"], False),
        ("p2", "s", "v1", ["good", "good"], False),  # an id twice in one prompt is one use
        ("p3", "s", "v1", ["x", "ghost"], False),
        ("h1", "s", "v1", ["x"], True),  # a holdout's items are ignored: it used nothing
        ("p4", "s", "v1", ["good"], False),  # no feedback: a use, not an outcome
    ]
    outcomes = {"p1": 0.5, "p2": 0.5, "p3": -0.1, "h1": -0.1}
    usage = pack_usage(calls(_interactions(rows), _scores(outcomes)), KNOWN)
    by_item = {r["item_id"]: r for r in usage.iter_rows(named=True)}
    assert set(by_item) == {"good", "x", "ghost", "s@2"}
    assert (by_item["s@2"]["item_kind"], by_item["x"]["item_kind"]) == ("template", "statement")
    good, x, ghost = by_item["good"], by_item["x"], by_item["ghost"]
    assert (good["uses"], good["n_outcomes"], good["mean_outcome"]) == (3, 2, 0.5)
    assert (x["uses"], ghost["uses"], ghost["item_kind"]) == (2, 1, "unknown")
    # Stratum variance 0.12; differences 0.6, 0.0, -0.4, 0.4 (s@2) with sampling variances
    # .12, .12, .16, .16: τ² = (0.36 + 0 + 0.16 + 0.16)/4 − (0.12 + 0.12 + 0.16 + 0.16)/4 = 0.03.
    assert good["raw_effect"] == pytest.approx(0.6) and ghost["raw_effect"] == pytest.approx(-0.4)
    assert good["tau2"] == pytest.approx(0.03)
    # Four calls, one pack version: the joint model leaves most to the prior.
    assert 0 < good["effect"] < 0.6 * 0.03 / 0.15 and good["verdict"] == "unclear"
    assert {r["verdict"] for r in by_item.values()} == {"unclear"}
    # The round-3 rule, the bench's baseline: the difference shrunk by τ²/(τ² + its variance).
    round3 = pack_usage(calls(_interactions(rows), _scores(outcomes)), KNOWN, ROUND_3)
    good = round3.filter(pl.col("item_id") == "good").row(0, named=True)
    assert good["effect"] == pytest.approx(0.6 * 0.03 / 0.15)
    half = Z * math.sqrt(0.03 / 0.15 * 0.12)
    assert good["effect_lower"] == pytest.approx(0.12 - half)


def _experiment(n_with: int, n_without: int, effect: float, item: str, skill: str) -> list:
    """Calls of one stratum: `n_with` use `item` (outcome 0.2 + effect ± 0.5), the rest not."""
    rows, outcomes = [], {}
    for i in range(n_with + n_without):
        uses = i < n_with
        event = f"{skill}-{item}-{i}"
        rows.append((event, skill, "v1", [item] if uses else [], False))
        outcomes[event] = 0.2 + (effect if uses else 0.0) + (0.5 if i % 2 else -0.5)
    return [rows, outcomes]


def test_few_uses_shrink_toward_zero_and_many_make_a_verdict() -> None:
    rows, outcomes = [], {}
    for n, item in ((2, "rare-bad"), (200, "bad"), (200, "good"), (200, "neutral")):
        effect = {"good": 0.3, "neutral": 0.0}.get(item, -0.3)
        more_rows, more = _experiment(n, 200, effect, item, skill=f"s-{item}")
        rows += more_rows
        outcomes |= more
    usage = pack_usage(calls(_interactions(rows), _scores(outcomes)), KNOWN)
    by_item = {r["item_id"]: r for r in usage.iter_rows(named=True)}
    assert by_item["bad"]["verdict"] == "harmful" and by_item["good"]["verdict"] == "helpful"
    assert by_item["bad"]["effect"] == pytest.approx(-0.3, abs=0.03)
    assert by_item["neutral"]["verdict"] == "unclear"
    rare = by_item["rare-bad"]
    assert rare["verdict"] == "unclear" and abs(rare["effect"]) < abs(rare["raw_effect"])
    width = {k: v["effect_upper"] - v["effect_lower"] for k, v in by_item.items()}
    assert width["rare-bad"] > 1.5 * width["bad"]


def test_without_receipts_the_tables_are_empty() -> None:
    receipts = calls(_interactions([("n0", "s", None, None, None)]), _scores({"n0": 1.0}))
    assert receipts.is_empty()
    assert pack_usage(receipts, KNOWN).is_empty() and pack_uplift(receipts).is_empty()


def test_confidently_harmful_items_are_demoted_with_their_reason() -> None:
    rows, outcomes = [], {}
    for n, item, effect in ((200, "bad", -0.3), (200, "good", 0.3), (2, "rare-bad", -0.3)):
        more_rows, more = _experiment(n, 200, effect, item, skill=f"s-{item}")
        rows += more_rows
        outcomes |= more
    usage = pack_usage(calls(_interactions(rows), _scores(outcomes)), KNOWN)
    out = demoted(usage)
    assert out["item_id"].to_list() == ["bad"]  # not the helpful one, not the one used twice
    bad = usage.filter(pl.col("item_id") == "bad").row(0, named=True)
    assert out["reason"][0] == (
        f"harmful: effect {round(bad['effect'], 2)}, 95 % interval "
        f"[{round(bad['effect_lower'], 2)}, {round(bad['effect_upper'], 2)}] over 200 uses in 1 skill"
    )
    assert demoted(usage.clear()).is_empty()


def _verdict(item: str, verdict: str, effect: float, lower: float, upper: float) -> dict:
    return {
        "tenant_id": "acme", "item_id": item, "item_kind": "statement", "skill_id": "s",
        "uses": 40, "n_outcomes": 40, "mean_outcome": 0.0, "positive_calls": 20,
        "pack_versions": 1, "n_compared": 40, "raw_effect": effect, "tau2": 0.01,
        "effect": effect, "effect_lower": lower, "effect_upper": upper, "verdict": verdict,
    }  # fmt: skip


def test_the_pack_cuts_harmful_memories_as_if_corrected_and_raises_helpful_ones() -> None:
    """A harmful memory's reputation is recomputed with one correction more; a helpful one gains
    the lower end of its interval, at most memory_boost and within its type's cap."""
    usage = pl.DataFrame(
        [
            _verdict("bad", "harmful", -0.2, -0.3, -0.1),
            _verdict("voted-bad", "harmful", -0.2, -0.3, -0.1),
            _verdict("good", "helpful", 0.2, 0.05, 0.35),
            _verdict("capped", "helpful", 0.4, 0.3, 0.5),
            _verdict("unsure", "unclear", 0.1, -0.1, 0.3),
        ],
        schema=tables.schema("pack_usage"),
    )
    scores = pl.DataFrame(
        {
            "tenant_id": "acme",
            "memory_id": ["voted-bad"],
            "positive_mass": [3.0],
            "negative_mass": [1.0],
        }
    )
    memories = pl.DataFrame(
        {
            "memory_id": ["bad", "voted-bad", "good", "capped", "unsure"],
            "memory_type": ["inferred_pattern"] * 4 + ["correction"],
            "confidence": [0.6, 0.6, 0.5, 0.65, 0.8],
            "n_feedback": [0, 4, 0, 0, 0],
            # voted-bad: 3 up, 1 down → quality 2 · 5 / 8 − 1 = 0.25
            "quality_score": [0.0, 0.25, 0.0, 0.0, 0.0],
        }
    )
    inputs = PackInputs(
        "acme",
        datetime(2026, 11, 3, tzinfo=UTC),
        {"pack_usage": usage.lazy(), "feedback_scores": scores.lazy()},
        [],
        None,
    )
    out = {r["memory_id"]: r for r in judged_in_use(memories, inputs).to_dicts()}
    assert out["bad"]["confidence"] == pytest.approx(0.6 * (1 + 0.2 * (2 * 2 / 5 - 1)))
    # 3 up and 2 down (the correction) through the Beta(2, 2) prior: 2 · 5 / 9 − 1
    corrected = (1 + 0.2 * (2 * 5 / 9 - 1)) / (1 + 0.2 * 0.25)
    assert out["voted-bad"]["confidence"] == pytest.approx(0.6 * corrected)
    assert out["good"]["confidence"] == pytest.approx(0.55)
    assert out["capped"]["confidence"] == pytest.approx(0.7)  # inferred_pattern's cap
    assert out["unsure"]["confidence"] == 0.8 and out["unsure"]["usage_reason"] is None
    assert out["bad"]["usage_reason"] == (
        "confidence cut as if corrected: harmful: effect -0.2, 95 % interval "
        "[-0.3, -0.1] over 40 uses in 1 skill"
    )
    assert out["good"]["usage_reason"].startswith("confidence +0.05: helpful: effect 0.2")
    nothing = judged_in_use(memories, PackInputs("acme", inputs.as_of, {}, [], None))
    assert nothing["confidence"].to_list() == memories["confidence"].to_list()
    assert nothing["usage_reason"].null_count() == memories.height
