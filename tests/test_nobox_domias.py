"""DOMIAS: the KDE kernel against a plain numpy computation on the explicit one-hot embedding (ties, duplicates, constant
columns, values outside the domain, one data record) and against scikit-learn's KernelDensity, thread independence, the AUC
and its normalisation, the reference split, the leaky-setting oracle, the metric contract and bad arguments."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp
from sklearn.metrics import roc_auc_score

from achilles.core.base import common_schema, encode_dataset
from achilles.core.data import Encoded, Schema
from achilles.core.results import auc_interval
from achilles.core.testing import check_metric
from achilles.nobox import METRICS, leaky_setting
from achilles.nobox.domias import DOMIAS, KDEKernel, domias_scores, kde_log_density


def _embed(e: Encoded, ker: KDEKernel) -> np.ndarray:
    "Plain numpy: one-hot codes (code -1: all zeros) and scaled numbers, each kept coordinate divided by its bandwidth."
    cols = []
    for k, w in enumerate(ker.weights):
        oh = np.zeros((e.n, len(w) - 1))
        ok = e.cat[:, k] >= 0
        oh[np.flatnonzero(ok), e.cat[ok, k]] = 1
        keep = w[1:] > 0
        cols.append(oh[:, keep] * np.sqrt(2 * w[1:][keep]))
    keep = ker.inv_h > 0
    cols.append(e.cont[:, keep] * ker.inv_h[keep])
    return np.hstack(cols)


def _numpy_log_kde(ker, q, data):
    X, Q = _embed(data, ker), _embed(q, ker)
    assert X.shape[1] == ker.dims
    d2 = ((Q[:, None, :] - X[None]) ** 2).sum(-1)
    return logsumexp(-0.5 * d2, axis=1) - np.log(data.n) - ker.log_norm


def _toy(n, g):
    df = pd.DataFrame({"c1": g.choice(list("abc"), n), "x1": g.integers(0, 4, n).astype(float), "c2": g.choice(list("uv"), n),
                       "const": np.full(n, 3.0), "x2": np.round(g.random(n), 1), "c3": g.choice(list("pqrs"), n)})
    if n > 4: df.iloc[: n // 4] = df.iloc[n // 4: 2 * (n // 4)].to_numpy()  # duplicates
    return df.astype({"x1": float, "const": float, "x2": float})


@pytest.mark.parametrize("n_data,bandwidth", [(1, 0.5), (7, "scott"), (60, "silverman"), (200, "scott"), (200, 0.05)])
def test_kde_matches_numpy(n_data, bandwidth):
    g = np.random.default_rng(n_data)
    data, q = _toy(n_data, g), _toy(50, g)
    data["c1"] = data["c1"].replace("c", "a")
    q.loc[1, "c1"] = "c"  # a category of the domain that the data lack: its coordinate is left out
    q.loc[0, "c3"] = "z"  # a category outside the schema's domain: code -1
    schema = Schema.from_dataframe(pd.concat([data, q.iloc[1:]], ignore_index=True))
    ed, eq = encode_dataset(data, schema), encode_dataset(q, schema)
    assert (eq.cat == -1).any()
    ker = KDEKernel(schema, [ed], bandwidth)
    got = kde_log_density(ker, eq, ed)
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, _numpy_log_kde(ker, eq, ed), rtol=0, atol=1e-8)


def test_kde_matches_sklearn_where_sklearn_is_exact():
    from sklearn.neighbors import KernelDensity
    g = np.random.default_rng(3)
    data, q = _toy(300, g), _toy(40, g)
    schema = common_schema(data, q)
    ed, eq = encode_dataset(data, schema), encode_dataset(q, schema)
    ker = KDEKernel(schema, [ed], 4.0)  # wide: no kernel term underflows in sklearn's tree sums
    skl = KernelDensity(bandwidth=1.0).fit(_embed(ed, ker)).score_samples(_embed(eq, ker))
    np.testing.assert_allclose(kde_log_density(ker, eq, ed), skl - (ker.log_norm - 0.5 * ker.dims * np.log(2 * np.pi)),
                               rtol=0, atol=1e-8)


def test_kde_bandwidth_rules():
    g = np.random.default_rng(0)
    df = _toy(400, g)
    schema = Schema.from_dataframe(df)
    e = encode_dataset(df, schema)
    d = len(schema)
    assert KDEKernel(schema, [e], "scott").factor == pytest.approx(400 ** (-1 / (d + 4)))
    assert KDEKernel(schema, [e], "silverman").factor == pytest.approx((400 * (d + 2) / 4) ** (-1 / (d + 4)))
    ker = KDEKernel(schema, [e], 0.7)
    assert ker.factor == 0.7
    k = schema.continuous.index("x2")
    assert ker.inv_h[k] == pytest.approx(1 / (0.7 * df["x2"].std(ddof=0) / (schema["x2"].upper - schema["x2"].lower)))
    assert ker.inv_h[schema.continuous.index("const")] == 0  # a constant column is left out
    p = (df["c2"] == "u").mean()
    assert ker.weights[schema.categorical.index("c2")][1] == pytest.approx(0.5 / (0.7 ** 2 * p * (1 - p)))


def test_kde_threads_and_cut():
    g = np.random.default_rng(4)
    df = _toy(500, g)
    schema = Schema.from_dataframe(df)
    e = encode_dataset(df, schema)
    ker = KDEKernel(schema, [e], "scott")
    a = kde_log_density(ker, e, e, n_jobs=1)
    b = kde_log_density(ker, e, e, n_jobs=2)
    assert np.array_equal(a, b)
    c = kde_log_density(ker, e, e, cut=np.inf)  # no term skipped
    np.testing.assert_allclose(a, c, rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="at least one data record"): kde_log_density(ker, e, e.take(np.arange(0)))


def test_kernel_is_fitted_to_synthetic_and_reference_pooled():
    "Eq. 6's two densities share one kernel, its bandwidths from the spread of synthetic and reference records pooled."
    g = np.random.default_rng(5)
    syn, ref = _toy(300, g), _toy(120, g)
    syn["x2"] = syn["x2"] / 10  # the synthetic numbers spread far less than the reference's
    syn["c2"] = "u"  # and one synthetic column is constant where the reference's is not
    schema = common_schema(syn, ref)
    es, er = encode_dataset(syn, schema), encode_dataset(ref, schema)
    _, _, ker = domias_scores(es, er, es, er, schema)
    factor = 300 ** (-1 / (len(schema) + 4))  # Scott's rule for the synthetic records
    assert ker.factor == pytest.approx(factor)
    sd = np.concatenate([es.cont, er.cont]).std(axis=0)
    keep = sd > 0
    np.testing.assert_allclose(ker.inv_h[keep], 1 / (factor * sd[keep]), rtol=1e-12)
    assert not np.allclose(ker.inv_h[keep], 1 / (factor * np.where(es.cont.std(axis=0) > 0, es.cont.std(axis=0), 1)[keep]))
    k = schema.categorical.index("c2")
    p = np.r_[syn["c2"] == "u", ref["c2"] == "u"].mean()  # the pooled frequency of "u"
    u = 1 + list(schema["c2"].categories).index("u")
    assert ker.weights[k][u] == pytest.approx(0.5 / (factor ** 2 * p * (1 - p)))


# ---------------------------------------------------------------------------------------------------------------------
# the attack

@pytest.fixture(scope="module")
def leaky(adult):
    df, _ = adult
    return {f: leaky_setting(df, f, n_train=2500, n_reference=2500, rng=0) for f in (0.0, 0.5, 1.0)}


def test_scores_auc_and_normalisation(leaky):
    s = leaky[1.0]
    r = DOMIAS(reference=s.reference).evaluate(s.train, s.synthetic, s.control, rng=0)
    schema = common_schema(s.train, s.synthetic, s.control)
    enc = lambda t: encode_dataset(t, schema)
    st, sc, ker = domias_scores(enc(s.train), enc(s.control), enc(s.synthetic), enc(s.reference), schema)
    assert np.array_equal(r.scores, np.r_[st, sc]) and r.labels.tolist() == [1] * 2500 + [0] * 2500
    auc = roc_auc_score(r.labels, r.scores)
    lo, hi = auc_interval(auc, 2500, 2500)
    assert r.metrics["auc"] == pytest.approx(auc) and (r.metrics["auc_ci_low"], r.metrics["auc_ci_high"]) == (lo, hi)
    assert r.value == pytest.approx(max(0.0, 2 * auc - 1)) and r.ci == (max(0, 2 * lo - 1), max(0, 2 * hi - 1))
    med = np.median(r.scores)
    assert r.attack_rate == pytest.approx(np.mean(st > med)) and r.control_rate == pytest.approx(np.mean(sc > med))
    # the kernel is fitted to synthetic and reference pooled, with Scott's factor for |synthetic| and the table's columns
    assert ker.factor == pytest.approx(2500 ** (-1 / (len(schema) + 4)))
    # scores are log p_synth - log p_reference, each a KDE log density
    np.testing.assert_allclose(st[:20], kde_log_density(ker, enc(s.train.iloc[:20]), enc(s.synthetic))
                               - kde_log_density(ker, enc(s.train.iloc[:20]), enc(s.reference)), atol=1e-12)


def test_leaky_oracle(leaky):
    r = {f: DOMIAS(reference=s.reference).evaluate(s.train, s.synthetic, s.control, rng=0) for f, s in leaky.items()}
    assert r[0.0].value < 0.05 and r[0.0].ci_low == 0
    assert r[0.0].value < r[0.5].value < r[1.0].value
    assert r[1.0].value > 0.3 and r[1.0].ci_low > r[0.5].ci_high
    assert abs(r[0.0].metrics["auc"] - 0.5) < 0.03
    split = {f: DOMIAS().evaluate(s.train, s.synthetic, s.control, rng=0) for f, s in leaky.items()}
    assert split[0.0].value < 0.05 and split[0.0].value < split[0.5].value < split[1.0].value


def test_reference_split_without_a_reference(leaky):
    s = leaky[0.5]
    r = DOMIAS(reference_fraction=0.4).evaluate(s.train, s.synthetic, s.control, rng=3)
    assert r.metrics["n_reference"] == 1000 and r.metrics["n_non_members"] == 1500 and r.metrics["n_members"] == 2500
    assert r.parameters["reference"].startswith("a random 0.4 of the control set")
    assert math.isnan(r.metrics["reference_overlap"])
    assert r.to_row() == DOMIAS(reference_fraction=0.4).evaluate(s.train, s.synthetic, s.control, rng=3).to_row()
    assert r.to_row() != DOMIAS(reference_fraction=0.4).evaluate(s.train, s.synthetic, s.control, rng=4).to_row()
    a = DOMIAS(n_jobs=1).evaluate(s.train, s.synthetic, s.control, rng=1)
    b = DOMIAS(n_jobs=2).evaluate(s.train, s.synthetic, s.control, rng=1)
    assert a.to_row() == b.to_row()


def test_contract_and_registry(adult):
    df, _ = adult
    train, synth, control = df.iloc[:300], df.iloc[300:600], df.iloc[600:900]
    assert check_metric(METRICS["domias"](), train, synth, control)
    assert check_metric(DOMIAS(reference=df.iloc[900:1200], bandwidth=0.3), train, synth, control)
    m = METRICS.make("domias", bandwidth="silverman")
    assert isinstance(m, DOMIAS) and m.bandwidth == "silverman"
    assert "<300 records>" in repr(DOMIAS(reference=df.iloc[900:1200]))


def test_bad_arguments(adult):
    df, _ = adult
    train, synth, control = df.iloc[:300], df.iloc[300:600], df.iloc[600:900]
    with pytest.raises(ValueError, match="bandwidth"): DOMIAS(bandwidth=0)
    with pytest.raises(ValueError, match="bandwidth"): DOMIAS(bandwidth=-1.0)
    with pytest.raises(ValueError, match="bandwidth"): DOMIAS(bandwidth="wide")
    with pytest.raises(ValueError, match="density"): DOMIAS(density="bnaf")
    with pytest.raises(ValueError, match="reference_fraction"): DOMIAS(reference_fraction=1.0)
    with pytest.raises(TypeError, match="reference must be a pandas DataFrame"): DOMIAS(reference=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="reference is empty"): DOMIAS(reference=df.iloc[:0])
    with pytest.raises(ValueError, match="disjoint"): DOMIAS(reference=control).evaluate(train, synth, control)
    with pytest.raises(ValueError, match="copies of training or control rows"):
        DOMIAS(reference=pd.concat([train.iloc[:200], df.iloc[900:950]])).evaluate(train, synth, control)
    with pytest.raises(ValueError, match="lacks the column"):
        DOMIAS(reference=df.iloc[900:1000].drop(columns="age")).evaluate(train, synth, control)
    with pytest.raises(ValueError, match="control"): DOMIAS().evaluate(train, synth, None)
    with pytest.raises(ValueError, match="reference_fraction"): DOMIAS().evaluate(train, synth, control.iloc[:1])
    # a few duplicates, as a real population has, are allowed and reported
    ref = pd.concat([df.iloc[900:1190], train.iloc[:10]])
    r = DOMIAS(reference=ref).evaluate(train, synth, control, rng=0)
    assert r.metrics["reference_overlap"] == pytest.approx(10 / 300, abs=0.01)


def test_kde_is_a_normalised_product_of_gaussians():
    "An independent restatement with scipy's normal log-pdf: each one-hot and scaled coordinate with spread gets N(y, (β·sd)²), "
    "β by Scott's rule over the schema's columns; the density is the mean over the data records (the normalisation included)."
    from scipy.stats import norm
    g = np.random.default_rng(11)
    data, q = _toy(90, g), _toy(30, g)
    schema = common_schema(data, q)
    ed, eq = encode_dataset(data, schema), encode_dataset(q, schema)
    def embed(e):
        cols = [np.eye(len(c.categories))[e.cat[:, k]] for k, c in enumerate(c for c in schema.columns if c.is_categorical)]
        return np.hstack(cols + [e.cont])
    X, Q = embed(ed), embed(eq)
    sd = X.std(axis=0); keep = sd > 0
    h = 90 ** (-1 / (len(schema) + 4)) * sd[keep]
    ref = logsumexp(norm.logpdf(Q[:, None, keep], X[None, :, keep], h).sum(-1), axis=1) - np.log(90)
    np.testing.assert_allclose(kde_log_density(KDEKernel(schema, [ed], "scott"), eq, ed), ref, rtol=0, atol=1e-8)


def test_kde_at_every_block_size_and_no_query():
    "The kernel works on blocks of 64 queries: 0, 1, 64, 65 and 130 queries all match the reference."
    g = np.random.default_rng(12)
    data, q = _toy(40, g), _toy(130, g)
    schema = common_schema(data, q)
    ed, eq = encode_dataset(data, schema), encode_dataset(q, schema)
    ker = KDEKernel(schema, [ed], "scott")
    for n in (1, 64, 65, 130):
        sub = eq.take(np.arange(n))
        np.testing.assert_allclose(kde_log_density(ker, sub, ed), _numpy_log_kde(ker, sub, ed), rtol=0, atol=1e-8)
    none = kde_log_density(ker, eq.take(np.arange(0)), ed)
    assert isinstance(none, np.ndarray) and none.shape == (0,)
    with pytest.raises(ValueError, match="cut=0"): kde_log_density(ker, eq, ed, cut=0)
    small = kde_log_density(ker, eq, ed, cut=0.5)  # any cut > 0 is allowed: fewer terms, a lower sum
    assert np.all(np.isfinite(small)) and np.all(small <= _numpy_log_kde(ker, eq, ed) + 1e-9)


def test_reference_checks(adult):
    df, _ = adult
    train, synth, control = df.iloc[:300], df.iloc[300:600], df.iloc[600:900]
    with pytest.raises(ValueError, match="is the training or the control table itself"):
        DOMIAS(reference=train).evaluate(train, synth, control)
    with pytest.raises(ValueError, match="100% of the reference rows are copies"):  # copies under another index
        DOMIAS(reference=control.reset_index(drop=True)).evaluate(train, synth, control)
    half = pd.concat([control.iloc[:150], df.iloc[1000:1150]], ignore_index=True)  # exactly half copies: allowed
    r = DOMIAS(reference=half).evaluate(train, synth, control, rng=0)
    assert r.metrics["reference_overlap"] == 0.5


def test_reference_split_edges(adult):
    df, _ = adult
    train, synth, control = df.iloc[:300], df.iloc[300:600], df.iloc[600:603]
    r = DOMIAS(reference_fraction=0.34).evaluate(train, synth, control, rng=0)  # one reference record, two scored
    assert (r.metrics["n_reference"], r.metrics["n_non_members"]) == (1, 2)
    with pytest.raises(ValueError, match="leave no reference or nothing to score"):
        DOMIAS(reference_fraction=0.9).evaluate(train, synth, control, rng=0)  # round(2.7) = 3: nothing left to score


def test_rates_levels_and_ties():
    "On all-categorical data many scores tie at the median: a record counts only strictly above it; the TPRs at 1 % and 10 % FPR."
    from sklearn.metrics import roc_curve
    from achilles.core.results import tpr_at_fpr
    g = np.random.default_rng(2)
    mk = lambda n: pd.DataFrame({"a": g.choice(list("xy"), n), "b": g.choice(list("uv"), n)})
    train, synth, control = mk(200), mk(200), mk(400)  # a reference of such records is all copies: split the control set
    r = DOMIAS().evaluate(train, synth, control, rng=0)
    s, y = r.scores, r.labels; med = np.median(s)
    assert (s == med).sum() > 10  # ties at the median
    assert r.attack_rate == np.mean(s[y == 1] > med) and r.control_rate == np.mean(s[y == 0] > med) and r.baseline_rate == 0.5
    fpr, tpr, _ = roc_curve(y, s)
    assert (r.metrics["tpr_at_fpr_0_01"], r.metrics["tpr_at_fpr_0_1"]) == (tpr_at_fpr(fpr, tpr, 0.01), tpr_at_fpr(fpr, tpr, 0.1))
