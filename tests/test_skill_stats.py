"""Skill statistics and preference vectors (SPEC §4.8): closed forms agree with replaying events."""

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import polars as pl
import pytest

from pipeline.examples.skill_stats import (
    SkillConfig,
    alignment,
    learning_effectiveness,
    skill_stats,
    skill_vectors,
    user_preferences,
)
from pipeline.ingest.contracts import FEEDBACK_SCHEMA, INTERACTION_SCHEMA
from pipeline.storage.vectors import TextVectors

T0 = datetime(2026, 10, 1, tzinfo=UTC)


def inter(
    event_id: str, skill: str | None, user: str | None = "u1", tenant: str = "acme"
) -> dict[str, Any]:
    return {"tenant_id": tenant, "event_id": event_id, "ts": T0, "skill_id": skill, "user_id": user}


def fb(n: int, target: str, signal: str, voter: str = "v", **fields: Any) -> dict[str, Any]:
    return {
        "tenant_id": "acme",
        "event_id": f"f{n}",
        "ts": T0 + timedelta(hours=n),
        "target_id": target,
        "signal": signal,
        "user_id": f"{voter}{n}",
        **fields,
    }


INTERACTIONS = pl.DataFrame(
    [
        inter("a1", "concise"),
        inter("a2", "concise"),
        inter("b1", "detailed"),
        inter("c1", None),
        inter("x1", "concise", "u2"),
    ],
    schema=INTERACTION_SCHEMA,
)
# u1: concise ↑ ↑ ↓ ↑ (in that order), detailed ↓ (rating 1), ignored validate; u2: nothing.
FEEDBACK = pl.DataFrame(
    [
        fb(1, "a1", "thumbs_up"),
        fb(2, "a2", "thumbs_up"),
        fb(3, "b1", "validate", rating=1),
        fb(4, "a1", "thumbs_down"),
        fb(5, "a2", "action_taken"),
        fb(6, "b1", "validate"),
        fb(7, "c1", "thumbs_up"),  # no skill: not counted
    ],
    schema=FEEDBACK_SCHEMA,
)


def row(stats: pl.DataFrame, user: str, skill: str) -> dict[str, Any]:
    return stats.filter((pl.col("user_id") == user) & (pl.col("skill_id") == skill)).row(
        0, named=True
    )


def test_counts_and_shares() -> None:
    stats = skill_stats(INTERACTIONS, FEEDBACK)
    concise = row(stats, "u1", "concise")
    assert (
        concise["usage"],
        concise["n_feedback"],
        concise["n_positive"],
        concise["n_negative"],
    ) == (2, 4, 3, 1)
    assert concise["positive_share"] == 0.75
    assert concise["mean_reward"] == pytest.approx(0.5)
    detailed = row(stats, "u1", "detailed")
    assert (detailed["usage"], detailed["n_positive"], detailed["n_negative"]) == (1, 0, 1)
    unused_votes = row(stats, "u2", "concise")
    assert unused_votes["n_feedback"] == 0 and unused_votes["positive_share"] is None
    assert unused_votes["ema_confidence"] == 0.5
    assert stats.height == 3  # no row for the skill-less interaction


def test_ema_equals_replaying_the_votes() -> None:
    stats = skill_stats(INTERACTIONS, FEEDBACK)
    confidence = 0.5
    for reward in (1.0, 1.0, 0.0, 1.0):  # concise, in time order
        confidence += 0.1 * (reward - confidence)
    assert row(stats, "u1", "concise")["ema_confidence"] == pytest.approx(confidence)
    assert row(stats, "u1", "detailed")["ema_confidence"] == pytest.approx(0.5 + 0.1 * (0.0 - 0.5))


def test_one_hot_fallback_and_preference_replay() -> None:
    vectors = skill_vectors(INTERACTIONS, None)
    assert set(vectors["vector_source"]) == {"one_hot"}
    by_skill = {r["skill_id"]: np.array(r["vector"]) for r in vectors.iter_rows(named=True)}
    assert len(by_skill["concise"]) == SkillConfig().fallback_dim
    assert by_skill["concise"] @ by_skill["detailed"] == 0.0
    prefs = user_preferences(INTERACTIONS, FEEDBACK, vectors)
    u1 = prefs.filter(pl.col("user_id") == "u1").row(0, named=True)
    # Replay: p ← p + 0.1 (v·s − p) in time order, then normalise.
    p = np.zeros(SkillConfig().fallback_dim)
    for skill, v in (
        ("concise", 1),
        ("concise", 1),
        ("detailed", -1),
        ("concise", -1),
        ("concise", 1),
    ):
        p = p + 0.1 * (v * by_skill[skill] - p)
    expected = p / np.linalg.norm(p)
    assert np.allclose(np.array(u1["preference_vector"]), expected, atol=1e-6)
    assert u1["n_updates"] == 5
    aligned = {
        r["skill_id"]: r["alignment"]
        for r in alignment(prefs, vectors).iter_rows(named=True)
        if r["user_id"] == "u1"
    }
    assert aligned["concise"] > 0 > aligned["detailed"]


def test_skill_vectors_are_mean_embeddings() -> None:
    embeddings = pl.DataFrame(
        {
            "tenant_id": ["acme"] * 3,
            "memory_id": ["a1", "a2", "b1"],
            "memory_kind": ["interaction"] * 3,
            "text_hash": ["h1", "h2", "h3"],
            "embedding": [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        },
        schema_overrides={"embedding": pl.Array(pl.Float32, 3)},
    )
    vectors = skill_vectors(INTERACTIONS, embeddings, TextVectors.from_frame(embeddings))
    concise = vectors.filter(pl.col("skill_id") == "concise").row(0, named=True)
    assert concise["vector_source"] == "embedding"
    assert concise["n_interactions"] == 3 and concise["n_embedded"] == 2  # x1 has no embedding
    assert np.allclose(concise["vector"], [2**-0.5, 2**-0.5, 0.0])
    prefs = user_preferences(INTERACTIONS, FEEDBACK, vectors)
    u1 = np.array(prefs.filter(pl.col("user_id") == "u1")["preference_vector"].item())
    assert u1[0] > 0 and u1[2] < 0  # toward concise, away from detailed
    assert np.linalg.norm(u1) == pytest.approx(1.0, abs=1e-6)


def test_vectors_are_bit_identical_whatever_the_row_order() -> None:
    """A pack holds these vectors: the same input must give the same bytes (SPEC §5), so no sum
    may depend on the order rows arrive in or on group_by's order."""
    rng = np.random.default_rng(3)
    n = 300
    interactions = pl.DataFrame(
        [inter(f"i{i:03d}", f"s{i % 3}", f"u{i % 5}") for i in range(n)], schema=INTERACTION_SCHEMA
    )
    feedback = pl.DataFrame(
        [fb(i, f"i{i:03d}", "thumbs_up" if i % 3 else "thumbs_down") for i in range(n)],
        schema=FEEDBACK_SCHEMA,
    )
    embeddings = pl.DataFrame(
        {
            "tenant_id": "acme",
            "memory_id": interactions["event_id"],
            "memory_kind": "interaction",
            "text_hash": [f"h{i % 150}" for i in range(n)],
            "embedding": rng.normal(size=(n, 64)).astype(np.float32),
        },
        schema_overrides={"embedding": pl.Array(pl.Float32, 64)},
    )
    text_vectors = TextVectors.from_frame(embeddings)
    results = []
    for seed in range(6):
        vectors = skill_vectors(
            interactions.sample(fraction=1.0, shuffle=True, seed=seed),
            embeddings.sample(fraction=1.0, shuffle=True, seed=seed),
            text_vectors,
        )
        prefs = user_preferences(
            interactions, feedback.sample(fraction=1.0, shuffle=True, seed=seed), vectors
        )
        results.append((vectors, prefs))
    for vectors, prefs in results[1:]:
        assert vectors.equals(results[0][0]) and prefs.equals(results[0][1])


def test_learning_effectiveness() -> None:
    figures = learning_effectiveness(skill_stats(INTERACTIONS, FEEDBACK))
    assert figures["positive_share_by_skill"] == {"acme/concise": 0.75, "acme/detailed": 0.0}
    assert figures["mean_reward_by_user"]["acme/u1"] == pytest.approx((0.5 * 4 - 1) / 5)
