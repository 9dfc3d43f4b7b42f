"""Issue 36: the audit's AUC intervals hold their nominal level under cross-fitting. Under no signal, "the interval's lower end is
above 0.5" must fire for 2.5 % of records, within the binomial range; Hanley-McNeil alone fires for about 8 %."""
import warnings

import numpy as np
import pytest
from scipy.stats import binom

from achilles.core.data import load_adult
from achilles.core.results import auc_interval, null_inflation
from achilles.shadow.audit import audit
from achilles.shadow.game import ScaleWarning
from achilles.shadow.pool_attack import COMBINED, PREVIOUS, auc_score, crossfit_record


def _range(n, p=0.025):
    "The counts a rate p shows among n independent records, 95 % of the time."
    lo, hi = binom.interval(0.95, n, p)
    return int(lo), int(hi)


def _null_record(seed, n=400, p=300, stack=False):
    "One record's cross-fitted AUC with no signal: correlated Gaussian features, random labels, the pooled LDA on 300 features."
    g = np.random.default_rng(seed)
    X = (g.normal(size=(n, 20)) @ g.normal(size=(20, p)) + g.normal(size=(n, p))).astype(np.float32)
    y = np.zeros(n, np.int64); y[g.permutation(n)[:n // 2]] = 1
    r = crossfit_record(X, y, {"a": np.arange(p // 2), "b": np.arange(p // 2, p)}, rng=seed, stack=stack)
    return auc_score(y, r["scores"][COMBINED])


def test_permutation_calibrated_intervals_hold_their_level_where_hanley_mcneil_does_not():
    "300 null records: Hanley-McNeil's lower end passes 0.5 far too often; widened by the inflation of 50 other null fits, it is nominal."
    kappa = null_inflation([_null_record(10_000 + s) for s in range(50)], 200, 200)
    aucs = np.array([_null_record(s) for s in range(300)])
    raw = sum(auc_interval(a, 200, 200)[0] > 0.5 for a in aucs)
    cal = sum(auc_interval(a, 200, 200, inflation=kappa)[0] > 0.5 for a in aucs)
    lo, hi = _range(len(aucs))
    assert kappa > 1.15, kappa
    assert raw > hi, (raw, hi)  # the test has teeth: the uncalibrated interval fails it
    assert lo <= cal <= hi, (cal, lo, hi, kappa)


@pytest.fixture(scope="module")
def adult():
    return load_adult()


def _null_audit(adult, seed, records=240, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)  # small pools on purpose: the count over records is what is tested
        return audit(adult, "null", generator_params={"data": "adult"}, records=records, n_datasets=200, dataset_size=200,
                     selectors=(), rng=seed, n_jobs=2, verbose=False, **kw)


def test_audit_intervals_of_the_previous_attacker_are_nominal_under_a_generator_that_ignores_its_data(adult):
    "240 Adult records audited against the null generator (every true AUC 0.5) by the attacker before issue 35: 8 % false alarms uncalibrated; the run's own widening brings it into the binomial range of 2.5 %."
    r = _null_audit(adult, 36, attacks=PREVIOUS, stack=False)
    lo, hi = _range(len(r))
    fired = int((r["auc_ci_low"] > 0.5).sum())
    assert lo <= fired <= hi, (fired, lo, hi, r["auc_inflation"].iloc[0])
    assert r["auc_inflation"].nunique() == 1 and r["auc_inflation"].iloc[0] > 1.2  # the cross-fitting's widening, measured in the run
    assert (r["q_value"] > 0.05).all()  # no record of a null generator survives Benjamini-Hochberg at 5 %


@pytest.mark.xfail(strict=True, reason="issue 36, open: the stacked attacker's null AUC is skewed with a long upper tail that varies "
                   "between records; 20 records x 10 permutations miss part of it (1,200 null records: 3.7 % false alarms where 2.5 % "
                   "is nominal, 4x nominal at p < 0.001). Strict: when the calibration is fixed this test passes and must lose its mark.")
def test_audit_intervals_of_the_default_attacker_are_nominal_under_a_generator_that_ignores_its_data(adult):
    "1,200 null records (four pools of 300) audited by the default attacker: 'interval above 0.5' within the binomial range of 2.5 %."
    rows = [_null_audit(adult, seed, records=300) for seed in (7, 8, 9, 10)]
    n = sum(len(r) for r in rows)
    lo, hi = _range(n)
    fired = sum(int((r["auc_ci_low"] > 0.5).sum()) for r in rows)
    assert lo <= fired <= hi, (fired, lo, hi, [r["auc_inflation"].iloc[0] for r in rows])
