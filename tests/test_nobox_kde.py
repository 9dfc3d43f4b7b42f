"""KDE membership disclosure (Pathak & Jana): the 1-D KDE against scipy and scikit-learn (ties, many values, a point mass,
one value), the oracles (S copies R: AUC = 1 - q/2; S independent: AUC about 0.5 and KS does not reject; realistic:
probabilities non-increasing in the distance), Method 1, the metric contract, bad arguments and the CLI."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import gaussian_kde
from sklearn.metrics import roc_auc_score
from sklearn.neighbors import KernelDensity

from achilles.core.data import load_adult
from achilles.core.testing import check_metric
from achilles.neighbours import count_matches
from achilles.core.base import common_schema
from achilles.nobox import METRICS, leaky_setting
from achilles.nobox.kde import KDE1D, KDEMembershipAttack, kde_bandwidth, membership_log_odds, method1


@pytest.fixture(scope="module")
def adult():
    return load_adult()


@pytest.fixture(scope="module")
def leak(adult):
    return {f: leaky_setting(adult, f, n_train=1500, rng=0) for f in (0.0, 0.5, 1.0)}


def _categorical(n, n_cols=4, card=3, seed=0):
    "A small categorical population with many duplicate rows."
    g = np.random.default_rng(seed)
    return pd.DataFrame({f"c{j}": pd.Series(g.integers(0, card, n)).map(lambda v: f"v{v}") for j in range(n_cols)})


@pytest.mark.parametrize("x", [np.random.default_rng(1).integers(0, 18, 3000) / 17,  # ties
                               np.r_[np.zeros(50), np.ones(3)],  # duplicates, two values
                               np.random.default_rng(2).exponential(0.1, 5)])  # tiny
def test_kde_exact_against_scipy_and_sklearn(x):
    h = kde_bandwidth(x)
    k = KDE1D(x, h)
    assert not k.binned
    q = np.linspace(-0.2, 1.3, 157)
    np.testing.assert_allclose(k.log_pdf(q), gaussian_kde(x).logpdf(q), rtol=1e-9, atol=1e-9)
    sk = KernelDensity(bandwidth=h).fit(x[:, None]).score_samples(q[:, None])
    np.testing.assert_allclose(k.log_pdf(q), sk, rtol=1e-7, atol=1e-7)


def test_kde_binned_within_bound():
    g = np.random.default_rng(3)
    x = np.abs(g.normal(0.2, 0.1, 40_000))
    h = kde_bandwidth(x); k = KDE1D(x, h)
    assert k.binned and k.delta_over_h <= 1 / 16 + 1e-12
    q = np.linspace(x.min() - 3 * h, x.max() + 3 * h, 400)
    ref = gaussian_kde(x).logpdf(q)
    u = 3.0  # queries are within 3 bandwidths of some data: relative error per term <= (δ/h)²(u²+1)/8
    bound = k.delta_over_h ** 2 * (u * u + 1) / 8
    assert np.abs(np.exp(k.log_pdf(q) - ref) - 1).max() <= bound * 1.01


def test_kde_threads_and_tail():
    x = np.random.default_rng(4).normal(size=5000)
    k = KDE1D(x, kde_bandwidth(x))
    q = np.linspace(-60, 60, 1001)
    a, b = k.log_pdf(q, n_jobs=1), k.log_pdf(q, n_jobs=2)
    assert np.array_equal(a, b)
    assert np.isfinite(a).all()  # scipy's density underflows to 0 out there; the log-space sum does not


def test_point_mass_and_bad_kde():
    k = KDE1D(np.zeros(10), kde_bandwidth(np.zeros(10), floor=1e-3))
    assert k.h == 1e-3
    lp = k.log_pdf([0.0, 0.1, 0.2])
    assert np.isfinite(lp).all() and lp[0] > lp[1] > lp[2]
    with pytest.raises(ValueError, match="at least one"): KDE1D([], 1.0)
    with pytest.raises(ValueError, match="NaN"): KDE1D([0.0, np.nan], 1.0)
    with pytest.raises(ValueError, match="h="): KDE1D([0.0], 0.0)


def test_equal_distances_equal_probabilities():
    km, kn = KDE1D(np.r_[0, 0, 1, 2] / 17, 0.02), KDE1D(np.r_[1, 2, 3, 3] / 17, 0.02)
    d = np.r_[0, 1, 0, 2, 1, 0] / 17
    L = membership_log_odds(d, km, kn)
    assert L[0] == L[2] == L[5] and L[1] == L[4]


def test_oracle_copy_auc_from_duplicates():
    pop = _categorical(4000, n_cols=6, card=4, seed=5)
    train, holdout = pop.iloc[:2000].reset_index(drop=True), pop.iloc[2000:].reset_index(drop=True)
    a = KDEMembershipAttack()
    r = a.evaluate(train, train.copy(), holdout, rng=0)
    assert (a.test_distances_[a.test_labels_ == 1] == 0).all()
    # q from the records themselves: test non-members with an exact duplicate in R
    schema = common_schema(train, train, holdout)
    dn = a.test_distances_[a.test_labels_ == 0]
    q = float(np.mean(dn == 0))
    assert 0.2 < q < 0.99  # the population has many duplicates: the oracle is not trivial
    assert math.isclose(r.metrics["auc"], 1 - q / 2, rel_tol=0, abs_tol=1e-12)
    # distance 0 is exactly an exact duplicate in R (count_matches on the tables), and q is about the population's share
    dup = count_matches(holdout, train, schema=schema) > 0
    assert np.array_equal(a.distances(holdout) == 0, dup)
    assert math.isclose(float(dup.mean()), q, abs_tol=0.06)


def test_oracle_independent(leak):
    s = leak[0.0]
    r = KDEMembershipAttack().evaluate(s.train, s.synthetic, s.control, rng=1)
    assert abs(r.metrics["auc"] - 0.5) < 0.06 and r.ci_low == 0.0
    assert r.metrics["ks_pvalue"] > 0.01


@pytest.mark.parametrize("f", [0.5, 1.0])
def test_realistic_monotone_and_auc_of_distance(leak, f):
    "With one shared bandwidth (our earlier form, an option) the realistic attack is a decreasing function of the distance."
    s = leak[f]
    a = KDEMembershipAttack("realistic", shared_bandwidth=True)
    r = a.evaluate(s.train, s.synthetic, s.control, rng=0)
    o = np.argsort(a.test_distances_, kind="stable")
    assert np.all(np.diff(r.scores[o]) <= 1e-12)
    assert np.all(np.diff(a.test_log_odds_[o]) <= 1e-9)
    np.testing.assert_allclose(a.sweep_["auc"].dropna(), roc_auc_score(a.test_labels_, -a.test_distances_), atol=1e-12)


def test_true_beats_nothing_and_ranks_leaks(leak):
    aucs = [KDEMembershipAttack().evaluate(s.train, s.synthetic, s.control, rng=0).metrics["auc"] for s in leak.values()]
    assert aucs[0] < aucs[1] < aucs[2] and aucs[2] > 0.99


def test_result_fields_and_unresolved_fpr(leak):
    s = leak[0.5]
    r = KDEMembershipAttack().evaluate(s.train, s.synthetic, s.control, rng=0)
    m = r.metrics
    n_neg = m["n_test_non_members"]
    assert n_neg == 450
    for lv in (1e-1, 1e-2):
        assert 0 <= m[f"tpr@{lv:g}_low"] <= m[f"tpr@{lv:g}"] <= m[f"tpr@{lv:g}_high"] <= 1
    for lv in (1e-3, 1e-4, 1e-5, 1e-6):  # below 1 / 450: unresolved
        assert math.isnan(m[f"tpr@{lv:g}"])
    assert math.isclose(r.value, max(0.0, 2 * m["auc"] - 1))
    assert set(np.unique(r.labels)) == {0, 1} and ((r.scores >= 0) & (r.scores <= 1)).all()
    assert math.isclose(m["accuracy"], float(np.mean((r.scores >= 0.5) == (r.labels == 1))))
    assert math.isclose(m["f1_baseline"], 2 / 3)


def test_balance_and_prior(leak):
    s = leak[0.5]
    a = KDEMembershipAttack(balance=0.2, prior=None)
    a.evaluate(s.train, s.synthetic, s.control, rng=0)
    share = a.test_labels_.mean()
    assert abs(share - 0.2) < 0.01 and a.prior_ == 0.2
    p = KDEMembershipAttack().fit(s.train, s.synthetic, s.control, rng=0)
    lo = KDEMembershipAttack(prior=0.1).fit(s.train, s.synthetic, s.control, rng=0)
    assert (lo.predict_proba(s.control.iloc[:50]) <= p.predict_proba(s.control.iloc[:50]) + 1e-15).all()


def test_method1_counts():
    t = method1(np.arange(10) / 10, np.r_[0.0, 0.05, 0.5, 0.95], np.r_[1, 0, 1, 0], percentiles=(10, 50, 90))
    ref = []
    for p in (10, 50, 90):
        tau = np.percentile(np.arange(10) / 10, p)
        pred = np.r_[0.0, 0.05, 0.5, 0.95] <= tau
        ref.append(int(np.sum(pred & (np.r_[1, 0, 1, 0] == 1))))
    assert t["tp"].tolist() == ref


def test_contract_and_registry(leak):
    s = leak[0.5]
    assert check_metric(KDEMembershipAttack(), s.train, s.synthetic, s.control)
    assert check_metric(KDEMembershipAttack("realistic", threshold=50), s.train, s.synthetic, s.control)
    assert isinstance(METRICS.make("kde_membership", variant="realistic"), KDEMembershipAttack)


def test_deterministic_across_threads(leak):
    s = leak[0.5]
    a = KDEMembershipAttack(n_jobs=1).evaluate(s.train, s.synthetic, s.control, rng=3)
    b = KDEMembershipAttack(n_jobs=2).evaluate(s.train, s.synthetic, s.control, rng=3)
    assert np.array_equal(a.scores, b.scores)
    assert pd.DataFrame([a.to_row()]).equals(pd.DataFrame([b.to_row()]))  # every field equal (NaN equal to NaN)


def test_errors(leak):
    s = leak[0.5]
    with pytest.raises(ValueError, match="empty"): KDEMembershipAttack().evaluate(s.train.iloc[:0], s.synthetic, s.control)
    with pytest.raises(ValueError, match="empty"): KDEMembershipAttack().evaluate(s.train, s.synthetic, s.control.iloc[:0])
    with pytest.raises(ValueError, match="lacks the column"):
        KDEMembershipAttack().evaluate(s.train, s.synthetic.drop(columns="age"), s.control)
    for bad in (0, 100, -5, 150):
        with pytest.raises(ValueError, match="threshold"): KDEMembershipAttack("realistic", threshold=bad)
    with pytest.raises(ValueError, match="realistic"): KDEMembershipAttack(threshold=50)
    with pytest.raises(ValueError, match="variant"): KDEMembershipAttack("oracle")
    with pytest.raises(ValueError, match="control"): KDEMembershipAttack().evaluate(s.train, s.synthetic, None)
    # a percentile that leaves one supposed group empty: S copies R, more than 60 % of the distances are 0
    pop = _categorical(1000, n_cols=2, card=2, seed=1)
    with pytest.raises(ValueError, match="supposed group is empty"):
        KDEMembershipAttack("realistic", threshold=10).evaluate(pop.iloc[:500], pop.iloc[:500], pop.iloc[500:])


def test_cli(tmp_path, leak):
    from achilles.cli import main
    s = leak[0.5]
    paths = {}
    for k in ("train", "synthetic", "control"):
        paths[k] = tmp_path / f"{k}.csv"; getattr(s, k).to_csv(paths[k], index=False)
    store = tmp_path / "r.sqlite"
    base = ["kde", "--train", str(paths["train"]), "--synthetic", str(paths["synthetic"]), "--holdout", str(paths["control"])]
    assert main(base + ["--variant", "realistic", "--results", str(store)]) == 0
    from achilles.core.results import ResultsStore
    rows = ResultsStore(store).read(kind="metric")
    assert len(rows) == 1 and rows["item"].iloc[0] == "kde_membership_realistic" and 0 <= rows["value"].iloc[0] <= 1
    assert main(base + ["--variant", "realistic", "--threshold", "120", "--results", ""]) == 2
    assert main(base[:-2] + ["--results", ""]) == 2  # no holdout


def test_paper_reading_options(leak):
    "The paper's reading (d < threshold, a Scott bandwidth per group, floor only for a point mass) against our earlier form."
    s = leak[0.5]
    paper = KDEMembershipAttack("realistic", threshold=50).fit(s.train, s.synthetic, s.control, rng=0)
    ours = KDEMembershipAttack("realistic", threshold=50, split="<=", shared_bandwidth=True, floor="always").fit(
        s.train, s.synthetic, s.control, rng=0)
    d, tau = paper.fit_distances_, np.percentile(paper.fit_distances_, 50)
    km, kn = paper.kdes_[50.0]
    from achilles.nobox.kde import kde_bandwidth
    assert math.isclose(km.h, kde_bandwidth(d[d < tau])) and math.isclose(kn.h, kde_bandwidth(d[d >= tau]))
    om, on = ours.kdes_[50.0]
    assert om.h == on.h == max(kde_bandwidth(d), 0.1 * np.diff(np.unique(d)).min())
    # a point mass still gets a finite KDE under the paper's reading
    r = KDEMembershipAttack().evaluate(s.train, s.train, s.control, rng=0)
    assert np.isfinite(r.metrics["auc"])
    with pytest.raises(ValueError, match="split"): KDEMembershipAttack(split="lt")
    with pytest.raises(ValueError, match="floor"): KDEMembershipAttack(floor="never")
    with pytest.raises(TypeError, match="shared_bandwidth"): KDEMembershipAttack(shared_bandwidth="yes")


# --- the mutation run's survivors (tests/MUTATION.md, nobox/kde) -----------------------------------------------------------

def test_bandwidth_rules_against_scipy():
    from scipy.stats import gaussian_kde
    from achilles.nobox.kde import kde_bandwidth
    x = np.random.default_rng(0).normal(size=137)
    sd = np.std(x, ddof=1)
    for rule in ("scott", "silverman"):
        assert kde_bandwidth(x, rule) == pytest.approx(gaussian_kde(x, bw_method=rule).factor * sd, rel=1e-12)
    assert kde_bandwidth(x, 0.5) == pytest.approx(0.5 * sd) and kde_bandwidth(x, 0.5, floor=9.0) == 9.0
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="bandwidth"): kde_bandwidth(x, bad)
    assert kde_bandwidth([3.0]) == 0.0 and kde_bandwidth([3.0], floor=0.1) == 0.1  # one value: no spread, the floor
    assert kde_bandwidth([0.0, 1.0]) == pytest.approx(2 ** -0.2 * np.std([0.0, 1.0], ddof=1))  # two values have a spread


def test_linear_binning_keeps_mass_and_mean():
    from achilles.nobox.kde import _linear_bin
    lo, delta, m = 1.0, 0.5, 9  # grid 1.0, 1.5, ..., 5.0
    inside = np.array([1.0, 1.2, 2.4, 3.0, 4.99, 5.0, 3.0])
    w = _linear_bin(inside, lo, delta, m)
    grid = lo + delta * np.arange(m)
    assert w.sum() == pytest.approx(len(inside)) and (w >= 0).all()
    assert (w * grid).sum() == pytest.approx(inside.sum())  # linear binning keeps the first moment
    assert w[4] == pytest.approx(2.0)  # 3.0 sits on a grid point: all its weight there, twice
    out = _linear_bin(np.array([-7.0, 40.0]), lo, delta, m)  # outside the grid: all to the nearest end
    assert out[0] == 1.0 and out[-1] == 1.0 and out.sum() == 2.0


def test_binned_grid_is_capped():
    from achilles.nobox.kde import KDE1D, _MAX_GRID
    x = np.linspace(0.0, 1.0, 200_001)  # every grid point gets weight
    k = KDE1D(x, 1e-7)
    assert k.binned and _MAX_GRID == 65_536 and len(k.centres) == 65_536


def test_method1_scores_and_percentile_bounds():
    from achilles.nobox.kde import PERCENTILES, _scores, method1
    assert PERCENTILES == tuple(range(10, 100, 10))  # the paper's 10th to 90th percentiles
    pred, y = np.array([True, True, False, False, True]), np.array([1, 0, 1, 0, 1])
    s = _scores(pred, y)  # tp 2, fp 1, fn 1, tn 1
    assert (s["tp"], s["fp"], s["fn"], s["tn"], s["accuracy"], s["f1"]) == (2, 1, 1, 1, 0.6, pytest.approx(4 / 6))
    assert _scores(np.zeros(3, bool), np.zeros(3, int))["f1"] == 0.0  # no positive anywhere: F1 0, not NaN
    fd = np.arange(100.0)
    t = method1(fd, [5.0, 50.0], [1, 0], percentiles=[0.5, 99.5])  # any percentile strictly inside (0, 100)
    assert t["threshold"].tolist() == [np.percentile(fd, 0.5), np.percentile(fd, 99.5)]
    for bad in (0, 100):
        with pytest.raises(ValueError, match="percentile"): method1(fd, [5.0], [1], percentiles=[bad])


def test_fit_kdes_needs_both_groups_and_the_floor():
    from achilles.nobox.kde import _floor, fit_kdes
    for y in ([1, 1, 1], [0, 0, 0]):
        with pytest.raises(ValueError, match="both KDEs need at least one"): fit_kdes([0.1, 0.2, 0.3], y)
    assert _floor(np.array([2.0, 2.0, 2.0])) == 1.0 and _floor(np.array([1.0, 1.5, 1.7, 1.7])) == pytest.approx(0.02)


def test_attack_sizes_at_a_balance():
    from achilles.nobox.kde import _attack_sizes
    assert _attack_sizes(1000, 1000, 0.5) == (1000, 1000)
    assert _attack_sizes(1000, 300, 0.5) == (300, 300)  # the smaller side bounds both
    assert _attack_sizes(1000, 300, 0.75) == (900, 300)  # 3 members per non-member
    assert _attack_sizes(100, 300, 0.75) == (100, 33)
    assert _attack_sizes(1000, 2, 0.6) == (3, 2)  # 0.6 / 0.4 × 2 is 2.9999999999999996 in floating point: 3 members, not 2


def test_realistic_attack_rates_threshold_and_predictions(leak):
    from achilles.nobox.kde import membership_probability
    s = leak[0.5]
    a = KDEMembershipAttack(variant="realistic")
    r = a.evaluate(s.train, s.synthetic, s.control, rng=0)
    y, m = r.labels, r.metrics
    pred = r.scores >= 0.5
    assert r.attack_rate == np.sum(pred & (y == 1)) / y.sum() and r.control_rate == np.sum(pred & (y == 0)) / (len(y) - y.sum())
    assert r.baseline_rate == 0.5 and m["accuracy_baseline"] == max(y.mean(), 1 - y.mean())
    best = a.sweep_["percentile"].iloc[int(np.argmax(a.sweep_["accuracy"].to_numpy()))]
    assert m["threshold_percentile"] == best and m["threshold_distance"] == np.percentile(a.fit_distances_, best)
    assert (m["bandwidth_member"], m["bandwidth_non_member"]) == (a.kdes_[best][0].h, a.kdes_[best][1].h)
    assert set(a.sweep_["percentile"]) <= set(range(10, 100, 10))  # percentiles that leave a group empty are left out
    rec = s.train.iloc[:40]
    d = a.distances(rec)
    np.testing.assert_allclose(a.predict_proba(rec), membership_probability(a._log_odds(d, best)))
    with pytest.raises(ValueError, match="records is empty"): a.distances(rec.iloc[:0])
    fixed = KDEMembershipAttack(variant="realistic", threshold=0.5, bandwidth=0.5)  # the open bounds: any value inside
    s0 = leak[0.0]  # no copies: no distance 0, so the 0.5th percentile splits the fitting distances
    fixed.evaluate(s0.train, s0.synthetic, s0.control, rng=0)
    assert list(fixed.kdes_) == [0.5]
    np.testing.assert_allclose(fixed.predict_proba(rec), membership_probability(fixed._log_odds(fixed.distances(rec), 0.5)))
    with pytest.raises(ValueError, match="bandwidth"): KDEMembershipAttack(bandwidth=0.0)


def _direct_log_pdf(x, h, q):
    "The KDE's log density term by term in numpy (no window, no binning)."
    z = (np.asarray(q, float)[:, None] - np.asarray(x, float)[None, :]) / h
    return np.log(np.exp(-0.5 * z * z).sum(1) / (len(x) * h * math.sqrt(2 * math.pi)))


def test_exact_kde_with_a_wide_bandwidth():
    "A bandwidth wider than the data's spread: every centre's term matters, so the window (reach × h) must scale with h."
    x = np.array([0.0, 5.0, 10.0, 10.0])
    k = KDE1D(x, 4.0)
    assert not k.binned and k.delta_over_h == 0.0  # exact: no grid, so no δ/h
    q = np.linspace(-30, 40, 71)
    np.testing.assert_allclose(k.log_pdf(q), _direct_log_pdf(x, 4.0, q), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(k.pdf(q), np.exp(k.log_pdf(q)), rtol=1e-15)


def test_binned_grid_is_exactly_the_coarsest_that_meets_the_bound():
    "m = ceil((hi − lo) / (h/16)) + 1 points from lo to hi: δ ≤ h/16, and no finer (the grid's size is the cost)."
    x = np.random.default_rng(7).uniform(0.0, 1.0, 20_000)
    h = 0.01
    k = KDE1D(x, h)
    lo, hi = x.min(), x.max()
    m = math.ceil((hi - lo) / (h / 16)) + 1
    assert k.binned and len(k.centres) == m  # uniform data: every grid point has weight
    np.testing.assert_allclose(k.centres, lo + (hi - lo) / (m - 1) * np.arange(m), rtol=0, atol=1e-12)
    assert k.centres[-1] == pytest.approx(hi, abs=1e-12) and k.delta_over_h == pytest.approx((hi - lo) / (m - 1) / h)
    assert 1 / 16 * (m - 2) / (m - 1) < k.delta_over_h <= 1 / 16


def test_exact_or_binned_at_the_boundary():
    "Exact while the distinct values are no more than the grid's points (and always for two values); binned above."
    k = KDE1D(np.arange(5.0), 16.0)  # grid: ceil(4 / 1) + 1 = 5 points, 5 distinct values: exact
    assert not k.binned and np.array_equal(k.centres, np.arange(5.0))
    k = KDE1D(np.array([0.0, 1e-9]), 1.0)  # a one-point grid, two values: exact
    assert not k.binned and len(k.centres) == 2
    k = KDE1D(np.array([0.0, 0.5, 1.0]), 16.0)  # a two-point grid, three values: binned, the middle value split in half
    assert k.binned and np.array_equal(k.centres, [0.0, 1.0]) and np.allclose(np.exp(k.logw), [0.5, 0.5])


def test_binned_kde_across_a_wide_gap():
    "Two far clusters on one grid: the empty grid points between them are dropped, so a query in the gap still finds them."
    g = np.random.default_rng(8)
    x = np.r_[g.normal(0, 0.01, 30_000), g.normal(10, 0.01, 30_000)]
    k = KDE1D(x, 0.1)
    assert k.binned and (np.exp(k.logw) > 0).all()
    q = np.array([5.0, 2.0, 8.0])  # about 20-50 bandwidths from the nearest cluster
    lp = k.log_pdf(q)
    assert np.isfinite(lp).all()
    ref = gaussian_kde(x, bw_method=0.1 / x.std(ddof=1)).logpdf(q)
    np.testing.assert_allclose(lp, ref, rtol=0.02)


def test_membership_log_odds_with_a_prior():
    km, kn = KDE1D([0.0, 0.1, 0.1], 0.05), KDE1D([0.2, 0.3], 0.05)
    d = np.array([0.0, 0.15, 0.3])
    for prior in (0.5, 0.2, 0.9):
        want = km.log_pdf(d) - kn.log_pdf(d) + math.log(prior / (1 - prior))
        np.testing.assert_allclose(membership_log_odds(d, km, kn, prior=prior), want, rtol=1e-12)


def test_scores_counts_and_f1():
    from achilles.nobox.kde import _scores
    pred = np.array([1, 1, 1, 1, 1, 0, 0, 0], bool)
    y = np.array([1, 1, 1, 0, 0, 1, 0, 0])
    sc = _scores(pred, y)
    assert (sc["tp"], sc["fp"], sc["fn"], sc["tn"]) == (3, 2, 1, 2)
    assert sc["f1"] == pytest.approx(6 / 9) and sc["accuracy"] == pytest.approx(5 / 8)
    assert _scores(np.zeros(3, bool), np.zeros(3, int))["f1"] == 0.0
    assert _scores(np.array([1, 1], bool), np.array([1, 0]))["f1"] == pytest.approx(2 / 3)  # tp = fp = 1, fn = 0
    assert _scores(np.array([1, 0], bool), np.array([1, 1]))["f1"] == pytest.approx(2 / 3)  # tp = fn = 1, fp = 0


def test_floor_and_bandwidth_modes():
    from achilles.nobox.kde import _bandwidth, _floor
    assert _floor(np.array([0.0, 0.0, 0.5])) == pytest.approx(0.05)  # two distinct values: a tenth of their gap
    x = np.array([0.0, 0.1, 0.2, 0.3])
    h = kde_bandwidth(x)
    assert _bandwidth(x, "scott", 1.0, "degenerate") == h  # the rule's h, even below the floor
    assert _bandwidth(x, "scott", 1.0, "always") == 1.0
    assert _bandwidth(x, "scott", 1e-6, "always") == h
    assert _bandwidth(np.zeros(3), "scott", 0.3, "degenerate") == 0.3


def test_roc_metrics_resolves_fpr_one_over_negatives():
    from achilles.nobox.kde import roc_metrics
    y = np.r_[np.ones(10), np.zeros(10)]
    s = np.r_[np.arange(10) + 10.5, np.arange(10)]
    m, _ = roc_metrics(s, y, fpr_levels=(0.1, 0.09))
    assert m["tpr@0.1"] == 1.0 and math.isnan(m["tpr@0.09"])  # 1/10 is resolvable with 10 negatives; below it is not


def _tiny(n_train, n_control, n_syn=3):
    pop = _categorical(n_train + n_control + n_syn, n_cols=3, card=3, seed=11)
    return (pop.iloc[:n_train].reset_index(drop=True), pop.iloc[n_train:n_train + n_control].reset_index(drop=True),
            pop.iloc[n_train + n_control:].reset_index(drop=True))


def test_smallest_attack_sets():
    "Two members and two non-members suffice (one to fit, one to test, each); one does not, with the sizes in the message."
    train, control, syn = _tiny(2, 2, n_syn=1)  # a one-record synthetic table: the nearest is its only record
    a = KDEMembershipAttack(test_size=0.5)
    a.fit(train, syn, control, rng=0)
    assert len(a.fit_distances_) == 2 and len(a.test_distances_) == 2
    np.testing.assert_array_equal(a.distances(train), a.distances(train.iloc[::-1])[::-1])  # a one-record release still answers
    train, control, syn = _tiny(20, 1)
    with pytest.raises(ValueError, match="attack set of 9 members and 1 non-members"):
        KDEMembershipAttack(balance=0.9).fit(train, syn, control, rng=0)
    train, control, syn = _tiny(1, 20)
    with pytest.raises(ValueError, match="attack set of 1 members and 1 non-members"):
        KDEMembershipAttack().fit(train, syn, control, rng=0)


def test_attack_set_takes_each_record_once(leak):
    "When the attack set is the whole of train and control, every record's distance is in it exactly once."
    s = leak[0.5]
    n = min(len(s.train), len(s.control))
    train, control = s.train.iloc[:n], s.control.iloc[:n]
    a = KDEMembershipAttack().fit(train, s.synthetic, control, rng=0)
    dm, dn = a.all_distances_
    np.testing.assert_array_equal(np.sort(dm), np.sort(a.distances(train)))
    np.testing.assert_array_equal(np.sort(dn), np.sort(a.distances(control)))


def test_a_tie_counts_as_member(leak):
    "P(member | d) = 0.5 classifies as member (the paper: P ≥ 0.5), in the sweep and in the result; rates over one of each."
    s = leak[0.5]
    a = KDEMembershipAttack("realistic", threshold=50).fit(s.train, s.synthetic, s.control, rng=0)
    a.kdes_ = {50: (KDE1D([0.0], 1.0), KDE1D([1.0], 1.0))}  # equal bandwidths: equal densities at d = 0.5
    a.test_distances_, a.test_labels_ = np.array([0.5, 0.5]), np.array([1, 0])
    r = a._score(np.random.default_rng(0))
    assert a.test_log_odds_.tolist() == [0.0, 0.0]
    assert (a.sweep_["tp"].iloc[0], a.sweep_["fp"].iloc[0]) == (1, 1)
    assert r.attack_rate == 1.0 and r.control_rate == 1.0 and r.metrics["tp"] == 1


def test_predict_proba_after_fit_uses_the_middle_percentile(leak):
    "Before any score there is no sweep: the realistic attack predicts with the median percentile's KDEs."
    from achilles.nobox.kde import membership_probability
    s = leak[0.5]
    a = KDEMembershipAttack("realistic").fit(s.train, s.synthetic, s.control, rng=0)
    keys = list(a.kdes_)
    assert len(keys) >= 3
    rec = s.train.iloc[:30]
    np.testing.assert_allclose(a.predict_proba(rec), membership_probability(a._log_odds(a.distances(rec), keys[len(keys) // 2])))
