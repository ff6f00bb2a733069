"""Skill templates: registry, candidates from evidence, selection rule, history kept and reversible."""

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from pipeline.ingest import contracts
from pipeline.preference.dpo import (
    STATUS_SKIPPED,
    STATUS_TRAINED,
    DPOPolicyConfig,
    PolicyRun,
    runs_frame,
)
from pipeline.preference.templates import (
    TEMPLATE_HISTORY_SCHEMA,
    ScoringPolicy,
    SkillEvidence,
    SkillTemplate,
    TemplateScore,
    candidate_templates,
    compare,
    empty_history,
    format_prompt,
    gather_evidence,
    history_row,
    load_registry,
    missing_current,
    parse_registry,
    refine_templates,
    roll_back_worse,
    rollback,
    select_template,
)
from pipeline.preference.templates.in_use import rolled_back_templates
from pipeline.preference.templates.rewards import scoring_policy
from pipeline.usage import USAGE_CONFIG

BASE_SKILLS = {
    "concise_response",
    "detailed_explanation",
    "casual_chat",
    "technical_precision",
    "empathy_direct",
    "empathy_subtle",
    "proactive_suggestions",
    "reactive_only",
    "code_review_constructive",
    "summarize_key_points",
}
T0 = datetime(2026, 11, 3, tzinfo=UTC)
T1 = datetime(2026, 11, 4, tzinfo=UTC)


def test_registry_has_the_ten_base_skills() -> None:
    registry = load_registry()
    assert set(registry) >= BASE_SKILLS
    for skill in registry.values():
        assert skill.description and skill.template and skill.version >= 1


def test_registry_rejects_a_skill_without_template() -> None:
    with pytest.raises(ValueError, match="no template"):
        parse_registry("skills:\n  x:\n    description: d\n")


def test_format_prompt_ends_on_a_newline_with_optional_prefix() -> None:
    assert format_prompt(" Hi ") == "Request: Hi\nResponse:\n"
    assert format_prompt("Hi", "Be brief.") == "Be brief.\n\nRequest: Hi\nResponse:\n"


def test_evidence_and_candidates_from_feedback_reasons() -> None:
    inter = pl.DataFrame(
        [
            {c: None for c in contracts.INTERACTION_COLUMNS}
            | {
                "tenant_id": "acme",
                "event_id": f"i{k}",
                "skill_id": "concise_response",
                "input": "Q",
                "output": "A",
            }
            for k in range(3)
        ],
        schema=contracts.INTERACTION_SCHEMA,
    )
    fb = pl.DataFrame(
        [
            {c: None for c in contracts.FEEDBACK_COLUMNS}
            | {
                "tenant_id": "acme",
                "event_id": "f1",
                "target_id": "i0",
                "signal": "thumbs_down",
                "reason": "too_verbose",
            },
            {c: None for c in contracts.FEEDBACK_COLUMNS}
            | {
                "tenant_id": "acme",
                "event_id": "f2",
                "target_id": "i1",
                "signal": "thumbs_down",
                "reason": "too_verbose",
            },
            {c: None for c in contracts.FEEDBACK_COLUMNS}
            | {
                "tenant_id": "acme",
                "event_id": "f3",
                "target_id": "i2",
                "signal": "thumbs_down",
                "reason": "wrong_tone",
            },
            {c: None for c in contracts.FEEDBACK_COLUMNS}
            | {
                "tenant_id": "acme",
                "event_id": "f4",
                "target_id": "i2",
                "signal": "correction",
                "corrected_output": "Sure. It ships today.",
            },
        ],
        schema=contracts.FEEDBACK_SCHEMA,
    )
    evidence = gather_evidence(inter, fb)
    ev = evidence["concise_response"]
    assert ev.reasons == {"too_verbose": 2, "wrong_tone": 1}
    assert ev.corrections == ["Sure. It ships today."]
    assert ev.typical_sentences == 2
    candidates = {c.name: c for c in candidate_templates("Base.", ev)}
    assert candidates["reason:too_verbose"].template == "Base.\nKeep answers under 2 sentences."
    assert "polite" in candidates["reasons:all"].template
    assert "Sure. It ships today." in candidates["corrections"].template
    assert candidates["combined"].template.startswith("Base.\nKeep answers under 2 sentences.")


def test_the_corrections_candidate_quotes_the_consensus_not_the_newest() -> None:
    """The correction given most often (spacing aside) is quoted, the newest among equals: a night
    that brings one more correction keeps the candidate, so its score comes from the memo."""
    inter = pl.DataFrame(
        [
            {c: None for c in contracts.INTERACTION_COLUMNS}
            | {"tenant_id": "acme", "event_id": f"i{k}", "skill_id": "casual_chat"}
            for k in range(5)
        ],
        schema=contracts.INTERACTION_SCHEMA,
    )

    def corrections(*rows: tuple[int, str]) -> pl.DataFrame:
        return pl.DataFrame(
            [
                {c: None for c in contracts.FEEDBACK_COLUMNS}
                | {
                    "tenant_id": "acme",
                    "event_id": f"f{day}",
                    "target_id": f"i{day}",
                    "ts": datetime(2026, 11, day + 1, tzinfo=UTC),
                    "signal": "correction",
                    "corrected_output": text,
                }
                for day, text in rows
            ],
            schema=contracts.FEEDBACK_SCHEMA,
        )

    def quoted(fb: pl.DataFrame) -> list[str]:
        return gather_evidence(inter, fb)["casual_chat"].corrections

    night = [(0, "Say hi back."), (1, "Say  hi back. "), (2, "Ask how they are.")]
    assert quoted(corrections(*night)) == ["Say hi back.", "Ask how they are."]
    # The next night's single new correction does not move the quote: the candidate is the same.
    assert quoted(corrections(*night, (3, "Use their name.")))[0] == "Say hi back."
    # Two given equally often: the newer one first.
    assert quoted(corrections((0, "Older."), (1, "Newer."))) == ["Newer.", "Older."]


def test_selection_keeps_the_current_template_unless_a_candidate_wins() -> None:
    current = TemplateScore(accuracy=0.75, margin=0.5, n=8)
    assert select_template(current, [], 1e-3) is None
    assert (
        select_template(current, [TemplateScore(0.5, 2.0, 8), TemplateScore(0.75, 0.5005, 8)], 1e-3)
        is None
    )
    assert (
        select_template(current, [TemplateScore(0.5, 2.0, 8), TemplateScore(0.75, 0.6, 8)], 1e-3)
        == 1
    )
    assert (
        select_template(current, [TemplateScore(0.875, 0.1, 8), TemplateScore(0.75, 0.9, 8)], 1e-3)
        == 0
    )


def test_a_paired_comparison_counts_wins_losses_and_an_interval() -> None:
    candidate = TemplateScore(0.75, 0.0, 8, (1, 1, 1, 1, 1, -1, 1, -1))
    current = TemplateScore(0.25, 0.0, 8, (-1, -1, -1, -1, -1, 1, 1, -1))
    got = compare(candidate, current)
    assert (got.wins, got.losses, got.n) == (5, 1, 8)
    assert got.p_value == pytest.approx(7 / 64)  # P(X >= 5), X ~ Bin(6, 1/2)
    # gain (5 - 1) / 8 = 0.5 ± 1.96 · sqrt(6 - 16/8) / 8 = ± 0.49
    assert (got.gain_low, got.gain_high) == (pytest.approx(0.01), pytest.approx(0.99))
    assert compare(candidate, candidate).p_value == 1.0  # no discordant pair: no evidence


def _pair(prompt: str) -> int:
    return int(re.search(r"Q(\d+)", prompt)[1])  # type: ignore[index]


def _by_prompt(right: set[int]):  # type: ignore[no-untyped-def]
    """A fake policy: the candidate prefix ranks pairs `right` correctly, the base ranks none."""

    def reward(
        prompts: list[str], chosen: list[str], rejected: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        wins = [1.0 if "Keep answers under" in p and _pair(p) in right else -1.0 for p in prompts]
        return np.array(wins), np.zeros(len(prompts))

    return reward


@pytest.mark.parametrize(
    ("right", "adopted"),
    [({0, 1}, False), ({0, 1, 2, 3}, False), ({0, 1, 2, 3, 4}, True), (set(range(8)), True)],
)
def test_a_candidate_is_adopted_only_on_a_significant_win(right: set[int], adopted: bool) -> None:
    """8 eval pairs: 2 or 4 more right is chance (p = 0.25, 0.0625); 5 or 8 is a win."""
    policy = ScoringPolicy("p1", _by_prompt(right), _eval_pairs(8))
    result = refine_templates(empty_history(), _registry(), "acme", EVIDENCE, policy, T0)
    assert result.adopted == int(adopted)
    best = result.decisions.filter(pl.col("candidate") != "current:v1").sort("eval_accuracy")[-1]
    assert best["win_p_value"][0] == pytest.approx(0.5 ** len(right))
    if adopted:
        row = result.history.filter(pl.col("source") == "refined").row(0, named=True)
        assert (row["eval_n"], row["win_p_value"]) == (8, pytest.approx(0.5 ** len(right)))
        assert row["gain_low"] > 0
    else:
        assert "not significant" in best["note"][0]


def test_a_tie_in_accuracy_keeps_the_current_template() -> None:
    """A better margin at the same accuracy is no evidence of a better template."""

    def reward(
        prompts: list[str], chosen: list[str], rejected: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        return np.array([2.0 if "Keep" in p else 1.0 for p in prompts]), np.zeros(len(prompts))

    policy = ScoringPolicy("p", reward, _eval_pairs(8))
    result = refine_templates(empty_history(), _registry(), "acme", EVIDENCE, policy, T0)
    assert result.adopted == 0
    assert result.decisions["win_p_value"].drop_nulls().to_list() == [1.0]


def _registry() -> dict[str, SkillTemplate]:
    return {
        "concise_response": SkillTemplate("concise_response", "d", "Be concise.", 1),
        "casual_chat": SkillTemplate("casual_chat", "d", "Be casual.", 1),
    }


def _eval_pairs(n: int = 6) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "tenant_id": ["acme"] * n,
            "skill_id": ["concise_response"] * n,
            "prompt": [f"Q{k}" for k in range(n)],
            "chosen": ["short"] * n,
            "rejected": ["long long long"] * n,
        }
    )


def _reward_for(phrase: str):  # type: ignore[no-untyped-def]
    """A fake policy: the chosen side wins only when the prompt prefix contains `phrase`."""

    def reward(
        prompts: list[str], chosen: list[str], rejected: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        wins = np.array([1.0 if phrase in p else -1.0 for p in prompts])
        return wins, np.zeros(len(prompts))

    return reward


EVIDENCE = {"concise_response": SkillEvidence("concise_response", reasons={"too_verbose": 3})}


def test_refine_adopts_a_winner_and_keeps_every_version() -> None:
    policy = ScoringPolicy("acme-p1", _reward_for("Keep answers under"), _eval_pairs())
    result = refine_templates(empty_history(), _registry(), "acme", EVIDENCE, policy, T0)
    history = result.history
    assert result.adopted == 1
    assert missing_current(history, _registry()) == []
    assert set(history["tenant_id"]) == {"acme"}
    concise = history.filter(pl.col("skill_id") == "concise_response").sort("version")
    assert concise.select("version", "is_current", "source").rows() == [
        (1, False, "registry"),
        (2, True, "refined"),
    ]
    new = concise.row(1, named=True)
    assert new["template"] == "Be concise.\nKeep answers under 3 sentences."
    assert (new["eval_accuracy"], new["policy_id"]) == (1.0, "acme-p1")
    evidence = json.loads(new["evidence"])
    assert evidence["replaced"] == {"version": 1, "eval_accuracy": 0.0, "eval_margin": -1.0}
    assert evidence["from_evidence"] == {"reasons": {"too_verbose": 3}}

    # Next night: history is read back and appended to; the refined version is not re-adopted.
    policy = ScoringPolicy("acme-p2", _reward_for("Keep answers under"), _eval_pairs())
    again = refine_templates(history, _registry(), "acme", EVIDENCE, policy, T1)
    assert again.adopted == 0
    assert again.history.height == history.height

    # Reversible: the base version can be made current again, nothing is lost.
    back = rollback(again.history, "concise_response", 1)
    current = back.filter(pl.col("is_current") & (pl.col("skill_id") == "concise_response"))
    assert current["version"].to_list() == [1]
    assert back.height == again.history.height


def test_a_template_scored_by_the_same_policy_on_the_same_pairs_is_not_scored_again() -> None:
    calls: list[int] = []
    scorer = _reward_for("Keep answers under")

    def counting(
        prompts: list[str], chosen: list[str], rejected: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        calls.append(len(prompts))
        return scorer(prompts, chosen, rejected)

    args = (_registry(), "acme", EVIDENCE)
    first = refine_templates(
        empty_history(), *args, ScoringPolicy("p1", counting, _eval_pairs()), T0
    )
    assert (first.scored, first.memo_hits, len(calls)) == (2, 0, 2)  # current + one candidate
    assert first.scores.select("policy_id", "n_eval").rows() == [("p1", 6), ("p1", 6)]
    assert first.adopted == 1

    # Next night, same policy and pairs: the now-current refined template is in the memo (and is
    # the only candidate text, so nothing else is scored).
    again = refine_templates(
        first.history, *args, ScoringPolicy("p1", counting, _eval_pairs()), T1, scores=first.scores
    )
    assert (again.scored, again.memo_hits, len(calls)) == (0, 1, 2)
    assert again.decisions["memo"].to_list() == [True]
    assert again.scores.equals(first.scores)

    # Another policy, or other eval pairs, is scored afresh.
    other = refine_templates(
        first.history, *args, ScoringPolicy("p2", counting, _eval_pairs()), T1, scores=first.scores
    )
    assert (other.scored, other.memo_hits) == (1, 0) and other.scores.height == 3
    fewer = refine_templates(
        first.history, *args, ScoringPolicy("p1", counting, _eval_pairs(5)), T1, scores=first.scores
    )
    assert (fewer.scored, fewer.memo_hits) == (1, 0)


def test_refine_keeps_the_old_template_when_no_candidate_wins() -> None:
    policy = ScoringPolicy("acme-p1", _reward_for("never present"), _eval_pairs())
    result = refine_templates(empty_history(), _registry(), "acme", EVIDENCE, policy, T0)
    assert result.adopted == 0
    current = result.history.filter(
        pl.col("is_current") & (pl.col("skill_id") == "concise_response")
    )
    assert current.select("version", "template").rows() == [(1, "Be concise.")]
    assert result.decisions.filter(pl.col("adopted")).is_empty()
    assert result.decisions.height >= 2  # the current template and the candidate(s) were scored


def test_refine_without_policy_or_eval_pairs_only_seeds_the_registry() -> None:
    no_policy = refine_templates(empty_history(), _registry(), "acme", EVIDENCE, None, T0)
    assert no_policy.adopted == 0 and no_policy.history.height == 2
    assert no_policy.decisions["note"].to_list() == ["no trained policy for the tenant"]
    policy = ScoringPolicy("p", _reward_for("Keep"), _eval_pairs(2))
    few = refine_templates(empty_history(), _registry(), "acme", EVIDENCE, policy, T0)
    assert few.adopted == 0 and "min_eval_pairs" in few.decisions["note"][0]


def test_a_new_registry_version_becomes_current_and_history_is_kept() -> None:
    first = refine_templates(empty_history(), _registry(), "acme", {}, None, T0).history
    bumped = {
        **_registry(),
        "casual_chat": SkillTemplate("casual_chat", "d", "Be casual, really.", 2),
    }
    second = refine_templates(first, bumped, "acme", {}, None, T1).history
    casual = second.filter(pl.col("skill_id") == "casual_chat").sort("version")
    assert casual.select("version", "template", "is_current").rows() == [
        (1, "Be casual.", False),
        (2, "Be casual, really.", True),
    ]


def test_a_skill_whose_scoring_raises_keeps_its_template_and_others_go_on() -> None:
    """The policy raises on casual_chat's prompts: that skill keeps its template with the reason,
    concise_response is still refined (another tenant is another run)."""
    right = _by_prompt(set(range(8)))

    def broken_on_casual(
        prompts: list[str], chosen: list[str], rejected: list[str]
    ) -> tuple[np.ndarray, np.ndarray]:
        if any(p.startswith("Be casual.") for p in prompts):
            raise RuntimeError("policy weights unreadable\nmore detail")
        return right(prompts, chosen, rejected)

    pairs = pl.concat([_eval_pairs(8), _eval_pairs(8).with_columns(skill_id=pl.lit("casual_chat"))])
    evidence = {
        **EVIDENCE,
        "casual_chat": SkillEvidence("casual_chat", reasons={"too_verbose": 3}),
    }
    policy = ScoringPolicy("p1", broken_on_casual, pairs)
    result = refine_templates(empty_history(), _registry(), "acme", evidence, policy, T0)
    assert result.adopted == 1  # concise_response's win is adopted
    current = result.history.filter(pl.col("is_current"))
    assert dict(current.select("skill_id", "source").iter_rows()) == {
        "casual_chat": "registry",
        "concise_response": "refined",
    }
    failed = result.decisions.filter(pl.col("skill_id") == "casual_chat")
    assert failed["note"].to_list() == [
        "scoring failed, the current template stays: RuntimeError: policy weights unreadable"
    ]


def test_the_tenant_is_scored_by_its_latest_trained_policy_on_its_held_out_sample(
    tmp_path: Path,
) -> None:
    """Its dpo_runs name the policy (this host's copy of it); a policy saved without its sample is
    scored on the same sampling rule (the smallest pair ids), and is not loaded until it scores."""
    evals = _eval_pairs(3).with_columns(pair_id=pl.Series(["c", "a", "b"]))
    runs = [
        PolicyRun("acme", "acme-old", STATUS_TRAINED, model_dir="/other-host/acme-old"),
        PolicyRun("acme", "acme-new", STATUS_TRAINED, model_dir="/other-host/acme-new"),
    ]
    history = runs_frame(runs).with_columns(
        run_at=pl.Series([T0, T1]), is_latest=pl.Series([False, True])
    )
    config = DPOPolicyConfig(max_eval_pairs=2)
    policy = scoring_policy(history, tmp_path / "models", "acme", evals, config)
    assert policy is not None and policy.policy_id == "acme-new"
    assert policy.eval_pairs["pair_id"].to_list() == ["a", "b"]
    skipped = runs_frame([PolicyRun("acme", None, STATUS_SKIPPED, skipped_reason="3 < min_pairs")])
    history = skipped.with_columns(run_at=pl.lit(T1), is_latest=pl.lit(True))
    assert scoring_policy(history, tmp_path / "models", "acme", evals, config) is None


def _adopted_history(evidence_version: int = 1) -> pl.DataFrame:
    when = datetime(2026, 11, 2, tzinfo=UTC)
    rows = [
        history_row(tenant_id="acme", skill_id="s", version=1, template="base", is_current=False,
                    source="registry", created_at=when),
        history_row(tenant_id="acme", skill_id="s", version=2, template="refined", is_current=True,
                    source="refined", created_at=when,
                    evidence=json.dumps({"replaced": {"version": evidence_version}})),
    ]  # fmt: skip
    return pl.DataFrame(rows, schema=TEMPLATE_HISTORY_SCHEMA)


def _template_usage(effects: dict[str, tuple[float, float, int]]) -> pl.DataFrame:
    """item → (effect, its standard error, uses) as pack_usage rows."""
    z = USAGE_CONFIG.z
    return pl.DataFrame(
        [
            {
                "tenant_id": "acme",
                "item_id": item,
                "item_kind": "template",
                "skill_id": "s",
                "uses": uses,
                "effect": e,
                "effect_lower": e - z * se,
                "effect_upper": e + z * se,
                "verdict": "unclear",
            }
            for item, (e, se, uses) in effects.items()
        ]
    )


def test_a_refined_template_worse_in_use_than_its_predecessor_is_rolled_back() -> None:
    now = datetime(2026, 11, 5, tzinfo=UTC)
    # v2 -0.10 ± 0.03, v1 +0.05 ± 0.04: the difference -0.15, interval up to -0.15 + 1.96 · 0.05
    usage = _template_usage({"s@2": (-0.10, 0.03, 200), "s@1": (0.05, 0.04, 150)})
    history, lines = roll_back_worse(_adopted_history(), usage, now)
    current = history.filter(pl.col("is_current"))
    assert current["version"].to_list() == [1]
    reason = history.filter(pl.col("version") == 2)["rollback_reason"].item()
    assert reason == (
        "rolled back to v1 on 2026-11-05: in use, v2 did -0.15 against v1 "
        "(95 % interval up to -0.05; 200 and 150 uses)"
    )
    assert lines == [f"s: {reason}"]
    assert rolled_back_templates(history, "s") == {"refined"}  # never a candidate again


@pytest.mark.parametrize(
    "effects",
    [
        {"s@2": (-0.10, 0.03, 200), "s@1": (-0.05, 0.04, 150)},  # worse, but not surely
        {"s@2": (-0.04, 0.03, 200)},  # v1 never measured: v2's own interval reaches 0
        {"s@1": (0.3, 0.01, 500)},  # v2 not measured yet
    ],
)
def test_a_template_not_surely_worse_in_use_stays(effects) -> None:
    history, lines = roll_back_worse(
        _adopted_history(), _template_usage(effects), datetime.now(UTC)
    )
    assert lines == [] and history.equals(_adopted_history())
