"""Issue 35: the families an outside attack showed the audit was missing, and the floor under its trained models, on real pools."""
import warnings

import numpy as np
import pytest

from achilles.core.data import Schema, load_adult
from achilles.shadow.audit import audit
from achilles.shadow.game import ScaleWarning
from achilles.shadow.pool_attack import DEFAULT_ATTACKS, PREVIOUS, TRAINED_FAMILIES

NAMES = ["auc", *(f"auc_{f}" for f in DEFAULT_ATTACKS)]


@pytest.fixture(scope="module")
def adult():
    df = load_adult()
    return df, Schema.from_dataframe(df)


@pytest.fixture(scope="module")
def null_rows(adult):
    "60 random Adult records audited against a generator that ignores its training data: every true AUC is 0.5."
    df, schema = adult
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)  # a small pool on purpose: the test asks about the mean over records
        return audit(df, "null", generator_params={"data": "adult"}, records=60, n_datasets=400, dataset_size=300, selectors=(), rng=4,
                     n_jobs=2, verbose=False)


@pytest.mark.parametrize("col", NAMES)
def test_no_family_is_systematically_off_chance_under_the_null(null_rows, col):
    "Neither a leak (above 0.5) nor the cross-fitting's pull below it: each family's mean AUC within 3 standard errors of 0.5."
    a = null_rows[col].to_numpy()
    se = a.std(ddof=1) / np.sqrt(len(a))
    assert abs(a.mean() - 0.5) < 3 * se + 1e-3, (col, a.mean(), se)


def test_the_stack_has_nominal_false_alarms_under_the_null(null_rows):
    "Hanley-McNeil's lower bound above 0.5 for at most a handful of the 60 null records (2.5 % nominal; issue 36 measures it exactly)."
    assert (null_rows["auc_ci_low"] > 0.5).sum() <= 6


@pytest.fixture(scope="module")
def synthpop_rows(adult):
    "Six records with a unique fnlwgt, audited against SynthPop (which copies its training values) with and without the new families."
    df, schema = adult
    counts = df["fnlwgt"].map(df["fnlwgt"].value_counts())
    recs = np.sort(np.flatnonzero(counts.to_numpy() == 1)[[10, 500, 2000, 6000, 11000, 17000]])
    kw = dict(records=recs, n_datasets=240, dataset_size=500, selectors=(), rng=2, n_jobs=2, verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)
        return audit(df, "synthpop", **kw), audit(df, "synthpop", attacks=PREVIOUS, **kw)


def test_exact_values_expose_what_synthpop_copies(synthpop_rows):
    "The exact-value family finds the copies, and the stack carries it: dropping it (the previous attacker) loses most of the AUC."
    new, old = synthpop_rows
    assert new["auc_exact"].mean() > 0.75, new["auc_exact"].tolist()
    assert (new["auc"] >= new["auc_exact"] - 0.04).all(), new[["auc", "auc_exact"]]
    assert new["auc"].mean() > old["auc"].mean() + 0.1, (new["auc"].mean(), old["auc"].mean())


def test_every_trained_family_is_reported(synthpop_rows):
    new, _ = synthpop_rows
    for f in DEFAULT_ATTACKS: assert f"auc_{f}" in new, f
    assert set(new["lead"]) <= set(DEFAULT_ATTACKS) | {"pooled", "none"}
    assert set(TRAINED_FAMILIES) >= {f for f in DEFAULT_ATTACKS if f not in ("dcr", "rarest")}


# Frozen output of the code just before issue 35 (commit 88669e1), the same call without `attacks` / `stack` (which it did not have)
BEFORE_ISSUE_35 = {"record": [0, 5, 17, 123, 401],
                   "auc": [0.55701754386, 0.661875, 0.717171717172, 0.451127819549, 0.689180737961],
                   "auc_query": [0.565162907268, 0.67, 0.652777777778, 0.451127819549, 0.682301438399],
                   "auc_distance": [0.536967418546, 0.51125, 0.676767676768, 0.504385964912, 0.72545340838],
                   "auc_density": [0.586466165414, 0.545, 0.636994949495, 0.448621553885, 0.695434646654],
                   "eps_lower": [0.0, 0.0, 0.142440714832, 0.0, 0.0],
                   "tpr@0.1": [0.142857142857, 0.225, 0.363636363636, 0.047619047619, 0.268292682927]}


def test_previous_attacker_is_the_code_before_issue_35():
    "`attacks=PREVIOUS, stack=False` is the audit before issue 35, to 12 digits: the committed BayNet map and `bench audit`'s baseline rest on it."
    df = load_adult().iloc[:600].reset_index(drop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)
        r = audit(df, "baynet", records=[0, 5, 17, 123, 401], n_datasets=80, dataset_size=200, rng=3, n_jobs=1, verbose=False,
                  selectors=(), attacks=PREVIOUS, stack=False)
        default = audit(df, "baynet", records=[0, 5, 17, 123, 401], n_datasets=80, dataset_size=200, rng=3, n_jobs=1, verbose=False,
                        selectors=())
    got = r[list(BEFORE_ISSUE_35)].round(12).to_dict("list")
    for k, v in BEFORE_ISSUE_35.items():
        np.testing.assert_allclose(got[k], v, rtol=0, atol=1e-12, err_msg=k)
    assert not np.allclose(default["auc"], BEFORE_ISSUE_35["auc"])  # and the default attacker is not the previous one
