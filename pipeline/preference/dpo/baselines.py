"""What a policy's eval accuracy is compared with: its Wilson interval, the reference model, the
length rule, and one plain sentence saying whether it learned."""

from __future__ import annotations

import math
from typing import Any

import polars as pl

Z_95 = 1.959963984540054  # the two-sided 95 % normal quantile


def wilson_interval(accuracy: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a proportion measured on `n` pairs (95 % by default); unlike
    accuracy ± 1.96·SE it stays inside [0, 1] and is honest on small n."""
    if n <= 0:
        return 0.0, 1.0
    z2n = z * z / n
    centre = (accuracy + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(accuracy * (1 - accuracy) / n + z2n / (4 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def length_rule_accuracy(pairs: pl.DataFrame) -> float | None:
    """The accuracy of "the longer reply wins" (in characters; a tie counts half): the simple
    rule a learned preference has to beat."""
    if pairs.is_empty():
        return None
    chosen, rejected = pl.col("chosen").str.len_chars(), pl.col("rejected").str.len_chars()
    score = pl.when(chosen > rejected).then(1.0).when(chosen == rejected).then(0.5).otherwise(0.0)
    return float(pairs.select(score.mean()).item())


def short_of_baselines() -> pl.Expr:
    """`dpo_runs` rows whose learning does not hold: the eval accuracy's 95 % interval lies below
    chance, or the accuracy does not beat the length rule's (a tie adds nothing to the rule).
    Unknown baselines, as in runs recorded before they existed, never count."""
    return (
        (pl.col("eval_accuracy_high") < 0.5)
        | (pl.col("eval_accuracy") <= pl.col("length_rule_accuracy"))
    ).fill_null(False)


def learning_verdict(
    accuracy: float | None,
    interval: tuple[float, float],
    length_accuracy: float | None,
    reference_accuracy: float | None,
    n_eval: int,
) -> str | None:
    """One plain sentence: does learning beat the length rule (and chance), with the figures."""
    if accuracy is None or length_accuracy is None:
        return None
    low, high = interval
    verdict = (
        "learning beats the length rule"
        if accuracy > length_accuracy
        else "learning does not beat the length rule"
    )
    if high < 0.5:
        verdict += " and is below chance"
    reference = "" if reference_accuracy is None else f", reference model {reference_accuracy:.2f}"
    return (
        f"{verdict}: eval accuracy {accuracy:.2f} (95 % interval {low:.2f}–{high:.2f}, "
        f"{n_eval} pairs), length rule {length_accuracy:.2f}{reference}"
    )


def baseline_fields(
    pairs: pl.DataFrame, accuracy: float | None, reference_accuracy: float | None
) -> dict[str, Any]:
    """The baseline columns of a `dpo_runs` row for an eval accuracy measured on `pairs`."""
    length = length_rule_accuracy(pairs)
    if accuracy is None:
        return {"length_rule_accuracy": length}
    interval = wilson_interval(accuracy, pairs.height)
    return {
        "eval_accuracy_low": interval[0],
        "eval_accuracy_high": interval[1],
        "reference_accuracy": reference_accuracy,
        "length_rule_accuracy": length,
        "verdict": learning_verdict(accuracy, interval, length, reference_accuracy, pairs.height),
    }
