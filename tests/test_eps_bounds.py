"""Issue 36: the ε lower bounds on mechanisms whose privacy is known. A bound that exceeds the truth in more than 5 % of runs
would tell a custodian their generator leaks more than it does; one far below it tells them too little."""
import math

import numpy as np
import pytest
from scipy.special import ndtri

from achilles.core.results import eps_ceiling, eps_lower_gdp, epsilon_bounds, gdp_epsilon, gdp_mu_lower

RUNS, N, DELTA = 500, 1000, 1e-5


def _best_threshold(a_in, a_out, grid):
    "The threshold a separate training sample prefers (the audit chooses its threshold on training folds, never on the counts it scores)."
    tp = (a_in[:, None] > grid).sum(0); fp = (a_out[:, None] > grid).sum(0)
    return grid[int(np.argmax(epsilon_bounds(tp, len(a_in), fp, len(a_out), delta=DELTA)))]


def test_gaussian_mechanism_both_bounds_hold_and_gdp_comes_closer():
    "σ = 1: exactly 1-GDP, so its ε at δ is gdp_epsilon(1, δ). Both bounds stay below it in >= 95 % of 500 runs; GDP's is higher."
    g = np.random.default_rng(36)
    truth = gdp_epsilon(1.0, DELTA)
    grid = np.linspace(0.0, 4.0, 81)
    cp, gdp = [], []
    for _ in range(RUNS):
        t = _best_threshold(g.normal(1, 1, N), g.normal(0, 1, N), grid)
        tp, fp = int((g.normal(1, 1, N) > t).sum()), int((g.normal(0, 1, N) > t).sum())
        cp.append(float(epsilon_bounds(tp, N, fp, N, delta=DELTA)))
        gdp.append(eps_lower_gdp(tp, N, fp, N, delta=DELTA))
    cp, gdp = np.array(cp), np.array(gdp)
    assert (cp <= truth).mean() >= 0.95 and (gdp <= truth).mean() >= 0.95, ((cp <= truth).mean(), (gdp <= truth).mean())
    assert gdp.mean() > cp.mean() + 1.0, (gdp.mean(), cp.mean(), truth)  # the whole curve says more than one point's ratio


@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.0])
def test_randomised_response_bounds_hold_in_their_own_currency(eps0):
    """RR at ε0 (one bit, flipped with probability 1 / (1 + e^ε0)) is ε0-DP; at δ its tight ε is ln((p - δ) / (1 - p)). The
    Clopper-Pearson bound stays below that; the GDP statement, about μ, stays below RR's tightest μ, 2Φ⁻¹(p). The GDP ε is not a
    bound on RR's ε at small δ (its trade-off is not Gaussian): the docs say so, and this test shows it."""
    g = np.random.default_rng(int(eps0 * 100))
    p = math.exp(eps0) / (1 + math.exp(eps0))
    eps_true, mu_true = math.log((p - DELTA) / (1 - p)), 2 * float(ndtri(p))
    tp, fp = g.binomial(N, p, RUNS), g.binomial(N, 1 - p, RUNS)
    cp = epsilon_bounds(tp, N, fp, N, delta=DELTA)
    mu = gdp_mu_lower(tp, N, fp, N)
    assert (cp <= eps_true).mean() >= 0.95, (cp <= eps_true).mean()
    assert (mu <= mu_true).mean() >= 0.95, (mu <= mu_true).mean()
    assert cp.mean() > 0.5 * eps_true  # and not vacuous
    assert eps_lower_gdp(int(np.median(tp)), N, int(np.median(fp)), N, delta=DELTA) > eps_true  # the assumption matters


def test_a_perfect_test_reaches_the_ceiling_and_no_further():
    "Every IN flagged, no OUT: the bound equals its ceiling, which depends on n_in and n_out only (1,017 OUT: 5.45 at the audit's 0.0125)."
    assert float(epsilon_bounds(1000, 1000, 0, 1017, alpha=0.0125)) == float(eps_ceiling(1000, 1017, alpha=0.0125))
    assert abs(float(eps_ceiling(1000, 1017, alpha=0.0125)) - 5.45) < 0.01
    assert float(eps_ceiling(1000, 4000, alpha=0.0125)) > float(eps_ceiling(1000, 1017, alpha=0.0125))  # more OUT datasets, higher ceiling
