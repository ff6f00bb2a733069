"""Confidence that means what it says (issue 16): overruled memories, floors, few-shot quality and
ranks, misses, and skills for a user with no history (the tenant's statistics as the prior)."""

from datetime import UTC, date, datetime
from pathlib import Path

import polars as pl
import pytest

from memorypack import MemoryPack
from pipeline.publish.build import build_pack, load_inputs
from pipeline.publish.writer import publish
from pipeline.storage.lake import Lake
from tests.tenant_runs import declared
from tests.test_pack_support import AS_OF, RUN_DATE, make_lake, tenant_frames

TS = pl.Datetime("us", "UTC")
# Per user × skill: n_positive, n_negative, ema_confidence. alpha_tone is used the most and liked
# the least; zeta_tone, alphabetically last, is the tenant's best.
SKILL_VOTES = {
    ("u1", "alpha_tone"): (2, 8, 0.25),
    ("u1", "zeta_tone"): (9, 1, 0.85),
    ("u2", "alpha_tone"): (1, 4, 0.3),
    ("u2", "zeta_tone"): (6, 0, 0.8),
    ("u3", "alpha_tone"): (5, 0, 0.9),  # likes alpha, on 5 votes
    ("u4", "alpha_tone"): (30, 0, 0.99),  # likes alpha, on 30 votes
}


def _lake(home: Path) -> Path:
    paths = make_lake(home, tenants=("acme",)).for_tenant("acme")
    lake, frames = Lake(paths), tenant_frames("acme")
    statements = frames["memory_statements"]
    # "Never book United", superseded by a later instruction; both stay in the lake.
    superseding = pl.DataFrame(
        {
            "tenant_id": ["acme"] * 2,
            "event_id": ["a-m3", "a-m4"],
            "ts": [datetime(2026, 11, 2, tzinfo=UTC), datetime(2026, 11, 5, tzinfo=UTC)],
            "load_date": [date(2026, 11, 2), date(2026, 11, 5)],
            "contact_id": ["c1", "c1"],
            "memory_type": ["explicit_instruction"] * 2,
            "content": ["Never book United", "Book United again, the lounge is back"],
            "category": ["travel"] * 2,
            "tags": [["travel"], ["travel"]],
        },
        schema_overrides={"ts": TS},
    )
    lake.write(
        "memory_statements",
        declared("memory_statements", pl.concat([statements, superseding], how="diagonal_relaxed")),
    )
    decay = pl.read_parquet(paths.partition("decay_snapshots", RUN_DATE))
    extra = decay.filter(pl.col("memory_id") == "a-m0").with_columns(
        memory_id=pl.Series(["a-m3"]), last_confirmed=pl.lit(datetime(2026, 11, 2, tzinfo=UTC))
    )
    newer = extra.with_columns(
        memory_id=pl.lit("a-m4"),
        confidence=pl.lit(0.9),
        last_confirmed=pl.lit(datetime(2026, 11, 5, tzinfo=UTC)),
    )
    lake.write_partition(
        "decay_snapshots", RUN_DATE, declared("decay_snapshots", pl.concat([decay, extra, newer]))
    )
    conflicts = frames["memory_conflicts"]
    link = conflicts.with_columns(
        memory_id_a=pl.lit("a-m3"),
        memory_id_b=pl.lit("a-m4"),
        preferred_id=pl.lit("a-m4"),
        reason=pl.lit("supersedes"),
        subject=pl.lit("book united"),
    )
    lake.write("memory_conflicts", declared("memory_conflicts", pl.concat([conflicts, link])))
    # a-i1: one up-vote. Its smoothed score is +0.2; its 95 % lower bound −0.54.
    scores = frames["feedback_scores"].with_columns(
        [
            pl.when(pl.col("memory_id") == "a-i1").then(pl.lit(v)).otherwise(pl.col(c)).alias(c)
            for c, v in {
                "n_feedback": 1,
                "n_positive": 1,
                "n_negative": 0,
                "quality_score": 0.2,
                "quality_lower": -0.54,
            }.items()
        ]
    )
    lake.write("feedback_scores", declared("feedback_scores", scores))
    few_shot = frames["few_shot_sets"]
    second = few_shot.filter(pl.col("memory_id") == "a-i0").with_columns(
        memory_id=pl.lit("a-i1"),
        rank=pl.lit(2, pl.Int64),
        quality_lower=pl.lit(-0.54),
        n_feedback=pl.lit(1, pl.Int64),
        output=pl.lit("Yes, from your account page."),
    )
    lake.write("few_shot_sets", declared("few_shot_sets", pl.concat([few_shot, second])))
    lake.write(
        "skill_stats",
        declared(
            "skill_stats",
            pl.DataFrame(
                {
                    "tenant_id": ["acme"] * len(SKILL_VOTES),
                    "user_id": [user for user, _ in SKILL_VOTES],
                    "skill_id": [skill for _, skill in SKILL_VOTES],
                    "usage": [p + n + 3 for p, n, _ in SKILL_VOTES.values()],
                    "n_positive": [p for p, _, _ in SKILL_VOTES.values()],
                    "n_negative": [n for _, n, _ in SKILL_VOTES.values()],
                    "positive_share": [p / (p + n) for p, n, _ in SKILL_VOTES.values()],
                    "ema_confidence": [e for _, _, e in SKILL_VOTES.values()],
                    "mean_reward": [0.0] * len(SKILL_VOTES),
                    "last_used_at": [AS_OF] * len(SKILL_VOTES),
                },
                schema_overrides={"last_used_at": TS},
            ),
        ),
    )
    publish(paths.packs, build_pack(load_inputs(lake, "acme", AS_OF)))
    return paths.packs / "acme"


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> MemoryPack:
    return MemoryPack.load(_lake(tmp_path_factory.mktemp("home")))


def _ids(memories: list) -> list[str]:
    return [m.memory_id for m in memories]


def test_overruled_memories_are_left_out_unless_asked_for(pack: MemoryPack) -> None:
    default = pack.memories_for("c1", k=10)
    assert set(_ids(default)) == {"a-m0", "a-m4", "a-i0", "a-i1", "a-i3"}
    assert all(m.overruled_by is None for m in default)
    every = {m.memory_id: m for m in pack.memories_for("c1", k=10, include_superseded=True)}
    assert set(every) == set(_ids(default)) | {"a-m1", "a-m3"}
    superseded, not_preferred = every["a-m3"], every["a-m1"]
    # "Never book United" stays at confidence 1.0 (its own), but that counts for nothing now.
    assert superseded.confidence == 1.0 and superseded.overruled_by == "a-m4"
    assert superseded.parts["superseded"] == -superseded.parts["semantic"] == -1.0
    assert "not_preferred" not in superseded.parts
    assert not_preferred.overruled_by == "a-m0"
    assert not_preferred.parts["not_preferred"] == pytest.approx(-0.58)
    for m in every.values():
        assert m.score == pytest.approx(sum(v for k, v in m.parts.items() if k != "confidence"))
    assert every["a-m4"].score > superseded.score
    assert "superseded: the pack prefers a-m4" in (pack.explain("a-m3") or "")


def test_floors_on_memories(pack: MemoryPack) -> None:
    every = pack.memories_for("c1", k=10)
    confident = pack.memories_for("c1", k=10, min_confidence=0.6)
    assert _ids(confident) == [m.memory_id for m in every if m.confidence >= 0.6]
    assert set(_ids(confident)) == {"a-m0", "a-m4", "a-i3"}
    floor = (every[1].score + every[2].score) / 2
    assert _ids(pack.memories_for("c1", k=10, min_score=floor)) == _ids(every[:2])
    assert pack.memories_for("c1", min_score=99.0) == []


def test_few_shot_quality_and_ranks(pack: MemoryPack) -> None:
    examples = pack.few_shot("support", k=5)
    # The best of each (system, kind, skill) set first, then the second of each; rank = position.
    assert _ids(examples) == ["a-i2", "a-i0", "a-i1"]
    assert [e.rank for e in examples] == [1, 2, 3]
    assert [e.group_rank for e in examples] == [1, 1, 2]
    corrected, liked, one_vote = examples
    assert (corrected.is_corrected, corrected.quality, corrected.quality_lower) == (True, 1.0, 1.0)
    assert (liked.quality, liked.quality_lower, liked.n_feedback) == (0.6, 0.3, 3)
    # One up-vote: a positive score beside a negative lower bound.
    assert (one_vote.quality, one_vote.quality_lower, one_vote.n_feedback) == (0.2, -0.54, 1)
    assert [e.confidence for e in examples] == [0.8, 0.55, 0.5]
    within = pack.few_shot("support", skill_id="concise_response")
    assert _ids(within) == ["a-i0", "a-i1"] and [e.rank for e in within] == [1, 2]
    assert _ids(pack.few_shot("support", k=5, min_score=0.5)) == ["a-i2", "a-i0"]
    assert _ids(pack.few_shot("support", k=5, min_confidence=0.52)) == ["a-i2", "a-i0"]
    floored = pack.few_shot("support", k=1, min_score=0.5, min_confidence=0.6)
    assert _ids(floored) == ["a-i2"] and floored[0].rank == 1


def test_misses_answer_empty_everywhere(pack: MemoryPack) -> None:
    assert pack.few_shot("no-such-system") == []
    assert pack.few_shot("support", skill_id="no-such-skill") == []
    assert pack.template("no-such-skill") is None
    assert pack.template_history("no-such-skill") == []
    assert pack.conflicts("no-such-contact") == []
    assert pack.memory("no-such-memory") is None
    assert pack.explain("no-such-memory") is None
    assert pack.select_skill("anyone", min_confidence=1.01) is None
    # An unknown contact is not a miss: the general memories apply to everybody.
    assert _ids(pack.memories_for("no-such-contact")) == ["a-i3"]


def _tenant(skill: str) -> float:
    votes = [(p, n) for (_, s), (p, n, _) in SKILL_VOTES.items() if s == skill]
    positive, total = sum(p for p, _ in votes), sum(p + n for p, n in votes)
    return (positive + 1) / (total + 2)


def test_a_new_user_gets_the_tenants_best_skill(pack: MemoryPack) -> None:
    choice = pack.select_skill("newcomer")
    assert choice is not None
    assert choice.skill_id == "zeta_tone"  # not alpha_tone, the alphabetical first
    assert choice.confidence == choice.tenant_confidence == pytest.approx(_tenant("zeta_tone"))
    assert (choice.user_votes, choice.alignment) == (0, 0.0)
    ranked = [skill for skill, _ in choice.ranking]
    assert ranked[:2] == ["zeta_tone", "alpha_tone"]
    # Skills without votes (templates, vectors only) sit at the coin flip, alphabetically.
    assert ranked[2:] == ["concise_response", "detailed_explanation", "empathy_direct"]
    assert dict(choice.ranking)["concise_response"] == pytest.approx(0.7 * 0.5)
    assert pack.select_skill("newcomer", min_score=0.6).skill_id == "zeta_tone"
    assert pack.select_skill("newcomer", min_score=0.7) is None


def test_a_users_own_votes_take_over_as_they_arrive(pack: MemoryPack) -> None:
    alpha = _tenant("alpha_tone")
    few = pack.select_skill("u3")  # 5 votes for alpha: not yet enough against the tenant's view
    assert few.skill_id == "zeta_tone"
    assert dict(few.ranking)["alpha_tone"] == pytest.approx(0.7 * (5 * 0.9 + 5 * alpha) / 10)
    many = pack.select_skill("u4")  # 30 votes for alpha
    assert many.skill_id == "alpha_tone" and many.user_votes == 30
    assert many.confidence == pytest.approx((30 * 0.99 + 5 * alpha) / 35)
    assert many.tenant_confidence == pytest.approx(alpha)
