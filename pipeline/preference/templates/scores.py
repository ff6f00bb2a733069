"""Scoring a template with a tenant's policy on held-out pairs, the paired test that says a win is
real, and the memo that keeps scores a night need not compute again."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from pipeline import tables
from pipeline.preference.dpo.settings import format_prompt

# Scores already computed: the same policy, template text and eval pairs always score the same,
# so a night whose policy is reused scores only the candidates whose text changed.
TEMPLATE_SCORE_SCHEMA = tables.schema("template_scores")


# (prompts, chosen, rejected) → (reward of chosen, reward of rejected): the DPO implicit reward.
RewardFn = Callable[[list[str], list[str], list[str]], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class ScoringPolicy:
    """What the tenant's templates are scored by: its trained DPO policy (id and implicit reward)
    and the held-out pairs that policy was evaluated on."""

    policy_id: str
    reward: RewardFn
    eval_pairs: pl.DataFrame


@dataclass(frozen=True)
class TemplateScore:
    accuracy: float
    margin: float
    n: int
    diffs: tuple[float, ...] = ()  # per eval pair: reward(chosen) − reward(rejected)


@dataclass(frozen=True)
class Comparison:
    """A candidate against the current template on the same eval pairs (a paired comparison)."""

    wins: int  # pairs the candidate ranks right and the current template wrong
    losses: int  # the reverse
    n: int
    p_value: float  # one-sided exact sign test (McNemar) on the wins + losses discordant pairs
    gain_low: float  # 95 % interval of the accuracy gain (paired Wald, clipped to [-1, 1])
    gain_high: float

    def note(self) -> str:
        return (
            f"wins {self.wins}, losses {self.losses} of {self.n} pairs, p={self.p_value:.3f}, "
            f"accuracy gain 95% [{self.gain_low:+.2f}, {self.gain_high:+.2f}]"
        )


def compare(candidate: TemplateScore, current: TemplateScore) -> Comparison:
    """Is the candidate's win real? Needs both scores' per-pair differences on the same pairs."""
    if len(candidate.diffs) != len(current.diffs):
        raise ValueError("a paired comparison needs both templates scored on the same pairs")
    right = np.asarray(candidate.diffs) > 0
    was_right = np.asarray(current.diffs) > 0
    wins, losses, n = int((right & ~was_right).sum()), int((~right & was_right).sum()), right.size
    discordant = wins + losses
    p_value = sum(math.comb(discordant, k) for k in range(wins, discordant + 1)) / 2**discordant
    gain = (wins - losses) / n if n else 0.0
    spread = 1.96 * math.sqrt(max(discordant - (wins - losses) ** 2 / n, 0.0)) / n if n else 1.0
    return Comparison(wins, losses, n, p_value, max(gain - spread, -1.0), min(gain + spread, 1.0))


def score_template(reward_fn: RewardFn, template: str, eval_pairs: pl.DataFrame) -> TemplateScore:
    """Preference accuracy and mean reward margin of the policy with `template` as prompt prefix."""
    prompts = [format_prompt(p, template) for p in eval_pairs["prompt"].to_list()]
    chosen_r, rejected_r = reward_fn(
        prompts, eval_pairs["chosen"].to_list(), eval_pairs["rejected"].to_list()
    )
    return preference_score(chosen_r, rejected_r)


def preference_score(chosen_rewards: np.ndarray, rejected_rewards: np.ndarray) -> TemplateScore:
    diff = np.asarray(chosen_rewards, dtype=np.float64) - np.asarray(
        rejected_rewards, dtype=np.float64
    )
    if diff.size == 0:
        return TemplateScore(accuracy=float("nan"), margin=float("nan"), n=0)
    return TemplateScore(
        accuracy=float((diff > 0).mean()),
        margin=float(diff.mean()),
        n=int(diff.size),
        diffs=tuple(diff.tolist()),
    )


def beats(candidate: TemplateScore, current: TemplateScore, epsilon: float) -> bool:
    """Strictly better accuracy; at equal accuracy, a margin better by more than `epsilon`."""
    if candidate.accuracy > current.accuracy + 1e-12:
        return True
    return abs(candidate.accuracy - current.accuracy) <= 1e-12 and (
        candidate.margin > current.margin + epsilon
    )


def select_template(
    current: TemplateScore, scored: Sequence[TemplateScore], epsilon: float
) -> int | None:
    """Index of the best candidate if it beats the current template, else None (keep current)."""
    if not scored:
        return None
    best = max(range(len(scored)), key=lambda i: (scored[i].accuracy, scored[i].margin, -i))
    return best if beats(scored[best], current, epsilon) else None


def _sha(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def eval_order(pairs: pl.DataFrame) -> pl.DataFrame:
    """Eval pairs in one canonical order, so per-pair scores line up across templates and nights."""
    return pairs.sort("prompt", "chosen", "rejected")


def eval_set_sha(pairs: pl.DataFrame) -> str:
    """Content hash of a set of eval pairs (order-free)."""
    rows = sorted(zip(pairs["prompt"], pairs["chosen"], pairs["rejected"], strict=True))
    return _sha(*(_sha(*row) for row in rows))


class ScoreMemo:
    """`template_scores` as a lookup: (tenant, skill, policy, template, eval set) → score (a
    tenant's run holds only its own rows)."""

    def __init__(self, rows: pl.DataFrame | None, created_at: datetime) -> None:
        self.created_at = created_at
        # Scores kept before per-pair differences were recorded cannot be compared: scored again.
        self.rows = (
            rows.select(list(TEMPLATE_SCORE_SCHEMA))
            .cast(TEMPLATE_SCORE_SCHEMA)  # type: ignore[arg-type]
            .filter(pl.col("pair_diffs").is_not_null())
            if rows is not None
            else pl.DataFrame(schema=TEMPLATE_SCORE_SCHEMA)
        )
        self.known = {
            (t, s, p, ts, es): TemplateScore(float(a), float(m), int(n), tuple(d))
            for t, s, p, ts, es, a, m, n, d in self.rows.select(
                list(TEMPLATE_SCORE_SCHEMA)[:-1]
            ).iter_rows()
        }
        self.new: list[dict[str, Any]] = []
        self.hits = 0

    def score(
        self,
        key: tuple[str, str, str],
        reward_fn: RewardFn,
        template: str,
        pairs: pl.DataFrame,
        eval_sha: str,
    ) -> tuple[TemplateScore, bool]:
        """(score, came from the memo) of `template` on `pairs` for (tenant, skill, policy)."""
        full = (*key, _sha(template), eval_sha)
        if full in self.known:
            self.hits += 1
            return self.known[full], True
        score = score_template(reward_fn, template, pairs)
        self.known[full] = score
        self.new.append(
            dict(
                zip(
                    TEMPLATE_SCORE_SCHEMA,
                    (*full, score.accuracy, score.margin, score.n, score.diffs, self.created_at),
                    strict=True,
                )
            )
        )
        return score, False

    def table(self) -> pl.DataFrame:
        if not self.new:
            return self.rows
        return pl.concat([self.rows, pl.DataFrame(self.new, schema=TEMPLATE_SCORE_SCHEMA)])
