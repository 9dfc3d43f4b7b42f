"""The peers' privacy metrics (issue 28): known answers on tiny tables (duplicates, ties, all-categorical and all-numeric tables),
and oracle checks against SynthEval 1.7.3 (a test dependency of ours) and SDMetrics 0.32 (its own venv, named by
$ACHILLES_SDMETRICS_PYTHON; skipped with the recipe when unset). synthcity does not install beside our pins: its four metrics are
checked on hand-computed cases here and in `nbs/35_nobox/08_disclosure.ipynb`."""
import math
import os

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema
from achilles.neighbours import NeighbourData
from achilles.nobox import METRICS, default_metrics, leaky_setting, metric_family
from achilles.nobox.disclosure import CAP, DisclosureProtection, KAnonymity, KMap, LDiversity, DeltaPresence, cap_scores
from achilles.nobox.distance_metrics import (DCRBaselineProtection, DCROverfittingProtection, EpsilonIdentifiability, HittingRate,
                                             NNAA, NNDR)
from achilles.nobox.membership import ClassifierMIA, DCRDiff, DPI
from achilles.perf import peer_runner as pr

PEERS = ["nndr", "nnaa", "hitting_rate", "epsilon_identifiability", "dcr_baseline", "dcr_overfitting", "disclosure", "cap",
         "k_anonymity", "l_diversity", "k_map", "delta_presence", "classifier_mia", "dcr_diff", "dpi"]


def test_every_row_of_the_issue_is_registered():
    for name in PEERS:
        assert name in METRICS and name not in default_metrics()
        assert metric_family(name) in ("distance", "disclosure", "inference", "membership")
        assert METRICS.describe().set_index("name").loc[name, "peer"]


# --- known answers on tiny tables -------------------------------------------------------------------------------------

def num(*v): return pd.DataFrame({"x": [float(a) for a in v]})


def test_nndr_all_numeric_by_hand():
    # Gower on one number, range [0, 10] from the union of the tables
    tr, sy, ct = num(0, 10), num(1, 3, 10), num(5, 6)
    r = NNDR(baseline=False, n_boot=20).evaluate(tr, sy, ct, rng=0)
    assert r.attack_rate == pytest.approx(np.mean([1 / 3, 0.0]))  # 0: (0.1, 0.3); 10: (0, 0.7)
    assert r.control_rate == pytest.approx(np.mean([1 / 2, 3 / 4]))  # 5: (0.2, 0.4); 6: (0.3, 0.4)
    assert r.value == pytest.approx((r.control_rate - r.attack_rate) / r.control_rate)


def test_nndr_two_copies_count_as_zero():
    tr, sy, ct = num(0, 10), num(0, 0, 10, 10), num(5, 6)
    r = NNDR(baseline=False, n_boot=20).evaluate(tr, sy, ct, rng=0)
    assert r.attack_rate == 0.0 and r.metrics["zero_over_zero"] == 2


def test_nnaa_all_categorical_by_hand():
    tr = pd.DataFrame({"a": list("xxyz")}); sy = pd.DataFrame({"a": list("xyyw")}); ct = pd.DataFrame({"a": list("wwzz")})
    r = NNAA(baseline=False, n_boot=20).evaluate(tr, sy, ct, rng=0)
    # left: x (TS 0, TT 0: no), x (no), y (TS 0, TT 1: no), z (TS 1, TT 1: no) -> 0
    # right: x (ST 0 > SS 1? no), y (0 > 0? no), y (no), w (ST 1 > SS 1? no) -> 0
    assert r.attack_rate == 0.0
    # control: w,w,z,z against synthetic: left: w (TS 0 > TT 0? no) x2, z (TS 1 > TT 0: yes) x2 -> 0.5;
    # right: x (ST 1 > SS 1? no), y (1 > 0: yes) x2, w (ST 0 > SS 1? no) -> 0.5
    assert r.control_rate == 0.5


def test_hitting_rate_ties_at_the_threshold_count():
    # range of the training numbers: 30, threshold 1: a difference of exactly 1 hits
    tr = pd.DataFrame({"c": list("aab"), "x": [0.0, 30.0, 15.0]})
    sy = pd.DataFrame({"c": list("aba"), "x": [1.0, 15.5, 28.5]})
    ct = pd.DataFrame({"c": list("ab"), "x": [10.0, 16.0]})
    r = HittingRate(baseline=False, n_boot=20).evaluate(tr, sy, ct, rng=0)
    assert r.attack_rate == pytest.approx(2 / 3)  # (a, 0) by (a, 1); (b, 15) by (b, 15.5); (a, 30) misses (28.5 is 1.5 away)
    assert r.control_rate == 0.0  # control range 6: threshold 0.2; (b, 16) misses by 0.5, no (a, ~10)


def test_epsilon_identifiability_duplicates_are_never_identified():
    # a training record with a duplicate has an inner distance 0: nothing is strictly closer
    tr = pd.DataFrame({"c": list("aabb"), "x": [0.0, 0.0, 5.0, 9.0]})
    sy = pd.DataFrame({"c": list("ab"), "x": [0.0, 9.0]})
    ct = pd.DataFrame({"c": list("ab"), "x": [3.0, 7.0]})
    m = EpsilonIdentifiability(baseline=False, n_boot=20)
    assert m.evaluate(tr, sy, ct, rng=0).attack_rate == pytest.approx(1 / 4)  # only (b, 9)


def test_dcr_overfitting_ties_go_to_the_holdout():
    # every synthetic record is equally far from train and control: p = 0, the score is 1 on both sides
    tr, ct, sy = num(0, 10), num(0, 10), num(2, 8)
    r = DCROverfittingProtection(n_boot=20).evaluate(tr, sy, ct, rng=0)
    assert r.attack_rate == 1.0 and r.control_rate == 1.0 and r.metrics["closer_to_training"] == 0.0


def test_dcr_baseline_copies_score_zero():
    tr = pd.DataFrame({"c": list("abcd") * 5, "x": np.arange(20.0)})
    r = DCRBaselineProtection(n_boot=20).evaluate(tr, tr.copy(), tr.iloc[::-1].reset_index(drop=True), rng=0)
    assert r.attack_rate == 0.0 and r.metrics["median_DCR_synthetic"] == 0.0


def test_cap_all_categorical_by_hand():
    syn = pd.DataFrame({"k": list("aab"), "s": list("uvu")})
    real = pd.DataFrame({"k": list("abc"), "s": list("uuv")})
    sch = Schema.from_dataframe(pd.concat([syn, real]))
    assert np.allclose(cap_scores(real, syn, ["k"], ["s"], sch, "cap"), [0.5, 1.0, np.nan], equal_nan=True)
    assert np.allclose(cap_scores(real, syn, ["k"], ["s"], sch, "zero_cap"), [0.5, 1.0, 0.0])
    assert np.allclose(cap_scores(real, syn, ["k"], ["s"], sch, "generalized_cap"), [0.5, 1.0, 1 / 3])  # c: all 3 at distance 1
    r = CAP(n_boot=20).evaluate(real, syn, real, rng=0)
    assert r.attack_rate == pytest.approx(1 - 0.75)


def test_k_anonymity_family_all_categorical_by_hand():
    # 30 records of one kind and 10 of another: only the 2-cluster k-means applies (40 / 5 < 10)
    tr = pd.DataFrame({"q": ["a"] * 30 + ["b"] * 10, "s": list("uvw") * 10 + ["u"] * 10})
    sy = pd.DataFrame({"q": ["a"] * 37 + ["b"] * 3, "s": list("uv") * 20})
    m = dict(secret="s", n_boot=20)
    assert KAnonymity(**m).evaluate(tr, sy, tr, rng=0).attack_rate == 3.0
    assert KAnonymity(**m).evaluate(tr, sy, tr, rng=0).control_rate == 10.0
    assert LDiversity(**m).evaluate(tr, sy, tr, rng=0).control_rate == 1.0  # the b group of train has one secret value
    assert KMap(**m).evaluate(tr, sy, tr, rng=0).attack_rate == 3.0
    assert DeltaPresence(**m).evaluate(tr, sy, tr, rng=0).attack_rate == pytest.approx(10 / 3, rel=1e-6)


def test_membership_scores_find_copies():
    df = pd.DataFrame({"c": list("abcdefgh") * 25, "x": np.arange(200.0)})
    tr, ct = df.iloc[::2].reset_index(drop=True), df.iloc[1::2].reset_index(drop=True)
    for m in (DCRDiff(), DPI(k=3)):
        r = m.evaluate(tr, tr.copy(), ct, rng=0)
        assert r.attack_rate > 0.9 and r.value > 0.8, m.name
    assert DCRDiff().evaluate(tr, ct.copy(), ct, rng=0).attack_rate < 0.5  # the release copies the control set


def test_classifier_mia_is_seeded(adult):
    s = leaky_setting(adult[0], 1.0, n_train=300, rng=0)
    a = ClassifierMIA(num_eval_iter=2).evaluate(s.train, s.synthetic, s.control, rng=3)
    b = ClassifierMIA(num_eval_iter=2).evaluate(s.train, s.synthetic, s.control, rng=3)
    assert a.to_row() == b.to_row() or pd.DataFrame([a.to_row()]).equals(pd.DataFrame([b.to_row()]))
    assert {"MIA precision", "MIA recall", "MIA macro F1", "auc", "tpr@0.1"} <= set(a.metrics)


# --- SynthEval as the oracle (in our venv) --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def adult_sample(adult):
    df, _ = adult
    s = leaky_setting(df, 0.5, n_train=600, rng=7)
    cat = Schema.from_dataframe(df).categorical
    return s, cat


def _syntheval(kind, s, cat, **params):
    syntheval = pytest.importorskip("syntheval", reason="SynthEval is a test dependency: pip install -e '.[dev]'")
    out = pr.run_evaluations(s.train, s.synthetic, s.control,
                             {"categorical": cat, "evaluations": [{"name": kind, "kind": kind, "params": params}]})
    e = out["evaluations"][kind]
    assert "error" not in e, e.get("traceback")
    return e["result"]


@pytest.mark.parametrize("kind, ours, key", [("nndr", NNDR, "avg"), ("nnaa", NNAA, "avg"), ("hitting_rate", HittingRate, "hit rate"),
                                             ("epsilon_identifiability", EpsilonIdentifiability, "eps_risk")])
def test_syntheval_oracle(adult_sample, kind, ours, key):
    s, cat = adult_sample
    theirs = _syntheval(kind, s, cat)
    r = ours(n_boot=20).evaluate(s.train, s.synthetic, s.control, rng=0)
    assert r.attack_rate == pytest.approx(theirs[key], abs=1e-9), (kind, r.attack_rate, theirs)
    if kind in ("nndr", "nnaa"):  # SynthEval's privacy loss: control minus train
        assert r.metrics["priv_loss"] == pytest.approx(theirs["priv_loss"], abs=1e-9)


def test_syntheval_classifier_mia_agrees_within_its_randomness(adult_sample):
    "SynthEval draws its splits from numpy's global generator and trains LightGBM; we seed ours and train scikit-learn's HGB."
    s, cat = adult_sample
    theirs = _syntheval("classifier_mia", s, cat)
    r = ClassifierMIA().evaluate(s.train, s.synthetic, s.control, rng=0)
    assert abs(r.attack_rate - theirs["MIA recall"]) < 0.15
    assert abs(r.metrics["MIA precision"] - theirs["MIA precision"]) < 0.15


# --- SDMetrics as the oracle (in its own venv) ----------------------------------------------------------------------

HAS_SDMETRICS = bool(os.environ.get(pr.SDMETRICS_ENV))
needs_sdmetrics = pytest.mark.skipif(not HAS_SDMETRICS, reason=f"${pr.SDMETRICS_ENV} is not set; {pr.SDMETRICS_HOWTO}")


@pytest.fixture(scope="module")
def sdmetrics_run(adult_sample):
    s, cat = adult_sample
    # SDMetrics divides by the reference's range and caps at 1; synthetic numbers inside the training range make that exact
    syn = s.synthetic.copy()
    for c in syn.columns:
        if c not in cat: syn[c] = syn[c].clip(s.train[c].min(), s.train[c].max()).clip(s.control[c].min(), s.control[c].max())
    known, sens = ["age", "workclass", "education", "sex", "race"], ["income"]
    ev = [dict(name="dcr_baseline", kind="dcr_baseline"), dict(name="dcr_overfitting", kind="dcr_overfitting"),
          dict(name="disclosure", kind="disclosure", known=known, sensitive=sens),
          dict(name="disclosure_zero", kind="disclosure", known=known, sensitive=sens, computation_method="zero_cap"),
          dict(name="disclosure_gen", kind="disclosure", known=known, sensitive=sens, computation_method="generalized_cap"),
          dict(name="cap", kind="cap", known=known[1:], sensitive=sens)]
    out = pr.run_peer(None, s.train, syn, s.control, {"categorical": cat, "evaluations": ev})
    for k, e in out["evaluations"].items(): assert "error" not in e, (k, e.get("traceback"))
    return s, syn, known, sens, {k: e["result"] for k, e in out["evaluations"].items()}


@needs_sdmetrics
def test_sdmetrics_dcr_overfitting(sdmetrics_run):
    s, syn, *_, theirs = sdmetrics_run
    r = DCROverfittingProtection(n_boot=20).evaluate(s.train, syn, s.control, rng=0)
    assert r.attack_rate == pytest.approx(theirs["dcr_overfitting"]["score"], abs=1e-12)
    assert r.metrics["closer_to_training"] == pytest.approx(theirs["dcr_overfitting"]["synthetic_data_percentages"]["closer_to_training"], abs=1e-12)


@needs_sdmetrics
def test_sdmetrics_dcr_baseline(sdmetrics_run):
    "The synthetic median DCR is exact; the random release is drawn by each side's own generator, so the score agrees in distribution."
    s, syn, *_, theirs = sdmetrics_run
    r = DCRBaselineProtection(n_boot=20).evaluate(s.train, syn, s.control, rng=0)
    t = theirs["dcr_baseline"]
    assert r.metrics["median_DCR_synthetic"] == pytest.approx(t["median_DCR_to_real_data"]["synthetic_data"], abs=1e-9)
    assert r.metrics["median_DCR_random"] == pytest.approx(t["median_DCR_to_real_data"]["random_data_baseline"], rel=0.1)
    assert r.attack_rate == pytest.approx(t["score"], rel=0.15)


@needs_sdmetrics
@pytest.mark.parametrize("name, method", [("disclosure", "cap"), ("disclosure_zero", "zero_cap"), ("disclosure_gen", "generalized_cap")])
def test_sdmetrics_disclosure(sdmetrics_run, name, method):
    s, syn, known, sens, theirs = sdmetrics_run
    r = DisclosureProtection(secret=sens[0], aux_cols=known, method=method, n_boot=20).evaluate(s.train, syn, s.control, rng=0)
    assert r.attack_rate == pytest.approx(theirs[name]["score"], abs=1e-12)
    assert r.metrics["cap_protection"] == pytest.approx(theirs[name]["cap_protection"], abs=1e-12)
    assert r.metrics["baseline_protection"] == pytest.approx(theirs[name]["baseline_protection"], abs=1e-12)


@needs_sdmetrics
def test_sdmetrics_categorical_cap(sdmetrics_run):
    s, syn, known, sens, theirs = sdmetrics_run
    r = CAP(secret=sens[0], aux_cols=known[1:], n_boot=20).evaluate(s.train, syn, s.control, rng=0)
    assert r.attack_rate == pytest.approx(theirs["cap"]["score"], abs=1e-12)


def test_the_runner_refuses_a_bad_configuration():
    with pytest.raises(ValueError, match="kind='nope'"):
        pr.check_config({"evaluations": [{"name": "a", "kind": "nope"}]})
    with pytest.raises(FileNotFoundError, match="is not an executable file"):
        pr.peer_python("/nonexistent/python")
