"""The joint model of item effects (issue 52 item 2, SPEC §4.9 round 4) against an independent
computation, on substitutes a with-versus-without difference gets wrong, and its large-tenant
path against the exact one."""

import numpy as np
import polars as pl
import pytest

from pipeline.usage import USAGE_CONFIG, UsageConfig, calls, pack_usage
from pipeline.usage.joint import Calls, posterior
from tests.test_usage import KNOWN, _interactions, _scores


def _random_calls(seed: int, n: int, p: int, strata: int, zipf: bool) -> tuple:
    """Calls of one tenant with up to 6 items each (uniform or Zipf-skewed) and planted effects."""
    rng = np.random.default_rng(seed)
    stratum = rng.integers(0, strata, n)
    k = rng.integers(0, 7, n)
    rows = np.repeat(np.arange(n), k)
    cols = (rng.zipf(1.3, rows.size) - 1) % p if zipf else rng.integers(0, p, rows.size)
    pairs = np.unique(np.stack([rows, cols], axis=1), axis=0)
    _, cols = np.unique(pairs[:, 1], return_inverse=True)  # only items that were used
    x = np.zeros((n, int(cols.max()) + 1))
    x[pairs[:, 0], cols] = 1.0
    effects = np.where(np.arange(x.shape[1]) < 6, rng.choice([-0.3, 0.3], x.shape[1]), 0.0)
    outcome = 0.1 * stratum + x @ effects + rng.normal(0, 0.5, n)
    return stratum, outcome, pairs[:, 0], cols, x


def test_the_posterior_is_the_ridge_with_free_pack_version_levels() -> None:
    """Profiling out the levels equals fitting them as columns with a flat prior."""
    stratum, outcome, rows, cols, x = _random_calls(0, n=600, p=40, strata=3, zipf=False)
    tau2 = 0.02
    calls = Calls(stratum, outcome, rows, cols, x.shape[1])
    mean, sd = posterior(calls, tau2)
    sigma2 = calls.noise_variance(USAGE_CONFIG)
    centred = outcome - np.array([outcome[stratum == s].mean() for s in range(3)])[stratum]
    assert sigma2 == pytest.approx(centred @ centred / (600 - 3))
    design = np.hstack([np.eye(3)[stratum], x])
    precision = design.T @ design + np.diag([0.0] * 3 + [sigma2 / tau2] * x.shape[1])
    covariance = sigma2 * np.linalg.inv(precision)
    expected = np.linalg.solve(precision, design.T @ outcome)
    np.testing.assert_allclose(mean, expected[3:], atol=1e-10)
    np.testing.assert_allclose(sd, np.sqrt(np.diag(covariance))[3:], atol=1e-10)


def test_a_large_tenant_keeps_exact_means_and_never_narrower_intervals() -> None:
    stratum, outcome, rows, cols, x = _random_calls(1, n=8000, p=1500, strata=5, zipf=True)
    calls = Calls(stratum, outcome, rows, cols, x.shape[1])
    exact_mean, exact_sd = posterior(calls, 0.01, UsageConfig(exact_items=10_000))
    mean, sd = posterior(calls, 0.01, UsageConfig(exact_items=100, dense_items=300))
    np.testing.assert_allclose(mean, exact_mean, atol=1e-7)
    # The hubs: items whose uses tell more than the prior (59 here, under the cap of 300).
    sigma2 = calls.noise_variance(USAGE_CONFIG)
    hubs = calls.diagonal() >= sigma2 / 0.01
    assert 20 <= hubs.sum() <= 300
    np.testing.assert_allclose(sd[hubs], exact_sd[hubs], rtol=1e-3)
    ratio = sd / exact_sd
    assert ratio.min() > 1 - 1e-6  # an interval is never narrower than the exact one
    assert ratio[~hubs].max() <= np.sqrt(2)  # and the others' at most √2 wider


def test_substitutes_are_told_apart_where_the_difference_in_means_is_not() -> None:
    """One slot in the prompt: `good` (+0.4) or `plain` (no effect), never both. The difference
    in means charges `plain` for the `good` it displaced; the joint model, with the holdout as
    the control, does not."""
    rows, outcomes = [], {}
    for i in range(600):
        holdout, item = i % 6 == 0, ["good", "plain"][i % 2]
        event = f"c{i}"
        rows.append((event, "s", "v1", [] if holdout else [item], holdout))
        noise = (0.3, -0.3, 0.1, -0.1)[(i // 6) % 4]
        outcomes[event] = noise + (0.4 if item == "good" and not holdout else 0.0)
    receipts = calls(_interactions(rows), _scores(outcomes))
    by_item = {r["item_id"]: r for r in pack_usage(receipts, KNOWN).iter_rows(named=True)}
    good, plain = by_item["good"], by_item["plain"]
    assert plain["raw_effect"] == pytest.approx(-0.4 * 200 / 300)  # good 200, holdout 100
    old = pack_usage(receipts, KNOWN, UsageConfig(joint=False))
    assert old.filter(pl.col("item_id") == "plain")["verdict"].item() == "harmful"  # round 3
    assert plain["verdict"] == "unclear" and abs(plain["effect"]) < 0.03
    assert good["verdict"] == "helpful" and good["effect"] == pytest.approx(0.4, abs=0.03)
