"""Statistics on tiny inputs (issue 40, round three): a handful of control records made DCR, k-NN DCR and GTCAP "significant" with
intervals that ignored the control set's own uncertainty; an audit's AUC of 1 on 6 IN / 6 OUT datasets had the interval
[0.999999, 1]; δ-presence read a value outside its own interval; l-diversity and k-map printed NaN with no word. Now a control table
below `MIN_CONTROL` is refused, a control rate of 0 keeps its uncertainty, every value lies in its interval, and a NaN says why."""
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from achilles.core.base import MIN_CONTROL
from achilles.core.data import load_adult
from achilles.nobox import METRICS
from achilles.nobox.statistical import _dcr_result
from faultkit import make_files, run


@pytest.fixture(scope="module")
def parts():
    a = load_adult().sample(1600, random_state=5).reset_index(drop=True)
    return a.iloc[:600].reset_index(drop=True), a.iloc[600:1200].reset_index(drop=True), a.iloc[1200:].reset_index(drop=True)


@pytest.mark.parametrize("metric", ["dcr", "knn_dcr", "gtcap", "ims", "inference_distance", "linkability", "singling_out"])
def test_a_control_table_below_the_minimum_is_refused(parts, metric):
    train, syn, control = parts
    with pytest.raises(ValueError, match=rf"{metric}: control has {MIN_CONTROL - 1} record\(s\); it needs at least {MIN_CONTROL}"):
        METRICS[metric]().evaluate(train, syn, control.iloc[:MIN_CONTROL - 1], rng=0)


def test_a_control_rate_of_zero_keeps_its_uncertainty():
    "6 % of synthetic records below the RRD percentile, 0 of 10 control records: the old binomial redraw gave the control rate no"
    " spread and an interval above 0; its Jeffreys posterior reaches well below."
    g = np.random.default_rng(0)
    srd = np.r_[np.zeros(30), np.full(470, 5.0)][:, None]
    rrd = g.uniform(1, 2, (200, 1))
    r = _dcr_result(srd, rrd, np.full((10, 1), 5.0), 1, 2.0, "DCR", 1000, np.random.default_rng(1), {})
    assert r.value > 0 and r.ci_low < 0 < r.ci_high, (r.value, r.ci_low, r.ci_high)
    big = _dcr_result(srd, rrd, np.full((2000, 1), 5.0), 1, 2.0, "DCR", 1000, np.random.default_rng(1), {})
    assert big.ci_low > 0  # the same rates over 2,000 control records: a real difference


@pytest.mark.parametrize("seed", range(4))
def test_every_value_lies_in_its_interval(parts, seed):
    train, syn, control = parts
    for m in ("delta_presence", "k_map", "k_anonymity"):
        r = METRICS[m]().evaluate(train, syn.sample(frac=1.0, random_state=seed).iloc[:300], control, rng=seed)
        if math.isfinite(r.value): assert r.ci_low <= r.value <= r.ci_high, (m, r.value, r.ci_low, r.ci_high)


def test_a_nan_says_why(parts):
    train, syn, control = parts
    r = METRICS["l_diversity"]().evaluate(train, syn, control, rng=0)  # a binary secret: a one-value cluster everywhere
    assert math.isnan(r.value) and math.isnan(r.ci_low) and math.isnan(r.ci_high)
    assert "already is its most risky value" in r.metrics["undefined"]


def test_the_command_prints_the_reason_beside_a_nan(tmp_path, capsys):
    f = make_files(tmp_path)
    code, out, err = run(capsys, ["nobox", "--train", f.train, "--synthetic", f.synth, "--control", f.control, "--metrics",
                                  "l_diversity,ims", "--results", "", "--quiet"])
    assert code == 0, err
    assert "l_diversity: no value (NaN): the figure on the control set (1) already is its most risky value (1)" in out, out


def test_a_peer_port_runs_on_a_one_record_control(parts):
    "Peer definitions keep by-hand parity at any size (min_control = 1); ours need MIN_CONTROL."
    train, syn, control = parts
    assert math.isfinite(METRICS["nndr"]().evaluate(train.iloc[:50], syn.iloc[:50], control.iloc[:1], rng=0).attack_rate)
