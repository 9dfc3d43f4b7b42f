"""Held-out log-likelihood of BayNet / PrivBayes / SynthPop (the overfitting risk model's validation loss), and BayNet's smoothing."""
import hashlib
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError

from achilles.core.data import Schema, Encoded, encode
from achilles.generators import GENERATORS, make_generator
from achilles.generators.baynet import BayNet, PrivBayes
from achilles.generators.synthpop import SynthPop, ENGINES


# --- plain references ---------------------------------------------------------------------------------------------
def cells(df, schema, bins):
    "Discrete cells of each record, computed by hand (category index; equal-width bin of the schema range)."
    out = []
    for c in schema.columns:
        if c.is_categorical: out.append([list(c.categories).index(v) for v in df[c.name]])
        else: out.append([min(int(math.floor((v - c.lower) / (c.upper - c.lower) * bins)), bins - 1) for v in df[c.name]])
    return [tuple(r) for r in zip(*out)]


def baynet_reference(train, test, schema, parents, bins, alpha):
    "ln P(x) = sum_a ln (n(x_a, x_pa) + α) / (n(x_pa) + α K_a), counted record by record (uniform if no mass at α = 0)."
    tr, te = cells(train, schema, bins), cells(test, schema, bins)
    K = [c.cardinality if c.is_categorical else bins for c in schema.columns]
    res = []
    for x in te:
        s = 0.0
        for a, ps in enumerate(parents):
            rows = [r for r in tr if all(r[p] == x[p] for p in ps)]
            hits = sum(r[a] == x[a] for r in rows)
            p = (hits + alpha) / (len(rows) + alpha * K[a]) if len(rows) + alpha > 0 else 1.0 / K[a]
            s += math.log(p) if p > 0 else -math.inf
        res.append(s)
    return np.array(res)


def walk(tree, f):
    feat, thr, lft, rgt = tree
    node = 0
    while feat[node] >= 0: node = lft[node] if f[feat[node]] <= thr[node] else rgt[node]
    return node


def synthpop_reference(m, train, test, alpha, bins):
    "Donors of each record's leaf found by routing every training record (Python walk, or sklearn's own apply)."
    cols = m.columns_
    tr, te = encode(train, m.schema), encode(test, m.schema)
    val = lambda e, j: (e.cat[:, cols[j][1]] if cols[j][0] else e.cont[:, cols[j][1]]).astype(np.float64)
    cell = lambda v, j: int(v) if cols[j][0] else min(int(math.floor(min(max(v, 0.0), 1.0) * bins)), bins - 1)
    K = [int(m.schema.cardinalities[i]) if c else bins for c, i in cols]
    Ftr = np.stack([val(tr, j) for j in range(len(cols))], 1).astype(np.float32)
    Fte = np.stack([val(te, j) for j in range(len(cols))], 1).astype(np.float32)
    out = []
    for r in range(te.n):
        s = 0.0
        for j in range(len(cols)):
            if j == 0: donors = range(tr.n)
            elif m.engine == "numba":
                t = m.trees_[j - 1][0]
                donors = [i for i in range(tr.n) if walk(t, Ftr[i, :j]) == walk(t, Fte[r, :j])]
            else:
                t = m.trees_[j - 1][0]
                donors = list(np.flatnonzero(t.apply(Ftr[:, :j]) == t.apply(Fte[r:r + 1, :j])[0]))
            donors = list(donors)
            hits = sum(cell(val(tr, j)[i], j) == cell(val(te, j)[r], j) for i in donors)
            p = (hits + alpha) / (len(donors) + alpha * K[j])
            s += math.log(p) if p > 0 else -math.inf
        out.append(s)
    return np.array(out)


def assert_same_ll(a, b):
    assert a.shape == b.shape
    np.testing.assert_array_equal(np.isneginf(a), np.isneginf(b))
    np.testing.assert_allclose(a[np.isfinite(a)], b[np.isfinite(b)], rtol=1e-10, atol=1e-10)


def toy(n=40, seed=2):
    "Categorical, single-category, integer-valued continuous (ties) and binary columns, with duplicated rows."
    r = np.random.default_rng(seed)
    df = pd.DataFrame({"a": r.choice(list("xyz"), n), "one": ["k"] * n, "v": r.integers(0, 6, n).astype(float),
                       "c": r.choice(["p", "q"], n)})
    df.loc[20:29] = df.loc[0:9].to_numpy()
    return df


def grid_of(schema, bins):
    "Every cell of the discrete domain, continuous columns at their bin midpoints."
    axes = [list(c.categories) if c.is_categorical else [c.lower + (b + 0.5) / bins * (c.upper - c.lower) for b in range(bins)]
            for c in schema.columns]
    return pd.DataFrame(list(itertools.product(*axes)), columns=schema.names)


@pytest.fixture(scope="module")
def adult_split(adult):
    df, schema = adult
    rows = df.sample(4000, random_state=5).reset_index(drop=True)
    return rows.iloc[:2000], rows.iloc[2000:], schema


# --- BayNet: smoothing keeps the old model at 0 --------------------------------------------------------------------
def _digest(g):
    e = g.sample_encoded(500, rng=11)
    return hashlib.sha256(e.cat.tobytes() + e.cont.tobytes()).hexdigest()[:16]


@pytest.mark.parametrize("cls, params, digest", [
    (BayNet, {}, "a996e95d4c978743"), (BayNet, {"degree": 2}, "f08b95db0b055d8e"),
    (PrivBayes, {"epsilon": 1.0}, "c4845f4611e11567"), (PrivBayes, {"epsilon": 5.0, "degree": 2}, "3bb10d7306ad462c")])
def test_smoothing_zero_reproduces_samples_before_the_change(adult, cls, params, digest):
    df, schema = adult
    train = df.sample(2000, random_state=1).reset_index(drop=True)
    g = cls(schema, **params).fit(train, rng=3)  # digests taken from the code before `smoothing` existed
    assert _digest(g) == digest
    assert _digest(cls(schema, smoothing=0.0, **params).fit(train, rng=3)) == digest


def test_smoothing_changes_tables_not_structure(adult):
    df, schema = adult
    train = df.sample(1000, random_state=0)
    b0, b1 = BayNet(schema).fit(train, rng=0), BayNet(schema, smoothing=2.0).fit(train, rng=0)
    assert b0.parents_ == b1.parents_ and (b0.order_ == b1.order_).all()
    assert min(P.min() for P in b0.conditionals_) == 0 and min(P.min() for P in b1.conditionals_) > 0
    for P in b1.conditionals_: np.testing.assert_allclose(P.sum(axis=1), 1.0)
    assert not b0.sample(200, rng=1).equals(b1.sample(200, rng=1))


def test_privbayes_smoothing_enters_after_clipping(adult):
    "P = (max(noisy joint, 0) + α) / row sum; the first attribute: α added to the clipped joint's marginal."
    df, schema = adult
    train = df.sample(500, random_state=0)
    pb = PrivBayes(schema, epsilon=1.0, smoothing=0.7).fit(train, rng=4)
    cards = pb.cards_
    for t, joint in enumerate(pb.noisy_joints_, start=1):
        a = pb.order_[t]
        C = np.maximum(joint, 0.0).reshape(-1, cards[a]) + 0.7
        np.testing.assert_allclose(pb.conditionals_[a], C / C.sum(axis=1, keepdims=True), rtol=1e-12)
    a0, a1 = pb.order_[0], pb.order_[1]
    M = np.maximum(pb.noisy_joints_[0], 0.0).reshape(cards[a0], cards[a1]).sum(axis=1) + 0.7
    np.testing.assert_allclose(pb.conditionals_[a0][0], M / M.sum(), rtol=1e-12)


def test_smoothing_registry_and_params(adult):
    _, schema = adult
    assert "smoothing" in GENERATORS.parameters("baynet") and "smoothing" in GENERATORS.parameters("privbayes")
    assert make_generator("baynet", schema, smoothing=0.5).get_params() == {"degree": 1, "histogram_bins": 10, "smoothing": 0.5}
    assert make_generator("privbayes", schema, smoothing=0.5).smoothing == 0.5


@pytest.mark.parametrize("bad, exc", [(-1.0, ValueError), (float("nan"), ValueError), (float("inf"), ValueError),
                                      ("1", TypeError), (True, TypeError)])
def test_smoothing_validation(adult, bad, exc):
    df, schema = adult
    train = df.iloc[:200]
    for cls in (BayNet, PrivBayes):
        with pytest.raises(exc, match="smoothing="):
            cls(schema, smoothing=bad).fit(train)
    bn = BayNet(schema).fit(train, rng=0)
    sp = SynthPop(schema).fit(train, rng=0)
    for g in (bn, sp):
        with pytest.raises(exc, match="smoothing="):
            g.log_likelihood(train, smoothing=bad)


# --- BayNet log-likelihood ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("degree", [0, 1, 2, 3])
@pytest.mark.parametrize("alpha", [0.0, 0.25, 3.0])
def test_baynet_loglik_against_reference(degree, alpha):
    df = toy()
    schema = Schema.from_dataframe(df)
    m = BayNet(schema, degree=degree, histogram_bins=4, smoothing=alpha).fit(df.iloc[:25], rng=degree)
    assert_same_ll(m.log_likelihood(df), baynet_reference(df.iloc[:25], df, schema, m.parents_, 4, alpha))
    # the same model scored at another α, without refitting
    assert_same_ll(m.log_likelihood(df, smoothing=1.5), baynet_reference(df.iloc[:25], df, schema, m.parents_, 4, 1.5))


def test_baynet_loglik_zero_probability_is_minus_inf():
    df = toy()
    schema = Schema.from_dataframe(df)
    m = BayNet(schema, degree=2, histogram_bins=4).fit(df.iloc[:8], rng=0)
    ll = m.log_likelihood(df)
    assert np.isneginf(ll).any() and np.isfinite(ll[:8]).all()  # training records always have mass
    assert np.isfinite(m.log_likelihood(df, smoothing=0.01)).all()


def test_baynet_loglik_one_row_training_table():
    df = toy()
    schema = Schema.from_dataframe(df)
    for alpha in (0.0, 0.5):
        m = BayNet(schema, histogram_bins=4, smoothing=alpha).fit(df.iloc[:1], rng=0)
        assert_same_ll(m.log_likelihood(df), baynet_reference(df.iloc[:1], df, schema, m.parents_, 4, alpha))
        assert m.log_likelihood(df.iloc[:1])[0] == pytest.approx(
            sum(math.log((1 + alpha) / (1 + alpha * k)) for k in [3, 1, 4, 2]))


@pytest.mark.parametrize("make", [lambda s: BayNet(s, degree=1, histogram_bins=3, smoothing=0.5),
                                  lambda s: BayNet(s, degree=2, histogram_bins=3, smoothing=0.01),
                                  lambda s: BayNet(s, degree=1, histogram_bins=3),
                                  lambda s: PrivBayes(s, epsilon=1.0, degree=1, histogram_bins=3, smoothing=0.2)])
def test_baynet_probabilities_sum_to_one(make):
    df = toy()[["a", "v", "c"]]
    schema = Schema.from_dataframe(df)
    m = make(schema).fit(df, rng=0)
    grid = grid_of(schema, 3)
    assert len(grid) == 3 * 3 * 2
    assert np.exp(m.log_likelihood(grid)).sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("cls", [BayNet, SynthPop])
def test_loglik_inputs_common(adult, cls):
    "Both generators: a DataFrame and its encoding score alike; not fitted; a category outside the domain."
    df, schema = adult
    m = cls(schema).fit(df.iloc[:500], rng=0)
    held = df.iloc[500:600]
    np.testing.assert_array_equal(m.log_likelihood(held), m.log_likelihood(encode(held, schema)))
    with pytest.raises(NotFittedError):
        cls(schema).log_likelihood(held)
    odd = held.copy()
    odd["workclass"] = odd["workclass"].cat.add_categories("Astronaut")
    odd.iloc[3, odd.columns.get_loc("workclass")] = "Astronaut"
    with pytest.raises(ValueError, match="'Astronaut' is not in the schema's domain"):
        m.log_likelihood(odd)


def test_baynet_loglik_inputs(adult):
    df, schema = adult
    bn = BayNet(schema).fit(df.iloc[:500], rng=0)
    held = df.iloc[500:600]
    old = held.copy(); old["age"] = old["age"] + 1000
    with pytest.raises(ValueError, match="outside the schema's range"):
        bn.log_likelihood(old)
    np.testing.assert_array_equal(bn.log_likelihood(old, out_of_range="clip"),
                                  bn.log_likelihood(held.assign(age=schema["age"].upper)))
    bad = encode(held, schema)
    with pytest.raises(ValueError, match="not allowed here"):
        bn.log_likelihood(Encoded(np.where(np.arange(bad.n)[:, None] == 0, -1, bad.cat).astype(np.int32), bad.cont))
    with pytest.raises(TypeError, match="df must be"):
        bn.log_likelihood(held.to_numpy())


# --- SynthPop log-likelihood --------------------------------------------------------------------------------------
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("leaf", [1, 3, 10])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_synthpop_loglik_against_reference(engine, leaf, alpha):
    df = toy()
    schema = Schema.from_dataframe(df)
    m = SynthPop(schema, min_samples_leaf=leaf, engine=engine).fit(df.iloc[:30], rng=0)
    assert_same_ll(m.log_likelihood(df, smoothing=alpha, bins=4), synthpop_reference(m, df.iloc[:30], df, alpha, 4))
    m2 = SynthPop(schema, min_samples_leaf=leaf, engine=engine, visit_order=["v", "c", "one", "a"]).fit(df.iloc[:30], rng=0)
    assert_same_ll(m2.log_likelihood(df, smoothing=alpha, bins=3), synthpop_reference(m2, df.iloc[:30], df, alpha, 3))
    assert_same_ll(m.log_likelihood(df, smoothing=alpha, bins=1), synthpop_reference(m, df.iloc[:30], df, alpha, 1))  # one bin


@pytest.mark.parametrize("engine", ENGINES)
def test_synthpop_loglik_one_row_training_table(engine):
    df = toy()
    schema = Schema.from_dataframe(df)
    m = SynthPop(schema, engine=engine).fit(df.iloc[:1], rng=0)
    assert_same_ll(m.log_likelihood(df, smoothing=0.5, bins=4), synthpop_reference(m, df.iloc[:1], df, 0.5, 4))
    assert m.log_likelihood(df.iloc[:1], smoothing=0.0)[0] == 0.0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("alpha", [0.0, 0.3])
def test_synthpop_probabilities_sum_to_one(engine, alpha):
    "Categorical predictors, the continuous column visited last: the model is a distribution over the cells."
    df = toy()
    schema = Schema.from_dataframe(df)
    m = SynthPop(schema, min_samples_leaf=2, visit_order=["a", "one", "c", "v"], engine=engine).fit(df, rng=0)
    grid = grid_of(schema, 5)
    assert len(grid) == 3 * 1 * 5 * 2
    assert np.exp(m.log_likelihood(grid, smoothing=alpha, bins=5)).sum() == pytest.approx(1.0, abs=1e-12)


def test_synthpop_engines_agree_where_trees_agree():
    r = np.random.default_rng(0)
    df = pd.DataFrame(r.random((300, 3)), columns=["u", "w", "z"])
    df["w"] += df["u"]; df["z"] += np.sin(6 * df["u"])
    schema = Schema.from_dataframe(df)
    ms = [SynthPop(schema, min_samples_leaf=5, engine=e).fit(df.iloc[:200], rng=0) for e in ENGINES]
    assert ms[0].n_leaves() == ms[1].n_leaves()
    for alpha, bins in [(1.0, 10), (0.1, 7)]:
        a, b = (m.log_likelihood(df.iloc[200:], smoothing=alpha, bins=bins) for m in ms)
        np.testing.assert_allclose(a, b, rtol=1e-12)


def test_synthpop_loglik_inputs(adult):
    df, schema = adult
    sp = SynthPop(schema).fit(df.iloc[:500], rng=0)
    held = df.iloc[500:600]
    with pytest.raises(ValueError, match="bins=0"):
        sp.log_likelihood(held, bins=0)
    assert sp.log_likelihood(held.iloc[:0]).shape == (0,)
    assert SynthPop(schema, engine="sklearn").fit(df.iloc[:500], rng=0).log_likelihood(held.iloc[:0]).shape == (0,)


# --- the overfitting direction on Adult ---------------------------------------------------------------------------
def test_synthpop_nll_is_worse_at_tiny_leaves(adult_split):
    fit_on, held_out, schema = adult_split
    leaves = [1, 2, 5, 10, 20, 50, 100, 200, 500]
    nll = np.array([-SynthPop(schema, min_samples_leaf=l).fit(fit_on, rng=0).log_likelihood(held_out).mean() for l in leaves])
    best = int(np.argmin(nll))
    assert 0 < best < len(leaves) - 1, nll  # U-shaped: the best leaf size is inside the path
    assert nll[0] > nll[best] and nll[-1] > nll[best]
    assert nll[0] > nll[1] > nll[2], nll  # memorising leaves: smaller is worse


def test_baynet_nll_is_worse_when_deep_and_unsmoothed(adult_split):
    fit_on, held_out, schema = adult_split
    nll = lambda k, a: -BayNet(schema, degree=k).fit(fit_on, rng=0).log_likelihood(held_out, smoothing=a).mean()
    assert nll(3, 1e-3) > nll(1, 1.0)
    assert nll(3, 1e-3) > nll(2, 1e-3) > nll(1, 1e-3)
