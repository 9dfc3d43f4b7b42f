"""Utility measures of achilles.fidelity: the detection score (App. G's MLE), the 3-way TVD against a pandas crosstab
reference, ML efficacy (TSTR / TRTR), `utility` and the UTILITY registry."""
import math
from itertools import combinations

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, encode, load_adult
from achilles.core.validate import InvalidParameterError
from achilles.fidelity import (UTILITY, _discrete, _tvd_joint, _unrank_triple, column_triples, detection_score,
                               ml_efficacy, tvd_3way, utility)
from achilles.generators import make_generator


@pytest.fixture(scope="module")
def adult():
    df = load_adult()
    return df, Schema.from_dataframe(df)


@pytest.fixture(scope="module")
def parts(adult):
    "Four disjoint real sets of 1,500 records."
    df, _ = adult
    idx = np.random.default_rng(11).permutation(len(df))
    return [df.iloc[idx[i * 1500:(i + 1) * 1500]].reset_index(drop=True) for i in range(4)]


# --- detection ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["hgb", "logistic"])
def test_detection_of_the_same_distribution_is_chance(adult, parts, model):
    _, schema = adult
    r = detection_score(parts[0], parts[1], schema, model=model, rng=0)
    assert r["mle_accuracy_ci_low"] <= 0.5 <= r["mle_accuracy_ci_high"], r
    assert abs(r["mle_auc"] - 0.5) < 0.06


def test_detection_sees_independent_marginals(adult, parts):
    _, schema = adult
    syn = make_generator("independent", schema).fit_sample(parts[0], 1500, rng=0)
    r = detection_score(parts[1], syn, schema, rng=0)
    assert r["mle_accuracy"] > 0.55 and r["mle_accuracy_ci_low"] > 0.5
    # also on the categorical columns alone (no binning artefacts): the lost correlations give it away
    cat = Schema(tuple(schema[c] for c in schema.categorical))
    assert detection_score(parts[1][cat.names], syn[cat.names], cat, rng=0)["mle_accuracy"] > 0.55


@pytest.mark.parametrize("column,value", [("fnlwgt", 200_000), ("age", 37)])
def test_detection_of_a_constant_column_is_near_one(adult, parts, column, value):
    _, schema = adult
    r = detection_score(parts[0], parts[1].assign(**{column: value}), schema, rng=0)
    assert r["mle_accuracy"] > 0.9 and r["mle_auc"] > 0.9


def test_detection_balances_and_splits(adult, parts):
    _, schema = adult
    r = detection_score(parts[0].iloc[:300], parts[1], schema, test_size=0.3, rng=0)
    assert r["n_test"] == 2 * 90 and r["n_train"] == 2 * 210
    r = detection_score(parts[0], parts[1].iloc[:2], schema, rng=0)  # the smallest possible: one record per class each side
    assert r["n_test"] == 2 and r["n_train"] == 2
    enc = detection_score(encode(parts[0], schema), encode(parts[1], schema), schema, rng=3)
    assert enc == detection_score(parts[0], parts[1], schema, rng=3)  # DataFrame or Encoded alike


def test_detection_is_deterministic_whatever_the_threads(adult, parts):
    _, schema = adult
    a = detection_score(parts[0], parts[2], schema, rng=5, n_jobs=1)
    assert a == detection_score(parts[0], parts[2], schema, rng=5, n_jobs=2)
    assert a == detection_score(parts[0], parts[2], schema, rng=np.random.default_rng(5), n_jobs=None)
    lg = detection_score(parts[0], parts[2], schema, model="logistic", rng=5)
    assert lg == detection_score(parts[0], parts[2], schema, model="logistic", rng=5, n_jobs=2)


def test_detection_validation(adult, parts):
    _, schema = adult
    a, b = parts[0].iloc[:50], parts[1].iloc[:50]
    with pytest.raises(ValueError, match=r"model='xgboost' is not allowed; choose one of 'hgb', 'logistic'"):
        detection_score(a, b, schema, model="xgboost")
    for bad in (0, 1, 1.5, -0.1):
        with pytest.raises(ValueError, match=rf"test_size={bad} is out of range"):
            detection_score(a, b, schema, test_size=bad)
    with pytest.raises(TypeError, match="test_size='a' must be a number"):
        detection_score(a, b, schema, test_size="a")
    with pytest.raises(ValueError, match="n_jobs=0 is not allowed"):
        detection_score(a, b, schema, n_jobs=0)
    with pytest.raises(TypeError, match="synthetic must be a DataFrame or an achilles.data.Encoded, got list"):
        detection_score(a, [1, 2], schema)
    with pytest.raises(ValueError, match="real is empty"):
        detection_score(a.iloc[:0], b, schema)
    with pytest.raises(ValueError, match="at least 2 records in each table; real has 1, synthetic has 50"):
        detection_score(a.iloc[:1], b, schema)
    with pytest.raises(TypeError):
        detection_score(a, b, schema, 0.3)  # the options are keyword-only


# --- 3-way TVD ----------------------------------------------------------------------------------------------------

def _reference(A, B, t):
    "Plain pandas: half the L1 distance between the normalised 3-way crosstabs."
    ct = lambda X: pd.crosstab([X[:, t[0]], X[:, t[1]]], X[:, t[2]], normalize="all").stack()
    return 0.5 * ct(A).sub(ct(B), fill_value=0).abs().sum()


def _bin_reference(v, lo, hi, bins):
    "Equal-width bins over the schema's range, by hand."
    return np.minimum(np.floor((v - lo) / (hi - lo) * bins), bins - 1).astype(int)


def test_tvd_3way_three_columns_with_empty_cells():
    r = np.random.default_rng(0)
    real = pd.DataFrame({"a": r.choice(list("pqrs"), 500), "b": r.choice(["u", "v", "w"], 500),
                         "c": np.round(r.uniform(0, 10, 500), 1)})  # rounded: many ties
    schema = Schema.from_dataframe(real)
    syn = real.iloc[:30].assign(a="p", b=lambda d: np.where(d.index % 2 == 0, "u", "v"))  # few cells occupied
    A = np.stack([encode(real, schema).cat[:, 0], encode(real, schema).cat[:, 1],
                  _bin_reference(real["c"].to_numpy(), real["c"].min(), real["c"].max(), 5)], axis=1)
    B = np.stack([encode(syn, schema).cat[:, 0], encode(syn, schema).cat[:, 1],
                  _bin_reference(syn["c"].to_numpy(), real["c"].min(), real["c"].max(), 5)], axis=1)
    got = tvd_3way(real, syn, schema, bins=5)
    assert got == pytest.approx(_reference(A, B, [0, 1, 2]), abs=1e-12)
    assert tvd_3way(syn, real, schema, bins=5) == pytest.approx(got, abs=1e-12)  # symmetric
    assert tvd_3way(real, real.sample(frac=1, random_state=0), schema) == 0.0  # order does not matter
    assert tvd_3way(real, pd.concat([real, real]), schema) == pytest.approx(0.0, abs=1e-15)  # duplicates: same distribution


def test_tvd_3way_disjoint_supports_is_one():
    a = pd.DataFrame({"x": ["a"] * 5 + ["b"] * 5, "y": ["c"] * 10, "z": ["d", "e"] * 5})
    schema = Schema.from_dataframe(a)
    assert tvd_3way(a[a.x == "a"], a[a.x == "b"], schema) == 1.0


@pytest.mark.parametrize("d,max_triples", [(4, None), (6, 200), (9, 25)])
def test_tvd_3way_against_the_reference(d, max_triples):
    r = np.random.default_rng(d)
    cols = {f"c{j}": r.choice(list("abcdefg")[: 2 + j % 4], 400) for j in range(d - 1)}
    real = pd.DataFrame(cols | {"num": r.integers(0, 50, 400)})
    syn = pd.DataFrame({k: r.permutation(v)[:250] for k, v in real.items()})
    schema = Schema.from_dataframe(real)
    A, B = _discrete(real, schema, 7, "real"), _discrete(syn, schema, 7, "synthetic")
    T = column_triples(d, max_triples, rng=3)
    assert len(T) == (math.comb(d, 3) if max_triples is None or math.comb(d, 3) <= max_triples else max_triples)
    want = np.mean([_reference(A, B, t) for t in T])
    assert tvd_3way(real, syn, schema, bins=7, max_triples=max_triples, rng=3) == pytest.approx(want, abs=1e-12)


def test_tvd_3way_large_domains_use_the_sparse_path():
    r = np.random.default_rng(1)
    real = pd.DataFrame({k: r.integers(0, 300, 600).astype(str) for k in "xyz"})
    schema = Schema.from_dataframe(real, types={k: "categorical" for k in "xyz"})
    syn = real.iloc[:200].copy(); syn["x"] = real["x"].iloc[200:400].to_numpy()
    A, B = _discrete(real, schema, 10, "real"), _discrete(syn, schema, 10, "synthetic")
    assert math.prod(schema.cardinalities) > 4 * 800 + 4096
    assert tvd_3way(real, syn, schema) == pytest.approx(_reference(A, B, [0, 1, 2]), abs=1e-12)
    # codes whose combined domain would overflow int64 are renumbered first
    A64, B64 = A.astype(np.int64), B.astype(np.int64)
    assert _tvd_joint(A64, B64, [2**22] * 3) == pytest.approx(_reference(A, B, [0, 1, 2]), abs=1e-12)


def test_column_triples():
    for d in (3, 5, 8):
        colex = sorted(combinations(range(d), 3), key=lambda t: t[::-1])
        assert [_unrank_triple(k, d) for k in range(math.comb(d, 3))] == colex
    assert column_triples(6).tolist() == [list(t) for t in combinations(range(6), 3)]
    T = column_triples(40, 100, rng=0)
    assert len({tuple(t) for t in T}) == 100 and (np.diff(T, axis=1) > 0).all() and T.max() < 40
    assert (T == column_triples(40, 100, rng=0)).all()
    assert not (T == column_triples(40, 100, rng=1)).all()
    with pytest.raises(ValueError, match="d=2 is out of range"): column_triples(2)
    with pytest.raises(ValueError, match="max_triples=0 is out of range"): column_triples(10, 0)


def test_tvd_3way_validation(adult, parts):
    df, schema = adult
    with pytest.raises(ValueError, match="bins=0 is out of range"): tvd_3way(parts[0], parts[1], schema, bins=0)
    with pytest.raises(TypeError, match="max_triples=2.5 must be an integer"): tvd_3way(parts[0], parts[1], schema, max_triples=2.5)
    two = Schema(schema.columns[:2])
    with pytest.raises(ValueError, match="needs at least 3 columns; the schema has 2"): tvd_3way(parts[0], parts[1], two)
    assert tvd_3way(parts[0], parts[1], schema, rng=4) == tvd_3way(parts[0], parts[1], schema, rng=4)


# --- ML efficacy --------------------------------------------------------------------------------------------------

def test_ml_efficacy_of_the_training_set_is_one(adult, parts):
    _, schema = adult
    r = ml_efficacy(parts[0], parts[0], parts[3], schema, rng=0)
    assert r["target"] == "income" and r["task"] == "classification" and r["score"] == "accuracy"
    assert r["tstr_over_trtr"] == 1.0 and r["tstr_auc"] == r["trtr_auc"] and r["n_test"] == 1500
    assert 0.75 < r["trtr_accuracy"] <= 1 and 0.5 < r["trtr_auc"] <= 1
    g = ml_efficacy(parts[0], parts[0], parts[3], schema, target="age", rng=0)
    assert g["task"] == "regression" and g["score"] == "nrmse" and g["tstr_over_trtr"] == 1.0 and 0 < g["trtr_r2"] < 1


def test_ml_efficacy_falls_when_the_target_is_shuffled(adult, parts):
    _, schema = adult
    shuffled = parts[0].assign(income=np.random.default_rng(0).permutation(parts[0]["income"].to_numpy()))
    r = ml_efficacy(parts[0], shuffled, parts[3], schema, rng=0)
    assert r["tstr_over_trtr"] < 0.95 and r["tstr_auc"] < r["trtr_auc"] - 0.2 and r["tstr_f1_macro"] < r["trtr_f1_macro"]
    age = parts[0].assign(age=np.random.default_rng(0).permutation(parts[0]["age"].to_numpy()))
    assert ml_efficacy(parts[0], age, parts[3], schema, target="age", rng=0)["tstr_over_trtr"] < 0.95


def test_ml_efficacy_constant_target_against_plain_formulas(adult, parts):
    _, schema = adult
    test = parts[3]
    one = ml_efficacy(parts[0], parts[1].assign(income=">50K"), test, schema, rng=0)  # one class: predicts it everywhere
    assert one["tstr_accuracy"] == pytest.approx((test["income"] == ">50K").mean(), abs=1e-12)
    assert one["tstr_auc"] == 0.5
    c = 40
    reg = ml_efficacy(parts[0], parts[1].assign(age=c), test, schema, target="age", rng=0)
    y = test["age"].to_numpy(float)
    assert reg["tstr_nrmse"] == pytest.approx(1 - np.sqrt(np.mean((y - c) ** 2)) / np.ptp(y), abs=1e-9)  # Eq. 10
    assert reg["tstr_r2"] == pytest.approx(1 - np.sum((y - c) ** 2) / np.sum((y - y.mean()) ** 2), abs=1e-9)


def test_ml_efficacy_determinism_and_validation(adult, parts):
    df, schema = adult
    a = ml_efficacy(parts[0], parts[1], parts[2], schema, rng=9)
    assert a == ml_efficacy(parts[0], parts[1], parts[2], schema, rng=9, n_jobs=2)
    assert ml_efficacy(parts[0], parts[1], parts[2], schema, target="income", rng=9) == a  # the default: the last column
    with pytest.raises(ValueError, match="target='salary' is not allowed; choose one of 'age'"):
        ml_efficacy(parts[0], parts[1], parts[2], schema, target="salary")
    with pytest.raises(ValueError, match="test is empty"):
        ml_efficacy(parts[0], parts[1], parts[2].iloc[:0], schema)
    with pytest.raises(TypeError, match="train must be a DataFrame"):
        ml_efficacy(None, parts[1], parts[2], schema)
    one = Schema(schema.columns[-1:])
    with pytest.raises(ValueError, match="needs a feature besides target='income'"):
        ml_efficacy(parts[0], parts[1], parts[2], one)
    with pytest.raises(InvalidParameterError, match="n_jobs=1.5 must be an integer"):
        ml_efficacy(parts[0], parts[1], parts[2], schema, n_jobs=1.5)


# --- utility and the registry -------------------------------------------------------------------------------------

def test_utility(adult, parts):
    _, schema = adult
    syn = make_generator("independent", schema).fit_sample(parts[0], 1500, rng=0)
    u = utility(parts[0], syn, schema, rng=0)
    assert list(u) == ["tvd_1way", "tvd_2way", "cramers_v_error", "tvd_3way", "mle_accuracy", "mle_auc"]
    assert all(isinstance(v, float) for v in u.values()) and u["mle_accuracy"] > 0.55
    h = utility(parts[0], syn, schema, holdout=parts[1], rng=0)
    assert h == utility(parts[0], syn, schema, holdout=parts[1], rng=0)
    assert {"ml_tstr_accuracy", "ml_trtr_accuracy", "ml_tstr_over_trtr", "ml_tstr_auc"} <= set(h)
    assert h["tvd_3way"] == u["tvd_3way"] and h["ml_tstr_over_trtr"] < 1
    same = utility(parts[0], parts[0], schema, holdout=parts[1], rng=0)  # the identity generator's output
    assert same["tvd_3way"] == 0.0 and same["ml_tstr_over_trtr"] == 1.0 and same["mle_accuracy"] < 0.56


def test_utility_registry_and_cli(capsys):
    from achilles import cli
    assert UTILITY.names() == ["detection", "tvd_3way", "ml_efficacy"]
    assert UTILITY["detection"] is detection_score and UTILITY["tvd_3way"] is tvd_3way
    t = UTILITY.describe()
    assert (t["summary"].str.len() > 0).all() and t["paper"].notna().all()
    assert cli.main(["list", "utility", "--parameters"]) == 0
    out = capsys.readouterr().out
    assert all(n in out for n in UTILITY.names()) and "max_triples=200" in out
