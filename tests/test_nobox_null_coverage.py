"""The no-box metrics' intervals under no risk. The synthetic table is an independent sample of the population, disjoint from the
training and control records, so every metric's true excess over its control is 0: a metric's 95 % interval must hold 0 in about
95 % of independent draws (within the binomial range). Adult, 300 records in each table, seeded draws."""
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from achilles.core.data import load_adult
from achilles.nobox.report import privacy_report
from achilles.nobox.singling_out import SinglingOut


def _draws(adult, reps, n=300, seed=1000):
    for s in range(reps):
        idx = np.random.default_rng(seed + s).permutation(len(adult))
        yield s, [adult.iloc[idx[i * n:(i + 1) * n]].reset_index(drop=True) for i in range(3)]


@pytest.fixture(scope="module")
def null_rows():
    adult, rows = load_adult(), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # at no risk the metrics warn that their attacks do no better than guessing: the point here
        for s, (tr, sy, co) in _draws(adult, 120):
            rows.append(privacy_report(tr, sy, co, metrics=HOLD, rng=s, n_jobs=1).drop(columns=["parameters"]))
    return pd.concat(rows, ignore_index=True)


HOLD = ["ims", "dcr", "knn_dcr", "linkability", "inference_distance", "gtcap", "domias", "kde_membership"]


@pytest.mark.parametrize("metric", HOLD)
def test_the_interval_holds_no_risk_at_its_level(null_rows, metric):
    r = null_rows[null_rows.metric == metric]
    covers = int(((r.ci_low <= 0) & (0 <= r.ci_high)).sum())
    lo, _ = binom.interval(0.999, len(r), 0.95)
    assert covers >= lo, (metric, covers, len(r), lo)
    assert int((r.ci_low > 0).sum()) <= binom.interval(0.999, len(r), 0.025)[1], metric  # false alarms: the lower end above 0


@pytest.mark.xfail(strict=True, reason="singling out's interval resamples its queries, not the records they are counted on: under no "
                                       "risk it holds 0 in about 83 % of draws with one attack of 2,000 queries on 400 records (and 68 % with the default sweep "
                                       "of ten, whose highest risk it reports); a record-level interval is still to be built")
def test_singling_out_interval_holds_no_risk_at_its_level():
    adult, ok, reps = load_adult(), 0, 150
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for s, (tr, sy, co) in _draws(adult, reps, n=400):
            r = SinglingOut(n_cols=[3]).evaluate(tr, sy, co, rng=s)
            ok += r.ci_low <= 0 <= r.ci_high
    assert ok >= binom.interval(0.999, reps, 0.95)[0], ok
