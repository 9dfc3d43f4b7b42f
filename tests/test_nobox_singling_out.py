"""Singling out (anonymeter's attack): the counting kernel against pandas / numpy on tables with ties and duplicates, the query
generators' invariants, the control-size correction against simulation and end to end (no leak, no risk, whatever the control
set's size), the leaky-setting oracle, the metric contract, and agreement with anonymeter's own results on the leaky Adult data
(tests/reference/anonymeter_leaky_adult.json, when present)."""
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, load_adult
from achilles.core.testing import check_metric
from achilles.nobox import METRICS, leaky_setting
from achilles.nobox.singling_out import (EQ, GE, LE, NE, CountTable, Predicates, QueryTable, SinglingOut, control_outcomes,
                                         control_rate_replicates, expected_singletons, fit_beta_binomial, multivariate_queries,
                                         predicate_counts, predicted_singletons, random_queries, subsample_singletons,
                                         univariate_queries, unique_rows)

REFERENCE = Path(__file__).parent / "reference" / "anonymeter_leaky_adult.json"
_OPS = {0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater, 5: np.greater_equal}


def _reference_counts(X, preds):
    "Plain numpy: rows satisfying every term of each predicate; with missing values, the rule spelled out: `== NaN` is missing, `!= NaN` is present, an order with NaN on either side is false."
    out = []
    for p in range(len(preds)):
        ok = np.ones(len(X), bool)
        for t in range(preds.nterms[p]):
            x, op, v = X[:, preds.cols[p, t]], int(preds.ops[p, t]), preds.vals[p, t]
            if np.isnan(v): ok &= np.isnan(x) if op == EQ else ~np.isnan(x) if op == NE else np.zeros(len(x), bool)
            else: ok &= _OPS[op](x, v)  # IEEE: NaN == v false, NaN != v true, NaN < v (and the others) false
        out.append(int(ok.sum()))
    return np.array(out, np.int64)


def _random_predicates(X, n, max_terms, g):
    "Random predicates on X: values mostly taken from X (ties), some absent; any operator; 1..max_terms terms (padded)."
    d = X.shape[1]
    cols = np.zeros((n, max_terms), np.int64); ops = np.zeros((n, max_terms), np.int8); vals = np.zeros((n, max_terms))
    nterms = g.integers(1, max_terms + 1, size=n)
    for p in range(n):
        c = g.choice(d, size=nterms[p], replace=False)
        cols[p, :nterms[p]] = c
        ops[p, :nterms[p]] = g.integers(0, 6, size=nterms[p])
        rows = g.integers(0, len(X), size=nterms[p])
        vals[p, :nterms[p]] = np.where(g.random(nterms[p]) < 0.85, X[rows, c], g.integers(-1, 8, size=nterms[p]) + 0.5)
    return Predicates(cols, ops, vals, nterms.astype(np.int64))


@pytest.mark.parametrize("n,d", [(1, 1), (2, 3), (7, 2), (200, 5), (1500, 8)])
def test_counts_match_numpy_reference(n, d):
    g = np.random.default_rng(n * 31 + d)
    X = g.integers(0, 4, size=(n, d)).astype(np.float64)  # few values: many ties and duplicate rows
    if n > 3: X[: n // 3] = X[n // 3: 2 * (n // 3)]
    preds = _random_predicates(X, 400, min(d, 4), g)
    ref = _reference_counts(X, preds)
    np.testing.assert_array_equal(predicate_counts(X, preds), ref)
    for cap in (1, 2, 5):
        np.testing.assert_array_equal(predicate_counts(X, preds, cap=cap), np.minimum(ref, cap))


def test_counts_edge_cases():
    X = np.array([[1.0, 2.0], [1.0, 3.0]])
    assert predicate_counts(X, Predicates.empty(2)).shape == (0,)
    none = Predicates(np.array([[0, 1]]), np.array([[EQ, EQ]], np.int8), np.array([[1.0, 9.0]]), np.array([2]))
    assert predicate_counts(X, none).tolist() == [0]
    ne = Predicates(np.array([[0]]), np.array([[NE]], np.int8), np.array([[0.5]]), np.array([1]))
    assert predicate_counts(X, ne).tolist() == [2]
    empty_table = CountTable(np.zeros((0, 2)))
    assert empty_table.count(ne).tolist() == [0]
    with pytest.raises(ValueError, match="column positions"):
        CountTable(X).count(Predicates(np.array([[2]]), np.array([[EQ]], np.int8), np.array([[1.0]]), np.array([1])))


def test_counts_do_not_depend_on_threads():
    import numba
    g = np.random.default_rng(5)
    X = g.integers(0, 6, size=(3000, 6)).astype(np.float64)
    preds = _random_predicates(X, 2000, 4, g)
    prev = numba.get_num_threads()
    try:
        numba.set_num_threads(1); a = predicate_counts(X, preds, cap=2)
        numba.set_num_threads(prev); b = predicate_counts(X, preds, cap=2)
    finally:
        numba.set_num_threads(prev)
    np.testing.assert_array_equal(a, b)


@pytest.fixture(scope="module")
def adult_leak():
    adult = load_adult()
    schema = Schema.from_dataframe(adult)
    s = leaky_setting(adult, 0.5, n_train=3000, rng=3)
    qt = QueryTable.fit(schema, s.train, s.synthetic, s.control)
    return s, qt


def test_query_strings_agree_with_pandas(adult_leak):
    s, qt = adult_leak
    S = CountTable(unique_rows(qt.encode(s.synthetic)))
    syn = s.synthetic.drop_duplicates()
    g = np.random.default_rng(0)
    q = random_queries(S, qt.numeric, 60, 3, g)
    assert S.count(q).tolist() == [len(syn.query(qt.query(q, i))) for i in range(len(q))]


def test_unique_rows_keeps_first_occurrences():
    X = np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0], [-0.0, 1.0], [3.0, 3.0]])
    np.testing.assert_array_equal(unique_rows(X), X[[0, 1, 4]])


def test_unique_rows_edge_sizes():
    assert unique_rows(np.zeros((0, 3))).shape == (0, 3)
    assert unique_rows(np.zeros((5, 0))).shape == (1, 0)  # five records with no columns are one (empty) record
    assert unique_rows(np.zeros((0, 0))).shape == (0, 0)
    np.testing.assert_array_equal(unique_rows(np.array([[2.5, 1.0]])), [[2.5, 1.0]])


def test_unique_rows_on_a_hash_collision(monkeypatch):
    "Every row hashing alike (a forced collision): the bytes decide, -0.0 and 0.0 are still one value, order kept."
    X = np.array([[1.0, 2.0], [0.0, 1.0], [1.0, 2.0], [-0.0, 1.0], [3.0, 3.0], [0.0, 1.0]])
    monkeypatch.setattr(pd.util, "hash_pandas_object", lambda df, index=False: pd.Series(np.zeros(len(df), np.uint64)))
    np.testing.assert_array_equal(unique_rows(X), X[[0, 1, 4]])
    Y = np.random.default_rng(0).integers(0, 3, (200, 3)).astype(float)
    _, first = np.unique(Y, axis=0, return_index=True)
    np.testing.assert_array_equal(unique_rows(Y), Y[np.sort(first)])


def test_query_table_codes_are_shared_and_unseen_values_get_their_own():
    df = pd.DataFrame({"c": pd.Categorical(["a", "b", "a"]), "x": [1, 2, 3]})
    qt = QueryTable.fit(Schema.from_dataframe(df), df, pd.DataFrame({"c": ["z", "y"], "x": [0, 0]}))
    assert qt.levels[0] == ("a", "b", "z", "y")
    assert qt.encode(pd.DataFrame({"c": ["y", "a", "z"], "x": [1, 1, 1]}))[:, 0].tolist() == [3.0, 0.0, 2.0]
    assert qt.encode(pd.DataFrame({"c": ["a"], "x": [-4.5]}))[:, 1].tolist() == [-4.5]  # negative numbers are values
    for bad in (pd.DataFrame({"c": ["a", "w"], "x": [1, 2]}), pd.DataFrame({"c": pd.Categorical(["a", "w"]), "x": [1, 2]})):
        with pytest.raises(ValueError, match="'w' in column 'c', which this QueryTable was not fitted on"):
            qt.encode(bad, "control")  # a value `fit` never saw (not a missing one) is still an error


def test_univariate_queries_single_out_and_are_distinct(adult_leak):
    s, qt = adult_leak
    S = CountTable(unique_rows(qt.encode(s.synthetic)))
    q = univariate_queries(S, qt.numeric, 10**6, np.random.default_rng(0))
    assert (q.nterms == 1).all() and len(set(q.keys().tolist())) == len(q)
    assert (S.count(q) == 1).all()
    X = S.XT.T  # every value held by exactly one synthetic record is there, on every column
    n_rare = sum(int((np.unique(X[:, j], return_counts=True)[1] == 1).sum()) for j in range(S.d))
    assert (q.ops == EQ).sum() == n_rare
    assert set(np.unique(q.ops)) <= {EQ, LE, GE}
    assert len(univariate_queries(S, qt.numeric, 7, np.random.default_rng(0))) == 7


def test_multivariate_queries_follow_anonymeter(adult_leak):
    s, qt = adult_leak
    S = CountTable(unique_rows(qt.encode(s.synthetic)))
    q, attempts = multivariate_queries(S, qt.numeric, 4, 300, 10**6, np.random.default_rng(1))
    assert len(q) == 300 and attempts >= 300
    assert (q.nterms == 4).all() and (np.diff(q.cols, axis=1) > 0).all()
    assert len(set(q.keys().tolist())) == len(q)
    assert (S.count(q) == 1).all()
    med = np.median(S.XT, axis=1)
    num = qt.numeric[q.cols]
    expect = np.where(num, np.where(q.vals > med[q.cols], GE, LE), EQ)
    np.testing.assert_array_equal(q.ops, expect)
    # a record's values: every query matches at least one synthetic record whose values it holds
    q2, att2 = multivariate_queries(S, qt.numeric, 4, 10**6, 5000, np.random.default_rng(1))
    assert att2 == 5000 and len(q2) < 5000


def test_random_queries_use_synthetic_values_and_allowed_operators(adult_leak):
    s, qt = adult_leak
    S = CountTable(unique_rows(qt.encode(s.synthetic)))
    q = random_queries(S, qt.numeric, 3000, 2, np.random.default_rng(2))
    for j in range(S.d):
        m = q.cols == j
        assert np.isin(q.vals[m], S.XT[j]).all()
        allowed = 6 if qt.numeric[j] else 2
        assert q.ops[m].max(initial=0) < allowed
    assert np.unique(q.ops[qt.numeric[q.cols]]).size == 6


def test_expected_singletons_against_simulation():
    g = np.random.default_rng(0)
    counts = np.array([1, 1, 1, 2, 2, 5, 9, 30, 0, 0])
    pool = np.repeat(np.arange(len(counts)), counts)
    for m in (5, 20, 40):
        sim = np.mean([np.sum(np.bincount(g.choice(pool, m, replace=False), minlength=len(counts)) == 1) for _ in range(20_000)])
        assert abs(expected_singletons(counts, len(pool), m) - sim) < 0.05
    assert expected_singletons(counts, len(pool), len(pool)) == pytest.approx(3.0)


def test_subsample_singletons_per_query():
    counts = np.array([0, 1, 2, 5])
    np.testing.assert_allclose(subsample_singletons(counts, 10, 10), [0, 1, 0, 0])  # the whole table
    np.testing.assert_allclose(subsample_singletons(counts, 10, 1), counts / 10)  # one record: it is the match with prob c/N
    # c = 2 of N = 10, m = 4: C(2,1) C(8,3) / C(10,4) = 2 * 56 / 210
    assert subsample_singletons(np.array([2]), 10, 4)[0] == pytest.approx(2 * 56 / 210)
    assert subsample_singletons(np.array([9]), 10, 4)[0] == 0.0  # 9 of 10 match: a 4-subset holds at least 3


@pytest.mark.parametrize("alpha,beta,N,m", [(0.4, 3000, 600, 3000), (0.8, 4000, 1000, 4000), (1.5, 10_000, 2500, 10_000),
                                            (0.3, 20_000, 5000, 20_000)])
def test_beta_binomial_extrapolates_simulated_shares(alpha, beta, N, m):
    "Shares drawn from a beta: the fit recovers the rate of singling out in m records from counts in N < m records."
    g = np.random.default_rng(int(alpha * 10) + N)
    p = g.beta(alpha, beta, size=4000)
    c = g.binomial(N, p)
    a, b = fit_beta_binomial(c, N)
    truth = np.mean(m * p * (1 - p) ** (m - 1))
    assert predicted_singletons(c, N, m, a, b).mean() == pytest.approx(truth, abs=0.015)
    assert a == pytest.approx(alpha, rel=0.35) and b == pytest.approx(beta, rel=0.5)
    # the posterior expectation at m = N of a beta-binomial is not the raw rate, but close to it on many queries
    assert predicted_singletons(c, N, N, a, b).mean() == pytest.approx(np.mean(c == 1), abs=0.01)


def test_beta_binomial_fit_is_the_penalised_optimum():
    from scipy.optimize import minimize
    from scipy.special import betaln
    g = np.random.default_rng(3)
    for alpha, N in ((0.5, 700), (2.0, 3000), (1.0, 1500)):
        c = g.binomial(N, g.beta(alpha, 5 * N, size=800))
        u, w = np.unique(c, return_counts=True)
        def nll(t):
            a, b = np.exp(t)
            return -np.sum(w * (betaln(a + u, b + N - u) - betaln(a, b))) + 0.5 * t[0] ** 2
        best = min((minimize(nll, [la, la + math.log(5 * N)], method="Nelder-Mead",
                             options=dict(xatol=1e-10, fatol=1e-12, maxiter=10_000)) for la in (-2.0, 0.0, 2.0)),
                   key=lambda r: r.fun)
        a, b = fit_beta_binomial(c, N)
        assert nll(np.log([a, b])) <= best.fun + 1e-7
        assert a == pytest.approx(math.exp(best.x[0]), rel=1e-3)


def test_control_outcomes_by_size():
    c = np.array([0, 1, 1, 2, 7])
    o, info = control_outcomes(c, 100, 100)
    assert info["method"] == "equal sizes" and o.tolist() == [0, 1, 1, 0, 0]
    o, info = control_outcomes(c, 100, 40)
    assert info["method"] == "subsample"
    np.testing.assert_allclose(o, subsample_singletons(c, 100, 40))
    o, info = control_outcomes(c, 100, 400)
    assert info["method"] == "beta-binomial" and info["alpha"] > 0 and info["beta"] > 0
    np.testing.assert_allclose(o, predicted_singletons(c, 100, 400, info["alpha"], info["beta"]))
    o, info = control_outcomes(np.zeros(5, int), 100, 400)  # nobody matched: nothing to extrapolate
    assert o.tolist() == [0.0] * 5 and math.isnan(info["alpha"])
    assert control_rate_replicates(np.zeros(5, int), 100, 400, info, 20, np.random.default_rng(0)).tolist() == [0.0] * 20


def test_control_rate_replicates_cover_the_truth():
    "The refitted bootstrap covers the rate at the training size in most of 20 simulated control sets; resampling alone does not."
    covered, naive_covered = 0, 0
    for seed in range(20):
        g = np.random.default_rng(seed)
        p = g.beta(0.7, 4000, size=500)
        c = g.binomial(1000, p)
        truth = np.mean(4000 * p * (1 - p) ** 3999)
        o, info = control_outcomes(c, 1000, 4000)
        rep = control_rate_replicates(c, 1000, 4000, info, 300, g)
        covered += np.quantile(rep, 0.025) <= truth <= np.quantile(rep, 0.975)
        naive = o[g.integers(0, len(o), (300, len(o)))].mean(1)
        naive_covered += np.quantile(naive, 0.025) <= truth <= np.quantile(naive, 0.975)
    assert covered >= 16 and naive_covered <= 10
    # the subsample case resamples the exact per-query values
    c = np.array([0, 1, 1, 2, 3])
    rep = control_rate_replicates(c, 50, 20, control_outcomes(c, 50, 20)[1], 500, np.random.default_rng(0))
    assert rep.mean() == pytest.approx(subsample_singletons(c, 50, 20).mean(), abs=0.02)


@pytest.fixture(scope="module")
def no_leak_4000():
    return leaky_setting(load_adult(), 0.0, n_train=4000, n_control=4000, rng=0)


@pytest.mark.parametrize("n_control", [3000, 1000, 500])
def test_no_leak_no_risk_with_a_smaller_control_set(no_leak_4000, n_control):
    "Issue 27: at f = 0 the risk is about 0 whatever the control set's size (before the fix: +0.13 at 1,200, -0.35 at 1,000, -0.73 at 500)."
    s = no_leak_4000
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = SinglingOut(mode="multivariate", n_cols=3, n_attacks=500).evaluate(s.train, s.synthetic, s.control.iloc[:n_control], rng=0)
    assert abs(r.value) < 0.1 and r.ci_low < 0 < r.ci_high, (r.value, r.ci_low, r.ci_high)
    assert r.metrics["control_size_method"] == "beta-binomial"
    assert r.metrics["control_rate_ci_low"] < r.control_rate < r.metrics["control_rate_ci_high"]
    # a smaller set singles out less often: its successes are scaled up, the more so the smaller it is
    assert r.metrics["control_size_correction"] > {3000: 1.0, 1000: 1.5, 500: 2.0}[n_control]
    assert any("extrapolated" in str(x.message) for x in w) == (n_control < 1000)


def test_no_leak_no_risk_with_a_larger_control_set():
    s = leaky_setting(load_adult(), 0.0, n_train=2000, n_control=8000, rng=1)
    r = _quiet(SinglingOut(mode="multivariate", n_cols=3, n_attacks=500), s)
    assert abs(r.value) < 0.1 and r.ci_low < 0 < r.ci_high
    assert r.metrics["control_size_method"] == "subsample"
    assert r.metrics["control_size_correction"] > 1.2  # 8,000 records single out less often than 2,000


def _quiet(metric, s, rng=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return metric.evaluate(s.train, s.synthetic, s.control, rng=rng)


@pytest.fixture(scope="module")
def leaky():
    adult = load_adult()
    return {f: leaky_setting(adult, f, n_train=2000, rng=0) for f in (0.0, 0.5, 1.0)}


@pytest.mark.parametrize("kw", [dict(mode="univariate", n_attacks=500), dict(mode="multivariate", n_cols=3, n_attacks=500),
                                dict(mode="both", n_attacks=500)])
def test_leaky_oracle(leaky, kw):
    r = {f: _quiet(SinglingOut(**kw), s) for f, s in leaky.items()}
    assert abs(r[0.0].value) < 0.1
    assert r[1.0].value > 0.9 and r[1.0].attack_rate == 1.0
    assert r[0.0].value < r[0.5].value < r[1.0].value
    assert 0.2 < r[0.5].value < 0.8


def test_synthetic_equal_to_train_gives_full_risk(leaky):
    s = leaky[0.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = SinglingOut(mode="both", n_cols=[3, 5], n_attacks=300).evaluate(s.train, s.train.copy(), s.control, rng=0)
    assert r.value == 1.0 and r.attack_rate == 1.0


def test_result_fields(leaky):
    s = leaky[0.5]
    r = _quiet(SinglingOut(mode="both", n_cols=[3, 4], n_attacks=300), s)
    assert r.n == r.metrics["n_guesses"] <= 300
    risks = {k: v for k, v in r.metrics.items() if k.startswith("risk_")}
    assert set(risks) == {"risk_univariate", "risk_n_cols_3", "risk_n_cols_4"}
    assert r.value == pytest.approx(max(risks.values()))
    assert r.ci_low <= r.value <= r.ci_high
    assert 0 <= r.baseline_rate < r.attack_rate
    assert r.metrics["attack_rate_ci_low"] <= r.attack_rate <= r.metrics["attack_rate_ci_high"]
    assert r.parameters["mode"] == "both" and r.parameters["n_cols"] == [3, 4]


def test_contract_and_registry(leaky):
    s = leaky[0.5]
    assert check_metric(SinglingOut(n_cols=3, n_attacks=200), s.train, s.synthetic, s.control)
    m = METRICS.make("singling_out", mode="univariate", n_attacks=100)
    assert isinstance(m, SinglingOut) and m.n_attacks == 100


def test_same_seed_same_result_whatever_n_jobs(leaky):
    s = leaky[0.5]
    a = _quiet(SinglingOut(n_cols=[3, 6], n_attacks=300, n_jobs=1), s, rng=7)
    b = _quiet(SinglingOut(n_cols=[3, 6], n_attacks=300, n_jobs=2), s, rng=7)
    c = _quiet(SinglingOut(n_cols=[3, 6], n_attacks=300, n_jobs=2), s, rng=8)
    assert a.to_row() == b.to_row()
    assert a.to_row() != c.to_row()
    # an attack does not depend on which others run beside it
    d = _quiet(SinglingOut(n_cols=[6], n_attacks=300), s, rng=7)
    assert d.metrics["risk_n_cols_6"] == a.metrics["risk_n_cols_6"]


def test_without_control_the_risk_is_the_train_rate(leaky):
    s = leaky[0.5]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = SinglingOut(n_cols=3, n_attacks=200).evaluate(s.train, s.synthetic, rng=0)
    assert r.value == r.attack_rate and math.isnan(r.control_rate)


def test_bad_arguments(leaky):
    s = leaky[0.5]
    for kw, msg in [(dict(mode="x"), "mode='x'"), (dict(n_attacks=0), "n_attacks=0"), (dict(n_attacks=2.5), "n_attacks=2.5"),
                    (dict(n_cols=0), "n_cols=0"), (dict(n_cols=[]), "n_cols is empty"), (dict(max_attempts=0), "max_attempts=0"),
                    (dict(n_jobs=0), "n_jobs=0")]:
        with pytest.raises((ValueError, TypeError), match=msg.replace("(", r"\(")):
            SinglingOut(**kw)
    with pytest.raises(ValueError, match="exceeds the 15 columns"):
        SinglingOut(n_cols=[3, 16]).evaluate(s.train, s.synthetic, s.control)
    with pytest.raises(ValueError, match="empty"):
        SinglingOut().evaluate(s.train, s.synthetic.iloc[:0], s.control)


# --- missing values: a missing category is a category of its own, a missing number equals only another missing number -------
@pytest.mark.parametrize("n,d", [(1, 1), (3, 2), (60, 3), (1500, 6)])
def test_counts_with_missing_values_match_the_rule(n, d):
    g = np.random.default_rng(7 * n + d)
    X = g.integers(0, 4, size=(n, d)).astype(np.float64)
    X[g.random((n, d)) < 0.25] = np.nan  # a quarter missing, in every column
    if n > 3: X[: n // 3] = X[n // 3: 2 * (n // 3)]  # duplicate rows, missing values included
    preds = _random_predicates(X, 600, min(d, 4), g)  # values from X: NaN in about a quarter of the terms
    assert np.isnan(preds.vals).any() or n == 1
    ref = _reference_counts(X, preds)
    assert (ref > 0).any()
    np.testing.assert_array_equal(predicate_counts(X, preds), ref)
    for cap in (1, 2):
        np.testing.assert_array_equal(predicate_counts(X, preds, cap=cap), np.minimum(ref, cap))
    if n == 1500:  # and `== NaN` alone is exactly the missing rows, column by column (not 0, as IEEE equality would give)
        isna = Predicates(np.arange(d)[:, None], np.full((d, 1), EQ, np.int8), np.full((d, 1), np.nan), np.ones(d, np.int64))
        np.testing.assert_array_equal(predicate_counts(X, isna), np.isnan(X).sum(0))


def test_a_record_with_a_missing_number_gives_an_isna_term_that_matches_exactly_the_missing_rows():
    S = CountTable(np.array([[1.0, 0], [2, 0], [2, 1], [3, 1], [np.nan, 1], [7, 0]]))  # one synthetic record misses x
    q, _ = multivariate_queries(S, np.array([True, False]), 1, 50, 5000, np.random.default_rng(0))
    terms = set(zip(q.cols[:, 0].tolist(), q.ops[:, 0].tolist(), q.vals[:, 0].tolist()))
    isna = [t for t in terms if t[0] == 0 and math.isnan(t[2])]
    assert len(isna) == 1 and isna[0][1] == EQ  # the record missing x singles itself out by `x.isna()`, not by an order
    assert {t for t in terms if not math.isnan(t[2])} == {(0, LE, 1.0), (0, GE, 7.0)}  # the extremes (median 2: of the numbers)
    p = Predicates(np.array([[0]]), np.array([[EQ]], np.int8), np.array([[np.nan]]), np.array([1]))
    T = np.array([[np.nan, 0], [1.0, 0], [2, 1], [np.nan, 1], [3, 0], [np.nan, 0], [-1, 1]])  # x missing in rows 0, 3, 5
    assert predicate_counts(T, p).tolist() == [3]
    assert [int(predicate_counts(T[[i]], p)[0]) for i in range(len(T))] == [1, 0, 0, 1, 0, 1, 0]  # those rows, and only they
    two = Predicates(np.array([[1, 0]]), np.array([[EQ, EQ]], np.int8), np.array([[0.0, np.nan]]), np.array([2]))
    assert predicate_counts(T, two).tolist() == [2]  # with a second term (the multi-term kernel): rows 0 and 5


def test_orders_never_match_a_missing_number():
    X = np.array([[np.nan], [1.0], [2.0], [np.nan], [3.0]])
    for op, want in ((LT, 1), (LE, 2), (GT, 1), (GE, 2), (NE, 4), (EQ, 1)):  # against 2: NaN is neither below nor above it
        p = Predicates(np.array([[0]]), np.array([[op]], np.int8), np.array([[2.0]]), np.array([1]))
        assert predicate_counts(X, p).tolist() == [want], OP_TEXT[op]
    for op in (LT, LE, GT, GE):  # an order against a missing value: no row, not even the missing ones
        p = Predicates(np.array([[0]]), np.array([[op]], np.int8), np.array([[np.nan]]), np.array([1]))
        assert predicate_counts(X, p).tolist() == [0], OP_TEXT[op]
    p = Predicates(np.array([[0]]), np.array([[NE]], np.int8), np.array([[np.nan]]), np.array([1]))
    assert predicate_counts(X, p).tolist() == [3]  # `notna`


@pytest.mark.parametrize("dtype", ["category", "object", "str"])
def test_a_missing_category_is_a_code_of_its_own_that_matches_only_missing(dtype):
    df = pd.DataFrame({"c": pd.Series(["a", None, "b", None, "a", "b"], dtype=dtype), "x": [1.0, 2, 3, 4, 5, 6]})
    qt = QueryTable.fit(Schema.from_dataframe(df), df)
    X = qt.encode(df)
    miss = float(len(qt.levels[0]))
    assert qt.levels[0] == ("a", "b") and X[:, 0].tolist() == [0.0, miss, 1.0, miss, 0.0, 1.0]
    one = lambda op, v: Predicates(np.array([[0]]), np.array([[op]], np.int8), np.array([[v]]), np.array([1]))
    rows = lambda p: [int(predicate_counts(X[[i]], p)[0]) for i in range(len(X))]
    assert rows(one(EQ, miss)) == [0, 1, 0, 1, 0, 0]  # missing: exactly the missing rows
    assert rows(one(EQ, 0.0)) == [1, 0, 0, 0, 1, 0]  # 'a': not the missing rows
    assert rows(one(NE, 0.0)) == [0, 1, 1, 1, 0, 1]  # not 'a': missing is not 'a'
    assert rows(one(NE, miss)) == [1, 0, 1, 0, 1, 1]
    for op, v in ((EQ, miss), (NE, miss), (EQ, 0.0), (NE, 0.0)):  # the printed queries select the same rows in pandas
        assert (rows(one(op, v)) == df.index.isin(df.query(qt.query(one(op, v), 0)).index).astype(int)).all()
    assert qt.query(one(EQ, miss), 0) == "`c`.isna()"
    S = CountTable(unique_rows(qt.encode(df.iloc[:3])))  # one missing value among the synthetic records: `c.isna()` singles out
    q = univariate_queries(S, qt.numeric, 100, np.random.default_rng(0))
    assert "`c`.isna()" in [qt.query(q, i) for i in range(len(q))]


def test_unique_rows_with_missing_values():
    neg_nan = -np.array([np.nan])[0]  # a NaN with other bits: still one missing value
    X = np.array([[np.nan, 1.0], [1.0, 2.0], [neg_nan, 1.0], [np.nan, 2.0], [1.0, 2.0]])
    U = unique_rows(X)
    assert U.shape == (3, 2)
    np.testing.assert_array_equal(U, X[[0, 1, 3]])
    p = Predicates(np.array([[0], [0]]), np.array([[EQ], [EQ]], np.int8), np.array([[np.nan], [neg_nan]]), np.ones(2, np.int64))
    assert p.keys()[0] == p.keys()[1]  # repeated `isna` terms are one predicate


def test_random_queries_draw_missing_as_one_value():
    S = CountTable(np.array([[1.0, 0], [1, 1], [2, 0], [2, 1], [np.nan, 2], [np.nan, 2], [np.nan, 2], [np.nan, 2]]))
    q = random_queries(S, np.array([True, False]), 6000, 1, np.random.default_rng(3))
    v, o = q.vals[q.cols == 0], q.ops[q.cols == 0]
    share = np.array([np.mean(v == 1), np.mean(v == 2), np.mean(np.isnan(v))])
    assert np.abs(share - 1 / 3).max() < 0.03  # 1, 2 and "missing": three values, whatever the number of missing records
    assert set(o[np.isnan(v)].tolist()) == {EQ, NE} and set(o[~np.isnan(v)].tolist()) == set(range(6))


def _islands(kind):
    "16 records, every combination of four binary columns, twice; one more record equal to the first but `x` missing."
    import itertools
    base = pd.DataFrame(list(itertools.product("pq", "uv", "st", (1.0, 2.0))) * 2, columns=["a", "b", "c", "x"])
    if kind == "categorical": base["x"] = base["x"].map({1.0: "lo", 2.0: "hi"})
    odd = base.iloc[[0]].assign(x=np.nan if kind == "numeric" else None)
    return base, odd


@pytest.mark.parametrize("kind", ["numeric", "categorical"])
@pytest.mark.parametrize("kw", [dict(mode="univariate"), dict(n_cols=2), dict(mode="both", n_cols=[2, 3])])
def test_a_record_singled_out_only_by_its_missing_value(kind, kw):
    "Only its missing value sets the odd record apart: kept, the attack singles it out (risk 1); imputed or dropped, nobody is."
    base, odd = _islands(kind)
    train = pd.concat([base, odd], ignore_index=True)
    control = pd.concat([base, base.iloc[[1]].assign(a="r")], ignore_index=True)  # as many distinct records, none missing x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = SinglingOut(n_attacks=50, max_attempts=20_000, **kw)
        r = m.evaluate(train, train.copy(), control, rng=0)
        assert r.value == 1.0 and r.attack_rate == 1.0 and r.control_rate == 0.0 and r.n >= 1
        imputed = train.fillna({"x": base.x.iloc[0]})  # the record becomes a copy of its neighbour
        for t in (imputed, train.dropna()):
            with pytest.raises(ValueError, match="no query singles out"):
                m.evaluate(t, t.copy(), control, rng=0)


def test_missing_values_in_a_custodian_table():
    from achilles.core.testing import custodian_table
    df = custodian_table(600, rng=0, ids=False, dates=False, free_text=False)
    schema = Schema.from_dataframe(df)
    assert {c.kind for c in schema.columns if c.missing} == {"categorical", "continuous"}  # missing values of both kinds
    train, control = df.iloc[:300], df.iloc[300:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = SinglingOut(mode="both", n_cols=[3, 5], n_attacks=300).evaluate(train, train.copy(), control, rng=0)
    assert math.isfinite(r.value) and r.value == 1.0 and r.attack_rate == 1.0 and r.n > 0
    for k in ("risk_univariate", "risk_n_cols_3", "risk_n_cols_5"):
        assert math.isfinite(r.metrics[k]), k
    # the queries use missing values, and they agree with pandas' own reading of the printed query strings
    qt = QueryTable.fit(schema, train, control)
    S = CountTable(unique_rows(qt.encode(train)))
    syn = train.drop_duplicates().astype({c: "float64" for c in schema.continuous})  # nullable Int64: NA as NaN for `query`
    q, _ = multivariate_queries(S, qt.numeric, 3, 300, 10**6, np.random.default_rng(0))
    rq = random_queries(S, qt.numeric, 300, 3, np.random.default_rng(1))
    texts = [qt.query(q, i) for i in range(len(q))] + [qt.query(rq, i) for i in range(len(rq))]
    assert sum(".isna()" in s for s in texts) > 30 and sum(".notna()" in s for s in texts) > 5
    assert np.concatenate([S.count(q), S.count(rq)]).tolist() == [len(syn.query(s)) for s in texts]


def test_missing_values_with_a_schema_from_complete_data(leaky):
    "A synthetic table with a missing age evaluates, also with a schema built from complete data (it only names the numbers)."
    s = leaky[0.5]
    holey = s.synthetic.assign(age=s.synthetic.age.astype(float).where(s.synthetic.index != s.synthetic.index[0]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = SinglingOut(n_cols=3, n_attacks=300).evaluate(s.train, holey, s.control, rng=0)
        r2 = SinglingOut(n_cols=3, n_attacks=300, schema=Schema.from_dataframe(s.train)).evaluate(s.train, holey, s.control, rng=0)
    assert math.isfinite(r.value) and r.n == 300 and r2.value == r.value and r2.n == r.n


def test_no_possible_guess_is_a_clear_error():
    import itertools  # every combination of three binary columns: any two columns hold two distinct records
    df = pd.DataFrame(list(itertools.product("xy", "uv", "pq")) * 3, columns=["a", "b", "c"])
    with pytest.raises(ValueError, match="no query singles out"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        SinglingOut(n_cols=2, n_attacks=10, max_attempts=2000).evaluate(df, df, df)


def test_too_few_queries_warns():
    df = pd.DataFrame({"a": list("xxyyz"), "b": [1, 2, 2, 3, 3]})  # a == 'z', b == 1, b <= 1: three queries
    with pytest.warns(UserWarning, match="only 3 of the 500 queries"):
        r = SinglingOut(mode="univariate", n_attacks=500).evaluate(df, df, pd.concat([df, df]), rng=0)
    assert r.n == 3


# --- agreement with anonymeter ----------------------------------------------------------------------------------------------
from reference import anonymeter_cases as _anonymeter_cases  # shared with the other anonymeter comparisons


@pytest.mark.parametrize("evaluation", ["singling_out_univariate", "singling_out_multivariate"])
def test_agrees_with_anonymeter(evaluation):
    """Same tables, same configuration (500 attacks; 3 columns): our risk, clipped to [0, 1] as anonymeter's is, lies in
    anonymeter's CI widened by 0.01 (its point estimate is Wilson-centred). Observed: every value inside the CI itself, at most
    0.017 from anonymeter's (the two draw different random queries)."""
    for s, par, risk, (lo, hi) in _anonymeter_cases(evaluation):
        kw = dict(mode="univariate") if par["mode"] == "univariate" else dict(mode="multivariate", n_cols=par["n_cols"])
        r = _quiet(SinglingOut(n_attacks=par["n_attacks"], **kw), s)
        v = min(max(r.value, 0.0), 1.0)
        assert lo - 0.01 <= v <= hi + 0.01, f"f={s.fraction}: ours {r.value:.4f}, anonymeter {risk:.4f} [{lo:.4f}, {hi:.4f}]"
        assert abs(v - risk) < 0.03, f"f={s.fraction}: ours {r.value:.4f}, anonymeter {risk:.4f}"


# --- what the mutation run of issue 27 found untested ------------------------------------------------------------------------
from achilles.core.rng import seed_child, seed_root
from achilles.nobox.singling_out import (GT, LT, OP_TEXT, _first_new, _random_columns, singling_out_attack)


def test_operator_codes_mean_what_they_print():
    X = np.array([[0.0], [1.0], [1.0], [2.0], [3.0]])
    for op, text, f in zip((EQ, NE, LT, LE, GT, GE), ("==", "!=", "<", "<=", ">", ">="), (np.equal, np.not_equal, np.less,
                                                                                          np.less_equal, np.greater, np.greater_equal)):
        assert OP_TEXT[op] == text
        p = Predicates(np.array([[0]]), np.array([[op]], np.int8), np.array([[1.0]]), np.array([1]))
        assert predicate_counts(X, p).tolist() == [int(f(X[:, 0], 1.0).sum())], text
    assert sorted({EQ, NE, LT, LE, GT, GE}) == list(range(6))


def test_predicates_empty_keys_and_tables():
    e = Predicates.empty(3)
    assert (e.cols.shape, e.ops.shape, e.vals.shape, e.nterms.shape, len(e)) == ((0, 3), (0, 3), (0, 3), (0,), 0)
    p = Predicates(np.array([[0], [0], [1]]), np.array([[EQ], [EQ], [EQ]], np.int8), np.array([[0.0], [-0.0], [0.0]]), np.ones(3, np.int64))
    k = p.keys()
    assert k[0] == k[1] and k[0] != k[2]  # -0.0 and 0.0 are one value
    T = CountTable(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    assert len(T) == 3 and repr(T) == "CountTable(3 rows, 2 columns)"


def test_first_new_keeps_order_and_skips_what_was_seen():
    p = Predicates(np.array([[0], [1], [0], [2], [3]]), np.full((5, 1), EQ, np.int8), np.zeros((5, 1)), np.ones(5, np.int64))
    seen = set()
    assert _first_new(p, seen, 10).tolist() == [0, 1, 3, 4]  # the repeat of predicate 0 dropped
    q = Predicates(np.array([[1], [5], [3], [6]]), np.full((4, 1), EQ, np.int8), np.zeros((4, 1)), np.ones(4, np.int64))
    assert _first_new(q, seen, 10).tolist() == [1, 3]  # the ones seen before are skipped, later ones still taken
    assert _first_new(q, set(), 2).tolist() == [0, 1]


def test_random_columns_are_the_k_smallest_random_keys():
    for b, d, k in ((50, 6, 2), (20, 15, 4), (10, 3, 3), (7, 5, 1)):
        want = np.sort(np.argsort(np.random.default_rng(b).random((b, d)), axis=1)[:, :k], axis=1)
        np.testing.assert_array_equal(_random_columns(np.random.default_rng(b), b, d, k), want if k < d else np.tile(np.arange(d), (b, 1)))


def test_multivariate_queries_reach_every_record_and_count_attempts():
    S = CountTable(np.arange(5.0)[:, None])  # only the extremes single out: `x <= 0` (record 0) and `x >= 4` (record 4)
    q, attempts = multivariate_queries(S, np.array([True]), 1, 2, 10_000, np.random.default_rng(0))
    assert sorted(zip(q.ops[:, 0].tolist(), q.vals[:, 0].tolist())) == [(LE, 0.0), (GE, 4.0)]
    assert attempts == 1000  # the first batch found both
    s = leaky_setting(load_adult(), 0.0, n_train=600, rng=0)
    qt = QueryTable.fit(Schema.from_dataframe(s.train), s.synthetic)
    S2 = CountTable(unique_rows(qt.encode(s.synthetic)))
    q2, att2 = multivariate_queries(S2, qt.numeric, 3, 10, 10**6, np.random.default_rng(0))
    assert len(q2) == 10 and att2 == 1000


def test_random_queries_pick_every_value_uniformly():
    S = CountTable(np.repeat(np.arange(5.0), 3)[:, None] * np.ones((1, 2)))
    q = random_queries(S, np.array([True, False]), 5000, 1, np.random.default_rng(1))
    for j in (0, 1):
        v = q.vals[q.cols == j]
        freq = np.bincount(v.astype(int), minlength=5)
        assert (freq > 0).all() and np.abs(freq / freq.sum() - 0.2).max() < 0.03


def test_univariate_attack_is_one_column_and_streams_are_keyed_by_attack(leaky):
    from achilles.core.base import common_schema
    s = leaky[0.5]
    schema = common_schema(s.train, s.synthetic, s.control)  # the schema the metric infers
    qt = QueryTable.fit(schema, s.train, s.synthetic, s.control)
    S, T, C = (CountTable(unique_rows(qt.encode(t))) for t in (s.synthetic, s.train, s.control))
    r = singling_out_attack(S, T, C, qt.numeric, "univariate", 3, 200, 10**6, np.random.default_rng(0))
    assert r["n_cols"] == 1 and r["attempts"] is None and r["control_model"]["method"] == ("equal sizes" if C.n == T.n else "subsample")
    no = singling_out_attack(S, T, None, qt.numeric, "univariate", 1, 200, 10**6, np.random.default_rng(0))
    assert no["control"] is None and no["correction"] == 1.0 and no["risk"] == no["train"].mean()
    # the documented streams: the univariate attack draws from child 1 of the seed, the multivariate one on k columns from 100 + k
    m = SinglingOut(mode="both", n_cols=[3], n_attacks=200)
    res = _quiet(m, s, rng=4)
    for mode, k, key in (("univariate", 1, 1), ("multivariate", 3, 103)):
        root = seed_root(np.random.default_rng(4))  # `evaluate` resolves the int seed to a Generator, `_evaluate` takes its root
        want = singling_out_attack(S, T, C, qt.numeric, mode, k, 200, m.max_attempts, np.random.default_rng(seed_child(root, key)))
        assert res.metrics[f"risk_{'univariate' if mode == 'univariate' else 'n_cols_3'}"] == want["risk"]
    assert res.parameters["deduplicated"] is True


def test_attack_sweep_and_parameter_bounds():
    assert SinglingOut()._attacks(15) == [("multivariate", k) for k in range(3, 13)]
    assert SinglingOut()._attacks(5) == [("multivariate", k) for k in (3, 4, 5)]
    assert SinglingOut()._attacks(2) == [("multivariate", 2)]  # fewer columns than the sweep's smallest: all of them
    assert SinglingOut(mode="both", n_cols=15)._attacks(15) == [("univariate", 1), ("multivariate", 15)]
    m = SinglingOut(n_attacks=1, max_attempts=1, n_boot=10, n_cols=1)
    assert (m.n_attacks, m.max_attempts, m.n_boot, m.n_cols) == (1, 1, 10, (1,))
    for kw in (dict(n_boot=9), dict(n_cols=0), dict(max_attempts=0)):
        with pytest.raises(ValueError):
            SinglingOut(**kw)


def test_result_labels_attempts_and_sizes(leaky):
    s = leaky[0.5]
    u = _quiet(SinglingOut(mode="univariate", n_attacks=200), s)
    assert u.metrics["attack"] == "univariate" and u.metrics["n_attempts"] == u.metrics["n_guesses"] == 200
    mv = _quiet(SinglingOut(n_cols=3, n_attacks=200), s)
    assert mv.metrics["attack"] == "multivariate, n_cols=3" and mv.metrics["n_attempts"] > mv.metrics["n_guesses"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every query asked for was found: no warning
        SinglingOut(n_cols=3, n_attacks=200).evaluate(s.train, s.synthetic, s.control, rng=0)
    nc = _quiet(SinglingOut(mode="univariate", n_attacks=100), type(s)(s.train, None, s.synthetic, None, s.fraction, s.leaked))
    assert nc.metrics["n_unique_control"] == 0 and nc.metrics["control_size_correction"] == 1.0


def test_one_guess_is_enough():
    df = pd.DataFrame({"a": list("xxyyz"), "b": list("pqpqp")})  # `a == 'z'` is the only query that singles out
    with pytest.warns(UserWarning, match="only 1 of the 50 queries"):
        r = SinglingOut(mode="univariate", n_attacks=50).evaluate(df, df, pd.concat([df, df]), rng=0)
    assert r.n == 1 and r.attack_rate == 1.0


def test_best_attack_skips_undefined_risks_and_warns_at_the_baseline(leaky, monkeypatch):
    "`_evaluate` on hand-made attack runs: a NaN risk is never the best; an attack no better than random queries warns."
    s = leaky[0.5]
    def run(mode, k, train, risk, baseline):
        t = np.asarray(train, float)
        return dict(mode=mode, n_cols=k, n=len(t), attempts=None if mode == "univariate" else 10 * len(t), correction=1.0,
                    train=t, control=np.zeros(len(t)), control_model=dict(method="equal sizes"), baseline=baseline, risk=risk)
    runs = [run("univariate", 1, [1, 0, 0, 0], math.nan, 0.0), run("multivariate", 3, [1, 1, 0, 0], 0.5, 0.5)]
    sizes = dict(n_unique_train=10, n_unique_synthetic=10, n_unique_control=10)
    m = SinglingOut(mode="both", n_cols=3, n_attacks=4)
    monkeypatch.setattr(SinglingOut, "_run_attacks", lambda self, *a: (runs, sizes))
    with pytest.warns(UserWarning, match="does no better than random queries"):
        r = m.evaluate(s.train, s.synthetic, s.control, rng=0)
    assert r.metrics["attack"] == "multivariate, n_cols=3" and r.value == 0.5 and r.metrics["n_attempts"] == 40
    from achilles.nobox import control_risk
    root = seed_root(np.random.default_rng(0))
    want = control_risk(runs[1]["train"], runs[1]["control"], name="x", n_boot=m.n_boot, rng=np.random.default_rng(seed_child(root, 0)))
    assert (r.ci_low, r.ci_high) == (want.ci_low, want.ci_high)


def test_beta_binomial_newton_converges_quadratically_to_the_maximum():
    """The fit behind the control-size correction: Newton steps reach their answer in 6 iterations (to 1e-9), and that answer is
    the maximum an independent optimiser (Nelder-Mead on the same objective) finds. A wrong gradient moves the answer; a wrong
    Hessian slows the convergence."""
    from scipy.optimize import minimize
    from achilles.nobox.singling_out import _bb_newton, _bb_objective
    g = np.random.default_rng(0)
    for al, be, N in ((0.5, 200.0, 1000), (2.0, 50.0, 300), (0.2, 3000.0, 5000), (5.0, 5.0, 50)):
        c = g.binomial(N, g.beta(al, be, 400))
        u, w = np.unique(c.astype(float), return_counts=True)
        W = w[None, :].astype(float)
        la0, lb0 = np.array([0.0]), np.array([math.log(max(N / max(float((u * w).sum() / w.sum()), 1e-3) - 1, 1))])
        l6, b6, _ = _bb_newton(la0, lb0, u, W, N, iters=6)
        l60, b60, f60 = _bb_newton(la0, lb0, u, W, N, iters=60)
        assert abs(l6[0] - l60[0]) <= 1e-9 and abs(b6[0] - b60[0]) <= 1e-9
        obj = lambda x: -_bb_objective(np.array([x[0]]), np.array([x[1]]), u, W, N)[0]
        nm = minimize(obj, [la0[0], lb0[0]], method="Nelder-Mead", options=dict(xatol=1e-10, fatol=1e-13, maxiter=20_000))
        assert abs(l60[0] - nm.x[0]) <= 1e-4 and abs(b60[0] - nm.x[1]) <= 1e-4 and f60[0] >= -nm.fun - 1e-6


def test_predicted_singletons_against_the_posterior_integral():
    "E[m p (1 - p)^(m - 1) | c] under the posterior Beta(alpha + c, beta + N - c), by numerical integration."
    from scipy import integrate
    from scipy.stats import beta as beta_dist
    a, b, N, m = 0.7, 300.0, 1000, 2500
    for c in (0, 1, 3, 20):
        post = beta_dist(a + c, b + N - c)
        want = integrate.quad(lambda p: m * p * (1 - p) ** (m - 1) * post.pdf(p), 0, 1, points=[post.mean()], limit=200)[0]
        assert predicted_singletons(np.array([c]), N, m, a, b)[0] == pytest.approx(want, rel=1e-6)


def test_control_outcomes_extrapolate_from_singletons_alone():
    "Counts of 0 and 1 only still hold a share to extrapolate from: the beta-binomial is fitted (not the all-zero answer)."
    c = np.r_[np.zeros(40, int), np.ones(10, int)]
    o, info = control_outcomes(c, 500, 2000)
    assert info["method"] == "beta-binomial" and math.isfinite(info["alpha"]) and (o[c == 1] > 0).all()


def test_the_control_size_correction_is_the_successes_per_singleton(leaky):
    s = leaky[0.5]
    from achilles.core.base import common_schema
    schema = common_schema(s.train, s.synthetic, s.control)
    qt = QueryTable.fit(schema, s.train, s.synthetic, s.control)
    S, T = (CountTable(unique_rows(qt.encode(t))) for t in (s.synthetic, s.train))
    C = CountTable(unique_rows(qt.encode(s.control.iloc[: len(s.control) // 3])))
    r = singling_out_attack(S, T, C, qt.numeric, "multivariate", 3, 300, 10**6, np.random.default_rng(0))
    ones = int(np.sum(r["control_counts"] == 1))
    assert ones > 0 and r["correction"] == pytest.approx(r["control"].sum() / ones, rel=1e-12)


def test_extrapolation_warning_threshold_and_control_interval(no_leak_4000, monkeypatch):
    """The warning starts above 4x fewer distinct control records (4.4x here); the control rate's interval is the replicates'
    central quantiles at the result's confidence (the replicates replaced by n_boot evenly spaced values in [0, 1] to read them off)."""
    import achilles.nobox.singling_out as SO
    monkeypatch.setattr(SO, "control_rate_replicates", lambda *a: np.linspace(0.0, 1.0, a[4]))  # a[4]: n_boot
    s = no_leak_4000
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = SinglingOut(mode="multivariate", n_cols=3, n_attacks=200).evaluate(s.train, s.synthetic, s.control.iloc[:900], rng=0)
    ratio = r.metrics["n_unique_train"] / r.metrics["n_unique_control"]
    assert 4 < ratio <= 5 and any("extrapolated" in str(x.message) for x in w)
    lo, hi = (1 - r.confidence) / 2, 1 - (1 - r.confidence) / 2
    assert r.metrics["control_rate_ci_low"] == pytest.approx(lo) and r.metrics["control_rate_ci_high"] == pytest.approx(hi)


def test_univariate_queries_hold_each_numbers_extremes():
    "Issue 37 mutation round (#268): `col <= min` and `col >= max` on every numeric column, the extremes of the numbers present "
    "(a missing value is not a number), each singling out its one record."
    S = CountTable(np.array([[1.0, 0.0], [5.0, 1.0], [3.0, 0.0], [np.nan, 1.0], [4.0, 0.0]]))
    q = univariate_queries(S, np.array([True, False]), 100, np.random.default_rng(0))
    got = {(int(c), int(o), float(v)) for c, o, v in zip(q.cols[:, 0], q.ops[:, 0], q.vals[:, 0]) if o in (LE, GE)}
    assert got == {(0, LE, 1.0), (0, GE, 5.0)} and (S.count(q) == 1).all()


def test_a_predicate_without_terms_or_with_more_than_its_row_is_refused():
    "A predicate of no term would count 0 rows (the kernel visits its best term's range, and there is none), not every row: refused."
    S = CountTable(np.array([[1.0, 0.0], [2.0, 1.0]]))
    p = Predicates(np.zeros((2, 2), np.int64), np.zeros((2, 2), np.int8), np.array([[1.0, 0.0], [2.0, 1.0]]), np.array([2, 0]))
    with pytest.raises(ValueError, match="each predicate needs 1 to 2 terms .* nterms runs from 0 to 2"): S.count(p)
    with pytest.raises(ValueError, match="nterms runs from 1 to 3"): S.count(Predicates(p.cols, p.ops, p.vals, np.array([1, 3])))
    assert S.count(Predicates(p.cols, p.ops, p.vals, np.array([1, 2]))).tolist() == [1, 0]
