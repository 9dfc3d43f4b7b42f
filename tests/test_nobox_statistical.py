"""IMS and DCR (Eq. 2-4) beyond the notebook's leaky-setting checks: ties at the α-percentile (all-categorical data, where most
distances are 0), the no-control best case, the k-NN sweep against the metric, and the identical-match hashing."""
import math

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, load_adult
from achilles.nobox import leaky_setting
from achilles.nobox.statistical import DCR, IMS, KNNDCR, _dcr_result, knn_dcr_sweep


@pytest.fixture(scope="module")
def categorical_leak():
    "Adult's categorical columns only: many records are at distance 0 from another, so the α-percentile RRD is 0."
    adult = load_adult()
    cats = [c for c in adult.columns if isinstance(adult[c].dtype, pd.CategoricalDtype)]
    return {f: leaky_setting(adult[cats], f, n_train=3000, rng=0) for f in (0.0, 1.0)}


def test_dcr_counts_ties_at_the_percentile(categorical_leak):
    "Eq. 3 counts distances at or below the α-percentile: with q = 0 a copied record (distance 0) counts, so f = 1 gives 1."
    r = {f: DCR().evaluate(s.train, s.synthetic, s.control, rng=0) for f, s in categorical_leak.items()}
    assert r[1.0].metrics["rrd_alpha"] == 0.0  # the percentile itself is a tie
    assert r[1.0].value == 1.0 and r[1.0].attack_rate == 1.0
    assert 0.0 < r[0.0].attack_rate < 1.0 and r[0.0].control_rate > 0.0  # real records share their categories too
    assert abs(r[0.0].value) < 0.1


def test_dcr_result_by_hand():
    srd = np.array([[0.0], [0.5], [0.5], [2.0]])  # synthetic-to-train
    rrd = np.array([[0.5], [1.0], [3.0], [4.0]])  # D1-to-D2: the 50th percentile is 2.0, the 25th 0.875 (linear)
    ctl = np.array([[0.4], [3.0], [5.0], [6.0]])
    r = _dcr_result(srd, rrd, ctl, 1, 50.0, "DCR", 100, np.random.default_rng(0), {})
    assert r.metrics["rrd_alpha"] == 2.0
    assert r.attack_rate == 1.0  # 2.0 <= 2.0 counts
    assert r.control_rate == 0.25
    assert r.value == pytest.approx((1.0 - 0.25) / (1 - 0.25))
    assert r.metrics["eq4_ratio"] == pytest.approx(4 / (0.5 * 4))  # Eq. 4: share below over the expected share α
    r2 = _dcr_result(srd, rrd, ctl, 1, 25.0, "DCR", 100, np.random.default_rng(0), {})
    assert r2.metrics["rrd_alpha"] == pytest.approx(0.875) and r2.attack_rate == 0.75 and r2.control_rate == 0.25
    assert r2.metrics["median_srd"] == 0.5 and r2.metrics["median_rrd"] == 2.0
    # k = 2: the mean of the first two distances
    srd2, rrd2 = np.array([[0.0, 1.0], [1.0, 3.0]]), np.array([[1.0, 2.0], [2.0, 2.0]])
    r3 = _dcr_result(srd2, rrd2, None, 2, 50.0, "2-NN DCR", 100, np.random.default_rng(0), {})
    assert r3.metrics["rrd_alpha"] == 1.75 and r3.attack_rate == 0.5 and r3.metrics["k"] == 2


def test_dcr_without_control_uses_alpha_as_the_best_case():
    srd, rrd = np.array([[0.0], [0.0], [1.0], [9.0]]), np.array([[1.0], [2.0], [3.0], [4.0]])
    r = _dcr_result(srd, rrd, None, 1, 50.0, "DCR", 200, np.random.default_rng(0), {})
    assert r.metrics["rrd_alpha"] == 2.5 and r.attack_rate == 0.75
    assert r.value == pytest.approx((0.75 - 0.5) / (1 - 0.5)) and r.baseline_rate == 0.5
    assert math.isnan(r.control_rate) and r.parameters["best_case"] == "alpha"
    assert r.ci_low <= r.value <= r.ci_high


def test_knn_sweep_equals_the_metric_for_every_k():
    s = leaky_setting(load_adult(), 0.5, n_train=1500, rng=2)
    sweep = knn_dcr_sweep(s.train, s.synthetic, s.control, ks=[1, 2, 4], rng=0)
    for k in (1, 2, 4):
        m = DCR() if k == 1 else KNNDCR(k=k)
        assert sweep.set_index("k").loc[k, "value"] == pytest.approx(m.evaluate(s.train, s.synthetic, s.control, rng=0).value)
    with pytest.raises(ValueError, match="ks is empty"):
        knn_dcr_sweep(s.train, s.synthetic, s.control, ks=[])
    with pytest.raises(ValueError, match="holdout split needs at least 8"):
        KNNDCR(k=4).evaluate(s.train.iloc[:7], s.synthetic, s.control)


def test_ims_matches_rows_on_their_values():
    df = pd.DataFrame({"c": pd.Categorical(["a", "b", "a", "c"]), "x": [1, 2, 3, 4]})
    syn = pd.DataFrame({"c": ["a", "b", "z", "c"], "x": [1.0, 2.5, 3.0, 4.0]})  # object dtype, floats: rows 0 and 3 match
    ctl = pd.DataFrame({"c": pd.Categorical(["a", "b"] * 5), "x": [1, 9] * 5})  # MIN_CONTROL records, half of them copied
    r = IMS(schema=Schema.from_dataframe(df)).evaluate(df, syn, ctl, rng=0)
    assert r.attack_rate == 0.5 and r.control_rate == 0.5 and r.value == 0.0
    assert r.metrics["synthetic_rows_copied"] == 0.5
    assert IMS().evaluate(df, df.copy(), None, rng=0).value == 1.0


def test_dcr_interval_without_control_is_the_rescaled_bootstrap():
    "With α as the best case, the interval is the attack rate's bootstrap interval put on the same scale as the value."
    from achilles.nobox import control_risk
    srd, rrd = np.array([[0.0], [0.0], [1.0], [9.0], [0.2], [5.0]]), np.array([[1.0], [2.0], [3.0], [4.0]])
    r = _dcr_result(srd, rrd, None, 1, 50.0, "DCR", 200, np.random.default_rng(7), {})
    raw = control_risk(srd[:, 0] <= 2.5, None, name="DCR", baseline_rate=0.5, n_boot=200, rng=np.random.default_rng(7))
    assert (r.ci_low, r.ci_high) == pytest.approx(((raw.ci_low - 0.5) / 0.5, (raw.ci_high - 0.5) / 0.5))


def test_names_parameters_and_bounds():
    s = leaky_setting(load_adult(), 0.5, n_train=400, rng=1)
    assert DCR().evaluate(s.train, s.synthetic, s.control, rng=0).name == "DCR"
    assert KNNDCR(k=3).evaluate(s.train, s.synthetic, s.control, rng=0).name == "3-NN DCR"
    assert KNNDCR(k=1).k == 1 and IMS(n_boot=10).n_boot == 10 and DCR(n_boot=10).n_boot == 10
    assert IMS().evaluate(s.train, s.synthetic, s.control, rng=0).baseline_rate == 0.0
    for bad in (lambda: IMS(n_boot=9), lambda: DCR(n_boot=9), lambda: KNNDCR(k=0), lambda: DCR(alpha=0.0),
                lambda: DCR(alpha=100.0)):
        with pytest.raises(ValueError):
            bad()
    assert DCR(alpha=0.5).alpha == 0.5 and DCR(alpha=99.5).alpha == 99.5
    # the holdout split: D1 and D2 are the two halves of the training set
    m = KNNDCR(k=4)
    srd, rrd, ctl = m._distances(s.train.iloc[:9], s.synthetic, s.control, m._check_tables(s.train, s.synthetic, s.control),
                                 np.random.default_rng(0), 4)
    assert rrd.shape == (4, 4) and srd.shape == (len(s.synthetic), 4) and ctl.shape == (len(s.control), 4)
    assert np.isfinite(KNNDCR(k=4).evaluate(s.train.iloc[:8], s.synthetic, s.control, rng=0).value)  # 2k records suffice
