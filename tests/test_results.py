"""The intervals and summaries every result carries (achilles.core.results), against independent formulas and simulation, on
the unbalanced and edge cases the notebook's examples do not reach (an audit's IN and OUT pools are unbalanced)."""
import math

import numpy as np
import pytest
from scipy import stats

from achilles.core.results import (RiskResult, _fmt, _z, auc_interval, bootstrap_interval, check_labels, tpr_at_fpr,
                                   wilson_interval)


def _hanley_mcneil_se(a, n_abnormal, n_normal):
    "Hanley & McNeil (1982), Eq. 1: Q1 goes with the abnormal (positive, IN) cases, Q2 with the normal (OUT) ones."
    q1, q2 = a / (2 - a), 2 * a ** 2 / (1 + a)
    return math.sqrt((a * (1 - a) + (n_abnormal - 1) * (q1 - a ** 2) + (n_normal - 1) * (q2 - a ** 2)) / (n_abnormal * n_normal))


@pytest.mark.parametrize("auc,n_pos,n_neg", [(0.8, 450, 50), (0.8, 50, 450), (0.65, 300, 20), (0.95, 40, 400), (0.5, 7, 3)])
def test_auc_interval_is_hanley_mcneil_on_unbalanced_classes(auc, n_pos, n_neg):
    lo, hi = auc_interval(auc, n_pos, n_neg)
    h = 1.959963984540054 * _hanley_mcneil_se(auc, n_pos, n_neg)
    assert lo == pytest.approx(max(0.0, auc - h), abs=1e-12) and hi == pytest.approx(min(1.0, auc + h), abs=1e-12)


def test_auc_interval_with_450_in_and_50_out():
    "The issue's example: [0.748, 0.852]; with the two counts swapped it would be [0.724, 0.876]."
    lo, hi = auc_interval(0.8, 450, 50)
    assert (round(lo, 3), round(hi, 3)) == (0.748, 0.852)
    assert (round(auc_interval(0.8, 50, 450)[0], 3)) == 0.724


def test_auc_interval_width_matches_simulation():
    """Exponential scores (Hanley and McNeil's derivation): the spread of the empirical AUC over 3,000 draws with 450 IN and
    50 OUT records matches the interval's standard error within 10 %; swapping the two counts would be 46 % off."""
    g = np.random.default_rng(0)
    a, n_pos, n_neg, reps = 0.8, 450, 50, 3000
    pos = g.exponential(1 / (1 / a - 1), size=(reps, n_pos))  # P(pos > neg) = a when neg ~ Exp(1)
    neg = g.exponential(1.0, size=(reps, n_neg))
    ranks = stats.rankdata(np.concatenate([pos, neg], axis=1), axis=1)
    aucs = (ranks[:, :n_pos].sum(1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    assert aucs.mean() == pytest.approx(a, abs=0.005)
    lo, hi = auc_interval(a, n_pos, n_neg)
    assert (hi - lo) / (2 * 1.959963984540054) == pytest.approx(aucs.std(), rel=0.1)


def test_auc_interval_edges():
    assert all(math.isnan(x) for x in auc_interval(0.7, 0, 10)) and all(math.isnan(x) for x in auc_interval(0.7, 10, 0))
    assert auc_interval(1.0, 1, 1) == pytest.approx((1.0 - 1.959963984540054 * math.sqrt(1e-12), 1.0), abs=1e-5)
    assert auc_interval(0.0, 5, 5)[0] == 0.0 and auc_interval(1.0, 5, 5)[1] == 1.0  # clipped
    lo90, hi90 = auc_interval(0.7, 30, 30, confidence=0.9)
    lo95, hi95 = auc_interval(0.7, 30, 30)
    assert (hi90 - lo90) / (hi95 - lo95) == pytest.approx(1.6448536269514722 / 1.959963984540054)


def _wilson(k, n, z):
    "The Wilson score interval, solving |p_hat - p| = z sqrt(p (1 - p) / n) for p."
    p = k / n
    roots = np.roots([1 + z * z / n, -(2 * p + z * z / n), p * p])
    return tuple(sorted(float(np.real(r)) for r in roots))


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (3, 7), (50, 100), (99, 100), (10, 10), (2, 300)])
def test_wilson_interval_solves_the_score_equation(k, n):
    lo, hi = wilson_interval(k, n)
    rlo, rhi = _wilson(k, n, 1.959963984540054)
    assert lo == pytest.approx(max(rlo, 0.0), abs=1e-9) and hi == pytest.approx(min(rhi, 1.0), abs=1e-9)
    assert lo <= k / n + 1e-12 and k / n <= hi + 1e-12


def test_wilson_interval_levels_and_edges():
    assert all(math.isnan(x) for x in wilson_interval(0, 0))
    for conf in (0.9, 0.95, 0.99, 0.8):
        lo, hi = wilson_interval(30, 100, conf)
        rlo, rhi = _wilson(30, 100, stats.norm.ppf(0.5 + conf / 2))
        assert (lo, hi) == pytest.approx((rlo, rhi), abs=1e-9)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0


def test_z_quantiles():
    for conf in (0.9, 0.95, 0.99, 0.8, 0.5):
        assert _z(conf) == pytest.approx(stats.norm.ppf(0.5 + conf / 2), abs=1e-12)


def test_bootstrap_interval():
    x = np.r_[np.ones(30), np.zeros(70)]
    lo, hi = bootstrap_interval(x, n_boot=2000, rng=0)
    assert lo < 0.3 < hi and hi - lo == pytest.approx(2 * 1.96 * math.sqrt(0.21 / 100), rel=0.15)
    assert bootstrap_interval(x, n_boot=500, rng=3) == bootstrap_interval(x, n_boot=500, rng=3)
    mlo, mhi = bootstrap_interval(np.arange(101.0), statistic=np.median, n_boot=500, rng=0)
    assert mlo < 50 < mhi and mhi - mlo < 30
    lo90, hi90 = bootstrap_interval(x, n_boot=2000, confidence=0.9, rng=0)
    assert lo <= lo90 and hi90 <= hi and (lo90, hi90) != (lo, hi)
    assert all(math.isnan(v) for v in bootstrap_interval([], rng=0))


def test_tpr_at_fpr_interpolates_between_roc_points():
    fpr, tpr = np.array([0.0, 0.0, 0.2, 0.6, 1.0]), np.array([0.0, 0.3, 0.5, 0.9, 1.0])
    assert tpr_at_fpr(fpr, tpr, 0.1) == pytest.approx(0.4)
    assert tpr_at_fpr(fpr, tpr, 0.5) == pytest.approx(0.8)
    assert tpr_at_fpr(fpr, tpr, 0.2) == 0.5  # on a point
    assert tpr_at_fpr(fpr, tpr, 0.0) == 0.3  # the highest TPR at FPR 0
    assert tpr_at_fpr(fpr, tpr, 1.0) == 1.0
    assert tpr_at_fpr(np.array([0.1, 1.0]), np.array([0.5, 1.0]), 0.05) == 0.0  # below the first point


def test_check_labels():
    assert check_labels([True, False], 2).tolist() == [1, 0]
    assert check_labels(np.array([1.0, 0.0, 1.0]), 3).tolist() == [1, 0, 1]
    for bad, msg in (([[1, 0]], "1-D"), ([1, 0, 1], "3 entries"), ([1, 2], r"0 \(OUT\) or 1 \(IN\)"), (["a", "b"], r"0 \(OUT\) or 1 \(IN\)"),
                     ([0.5, 1.0], r"such as \[np.float64\(0.5\)\]")):
        with pytest.raises(ValueError, match=msg):
            check_labels(bad, 2)
    with pytest.raises(ValueError, match="both IN"):
        check_labels([1, 1], 2, need_both=True)
    assert check_labels([1, 1], 2, need_both=False).tolist() == [1, 1]


def test_from_scores_on_unbalanced_labels():
    g = np.random.default_rng(1)
    y = np.r_[np.ones(450, int), np.zeros(50, int)]
    s = np.clip(0.5 + 0.25 * (y - 0.5) + g.normal(0, 0.2, len(y)), 0, 1)
    r = RiskResult.from_scores(s, y, fpr_level=0.1)
    from sklearn.metrics import roc_auc_score, roc_curve
    assert r.value == r.auc == pytest.approx(roc_auc_score(y, s))
    assert (r.ci_low, r.ci_high) == pytest.approx(auc_interval(r.auc, 450, 50))
    assert r.metrics["n_in"] == 450 and r.metrics["n_datasets"] == 500 and r.n == 500
    assert r.accuracy == pytest.approx(np.mean((s > 0.5) == (y == 1)))
    fpr, tpr, _ = roc_curve(y, s)
    assert r.tpr_at_low_fpr == pytest.approx(tpr_at_fpr(fpr, tpr, 0.1)) and r.fpr_level == 0.1
    assert r.metrics["tpr@0.1"] == pytest.approx(tpr_at_fpr(fpr, tpr, 0.1))
    assert (r.metrics["tpr@0.1_low"], r.metrics["tpr@0.1_high"]) == wilson_interval(round(r.metrics["tpr@0.1"] * 450), 450)
    assert math.isnan(r.metrics["tpr@0.01"]) and math.isnan(r.metrics["tpr@0.001"])  # below 1/50: no threshold resolves them


def test_from_scores_resolvable_levels_depend_on_the_out_count():
    y = np.r_[np.ones(10, int), np.zeros(100, int)]
    s = np.linspace(0, 1, 110)[::-1]
    r = RiskResult.from_scores(s, y)
    assert not math.isnan(r.metrics["tpr@0.01"]) and math.isnan(r.metrics["tpr@0.001"])  # 1/100 resolves 0.01, not 0.001
    assert r.value == 1.0 and r.metrics["tpr@0.01"] == 1.0
    r2 = RiskResult.from_scores(s[:60], np.r_[np.ones(10, int), np.zeros(50, int)])
    assert math.isnan(r2.metrics["tpr@0.01"]) and not math.isnan(r2.metrics["tpr@0.1"])


def test_accuracy_threshold_and_labels_keep_their_order():
    r = RiskResult.from_scores([0.5, 0.51, 0.49, 0.2], [1, 1, 0, 0])
    assert r.accuracy == 0.75  # 0.5 is not above 0.5: called OUT
    assert r.labels.tolist() == [1, 1, 0, 0] and r.scores.tolist() == [0.5, 0.51, 0.49, 0.2]
    with pytest.raises(ValueError, match="NaN"):
        RiskResult.from_scores([0.5, np.nan], [1, 0])
    with pytest.raises(ValueError, match="1-D"):
        RiskResult.from_scores([[0.5, 0.2]], [1, 0])


def test_rows_and_text():
    r = RiskResult("x", 0.25, 0.1, 0.4, "wilson", attack_rate=0.3, baseline_rate=0.5, n=4, metrics=dict(k=1),
                   parameters=dict(b=2, a=1))
    row = r.to_row()
    assert row["value"] == 0.25 and row["ci_low"] == 0.1 and row["ci_high"] == 0.4 and row["k"] == 1
    assert row["parameters"] == '{"a": 1, "b": 2}' and math.isnan(row["control_rate"])
    assert r.ci == (0.1, 0.4)
    assert repr(r) == "RiskResult(x: 0.250 [0.100, 0.400] (wilson), higher is riskier, baseline=0.500, n=4)"
    assert "parameters" not in RiskResult("y", 1.0).to_row()
    assert (_fmt(None), _fmt(math.nan), _fmt(0.12345), _fmt(3), _fmt("a")) == ("–", "–", "0.123", "3", "a")
    html = r._repr_html_()
    assert "<b>x</b>" in html and "0.250" in html and "[0.100, 0.400]" in html and ">k<" in html
    with pytest.raises(AttributeError, match="has no 'auc'"):
        r.auc
    with pytest.raises(ValueError, match="no per-item scores"):
        r.roc_curve()
