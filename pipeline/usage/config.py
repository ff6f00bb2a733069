"""The usage stage's constants (SPEC §4.9) in one place."""

from __future__ import annotations

from dataclasses import dataclass

# A call is compared with calls of the same skill and pack version (its stratum).
STRATUM = ("skill_id", "pack_version")
# The round-3 rule's prior is a skill's; the joint model is one per tenant, over every skill.
GROUP = ("tenant_id", "skill_id")


@dataclass(frozen=True)
class UsageConfig:
    """The constants of SPEC §4.9 in one place."""

    z: float = 1.959964  # 95 % two-sided normal interval
    # Item effects from one model over all items of a tenant (round 4, joint.py). False: each
    # item's with-versus-without difference in means, shrunk (round 3, marginal.py) — it charges an
    # item for what its presence pushed out of the prompt; kept as the baseline the bench measures.
    joint: bool = True
    # The smallest prior variance of item effects: effects of ±0.1 on a [−1, 1] score stay
    # plausible even when a skill's items look alike (τ² = 0 would pin every effect at 0).
    tau2_floor: float = 0.01
    # The outcome variance of a stratum with fewer than two scored calls (a [−1, 1] score's
    # variance is at most 1; 0.25 is that of a coin between ±0.5).
    fallback_variance: float = 0.25
    # The smallest outcome variance the joint model uses: below it the outcomes are ties, and a
    # zero variance would leave items that always appear together without a unique solution.
    variance_floor: float = 1e-4
    # Up to this many items of one tenant the joint model is solved exactly (one dense Cholesky
    # factor: ~0.2 s at 1,000 items on 2 cores, ~4 s at 3,000, growing with the cube). Beyond,
    # the items whose uses tell more than the prior, at most `dense_items` of the most used, are
    # its dense part, and the rest's intervals take the prior's width (joint.py says why).
    exact_items: int = 1000
    dense_items: int = 3000
    # The most a memory measured helpful gains in confidence (as a few-shot example gains in
    # score, FewShotConfig.helpful_boost): it moves up among peers, never past a clearly surer one.
    memory_boost: float = 0.1


USAGE_CONFIG = UsageConfig()
