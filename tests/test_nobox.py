"""The two pieces every no-box metric shares (achilles.nobox): the paper's leaky setting (sizes, disjointness, the leak) and
`control_risk` (Eq. 8, its bootstrap interval reproduced draw by draw, the Wilson intervals, the edge cases)."""
import math

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import load_adult
from achilles.core.results import wilson_interval
from achilles.nobox import _resampled_means, control_risk, leaky_setting


@pytest.fixture(scope="module")
def small():
    return load_adult().iloc[:400].reset_index(drop=True)


def test_leaky_setting_sizes_disjointness_and_leak(small):
    s = leaky_setting(small, 0.25, n_train=100, n_control=60, n_reference=40, rng=0)
    assert (len(s.train), len(s.control), len(s.synthetic), len(s.reference)) == (100, 60, 100, 40)
    key = lambda d: set(map(tuple, d.astype(str).to_numpy()))
    assert not key(s.train) & key(s.control) and not key(s.train) & key(s.reference) and not key(s.control) & key(s.reference)
    assert len(s.leaked) == 25 and sorted(s.leaked) == list(s.leaked)
    leaked_rows = key(s.train.iloc[s.leaked])
    assert leaked_rows <= key(s.synthetic)  # the leaked training records are in the release ...
    assert len(key(s.synthetic) & key(s.train)) == len(leaked_rows)  # ... and no other training record is
    assert (s.synthetic.dtypes == small.dtypes).all() and s.fraction == 0.25
    assert leaky_setting(small, 0.0, n_train=100, rng=0).reference is None
    assert len(leaky_setting(small, 1.0, n_train=100, rng=0).control) == 100  # n_control defaults to n_train
    t = leaky_setting(small, 1.0, n_train=1, n_control=1, rng=3)  # the smallest setting
    assert len(t.train) == len(t.control) == len(t.synthetic) == 1 and key(t.synthetic) == key(t.train)


def test_leaky_setting_needs_exactly_2_train_plus_control_plus_reference_rows(small):
    df = small.iloc[:2 * 50 + 30 + 20]
    assert len(leaky_setting(df, 0.5, n_train=50, n_control=30, n_reference=20, rng=0).reference) == 20  # exactly enough
    with pytest.raises(ValueError, match="needs 2·n_train \\+ n_control \\+ n_reference = 151 records, but df has 150"):
        leaky_setting(df, 0.5, n_train=50, n_control=31, n_reference=20, rng=0)
    for kw, msg in ((dict(n_train=0), "n_train=0"), (dict(n_control=0), "n_control=0"), (dict(n_reference=-1), "n_reference=-1")):
        with pytest.raises(ValueError, match=msg):
            leaky_setting(df, 0.5, **{"n_train": 10, **kw})


def test_resampled_means():
    g = np.random.default_rng(0)
    x = np.r_[np.ones(30), np.zeros(70)]
    np.testing.assert_array_equal(_resampled_means(x, 50, np.random.default_rng(1)),
                                  np.random.default_rng(1).beta(30.5, 70.5, size=50))  # 0/1: the rate's Jeffreys posterior
    z = _resampled_means(np.zeros(4), 4000, np.random.default_rng(1))  # 0 of 4: still uncertain (a binomial redraw: all 0)
    assert z.min() >= 0 and np.quantile(z, 0.975) == pytest.approx(0.43, abs=0.05)
    s = np.array([1000.0, 0.0, 0.0, 0.0])  # scores: index resampling, every index reachable
    m = _resampled_means(s, 4000, g)
    assert m.mean() == pytest.approx(250, rel=0.05) and (m > 0).mean() > 0.6
    np.testing.assert_array_equal(_resampled_means(s, 7, np.random.default_rng(2)),
                                  s[np.random.default_rng(2).integers(0, 4, size=(7, 4))].mean(axis=1))


def _replicates(t, c, n_boot, seed):
    "control_risk's bootstrap, drawn here the same way: train means, then control means, from one generator."
    g = np.random.default_rng(seed)
    return _resampled_means(np.asarray(t, float), n_boot, g), _resampled_means(np.asarray(c, float), n_boot, g)


@pytest.mark.parametrize("confidence", [0.95, 0.5])
def test_control_risk_interval_is_the_bootstrap_quantiles(confidence):
    t, c = np.r_[np.ones(60), np.zeros(40)], np.r_[np.ones(25), np.zeros(75)]
    r = control_risk(t, c, name="x", n_boot=400, confidence=confidence, rng=5)
    bt, bc = _replicates(t, c, 400, 5)
    e = (bt - bc) / (1 - bc)
    a = (1 - confidence) / 2
    assert (r.ci_low, r.ci_high) == pytest.approx((np.quantile(e, a), np.quantile(e, 1 - a)))
    assert r.value == pytest.approx((0.6 - 0.25) / 0.75) and r.confidence == confidence
    assert (r.metrics["attack_rate_ci_low"], r.metrics["attack_rate_ci_high"]) == wilson_interval(60, 100, confidence)
    assert (r.metrics["control_rate_ci_low"], r.metrics["control_rate_ci_high"]) == wilson_interval(25, 100, confidence)
    assert r.metrics["n_control"] == 100 and r.n == 100


def test_control_risk_edges():
    r = control_risk([1.0, 0.0], [1.0, 1.0], name="x", rng=0)  # the control rate is already the best: E undefined
    assert math.isnan(r.value)
    assert control_risk([1.0, 1.0], [0.5, 1.0], name="x", best=1.0, rng=0).value == 1.0
    assert control_risk([0.5, 0.7], [0.2, 0.4], name="x", best=2.0, rng=0).value == pytest.approx((0.6 - 0.3) / (2.0 - 0.3))
    nc = control_risk([1.0, 0.0, 1.0], None, name="x", n_boot=10, rng=0)  # no control: the raw rate; n_boot=10 is allowed
    assert nc.value == pytest.approx(2 / 3) and nc.metrics["n_control"] == 0 and math.isnan(nc.control_rate)
    sc = control_risk([0.2, 0.4], [0.1, 0.3], name="x", rng=0)  # scores, not 0/1: no Wilson intervals
    assert not any(k.endswith(("_ci_low", "_ci_high")) for k in sc.metrics)
    with pytest.raises(ValueError, match="n_boot=9"):
        control_risk([1.0], [0.0], name="x", n_boot=9)
    with pytest.raises(ValueError, match="control_boot was given without control outcomes"):
        control_risk([1.0], None, name="x", n_boot=10, control_boot=np.zeros(10))
    with pytest.raises(ValueError, match="finite replicate means"):
        control_risk([1.0], [0.0], name="x", n_boot=10, control_boot=np.r_[np.zeros(9), np.nan])


def test_control_boot_replaces_the_control_replicates():
    t, c = np.r_[np.ones(60), np.zeros(40)], np.full(100, 0.25)
    cb = np.random.default_rng(9).uniform(0.15, 0.35, 300)
    r = control_risk(t, c, name="x", n_boot=300, rng=5, control_boot=cb)
    bt = _resampled_means(t, 300, np.random.default_rng(5))  # the train draws are unchanged
    e = (bt - cb) / (1 - cb)
    assert (r.ci_low, r.ci_high) == pytest.approx((np.quantile(e, 0.025), np.quantile(e, 0.975)))
    assert r.control_rate == 0.25 and r.value == pytest.approx((0.6 - 0.25) / 0.75)


# --- the default metric set (mutation survivors) ------------------------------------------------------------------------------

def test_the_default_metrics_are_the_papers_ten_with_kde_membership():
    from achilles.nobox import default_metrics
    d = default_metrics()
    assert len(d) == 10 and d[-1] == "kde_membership"  # the risk-insertion paper's nine, then Pathak & Jana's KDE attack
    assert {"ims", "dcr", "singling_out", "linkability", "domias"} <= set(d)


def test_a_metric_registered_without_default_runs_by_default(monkeypatch):
    "`default` is optional when registering: a metric says default=False to stay out of the default set (the peers' do)."
    from achilles.nobox import METRICS, default_metrics
    monkeypatch.setitem(METRICS._entries, "tmp_metric", dict(factory="achilles.nobox.statistical:IMS", summary="", extra=None,
                                                             metadata=dict(family="statistical")))
    monkeypatch.setitem(METRICS._entries, "tmp_off", dict(factory="achilles.nobox.statistical:IMS", summary="", extra=None,
                                                          metadata=dict(family="statistical", default=False)))
    d = default_metrics()
    assert "tmp_metric" in d and "tmp_off" not in d
