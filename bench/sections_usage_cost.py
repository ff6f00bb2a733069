"""What receipts cost a night (issue 42, item 7): the `scale_goal` nights (10 tenants ×
1,000,000 interactions, `--workers 2`, then the incremental night) twice from the same seed, once
with no receipts and once with `RECEIPTS` of the calls carrying one (from the generation's second
day on). In both, the incremental day is the second day of a two-day generation
(`data.add_day(..., receipts=)`), so the two new days differ only in what receipts change. They
do change the data a little: a planted item shifts the chance of feedback, and the generator's
stream of feedback and memories drifts with it (measured on small generations: 1-3 % more or
fewer feedback events and memories), so the nights are alike, not identical. The figure is the
incremental night with receipts beside the same night without; the usage stages' own seconds
(`pack_usage`, `pack_uplift`, summed over the tenants) are in its details. The usage stages'
work alone, exactly the same calls with and without receipts, is the `usage` section.

Four nights at the issue's size take hours, so it runs only when asked:

    python -m bench.run --only usage_cost --reps 1
"""

from __future__ import annotations

from typing import Any

from bench.common import Figure, Sizes, ratio, rounded, scaled_goal
from bench.sections_scale import GOAL_INTERACTIONS
from bench.sections_scale_goal import WORKERS, _step_totals, nights

RECEIPTS = 0.9  # the share of calls an app logs with a receipt (the rest: apps not yet updated)
GOAL = 1.05  # receipts add at most 5 % to the incremental night
STAGES = ("pack_usage", "pack_uplift")


def _night(night: dict[str, Any]) -> dict[str, Any]:
    totals = _step_totals(night)
    return {
        "seconds": night["seconds"],
        "load_avg_1min": night["load_avg_1min"],
        "usage_stages_s": {stage: totals.get(stage, 0.0) for stage in STAGES},
        "step_totals_s": totals,
    }


def run(sizes: Sizes) -> list[Figure]:
    if sizes.scale_goal_new_interactions <= 0:
        raise ValueError(
            "usage_cost compares incremental nights: --scale-goal-new-interactions > 0"
        )
    without = nights(sizes, 0.0)
    with_receipts = nights(sizes, RECEIPTS)
    _, full_0, incr_0, counts, new = without
    summary, full_r, incr_r, _, _ = with_receipts
    assert incr_0 is not None and incr_r is not None
    n = sum(counts.values())
    share = ratio(incr_r["seconds"], incr_0["seconds"])
    figure = Figure(
        name=f"incremental night (+{sum(new.values()):,} interactions over {len(new)} tenants), "
        f"{RECEIPTS:.0%} of calls with a receipt, --workers {WORKERS}",
        value=round(incr_r["seconds"], 1),
        unit="s",
        baseline_name="the same night without receipts",
        baseline_value=round(incr_0["seconds"], 1),
        ratio=rounded(share),
        goal=f"≤ {GOAL:.2f}× the night without receipts (issue 42: usage and uplift add ≤ 5 %)",
        goal_met=share is not None and share <= GOAL,
        details={
            "generator": summary,
            "interactions_by_tenant": counts,
            "new_interactions_by_tenant": new,
            "incremental": {"with_receipts": _night(incr_r), "without": _night(incr_0)},
            "full": {"with_receipts": _night(full_r), "without": _night(full_0)},
        },
    )
    return [scaled_goal(figure, n, GOAL_INTERACTIONS, "interactions")]
