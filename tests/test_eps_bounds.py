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


def test_auc_se_is_the_half_width_of_hanley_mcneil_and_says_nan_without_both_classes():
    """auc_se against the variance auc_interval inverts, at several AUCs and sizes (the interval is a score interval since issue 40:
    each end A sits at z * sqrt(V(A)) from the AUC); nan without IN or OUT; a perfect AUC still has a (tiny) error."""
    from achilles.core.results import auc_interval, auc_se
    for a, n1, n0 in [(0.5, 100, 100), (0.7, 30, 80), (0.93, 1000, 17), (0.2, 5, 5)]:
        lo, hi = auc_interval(a, n1, n0)
        for b in (lo, hi):
            assert abs(abs(b - a) - 1.959963984540054 * auc_se(b, n1, n0)) < 1e-9 or b in (0.0, 1.0)
    assert math.isnan(auc_se(0.5, 0, 5)) and math.isnan(auc_se(0.5, 5, 0)) and math.isfinite(auc_se(0.5, 1, 1))
    assert 0 < auc_se(1.0, 10, 10) < 1e-4


def test_null_inflation_takes_the_upper_tail_when_it_is_heavier_than_the_rms():
    "190 null AUCs at 0.5 and 10 at z = 3: the RMS is 0.67, the upper 97.5 % quantile 3, so the widening is 3 / 1.96."
    from achilles.core.results import auc_se, null_inflation
    se0 = auc_se(0.5, 100, 100)
    aucs = np.r_[np.full(190, 0.5), np.full(10, 0.5 + 3 * se0)]
    assert abs(null_inflation(aucs, 100, 100) - 3 / 1.959963984540054) < 1e-9
    assert null_inflation([0.0, 1.0], 10, 10) > 1  # AUCs of exactly 0 and 1 are AUCs


def test_bh_and_gdp_edges():
    from achilles.core.results import bh_q_values
    assert list(bh_q_values([1.0, 0.01])) == [1.0, 0.02]  # a p-value of exactly 1 is a p-value
    with pytest.raises(ValueError, match="p-values"):
        bh_q_values([0.5, 1.5])
    with pytest.raises(ValueError, match="delta=1.0"):
        gdp_epsilon(1.0, 1.0)
    assert gdp_epsilon(0.1, 0.5) == 0.0  # a weak mechanism at a large δ: no ε needed
