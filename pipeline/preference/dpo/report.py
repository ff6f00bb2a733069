"""What one night of a tenant's DPO training says: its figures and, plainly, whether it learned."""

from __future__ import annotations

import polars as pl

from pipeline.preference.dpo.baselines import short_of_baselines
from pipeline.preference.dpo.runs import PolicyRun, runs_frame
from pipeline.preference.dpo.settings import STATUS_SKIPPED, STATUS_TRAINED

PER_TENANT_FIGURES = (
    "tenant_id",
    "policy_id",
    "status",
    "skipped_reason",
    "n_eval",
    "eval_accuracy",
    "eval_accuracy_low",
    "eval_accuracy_high",
    "reference_accuracy",
    "length_rule_accuracy",
    "verdict",
    "eval_margin",
    "steps",
    "seconds",
)


def learning_summary(trained: pl.DataFrame, short: pl.DataFrame) -> str:
    """Says plainly, for the whole run, whether learning holds against the baselines."""
    judged = trained.filter(pl.col("verdict").is_not_null()).height
    if not judged:
        return "not measured: no trained policy has eval pairs"
    if short.is_empty():
        return (
            "learning beats the length rule, and is not below chance, "
            f"for every policy ({judged} judged)"
        )
    return (
        f"learning does not beat the length rule or chance for {short.height} of {judged} "
        f"policies: {'; '.join(short['verdict'].to_list())}"
    )


def run_figures(
    run: PolicyRun | None, loss_type: str, recorded: int | None = None
) -> tuple[dict[str, object], pl.DataFrame]:
    """The tenant's figures of the night (no run: it has no interactions) and its policy when it
    is trained and short of its baselines; `recorded`: the rows dpo_runs gained (None: the run is
    not recorded)."""
    current = runs_frame([run] if run is not None else [])
    trained = current.filter(pl.col("status") == STATUS_TRAINED)
    short = trained.filter(short_of_baselines())
    figures: dict[str, object] = {
        # 0: the tenant's policy is the one dpo_runs already has
        **({"runs_recorded": recorded} if recorded is not None else {}),
        "loss_type": loss_type,
    }
    if current.height:
        own = current.select(*PER_TENANT_FIGURES, "train_loss").row(0, named=True)
        figures |= {name: value for name, value in own.items() if value is not None}
    if trained.height:
        figures["learning"] = learning_summary(trained, short)
    return figures, short


def unrecorded_outcomes(latest: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """Of each tenant's latest run: the trained ones, how many of those with eval pairs lack an
    accuracy in [0, 1], and how many skipped ones lack a reason."""
    trained = latest.filter(pl.col("status") == STATUS_TRAINED)
    bad_trained = trained.filter(
        (pl.col("n_eval") > 0) & ~pl.col("eval_accuracy").is_between(0.0, 1.0).fill_null(False)
    ).height
    bad_skipped = latest.filter(
        (pl.col("status") == STATUS_SKIPPED) & pl.col("skipped_reason").is_null()
    ).height
    return trained, bad_trained, bad_skipped
