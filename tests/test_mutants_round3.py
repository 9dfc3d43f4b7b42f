"""Mutants of tests/MUTATION.md that issue 40 showed are not equivalent, each killed here by an input on which the mutant and the
original differ (found by running both, not by reading): the Wilson interval's clamps at its bounds; the audit's run id (a key
that is not the documented hash makes every rerun recompute); `n_jobs=None`, which the signatures allow, in both audit designs;
singling-out thresholds below 1e-16; the index column of the no-box report's HTML table."""
import hashlib
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import load_adult
from achilles.core.results import wilson_interval
from achilles.shadow.audit import audit
from achilles.shadow.game import ScaleWarning


def test_wilson_interval_is_clamped_at_its_bounds_where_rounding_crosses_them():
    "16 of 16: c + h is 1.0000000000000002 in floating point; 0 of 21: c - h is -1.4e-17 (a clamp at 2.0, or at 1.0 below, is caught)."
    assert wilson_interval(16, 16)[1] == 1.0 and wilson_interval(40, 40)[1] == 1.0
    assert wilson_interval(0, 21)[0] == 0.0 and wilson_interval(0, 37)[0] == 0.0
    for n in range(1, 400):
        lo, hi = wilson_interval(n, n)
        assert 0.0 < lo < hi <= 1.0
        lo, hi = wilson_interval(0, n)
        assert 0.0 <= lo < hi < 1.0


@pytest.fixture(scope="module")
def small():
    return load_adult().sample(400, random_state=0).reset_index(drop=True)


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)
        return fn()


def test_the_audit_run_id_is_the_documented_hash_of_its_configuration(small):
    "A store's rows are found again by run id: sha256 of the configuration as sorted JSON, first 16 hex digits (34_audit)."
    r = _quiet(lambda: audit(small, "independent", records=3, n_datasets=40, dataset_size=100, selectors=(), rng=1, verbose=False))
    cfg = r.attrs["config"]
    assert r.attrs["run_id"] == hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]
    shuffled = dict(reversed(list(cfg.items())))  # the same configuration built in another order: the same id
    assert hashlib.sha256(json.dumps(shuffled, sort_keys=True, default=str).encode()).hexdigest()[:16] == r.attrs["run_id"]


@pytest.mark.parametrize("design", ["bernoulli", "population"])
def test_n_jobs_none_runs_in_both_designs(small, design):
    "The signature allows n_jobs=None (all threads); `or` swapped for `and` made it max(1, None): a TypeError."
    kw = dict(records=3, n_datasets=40) if design == "bernoulli" else dict(records=[0, 1], design="population", n_in=20)
    a = _quiet(lambda: audit(small, "independent", dataset_size=100, selectors=(), rng=2, verbose=False, n_jobs=None, **kw))
    b = _quiet(lambda: audit(small, "independent", dataset_size=100, selectors=(), rng=2, verbose=False, n_jobs=1, **kw))
    pd.testing.assert_frame_equal(a, b)  # and the same rows as one thread


def test_singling_out_thresholds_below_1e_16_stay_apart():
    "Keys add 0.0 to merge -0.0 and 0.0; adding 1.0 would make 1e-17 and 2e-17 one threshold (1 + 1e-17 == 1.0)."
    from achilles.nobox.singling_out import Predicates
    p = Predicates(np.zeros((3, 1), np.int64), np.zeros((3, 1), np.int8), np.array([[1e-17], [2e-17], [-0.0]]), np.ones(3, np.int64))
    k = p.keys()
    assert k[0] != k[1] and k[0] != k[2]
    z = Predicates(np.zeros((2, 1), np.int64), np.zeros((2, 1), np.int8), np.array([[0.0], [-0.0]]), np.ones(2, np.int64))
    assert z.keys()[0] == z.keys()[1]


def test_the_report_table_has_no_index_column(small):
    from achilles.nobox.report import privacy_report
    tr, syn, ct = small.iloc[:150], small.iloc[150:300], small.iloc[300:]
    rep = privacy_report(tr, syn, ct, metrics=["ims", "dcr"], rng=0)
    html = rep._repr_html_()
    head = html[html.index("<thead>"):html.index("</thead>")]
    import re
    cells = re.findall(r"<th[^>]*>(.*?)</th>", head)
    assert cells == ["family", "metric", "risk", "CI low", "CI high", "attack rate", "control rate", "random guess", "seconds"], cells
