"""End to end over several nights (SPEC §4.9): the generator plants helpful and harmful pack items;
the nights measure them, demote the harmful ones and leave the rest alone."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import dagster as dg
import polars as pl
import pytest

from jobs.runner import run_nightly
from memorypack import MemoryPack
from pipeline import usage
from pipeline.feedback.scores import compute_scores
from pipeline.generate import generate
from tests.tenant_runs import TENANT, tenant_lake

START = date(2026, 11, 1)
NIGHTS = 4  # receipts start on the second day: three nights of them
# A large holdout so one tenant's few hundred calls give informative uplift intervals.
RECEIPTS, HOLDOUT = 0.95, 0.25
MARGIN = 0.01  # how far below 0 a harmful item's interval ends at least, on the last night


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One nightly run over every date (the tables as the last night leaves them), and each
    earlier night's item verdicts: the stage's own functions over what was loaded by then (one
    nightly run per date costs minutes; the usage stage reads nothing else)."""
    home = tmp_path_factory.mktemp("home")
    landing = home / "landing"
    truth = generate(
        landing,
        days=NIGHTS,
        interactions=1200,
        tenants=1,
        seed=7,
        start=START,
        receipts=RECEIPTS,
        holdout=HOLDOUT,
    )
    end = (START + timedelta(days=NIGHTS - 1)).isoformat()
    with dg.instance_for_test() as instance:
        outcome = run_nightly(home, landing, START.isoformat(), end, fast=True, instance=instance)
    assert outcome.success
    lake = tenant_lake(home)
    read = {n: lake.read(n).collect() for n in ("interactions", "feedback", "memory_statements")}
    demoted = []
    for k in range(NIGHTS):
        by = pl.col("load_date") <= START + timedelta(days=k)
        seen = {n: frame.filter(by) for n, frame in read.items()}
        scores = compute_scores(seen["interactions"], seen["memory_statements"], seen["feedback"])
        known = usage.known_items(seen["interactions"].lazy(), seen["memory_statements"].lazy())
        items = usage.pack_usage(usage.calls(seen["interactions"], scores), known)
        demoted.append(set(usage.demoted(items)["item_id"]))
    return {
        "truth": truth["usage"]["tenants"][TENANT],
        "demoted": demoted,
        "usage": lake.read("pack_usage").collect(),
        "uplift": lake.read("pack_uplift").collect(),
        "few_shot": lake.read("few_shot_sets").collect(),
        "snapshot": lake.read("decay_snapshots")
        .filter(pl.col("as_of") == pl.col("as_of").max())
        .collect(),
        "pack": MemoryPack.load(home / "packs" / TENANT),
    }


def _first_night(demoted: list[set[str]], item: str) -> int | None:
    """The night (1 = the first) after which `item` is demoted, None when never."""
    return next((k + 1 for k, items in enumerate(demoted) if item in items), None)


def test_harmful_items_are_demoted_within_the_nights_the_data_allows(nights) -> None:
    truth, demoted = nights["truth"], nights["demoted"]
    harmful = sorted(i for i, p in truth["planted"].items() if p["shift"] < 0)
    when = {item: _first_night(demoted, item) for item in harmful}
    # Measured (seed 7, ~300 calls a night, receipts from night 2): the two harmful examples are
    # demoted after night 2 (their first night of receipts); the harmful memory, about the regular
    # contact (~30 % of the sessions, the memory in about half of their calls), after night 4. The
    # template version `<skill>@2` is used only in half of one skill's calls (~20 scored a night):
    # after three nights of receipts its effect is negative but its interval still reaches 0.
    memory = _harmful_memory(truth)
    planted = nights["usage"].filter(pl.col("item_id").is_in(harmful))
    assert {i: n for i, n in when.items() if "@" not in i} == {
        "i_00000010": 2,
        "i_00000011": 2,
        memory: 4,
    }, planted
    # Not on a knife edge: its interval ends clear of 0 (measured: see the margin below).
    upper = planted.filter(pl.col("item_id") == memory)["effect_upper"].drop_nulls()
    assert upper.max() < -MARGIN, planted
    (template,) = [i for i in harmful if "@" in i]
    effect = nights["usage"].filter(pl.col("item_id") == template).row(0, named=True)
    assert effect["effect"] < 0 < effect["effect_upper"] and when[template] is None
    assert demoted[0] == set()
    assert demoted[-1] == set(nights["usage"].filter(pl.col("verdict") == "harmful")["item_id"])
    few_shot = set(nights["few_shot"]["memory_id"])
    assert not few_shot & {i for i in harmful if truth["planted"][i]["kind"] == "interaction"}


def test_helpful_and_neutral_items_are_not_demoted(nights) -> None:
    truth, usage = nights["truth"], nights["usage"]
    helpful = {i for i, p in truth["planted"].items() if p["shift"] > 0}
    ever = set().union(*nights["demoted"])
    assert not ever & helpful
    neutral = usage.filter(pl.col("item_id").is_in(truth["neutral"]))
    # The interval's error rate: at most 1 in 20 neutral items × skills flagged either way.
    flagged = neutral.filter(pl.col("verdict") != "unclear").height
    assert flagged <= max(1, neutral.height // 20), neutral.filter(pl.col("verdict") != "unclear")


def test_planted_effects_are_estimated_with_their_sign(nights) -> None:
    truth, usage = nights["truth"], nights["usage"]
    pooled = (
        usage.group_by("item_id")
        .agg(((pl.col("effect") * pl.col("uses")).sum() / pl.col("uses").sum()).alias("effect"))
        .rows()
    )
    estimate = dict(pooled)
    for item, planted in truth["planted"].items():
        assert estimate[item] * planted["effect"] > 0, (item, estimate[item], planted)


def test_uplift_intervals_cover_the_true_uplift(nights) -> None:
    # The receipt names `<tenant>/<version>`; the lake keeps the version (SPEC §2 `context`).
    truth = pl.DataFrame(
        [
            {"pack_version": version.partition("/")[2], "skill_id": skill, "truth": value}
            for version, skills in nights["truth"]["uplift"].items()
            for skill, value in skills.items()
        ]
    )
    rows = nights["uplift"].filter(pl.col("uplift").is_not_null())
    rows = rows.join(truth, on=["pack_version", "skill_id"], how="left")
    assert rows["truth"].null_count() == 0
    true = pl.col("truth")
    covered = rows.filter((pl.col("uplift_lower") <= true) & (true <= pl.col("uplift_upper")))
    # 95 % intervals: of these rows a few may miss by chance (seeded, so always the same few).
    assert covered.height >= 0.9 * rows.height, rows


def _harmful_memory(truth: dict[str, Any]) -> str:
    (memory,) = [
        i for i, p in truth["planted"].items() if p["kind"] == "statement" and p["shift"] < 0
    ]
    return memory


def test_the_pack_cuts_a_harmful_memory_and_says_why(nights) -> None:
    """Issue 52 item 3: a regular contact comes back often enough (≥ 40 calls) that a harmful
    memory about them is measured. Its confidence in the pack is its snapshot's with the
    reputation of one correction more (it had no feedback: 1.0 → 1 + 0.2 · (2 · 2 / 5 − 1) =
    0.96); explain() and the analyst's pack_usage say why; the manifest carries the uplift."""
    pack, snapshot, truth = nights["pack"], nights["snapshot"], nights["truth"]
    memory = _harmful_memory(truth)
    assert truth["regular_contact_calls"] >= 40 and truth["planted"][memory]["uses"] >= 40
    before = snapshot.filter(pl.col("memory_id") == memory)["confidence"].item()
    assert pack.memory(memory)["confidence"] == pytest.approx(before * 0.96)
    why = pack.explain(memory)
    assert "confidence cut as if corrected: harmful: effect -" in why and "95 % interval" in why
    reasons = pl.from_arrow(pack.memories.select(["memory_id", "usage_reason"]))
    judged = nights["usage"].filter(pl.col("verdict") != "unclear")["item_id"]
    assert (
        reasons.filter(pl.col("usage_reason").is_not_null())["memory_id"]
        .is_in(judged.implode())
        .all()
    )
    uplift = pack.manifest["inputs"]["uplift"]
    assert {row["pack_version"] for row in uplift} <= set(nights["uplift"]["pack_version"])
    assert len(uplift) == nights["uplift"].height
