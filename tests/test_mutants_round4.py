"""Issue 40, the last of the mutants `tests/MUTATION.md` had called equivalent: each test is built on an input that tells the
mutant from the original (the mutant was run on it, and the test fails under it)."""
import math

import numpy as np
import pytest

from achilles.core.data import Encoded, Schema
from achilles.distance import knn
from achilles.nobox.domias import KDEKernel, kde_log_density
from achilles.shadow import pool_attack as pa


def _enc(cont, cat=None):
    cont = np.ascontiguousarray(np.asarray(cont, np.float64).reshape(len(cont), -1))
    cat = np.zeros((len(cont), 0), np.int32) if cat is None else np.ascontiguousarray(cat, np.int32)
    return Encoded(cat, cont)


@pytest.mark.parametrize("metric", ["minkowski1", "minkowski2"])
def test_a_candidate_nearer_by_less_than_the_bounds_margin_is_still_found(metric):
    # distance #247: the pruning bound's margin (1 + 1e-9) must loosen the bound, never tighten it. The first candidate sets
    # the threshold at 1; the second is nearer by 1e-11 (relative), well inside the margin: a bound divided by the margin
    # instead of multiplied would skip it and return the farther one.
    q, c = _enc([[0.0]]), _enc([[1.0], [1.0 - 1e-11]])
    dist, idx = knn(q, None, 1, metric=metric, Y=c)
    assert idx.tolist() == [[1]] and dist[0, 0] < 1.0
    dist, idx = knn(q, None, 2, metric=metric, Y=c)
    assert idx.tolist() == [[1, 0]]


def test_kde_cut_skips_a_term_exactly_cut_below_the_largest_and_keeps_one_just_inside():
    # domias #94: terms at or below e^-cut of the largest are skipped (`e < cut` keeps a term); with cut = 1 the term exactly
    # 1 below changes the density by log(1 + e^-1), so `<=` cannot pass for `<`.
    schema = Schema.from_dataframe(__import__("pandas").DataFrame({"x": [0.0, 1.0]}))
    data = _enc([[0.0], [0.6]])
    ker = KDEKernel(schema, [data], 1.0)
    v = (0.0 - 0.6) * ker.inv_h[0]; e = 0.5 * v * v  # the second term's cost over the first's, as the kernel computes it
    base = -math.log(2) - ker.log_norm
    at = kde_log_density(ker, _enc([[0.0]]), data, cut=e)[0]
    assert at == pytest.approx(base, abs=1e-15)  # the term exactly at the cut is skipped
    inside = kde_log_density(ker, _enc([[0.0]]), data, cut=np.nextafter(e, np.inf))[0]
    assert inside == pytest.approx(base + math.log1p(math.exp(-e)), rel=1e-12)


def test_a_kernel_with_no_record_is_refused_by_name():
    # domias #48: the branch for data without records built a zero spread (and NaN weights) in silence; it is refused now.
    import pandas as pd
    schema = Schema.from_dataframe(pd.DataFrame({"x": [0.0, 1.0], "c": ["a", "b"]}))
    empty = Encoded(np.zeros((0, 1), np.int32), np.zeros((0, 1)))
    with pytest.raises(ValueError, match=r"data holds 2 table\(s\) and no record"):
        KDEKernel(schema, [empty, empty], "scott", n=1)
    with pytest.raises(TypeError, match="data=DataFrame is not allowed"):
        KDEKernel(schema, pd.DataFrame({"x": [0.0]}), "scott")
    with pytest.raises(TypeError, match="data=a list of DataFrame is not allowed"):  # the tables themselves, not encoded
        KDEKernel(schema, [pd.DataFrame({"x": [0.0]})], "scott")


def _blocks(rng, folds=4, per=7, p=6):
    "Raw features of 2 * folds (fold, class) blocks, IN blocks odd, with class means apart; and the sums the screen reads."
    sizes = rng.integers(per - 2, per + 3, 2 * folds)
    odd = np.arange(2 * folds) % 2 == 1
    raw = [rng.normal(3.0 + 1.5 * o, 0.5 + rng.random(p), (s, p)) for s, o in zip(sizes, odd)]
    gm = np.concatenate(raw).mean(0)
    S1 = np.array([(r - gm).sum(0) for r in raw]); S2 = np.array([((r - gm) ** 2).sum(0) for r in raw])
    return raw, odd, gm, S1, S2, sizes.astype(np.float64)


def test_the_screens_statistics_are_welchs_on_the_raw_features():
    # pool_attack #389, #395: the class variances E[x²] - μ² (a `+` in either keeps other features, and changes ε).
    rng = np.random.default_rng(5)
    raw, odd, gm, S1, S2, N = _blocks(rng)
    for train in (np.ones(len(N), bool), np.r_[False, False, np.ones(len(N) - 2, bool)]):
        n1, n0, mu, var, live, t = pa._fold_stats(S1, S2, N, odd, gm, train)
        xin = np.concatenate([r for r, o, k in zip(raw, odd, train) if o and k])
        xout = np.concatenate([r for r, o, k in zip(raw, odd, train) if not o and k])
        both = np.concatenate([xin, xout])
        assert (n1, n0) == (len(xin), len(xout))
        np.testing.assert_allclose(mu + gm, both.mean(0), rtol=1e-12)
        np.testing.assert_allclose(var, both.var(0), rtol=1e-9)
        welch = np.abs(xin.mean(0) - xout.mean(0)) / np.sqrt(xin.var(0) / len(xin) + xout.var(0) / len(xout))
        np.testing.assert_allclose(t, welch, rtol=1e-9)
        assert live.all()


def test_the_screens_live_features_and_a_feature_without_spread_in_either_class():
    # pool_attack, the screen's other terms: a feature is live when its variance on the training folds is above 1e-12 of its
    # squared mean in the uncentred scale (at least 1e-12), and |t| stays finite (+1e-300) when neither class varies.
    odd = np.array([False, True, False, True]); N = np.array([4.0, 4.0, 4.0, 4.0]); train = np.array([True, True, False, False])
    wig = np.array([1.0, -1.0, 1.0, -1.0])
    def feature(v01, v23):  # values of blocks 0 and 1 (the training folds), and of blocks 2 and 3
        return [np.asarray(v01[0]), np.asarray(v01[1]), np.asarray(v23[0]), np.asarray(v23[1])]
    cols = [feature((2000 + 1e-4 * wig, 2000 + 1e-4 * wig), (0 * wig, 0 * wig)),  # A: mean 2000 on the training folds, var 1e-8
            feature((2000 + 1e-2 * wig, 2000 + 1e-2 * wig), (0 * wig, 0 * wig)),  # B: var 1e-4
            feature((1.2247448713915890e-6 * wig, 1.2247448713915890e-6 * wig), (0 * wig, 0 * wig)),  # C: mean 0, var 1.5e-12
            feature((0 * wig, 0 * wig + 1), (0 * wig, 0 * wig + 1)),  # D: 0 in every OUT block, 1 in every IN block
            feature((1e-6 * wig, 1e-6 * wig), (1e-6 * wig, 1e-6 * wig))]  # E: mean 0, var exactly 1e-12 (computed so)
    raw = [np.stack([c[b] for c in cols], 1) for b in range(4)]
    gm = np.concatenate(raw).mean(0)
    S1 = np.array([(r - gm).sum(0) for r in raw]); S2 = np.array([((r - gm) ** 2).sum(0) for r in raw])
    n1, n0, mu, var, live, t = pa._fold_stats(S1, S2, N, odd, gm, train)
    np.testing.assert_allclose(var[:3], [1e-8, 1e-4, 1.5e-12], rtol=0.05)
    assert var[4] == 1e-12  # E sits exactly on its threshold, 1e-12 x max(1, 0²): not above it, so not live
    assert live.tolist() == [False, True, True, True, False]  # A under 4e-6 = 1e-12 x 2000²; B above it; C above 1e-12
    assert np.isfinite(t[3]) and t[3] > 1e100  # |1 - 0| / sqrt(0 + 0 + 1e-300)


def test_the_eps_grid_is_0_to_10_then_40_geometric_steps_to_half():
    # pool_attack, ε: the grid of candidate false-positive counts is part of the ε test's design (another grid chooses
    # other thresholds and reports another ε).
    g = pa._eps_grid(100_000)
    assert g[:11].tolist() == list(range(11)) and len(g) == 11 + 40 and g[11] == 11 and g[-1] == 50_000
    ideal = 11 * ((50_000 / 11) ** (1 / 39)) ** np.arange(40)  # the geometric points before they are cut to whole numbers
    assert (np.abs(g[11:] - ideal) < 1 + 1e-9 * ideal).all()
    assert pa._eps_grid(5).tolist() == [0, 1, 2, 3, 4] and pa._eps_grid(11).tolist() == list(range(11))  # never n0 itself
    assert pa._eps_grid(20).tolist() == list(range(12))  # the geometric part starts and ends at 11 when half is below it
    ideal = 11 * ((71 // 2) / 11) ** (np.arange(40) / 39)  # an odd n0: the top is n0 // 2 = 35, not 35.5
    assert pa._eps_grid(71).tolist() == sorted(set(range(11)) | set(ideal.astype(np.int64).tolist()))


@pytest.mark.parametrize("pairs, n_features", [(1000, 1021), (12, 7), (1, 1), (2 * 500 + 1, 3), (10 ** 6, 10 ** 4), (7, 0), (0, 5)])
def test_a_chunk_holds_as_many_records_as_its_feature_budget_allows(pairs, n_features):
    # audit (the chunk size, called equivalent because rows do not depend on it): the chunk is the audit's memory promise,
    # at most CHUNK_BYTES of float32 features a chunk (one more record would not fit), and at least one record.
    from achilles.shadow.audit import CHUNK_BYTES, _chunk_records
    c = _chunk_records(pairs, n_features)
    per = 4 * max(pairs, 1) * max(n_features, 1)  # no pair (nothing to score) is counted as one
    assert c >= 1 and (c == 1 or c * per <= CHUNK_BYTES) and (c + 1) * per > CHUNK_BYTES
    assert _chunk_records(pairs, n_features, budget=per * 3) == 3


def test_a_nan_peer_figure_says_which_table_left_it_undefined():
    # distance_metrics #25 (`cp is not None and c == best` -> `or`): a control set whose figure is undefined (NaN) must not be
    # described as "already at its most risky value"; a control at the most risky value must be.
    from achilles.nobox.distance_metrics import peer_risk
    share = lambda x: float(np.mean(x)) if len(x) else math.nan
    t = np.array([1.0, 0.0, 1.0, 1.0])
    r = peer_risk("share", share, (t,), (np.array([]),), best=1.0, n_boot=50, rng=0)
    assert math.isnan(r.value) and r.metrics["undefined"] == "the figure is undefined on these tables (train 0.75, control nan)"
    r = peer_risk("share", share, (t,), (np.ones(3),), best=1.0, n_boot=50, rng=0)
    assert math.isnan(r.value) and r.metrics["undefined"].startswith("the figure on the control set (1) already is its most risky value (1)")


def _chunk_run(monkeypatch, run, records_per_chunk):
    """Run the audit `run()` twice: once to learn the most pairs a record needs (its IN and OUT datasets, and the release) and
    the features per pair; then with `CHUNK_BYTES` set to hold exactly `records_per_chunk` such records. Returns the second
    run's chunk shapes and the budget."""
    from achilles.shadow import audit as au
    shapes, asked, real, real_records = [], [], au._chunk_buffer, au._chunk_records
    monkeypatch.setattr(au, "_chunk_buffer", lambda k, shape: shapes.append(shape) or real(k, shape))
    monkeypatch.setattr(au, "_chunk_records", lambda pairs, n, budget=None: asked.append(pairs) or real_records(pairs, n, budget))
    out = run()
    pairs = int((out["n_in"] + out["n_out"]).max()) + ("release_p" in out)  # the release: one more pair per record
    assert asked == [pairs]  # the chunk is sized from exactly the most pairs a record needs
    budget = records_per_chunk * 4 * pairs * shapes[0][1]
    monkeypatch.setattr(au, "CHUNK_BYTES", budget); shapes.clear()
    run()
    return shapes, budget


def test_a_population_audit_keeps_each_chunk_within_its_feature_budget(adult, monkeypatch):
    # audit: the population design's chunk counts the pairs a record needs, its IN and OUT datasets: with a budget of exactly
    # 40 records' features, every chunk's array fits it and the 300 records take ceil(300 / 40) = 8 chunks.
    from achilles.shadow.audit import audit
    df, schema = adult
    kw = dict(records="all", n_in=10, dataset_size=100, order=1, selectors=(), rng=5, verbose=False, n_jobs=1)
    def run():
        with pytest.warns(Warning, match="n_in=10 gives each record 10 IN"):
            return audit(df.iloc[:300].reset_index(drop=True), "baynet", **kw)
    shapes, budget = _chunk_run(monkeypatch, run, 40)
    assert len(shapes) == 8 and all(4 * rows * cols <= budget for rows, cols in shapes)


def test_a_release_audit_counts_every_pair_a_record_needs(monkeypatch):
    # audit: in the release design a record is IN about half of the datasets (many more than n_in) and has one more pair, the
    # release; a chunk sized from n_in instead overran its budget by 30 % (found by this test).
    import warnings
    from achilles.core.data import load_adult
    from achilles.shadow.audit import audit
    from achilles.shadow.game import ScaleWarning
    df = load_adult().iloc[:160].reset_index(drop=True)
    release = df.sample(160, replace=True, random_state=0).reset_index(drop=True)
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ScaleWarning)
            return audit(df, "independent", release=release, records=list(range(10)), design="release", n_in=150, order=1,
                         selectors=(), rng=0, verbose=False)
    shapes, budget = _chunk_run(monkeypatch, run, 3)
    assert len(shapes) == 4 and all(4 * rows * cols <= budget for rows, cols in shapes)  # ceil(10 / 3) chunks
