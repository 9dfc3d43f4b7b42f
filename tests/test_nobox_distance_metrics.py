"""`achilles.nobox.distance_metrics` at its edges (the figures by hand and against SynthEval are in tests/test_peer_metrics.py):
peer_risk without a control set, NNAA's smallest tables, its resampling switch and its error over rounds, the entropy weights."""
import math

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema
from achilles.neighbours import NeighbourData
from achilles.nobox.distance_metrics import NNAA, _entropy_weights, peer_risk

pytestmark = pytest.mark.filterwarnings("ignore:.*shares almost no values")  # tiny random tables


def _frame(n, seed):
    g = np.random.default_rng(seed)
    return pd.DataFrame({"c": pd.Categorical(g.choice(list("abc"), n), categories=list("abc")), "x": g.integers(0, 20, n) / 2.0})


def test_peer_risk_without_a_control_set_is_the_figure():
    t = np.array([1.0, 0.0, 1.0, 1.0])
    r = peer_risk("share", np.mean, (t,), None, best=1.0, n_boot=50, rng=0)
    assert r.value == pytest.approx(0.75) and r.attack_rate == pytest.approx(0.75)
    assert 0.0 <= r.ci_low <= 0.75 <= r.ci_high <= 1.0


def test_nnaa_on_two_records_and_without_resampling():
    "Two records per table are enough (one neighbour each); tables within 2x of each other are used whole: no error over rounds."
    a, b, c = _frame(2, 0), _frame(2, 1), _frame(2, 2)
    r = NNAA(baseline=False, n_boot=20).evaluate(a, b, c, rng=0)
    assert math.isfinite(r.attack_rate) and r.metrics["nnaa_err"] == 0.0
    r = NNAA(baseline=False, n_boot=20).evaluate(_frame(59, 3), _frame(30, 4), _frame(30, 5), rng=0)  # 1.97x: whole
    assert r.metrics["nnaa_err"] == 0.0
    with pytest.raises(ValueError, match="at least 2 records"): NNAA(baseline=False, n_boot=20).evaluate(_frame(1, 0), b, c, rng=0)


def test_nnaa_resamples_from_twice_the_size():
    "At 2x (SynthEval's rule) the larger table is subsampled in n_resample rounds: the figure is their mean, with its standard error."
    tr, sy, ct = _frame(60, 3), _frame(30, 4), _frame(60, 5)
    r = NNAA(n_resample=8, baseline=False, n_boot=20).evaluate(tr, sy, ct, rng=0)
    assert r.metrics["nnaa_err"] > 0.0
    assert r.value == pytest.approx((r.attack_rate - r.control_rate) / (0.0 - r.control_rate))
    one = NNAA(n_resample=1, baseline=False, n_boot=20).evaluate(tr, sy, ct, rng=0)
    assert one.metrics["nnaa_err"] == 0.0  # one round: no spread to report


def test_entropy_weights():
    "1 / (H + 1e-16) per column, H the entropy of its codes (of the rounded scaled numbers): a constant column gets 1e16."
    df = pd.DataFrame({"c": pd.Categorical(list("aabb"), categories=list("ab")), "k": pd.Categorical(list("zzzz")),
                       "x": [0.0, 0.2, 0.9, 1.0], "z": [0.3] * 4})
    schema = Schema.from_dataframe(df)
    wc, wk = _entropy_weights(NeighbourData.from_frame(df, schema))
    assert wc[0] == pytest.approx(1 / math.log(2)) and wc[1] == pytest.approx(1e16)
    assert wk[0] == pytest.approx(1 / math.log(2)) and wk[1] == pytest.approx(1e16)  # rounded scaled values 0, 0, 1, 1; a constant


def _brute_weighted(q: NeighbourData, r: NeighbourData, wc, wk, exclude_self):
    "min over references of (sum_c wc [codes differ] + sum_k wk |values differ|) / (sum wc + sum wk), by numpy."
    d = (wc[:, None, None] * (q.cat[:, :, None] != r.cat[:, None, :])).sum(0)
    d = d + (wk[:, None, None] * np.abs(q.cont[:, :, None] - r.cont[:, None, :])).sum(0)
    if exclude_self: np.fill_diagonal(d, np.inf)
    return d.min(1) / (wc.sum() + wk.sum())


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize("exclude_self", [True, False])
def test_weighted_nearest_against_brute_force(sparse, exclude_self):
    "Both walks (one over all references for sparse tables, one per categorical profile otherwise) find the true minimum."
    from achilles.nobox.distance_metrics import weighted_nearest
    g = np.random.default_rng(1 + sparse)
    n, card = 240, (6 if sparse else 2)
    df = pd.DataFrame({f"c{j}": pd.Categorical(g.integers(0, card, n)) for j in range(3 if sparse else 1)})
    df["x"], df["y"] = g.random(n), g.integers(0, 5, n).astype(float)
    ref = df.iloc[: n // 2].reset_index(drop=True) if not exclude_self else df
    schema = Schema.from_dataframe(df)
    q, r = NeighbourData.from_frame(df, schema), NeighbourData.from_frame(ref, schema)
    wc = g.uniform(0.5, 2.0, q.cat.shape[0]); wk = np.array([3.0, 0.7])
    got = weighted_nearest(q, r, wc, wk, exclude_self=exclude_self)
    np.testing.assert_allclose(got, _brute_weighted(q, r, wc, wk, exclude_self), rtol=1e-12, atol=1e-12)


def test_weighted_nearest_needs_a_neighbour():
    from achilles.nobox.distance_metrics import weighted_nearest
    df = _frame(5, 0)
    schema = Schema.from_dataframe(df)
    q = NeighbourData.from_frame(df, schema)
    w = (np.ones(1), np.ones(1))
    with pytest.raises(ValueError, match="among 0 reference"): weighted_nearest(q, NeighbourData.from_frame(df.iloc[:0], schema), *w)
    with pytest.raises(ValueError, match="among 1 reference"):
        weighted_nearest(q, NeighbourData.from_frame(df.iloc[:1], schema), *w, exclude_self=True)
    assert np.isfinite(weighted_nearest(q, NeighbourData.from_frame(df.iloc[:1], schema), *w)).all()


def test_weighted_gower_data_makes_the_engines_gower_the_weighted_one():
    "ε-identifiability's re-encoding: the neighbour engine's Gower distance on it, times the returned constant, is the weighted Gower."
    from achilles.neighbours import nearest
    from achilles.nobox.distance_metrics import weighted_gower_data
    g = np.random.default_rng(0)
    n = 60  # 8 x 9 categorical profiles for 60 records: most nearest neighbours differ in a category, so its weight counts
    df = pd.DataFrame({"a": pd.Categorical(g.integers(0, 8, n)), "b": pd.Categorical(g.integers(0, 9, n)),
                       "x": g.random(n), "y": g.random(n)})
    nd = NeighbourData.from_frame(df, Schema.from_dataframe(df))
    for wc in (np.array([1.0, 2.5]), np.array([3.0, 3.0]), np.array([2.0, 1.0])):
        wk = np.array([0.7, 3.0])
        t, c = weighted_gower_data(nd, wc, wk)
        d = nearest(t, t, 1, metric="gower", exclude_self=True)[0][:, 0]
        want = _brute_weighted(nd, nd, wc, wk, True)
        np.testing.assert_allclose(d * c, want, rtol=1e-12, atol=1e-12)
    assert (nearest(nd, nd, 1, metric="hamming", exclude_self=True)[0][:, 0] > 0).mean() > 0.5  # mismatches at the nearest


def test_weighted_nearest_refuses_missing_values():
    from achilles.nobox.distance_metrics import weighted_nearest
    df = _frame(6, 0)
    schema = Schema.from_dataframe(df)
    ok = NeighbourData.from_frame(df, schema)
    miss_cat = NeighbourData.from_frame(df.assign(c=df["c"].cat.set_categories(list("abc")).where(df.index != 2)), schema)
    miss_num = NeighbourData.from_frame(df.assign(x=df["x"].where(df.index != 3)), schema)
    for bad in (miss_cat, miss_num):
        with pytest.raises(ValueError, match="missing values"): weighted_nearest(bad, ok, np.ones(1), np.ones(1))


def test_overfitting_protection_warns_on_a_small_holdout():
    "SDMetrics' warning: a holdout smaller than half the training set."
    import warnings
    from achilles.nobox.distance_metrics import DCROverfittingProtection
    tr, sy = _frame(40, 0), _frame(40, 1)
    for n_control, warns in ((19, True), (20, False), (30, False)):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            DCROverfittingProtection(n_boot=20).evaluate(tr, sy, _frame(n_control, 2), rng=0)
        assert any("less than half" in str(x.message) for x in w) == warns, n_control


@pytest.mark.parametrize("n", [2, 7, 60])
def test_weighted_nearest_with_syntheval_weights_on_small_tables(n):
    "The smallest tables, with SynthEval's entropy weights (moved from tests/test_peer_metrics.py, on the shared brute force)."
    from achilles.nobox.distance_metrics import weighted_nearest
    g = np.random.default_rng(n)
    df = pd.DataFrame({"a": g.choice(list("xy"), n), "u": g.integers(0, 3, n).astype(float), "v": g.random(n).round(1)})
    nd = NeighbourData.from_frame(df, Schema.from_dataframe(df))
    wc, wk = _entropy_weights(nd)
    np.testing.assert_allclose(weighted_nearest(nd, nd, wc, wk, exclude_self=True), _brute_weighted(nd, nd, wc, wk, True),
                               rtol=0, atol=1e-12)
