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
                       "x": [0.0, 0.2, 0.9, 1.0]})
    schema = Schema.from_dataframe(df)
    wc, wk = _entropy_weights(NeighbourData.from_frame(df, schema))
    assert wc[0] == pytest.approx(1 / math.log(2)) and wc[1] == pytest.approx(1e16)
    assert wk[0] == pytest.approx(1 / math.log(2))  # rounded scaled values 0, 0, 1, 1
