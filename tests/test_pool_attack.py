"""The audit's attacker: the pair-feature kernel against a numpy reference on every kind of table, the cross-fitting's
honesty (no signal gives chance, whatever is screened), every family reaching the combination, and the ε bound's validity."""
import math

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from achilles.core.data import Encoded, Schema, encode, load_adult
from achilles.shadow.pool_attack import (COMBINED, DENSITY, crossfit_record, feature_plan, join_pools, membership_row, pair_features,
                                         stack_pool, tpr_at_fpr_exact)


def reference(syn: Encoded, tc, tx, schema: Schema, plan) -> np.ndarray:
    "The features of one pair from their definitions (numpy)."
    F, n = len(schema), syn.n
    match = np.zeros((n, F), bool); equal = np.zeros((n, F), bool)
    match[:, schema.cat_idx] = equal[:, schema.cat_idx] = syn.cat == tc
    match[:, schema.cont_idx] = syn.cont <= tx
    equal[:, schema.cont_idx] = np.abs(syn.cont - tx) < plan.tol
    counts = [match[:, [j for j in s if j >= 0]].all(1).sum() for s in plan.subsets]
    counts += [equal[:, [j for j in s if j >= 0]].all(1).sum() for s in plan.exact]
    copies = [((~equal).sum(1) <= m).sum() for m in range(plan.n_copy)]
    mis = (syn.cat != tc).sum(1)
    gower = (mis + np.abs(syn.cont - tx).sum(1)) / F
    D = syn.cont.shape[1]
    tn, sn = np.sqrt((tx ** 2).sum()), np.sqrt((syn.cont ** 2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where((tn > 0) & (sn > 0), np.minimum(syn.cont @ tx / (tn * sn), 1.0), np.where((tn == 0) & (sn == 0), 1.0, 0.0))
    eq5 = np.clip((mis + D - D * cos) / F, 0, 1)
    pad = lambda v, k: np.concatenate([np.sort(v), np.ones(k)])[:k]
    radii = [(gower <= (i + 1e-9) / (2 * F)).sum() for i in range(plan.n_radii)]
    dens = [np.log(np.exp(-(gower / (plan.h_max / 2 ** i)) ** 2).sum() / max(n, 1) + 1e-300) for i in range(plan.n_bandwidths)]  # an empty dataset: log(1e-300)
    return np.concatenate([counts, copies, pad(gower, plan.k_gower), pad(eq5, plan.k_cos), radii, dens])


def _planted(seed, n, p, shift, k):
    "Half of n datasets IN at random; p Gaussian features, the first k shifted by `shift` in IN datasets. Returns the generator too (tests draw on from it)."
    g = np.random.default_rng(seed)
    y = np.zeros(n, np.int64); y[g.permutation(n)[:n // 2]] = 1
    return g, y, (g.normal(size=(n, p)) + shift * y[:, None] * (np.arange(p) < k)).astype(np.float32)


@pytest.fixture(scope="module")
def adult():
    df = load_adult()
    return df, Schema.from_dataframe(df)


@pytest.mark.parametrize("cols", [None, ["workclass", "education", "sex", "race"], ["age", "hours-per-week", "capital-gain"]])
@pytest.mark.parametrize("order,extra", [(3, 0), (1, 5)])
def test_pair_features_equal_the_reference(adult, cols, order, extra):
    df, _ = adult
    d = df if cols is None else df[cols]
    schema = Schema.from_dataframe(d)
    plan = feature_plan(schema, order=min(order, len(schema)), subsets=min(extra, 2 ** len(schema) - 1 - len(schema)), rng=3,
                        attacks=("query", "exact", "copy", "distance", "density"))
    rng = np.random.default_rng(1)
    enc = encode(d, schema)
    sizes = (1, 2, 63, 64, 65, 130)
    syns = [enc.take(rng.integers(0, 60, n)) for n in sizes]  # resampled: duplicates and ties at every distance
    targets = enc.take([0, 3, 3, 59, 20_000])
    pool = stack_pool(syns)
    pd_, pt = np.repeat(np.arange(len(syns)), targets.n), np.tile(np.arange(targets.n), len(syns))
    got = pair_features(pool, targets, pd_, pt, schema, plan)
    for j in range(len(pd_)):
        ref = reference(syns[pd_[j]], targets.cat[pt[j]], targets.cont[pt[j]], schema, plan)
        np.testing.assert_allclose(got[j], ref, rtol=2e-6, atol=2e-6, err_msg=f"pair {j} (size {sizes[pd_[j]]})")
    # one thread and two give the same bits
    np.testing.assert_array_equal(got, pair_features(pool, targets, pd_, pt, schema, plan, n_jobs=1))


def test_pair_features_refuse_bad_pairs(adult):
    df, schema = adult
    enc = encode(df.iloc[:50], schema)
    pool, plan = stack_pool([enc]), feature_plan(schema, order=1)
    with pytest.raises(ValueError, match="dataset outside"):
        pair_features(pool, enc.take([0]), np.array([1]), np.array([0]), schema, plan)
    with pytest.raises(ValueError, match="target outside"):
        pair_features(pool, enc.take([0]), np.array([0]), np.array([2]), schema, plan)
    with pytest.raises(ValueError, match="empty"):
        stack_pool([])


def _stack_at_once(datasets, compact=False):
    "`stack_pool` as it was built before 2026-12-07: concatenate, transpose, square the whole pool (three pool-sized copies)."
    cat = np.concatenate([d.cat for d in datasets]).T
    dtype = np.min_scalar_type(int(cat.max())) if compact and cat.size and cat.min() >= 0 else np.int32
    cont = np.ascontiguousarray(np.concatenate([d.cont for d in datasets]).T, dtype=np.float64)
    return np.ascontiguousarray(cat, dtype=dtype), cont, np.sqrt((cont * cont).sum(0))


@pytest.mark.parametrize("C, D, lo, hi", [(3, 13, 0, 300), (2, 0, 0, 5), (0, 4, 0, 1), (4, 9, -1, 70_000), (1, 2, 0, 0)])
@pytest.mark.parametrize("compact", [False, True])
def test_stack_pool_fills_its_arrays_in_place_bit_for_bit(C, D, lo, hi, compact):
    """Each dataset copied into its run of arrays allocated once: the codes' type and every value, the norms included (13 columns:
    the sum over columns keeps its order), equal the one-shot construction's; empty and one-row datasets, negative codes (int32
    kept), codes past 255 and 65,535 (wider types), a table without categorical or continuous columns."""
    g = np.random.default_rng(C * 100 + D)
    sizes = (0, 1, 64, 0, 257, 3)
    data = [Encoded(g.integers(lo, hi + 1, (n, C)).astype(np.int32), g.normal(size=(n, D)) * 10.0 ** g.integers(-3, 4, (1, D))) for n in sizes]
    got, want = stack_pool(data, compact=compact), _stack_at_once(data, compact=compact)
    for a, b in zip((got.cat, got.cont, got.norm), want):
        assert a.dtype == b.dtype and a.shape == b.shape and a.flags.c_contiguous and np.array_equal(a, b)
    np.testing.assert_array_equal(got.offsets, np.r_[0, np.cumsum(sizes)])


def test_stack_pool_compacts_when_only_the_last_dataset_has_rows():
    "Empty datasets first, then one with rows: its codes decide the compact type; every dataset empty: int32, no rows."
    empty, one = Encoded(np.zeros((0, 2), np.int32), np.zeros((0, 1))), Encoded(np.array([[3, 200]], np.int32), np.ones((1, 1)))
    pool = stack_pool([empty, empty, one], compact=True)
    assert pool.cat.dtype == np.uint8 and pool.cat.tolist() == [[3], [200]] and pool.offsets.tolist() == [0, 0, 0, 1]
    none = stack_pool([empty, empty], compact=True)
    assert none.cat.dtype == np.int32 and none.cat.shape == (2, 0) and none.norm.shape == (0,)


def test_join_pools_is_the_stack_of_both_lists_with_their_reference_masses():
    "Two pools joined, masses included, equal one pool of both lists (codes of different widths widened); mismatches refused."
    from achilles.shadow.set_features import reference_mass
    df = load_adult().iloc[:300]
    schema = Schema.from_dataframe(df); enc = encode(df, schema)
    g = np.random.default_rng(5)
    a, b = [enc.take(g.integers(0, 300, n)) for n in (40, 0, 7)], [enc.take(g.integers(0, 300, n)) for n in (1, 64)]
    ref = enc.take(np.arange(0, 300, 3))
    with_mass = lambda p: __import__("dataclasses").replace(p, refmass=reference_mass(p, ref, schema, [0.125, 0.0625]))
    got = join_pools(with_mass(stack_pool(a, compact=True)), with_mass(stack_pool(b)))  # uint8 codes, then int32
    want = with_mass(stack_pool(a + b))
    for f in ("cat", "cont", "norm", "offsets", "refmass"):
        x, y = getattr(got, f), getattr(want, f)
        assert x.dtype == y.dtype and x.flags.c_contiguous and np.array_equal(x, y), f
    with pytest.raises(ValueError, match="same reference masses"):
        join_pools(stack_pool(a), with_mass(stack_pool(b)))
    one_bw = __import__("dataclasses").replace(stack_pool(b), refmass=reference_mass(stack_pool(b), ref, schema, [0.125]))
    with pytest.raises(ValueError, match="same reference masses"):  # two bandwidths against one
        join_pools(with_mass(stack_pool(a)), one_bw)
    with pytest.raises(ValueError, match="categorical"):
        join_pools(stack_pool(a), stack_pool([Encoded(np.zeros((2, 1), np.int32), np.zeros((2, len(schema.cont_idx))))]))


def test_stack_pool_refuses_datasets_of_other_columns():
    a = Encoded(np.zeros((3, 2), np.int32), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="dataset 1 has 2 categorical and 2 continuous columns; dataset 0 has 2 and 1"):
        stack_pool([a, Encoded(np.zeros((4, 2), np.int32), np.zeros((4, 2)))])


def test_stack_pool_holds_one_pool_at_a_time():
    "The peak while stacking is the pool plus one dataset's squares (numpy reports its arrays to tracemalloc), not three pools."
    import tracemalloc
    g = np.random.default_rng(0)
    data = [Encoded(g.integers(0, 9, (5_000, 8)).astype(np.int32), g.random((5_000, 6))) for _ in range(20)]
    tracemalloc.start()
    try:
        pool = stack_pool(data, compact=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally: tracemalloc.stop()
    assert peak < pool.nbytes + 2 * data[0].cont.nbytes + 100_000, (peak, pool.nbytes)


def _noise(seed, n=600, p=120):
    g = np.random.default_rng(seed)
    return g.normal(size=(n, p)).astype(np.float32), (g.random(n) < 0.5).astype(int)


FAM = {"query": np.arange(0, 100), "distance": np.arange(100, 116), "density": np.arange(116, 120)}


def test_no_signal_stays_at_chance_whatever_is_screened():
    "Cross-fitting: the mean AUC of every model over 25 noise records is 0.5; fitting on the scored datasets would not be."
    aucs = {m: [] for m in list(FAM) + ["pooled", COMBINED]}
    for s in range(25):
        X, y = _noise(s)
        r = crossfit_record(X, y, FAM, screen=60, rng=s)
        for m, v in r["scores"].items(): aucs[m].append(roc_auc_score(y, v))
    for m, v in aucs.items():
        assert abs(np.mean(v) - 0.5) < 0.02, (m, np.mean(v))


@pytest.mark.parametrize("family", list(FAM))
def test_every_family_reaches_the_combination(family):
    X, y = _noise(7, n=1000)
    X[:, FAM[family][:2]] += 1.2 * y[:, None]
    r = crossfit_record(X, y, FAM, rng=0)
    auc = {m: roc_auc_score(y, v) for m, v in r["scores"].items()}
    assert auc[COMBINED] > 0.85 and auc[family] > 0.85, auc
    assert all(abs(auc[o] - 0.5) < 0.08 for o in FAM if o != family), auc


@pytest.mark.parametrize("classifier", ["lda", "logistic", "rf"])
def test_classifiers_find_a_clear_signal(classifier):
    X, y = _noise(3, n=500, p=40)
    X[:, 0] += 2.0 * y
    r = crossfit_record(X, y, {"query": np.arange(40)}, classifier=classifier, rng=0)
    assert roc_auc_score(y, r["scores"][COMBINED]) > 0.85


def test_crossfit_refuses_one_class_and_too_many_folds():
    X, y = _noise(0, n=20, p=3)
    with pytest.raises(ValueError, match="both IN"):
        crossfit_record(X, np.ones(20, int), {"query": np.arange(3)})
    with pytest.raises(ValueError, match="folds"):
        crossfit_record(X, np.r_[np.ones(3, int), np.zeros(17, int)], {"query": np.arange(3)}, folds=5)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_epsilon_lower_bound_never_exceeds_the_truth(eps):
    "Randomised response with a known ε: the bound stays below ε in (at least) 95 % of repetitions."
    over = 0
    for s in range(30):
        g = np.random.default_rng(100 + s)
        y = (g.random(2000) < 0.5).astype(int)
        p = math.exp(eps) / (1 + math.exp(eps))
        x = np.where(g.random(2000) < p, y, 1 - y).astype(np.float32)[:, None]
        row = membership_row(crossfit_record(x, y, {"distance": np.array([0])}, rng=s), y)
        over += row["eps_lower"] > eps
    assert over <= 2


def test_tpr_at_fpr_reads_a_real_threshold():
    s, y = np.array([5., 4, 3, 3, 2, 1]), np.array([1, 1, 0, 1, 0, 0])
    assert tpr_at_fpr_exact(s, y, 0.0) == (2, 0)
    assert tpr_at_fpr_exact(s, y, 1 / 3) == (3, 1)
    assert tpr_at_fpr_exact(s, y, 1.0) == (3, 3)


def test_pair_features_of_a_target_far_from_every_record():
    "Every synthetic record at Gower distance 1: the narrow kernels underflow to 0 and the log density is log(1e-300), finite."
    import pandas as pd
    df = pd.DataFrame({"c": pd.Categorical(["a"] * 20 + ["b"], categories=["a", "b"]), "x": [0.0] * 20 + [1.0]})
    schema = Schema.from_dataframe(df)
    enc = encode(df, schema)
    plan = feature_plan(schema, order=2, subsets=0, rng=0, attacks=("query", "exact", "copy", "distance", "density"))
    pool = stack_pool([enc.take(np.arange(20))])
    got = pair_features(pool, enc.take([20]), np.array([0]), np.array([0]), schema, plan)[0]
    ref = reference(enc.take(np.arange(20)), enc.cat[20], enc.cont[20], schema, plan)
    dens = got[-plan.n_bandwidths:]
    assert np.isfinite(got).all() and dens.min() == pytest.approx(math.log(1e-300), rel=1e-6)
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-6)


def test_lda_shrinkage_is_ledoit_wolf():
    "Few datasets per feature, where the shrinkage is large (and, at 6 datasets and 2 features, capped at 1): the LDA direction solves sklearn's Ledoit-Wolf covariance."
    from sklearn.covariance import ledoit_wolf
    from achilles.shadow.pool_attack import lda_fit
    for n, p, seed, cap in ((30, 20, 0, False), (6, 2, 1, True)):
        g = np.random.default_rng(seed)
        y = np.r_[np.ones(n // 2, bool), np.zeros(n - n // 2, bool)]
        Z = g.normal(size=(n, p)) + 0.8 * y[:, None] * (np.arange(p) < 3)
        w, b = lda_fit(Z, y)
        mu1, mu0 = Z[y].mean(0), Z[~y].mean(0)
        R = Z - np.where(y[:, None], mu1, mu0)
        cov, shrink = ledoit_wolf(R, assume_centered=True)
        assert (shrink == 1.0) == cap and shrink > 0.1
        want = np.linalg.solve(cov, mu1 - mu0)
        np.testing.assert_allclose(w, want, rtol=2e-4, atol=2e-5)
        assert b == pytest.approx(-0.5 * (mu1 + mu0) @ want, rel=1e-3, abs=1e-4)  # equal classes: no prior term


def test_the_training_folds_threshold_maximises_the_bound():
    "With at most 11 OUT scores every one of them is a candidate: the chosen threshold attains the largest ε lower bound."
    from achilles.core.results import epsilon_bounds
    from achilles.shadow.pool_attack import _choose_threshold
    g = np.random.default_rng(4)
    bests = []
    outlier = np.r_[np.linspace(1, 2, 30), 1.9, np.linspace(0, 0.5, 10)]  # one OUT score among the IN: the best t is not above it
    for n1, n0, s in ((30, 11, None), (12, 8, None), (40, 5, None), (30, 11, outlier)):
        y = np.r_[np.ones(n1, int), np.zeros(n0, int)]
        s = g.normal(size=n1 + n0) + 1.5 * y if s is None else s
        best = max(float(epsilon_bounds(int((s[y == 1] > t).sum()), n1, int((s[y == 0] > t).sum()), n0, delta=0.0, alpha=0.0125))
                   for t in s[y == 0])
        t = _choose_threshold(s, y, 0.0125, 0.0)
        got = float(epsilon_bounds(int((s[y == 1] > t).sum()), n1, int((s[y == 0] > t).sum()), n0, delta=0.0, alpha=0.0125))
        assert t in s[y == 0] and got == pytest.approx(best, abs=1e-12)
        bests.append(best)
    assert max(bests) > 0  # the largest case has a bound to maximise


def test_constant_features_score_the_prior_odds():
    "Nothing varies: every dataset gets its training folds' prior log odds (0 with balanced folds)."
    X = np.ones((40, 6), np.float32); y = np.tile([1, 0], 20)
    r = crossfit_record(X, y, {"query": np.arange(3), "distance": np.arange(3, 6)}, folds=2, rng=0)
    for v in r["scores"].values(): np.testing.assert_array_equal(v, 0.0)


def test_lda_scores_do_not_depend_on_the_features_units():
    "Features are standardised on the training folds before the shrinkage LDA: rescaling a feature changes no score."
    X, y = _noise(5, n=300, p=30)
    X[:, :3] += 0.8 * y[:, None]
    scale = np.geomspace(1e-3, 1e3, 30).astype(np.float32)
    fam = {"query": np.arange(30)}
    a = crossfit_record(X, y, fam, rng=0)["scores"][COMBINED]
    b = crossfit_record(X * scale, y, fam, rng=0)["scores"][COMBINED]
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)


def test_eps_counts_hold_each_scored_dataset_once():
    """The ε tests count each held-out dataset once per direction (the combined model only, not each family). IN and OUT far
    apart: every IN dataset passes, and only the few OUT datasets whose noise lifts them over the training folds' highest OUT
    score are false positives."""
    X, y = _noise(6, n=200, p=20)
    X[:, 0] += 20.0 * y  # IN and OUT apart on feature 0
    r = crossfit_record(X, y, {"query": np.arange(10), "distance": np.arange(10, 20)}, rng=0)
    n1, n0 = int(y.sum()), int(len(y) - y.sum())
    c = r["eps_counts"]
    assert c[:, 1].tolist() == [n1, n0] and c[:, 3].tolist() == [n0, n1] and c[:, 0].tolist() == [n1, n0]
    assert (c[:, 2] <= 0.05 * c[:, 3]).all()
    row = membership_row(r, y)
    assert row["eps_lower"] > 2.0


def test_membership_row_resolves_fpr_down_to_one_out_dataset():
    y = np.r_[np.ones(100, int), np.zeros(100, int)]
    s = np.r_[np.linspace(1, 2, 100), np.linspace(0, 1.5, 100)]
    res = dict(scores={COMBINED: s}, eps_counts=np.zeros((2, 4), np.int64))
    row = membership_row(res, y, fpr_levels=(0.001, 0.01, 0.1))
    assert math.isnan(row["tpr@0.001"]) and not math.isnan(row["tpr@0.01"]) and not math.isnan(row["tpr@0.1"])
    assert row["tpr@0.01"] == tpr_at_fpr_exact(s, y, 0.01)[0] / 100


# Issue 35's mutation sample of shadow.pool_attack: what its survivors showed the tests did not pin.

def test_single_column_counts_the_value_alone(adult):
    "The column `single_column` names (what the untrained `rarest` family reads) counts the synthetic rows equal to the record on that attribute alone."
    df, _ = adult
    d = df[["workclass", "education", "age", "fnlwgt", "sex"]]
    schema = Schema.from_dataframe(d)
    plan = feature_plan(schema, order=2, rng=0, attacks=("query", "exact", "rarest"))
    enc = encode(d, schema)
    syn = enc.take(np.random.default_rng(0).integers(0, 200, 150))
    t = enc.take([3])
    X = pair_features(stack_pool([syn]), t, np.array([0]), np.array([0]), schema, plan)[0]
    tol = plan.tol
    for j in range(len(schema)):
        col = plan.single_column(schema, j)
        if j in schema.cat_idx.tolist():
            k = schema.cat_idx.tolist().index(j); want = (syn.cat[:, k] == t.cat[0, k]).sum()
        else:
            k = schema.cont_idx.tolist().index(j); want = (np.abs(syn.cont[:, k] - t.cont[0, k]) < tol[k]).sum()
        assert col >= 0 and X[col] == want, (schema.names[j], col, X[col], want)


def test_rarest_attribute_equals_brute_force(adult):
    df, _ = adult
    d = df[["workclass", "age", "race", "capital-gain", "hours-per-week"]].iloc[:3000]
    schema = Schema.from_dataframe(d)
    enc = encode(d, schema)
    from achilles.shadow.pool_attack import rarest_attribute
    got = rarest_attribute(enc, schema)
    cols = {**{j: enc.cat[:, k] for k, j in enumerate(schema.cat_idx)}, **{j: enc.cont[:, k] for k, j in enumerate(schema.cont_idx)}}
    counts = np.stack([[(cols[j] == cols[j][i]).sum() for j in range(len(schema))] for i in range(0, 3000, 37)])
    np.testing.assert_array_equal(got[::37], np.argmin(counts, axis=1))


def test_exact_tolerance_of_a_constant_column():
    "A continuous column with one distinct value has no gap: its tolerance falls back, it does not fail."
    from achilles.shadow.pool_attack import exact_tolerance
    df = __import__("pandas").DataFrame({"x": [0.25] * 10 + [0.75], "y": np.linspace(0.1, 0.9, 11)})
    schema = Schema.from_dataframe(df)
    tol = exact_tolerance(schema, encode(df.iloc[:10], schema))  # x constant in these rows
    assert np.isfinite(tol).all() and (tol > 0).all(), tol


def test_pair_features_refuse_groundhog_of_the_wrong_shape(adult):
    df, schema = adult
    enc = encode(df.iloc[:50], schema)
    plan = feature_plan(schema, order=1, rng=0, attacks=("query", "groundhog"))
    pool = stack_pool([enc, enc])
    with pytest.raises(ValueError, match="Groundhog"):
        pair_features(pool, enc.take([0]), np.array([0]), np.array([0]), schema, plan, groundhog=np.zeros((1, plan.n_groundhog), np.float32))


def test_the_stacks_intercept_centres_its_training_scores_on_the_prior():
    "The stack's score is a log-odds: on its training datasets the two classes' mean scores sit symmetrically about the prior odds."
    from achilles.shadow.pool_attack import _stack
    g = np.random.default_rng(0)
    y = (g.random(500) < 0.3).astype(np.int64)
    C = np.c_[g.normal(size=500) + 1.5 * y, g.normal(size=500) + 0.8 * y]
    s_te, s_tr, w, _ = _stack(C, y, C[:10], 0)
    prior = math.log(y.sum() / (len(y) - y.sum()))
    assert (w > 0).all()
    assert abs(0.5 * (s_tr[y == 1].mean() + s_tr[y == 0].mean()) - prior) < 1e-9
    assert s_tr[y == 1].mean() > prior > s_tr[y == 0].mean()


def test_eps_counts_score_ties_at_the_threshold_as_out():
    "A dataset whose score equals the training folds' threshold is not flagged IN, for the true positives and the false positives alike."
    y = np.r_[np.ones(200), np.zeros(200)].astype(np.int64)
    r = crossfit_record(np.zeros((400, 0), np.float32), y, {}, rng=0, untrained={"flat": np.zeros(400)}, stack=False)
    np.testing.assert_array_equal(r["eps_counts"][0], [0, 200, 0, 200])


def test_the_forests_refits_are_seeded_apart():
    "The stack's refits of the paper's forest each get their own seed (seed + 1000 (j + 1)): frozen scores, as this code gives them."
    X, y = _noise(11, n=300, p=12)
    X[:, :2] += 0.8 * y[:, None]
    r = crossfit_record(X, y, {"a": np.arange(6), "b": np.arange(6, 12)}, classifier="rf", rng=3, n_jobs=1)
    got = [round(roc_auc_score(y, r["scores"][m]), 4) for m in ("a", "b", COMBINED)]
    assert got == FROZEN_RF, got


FROZEN_RF = [0.7933, 0.5076, 0.8025]


def test_pair_features_refuse_a_pool_of_another_schema(adult):
    "A pool whose continuous columns (only) differ from the schema's is refused, as is one whose categorical columns differ."
    df, schema = adult
    other = Schema.from_dataframe(df.drop(columns=["age"]))
    enc = encode(df.iloc[:30], schema)
    plan = feature_plan(schema, order=1, rng=0, attacks=("query",))
    with pytest.raises(ValueError, match="do not match the schema"):
        pair_features(stack_pool([encode(df.drop(columns=["age"]).iloc[:30], other)]), enc.take([0]), np.array([0]), np.array([0]), schema, plan)
    other2 = Schema.from_dataframe(df.drop(columns=["sex"]))
    with pytest.raises(ValueError, match="do not match the schema"):
        pair_features(stack_pool([encode(df.drop(columns=["sex"]).iloc[:30], other2)]), enc.take([0]), np.array([0]), np.array([0]), schema, plan)


def test_a_refit_with_no_features_scores_its_groups_prior_odds():
    "`_lda_groups`: a group whose refit keeps no feature is scored with the prior odds of the datasets outside it."
    from achilles.shadow.pool_attack import _lda_groups
    g = np.random.default_rng(2)
    sizes = [30, 10, 25, 20, 15, 40]  # blocks: (group 0 OUT, IN), (group 1 OUT, IN), (group 2 OUT, IN)
    blocks = np.r_[0, np.cumsum(sizes)]
    Zt = g.normal(size=(4, blocks[-1])).astype(np.float32)
    w, b, oof = _lda_groups(Zt, blocks, np.arange(4), [np.arange(4), np.array([], np.int64), np.arange(2)])
    n_in, n_out = 10 + 20 + 40, 30 + 25 + 15
    np.testing.assert_allclose(oof[blocks[2]:blocks[4]], math.log((n_in - 20) / (n_out - 25)))
    assert np.ptp(oof[:blocks[2]]) > 0 and np.ptp(oof[blocks[4]:]) > 0


def test_the_threshold_search_reaches_half_the_out_datasets():
    "The ε test's thresholds go down to half the OUT datasets: IN scores that all sit at the OUT scores' 55th percentile are found there."
    from achilles.shadow.pool_attack import _choose_threshold
    s_out = np.linspace(0, 1, 1000)
    s = np.r_[np.full(200, 0.55), s_out]
    y = np.r_[np.ones(200), np.zeros(1000)].astype(np.int64)
    assert _choose_threshold(s, y, 0.05 / 4, 0.0) < 0.55


def test_the_stack_falls_back_to_the_first_column_when_nothing_beats_chance():
    from achilles.shadow.pool_attack import _stack
    g = np.random.default_rng(0)
    y = (g.random(400) < 0.5).astype(np.int64)
    C = g.normal(size=(400, 2))
    C[:, 0] += 0.05 * y  # a weak signal in the right direction, too weak to beat chance with 95 % confidence
    from achilles.core.results import _wald_low
    from achilles.shadow.pool_attack import auc_score
    assert all(_wald_low(auc_score(y, C[:, j]), int(y.sum()), int(len(y) - y.sum())) <= 0.5 for j in (0, 1))  # the screen's own test
    s_te, s_tr, w, _ = _stack(C, y, C[:20], 0)
    assert w[0] > 0 and w[1] == 0 and np.ptp(s_te) > 0, w


@pytest.mark.parametrize("n,p", [(1, 1), (31, 33), (32, 32), (65, 7), (200, 1335)])
def test_center_t_is_numpys_transposed_difference_bit_for_bit(n, p):
    "The tiled transpose (issue 35's cost work) against numpy's `X[perm].T - g`: ties, duplicate rows, NaN, inf and sizes off the 32-tile."
    from achilles.shadow.pool_attack import _center_t
    g = np.random.default_rng(n * 1000 + p)
    X = g.integers(0, 3, size=(n, p)).astype(np.float32)  # ties everywhere
    X[::2] = X[0]  # duplicate rows
    if n * p > 4: X[n - 1, p - 1] = np.nan; X[0, -1] = np.inf
    perm = g.permutation(n).astype(np.int64)
    c = X.mean(0, dtype=np.float64).astype(np.float32)
    want = X[perm].T - c[:, None]
    got = _center_t(X, perm, c, np.empty((p, n), np.float32))
    assert got.shape == (p, n)
    np.testing.assert_array_equal(got.view(np.int32), want.view(np.int32))


def _row(counts, n1=40, n0=40):
    "membership_row of fixed scores and given ε counts (one row per test direction: tp, n_in, fp, n_out)."
    from achilles.shadow.pool_attack import QUERY
    y = np.r_[np.ones(n1), np.zeros(n0)].astype(int); s = np.linspace(0, 1, n1 + n0)[::-1]
    return membership_row(dict(scores={COMBINED: s, QUERY: s}, eps_counts=np.array(counts)), y)


def test_membership_row_ceiling_gdp_and_family_columns():
    "Issue 36's ε columns: the ceiling of the direction that carries the bound, 'at least' only near it, μ at the row's confidence."
    from achilles.core.results import eps_ceiling, epsilon_bounds, gdp_mu_lower
    ceil = lambda n_in, n_out: float(eps_ceiling(n_in, n_out, alpha=0.0125))
    nothing = _row([[0, 300, 50, 100], [0, 100, 50, 300]])  # no direction shows anything: the larger ceiling, not "at least"
    assert nothing["eps_lower"] == 0 and nothing["eps_ceiling"] == max(ceil(100, 300), ceil(300, 100)) and not nothing["eps_at_ceiling"]
    weak = _row([[75, 300, 7, 100], [5, 100, 50, 300]])  # direction 0 carries a bound below 1; its own ceiling is the smaller one
    assert 0 < weak["eps_lower"] < 1 and weak["eps_ceiling"] == ceil(300, 100) < ceil(100, 300) and not weak["eps_at_ceiling"]
    small = _row([[10, 10, 0, 10], [10, 10, 0, 10]])  # perfect on 10 + 10: the bound is its ceiling, 0.60, and reads "at least"
    assert small["eps_lower"] == small["eps_ceiling"] == ceil(10, 10) and 0 < small["eps_lower"] < 1 and small["eps_at_ceiling"]
    tiny = _row([[1, 1, 0, 1], [1, 1, 0, 1]])  # one dataset each way: nothing can be shown, ceiling 0, not "at least"
    assert tiny["eps_ceiling"] == 0.0 and not tiny["eps_at_ceiling"]
    assert weak["mu_lower"] == max(float(gdp_mu_lower(75, 300, 7, 100, alpha=0.0125)), float(gdp_mu_lower(5, 100, 50, 300, alpha=0.0125)))
    assert "auc_query" in weak and "auc_combined" not in weak and weak["auc_inflation"] == 1.0


def test_at_ceiling_at_its_boundary():
    from achilles.shadow.pool_attack import AT_CEILING, at_ceiling
    assert at_ceiling(AT_CEILING * 2.0, 2.0) and at_ceiling(2.0, 2.0) and not at_ceiling(AT_CEILING * 2.0 - 1e-9, 2.0)
    assert not at_ceiling(0.0, 0.0) and not at_ceiling(0.0, 1.0)


@pytest.mark.parametrize("stack", [True, False])
def test_the_certificate_never_reads_the_labels_it_is_scored_on(monkeypatch, stack):
    """Issue 36: the certificate is fitted on folds 0-2 and scores folds 3-4. With the folds held fixed, swapping IN and OUT labels
    inside the scored folds leaves its scores bit for bit; swapping two in a training fold changes them (the test has teeth).
    The cross-fitted scores of the headline are those of a certify=False run, bit for bit."""
    import achilles.shadow.pool_attack as pa
    n = 300
    g, y, X = _planted(4, n, 40, 0.4, 5)
    fam = {"a": np.arange(20), "b": np.arange(20, 40)}
    un = {"u": X[:, 0].astype(np.float64) + g.normal(size=n)}
    base = crossfit_record(X, y, fam, rng=1, untrained=un, stack=stack, certify=True)
    f = base["folds"]
    monkeypatch.setattr(pa, "record_folds", lambda yy, folds, rng=None: f.copy())
    idx = base["certificate"]["index"]
    np.testing.assert_array_equal(np.sort(idx), np.flatnonzero(f >= 3))  # 5 folds: the last 2 are scored, 40 %
    def swapped(rows):  # one IN and one OUT of the same fold trade labels: every fold keeps its class counts
        k = f[rows[0]]
        i = next(r for r in rows if f[r] == k and y[r] == 1); o = next(r for r in rows if f[r] == k and y[r] == 0)
        y2 = y.copy(); y2[i], y2[o] = 0, 1
        return y2
    by_row = lambda r: r["certificate"]["scores"][np.argsort(r["certificate"]["index"])]  # each scored dataset's score, in row order
    same = crossfit_record(X, swapped(idx), fam, rng=1, untrained=un, stack=stack, certify=True)
    np.testing.assert_array_equal(by_row(same), by_row(base))
    moved = crossfit_record(X, swapped(np.flatnonzero(f < 3)), fam, rng=1, untrained=un, stack=stack, certify=True)
    assert not np.array_equal(by_row(moved), by_row(base))
    plain = crossfit_record(X, y, fam, rng=1, untrained=un, stack=stack)
    assert "certificate" not in plain
    for k, v in plain["scores"].items(): np.testing.assert_array_equal(v, base["scores"][k])


def test_membership_row_takes_its_interval_from_the_certificate():
    "The AUC stays the cross-fitted one; its interval, p-value and TPR intervals are the certificate's, unwidened whatever `inflation` says."
    from achilles.core.results import auc_interval, auc_p_value, clopper_pearson
    from achilles.shadow.pool_attack import auc_score, tpr_at_fpr_exact
    _, y, X = _planted(5, 400, 30, 0.3, 4)
    res = crossfit_record(X, y, {"a": np.arange(30)}, rng=2, certify=True)
    row = membership_row(res, y, inflation=1.7)
    idx, sc = res["certificate"]["index"], res["certificate"]["scores"]
    yc = y[idx]; c1 = int(yc.sum()); c0 = len(yc) - c1
    a = auc_score(yc, sc)
    assert row["auc"] == auc_score(y, res["scores"][COMBINED]) and row["auc_cert"] == a and row["n_cert"] == len(idx) == 160
    assert (row["auc_ci_low"], row["auc_ci_high"]) == auc_interval(a, c1, c0) and row["auc_p"] == auc_p_value(a, c1, c0)
    assert row["auc_inflation"] == 1.0
    tp, _ = tpr_at_fpr_exact(sc, yc, 0.1)
    assert (row["tpr@0.1_low"], row["tpr@0.1_high"]) == clopper_pearson(tp, c1, 0.95)
    assert math.isnan(row["tpr@0.001"])  # 200 OUT datasets cannot show an FPR of 0.001
    assert (row["tpr@0.01_low"], row["tpr@0.01_high"]) == (0.0, 1.0)  # 80 OUT in the certificate cannot show 0.01 either: no information
    wide = membership_row(crossfit_record(X, y, {"a": np.arange(30)}, rng=2), y, inflation=1.7)  # without it: the widened cross-fit
    assert wide["auc_inflation"] == 1.7 and "auc_cert" not in wide
    assert (wide["auc_ci_low"], wide["auc_ci_high"]) == auc_interval(wide["auc"], 200, 200, 0.95, 1.7)


def test_membership_row_keeps_both_eps_tests_counts_so_a_family_wise_bound_can_be_redone():
    "The row's ε bound is epsilon_bounds of its own counts at alpha/4, and the same counts give the Bonferroni bound over R records."
    from achilles.core.results import epsilon_bounds
    row = _row([[290, 300, 2, 100], [5, 100, 50, 300]])
    hi = [row[f"eps_{k}_hi"] for k in ("tp", "nin", "fp", "nout")]; lo = [row[f"eps_{k}_lo"] for k in ("tp", "nin", "fp", "nout")]
    assert hi == [290, 300, 2, 100] and lo == [5, 100, 50, 300] and all(isinstance(v, int) for v in hi + lo)
    assert row["eps_lower"] == max(0.0, *(float(epsilon_bounds(*c, alpha=0.05 / 4)) for c in (hi, lo)))
    fw = max(float(epsilon_bounds(*c, alpha=0.05 / 4 / 1000)) for c in (hi, lo))  # one of 1,000 records, family-wise
    assert 0 < fw < row["eps_lower"]


def test_a_constant_family_does_not_stop_the_families_after_it():
    "A family whose features never vary scores the prior odds; the informative family listed after it is still fitted, and the stack uses it."
    from achilles.shadow.pool_attack import auc_score
    g = np.random.default_rng(8)
    n = 300
    y = np.zeros(n, np.int64); y[g.permutation(n)[:150]] = 1
    X = np.c_[np.ones((n, 5)), g.normal(size=(n, 10)) + 0.8 * y[:, None]].astype(np.float32)
    r = crossfit_record(X, y, {"flat": np.arange(5), "live": np.arange(5, 15)}, rng=3, certify=True)
    assert np.unique(r["scores"]["flat"]).size <= 5  # the prior odds of each fold
    assert auc_score(y, r["scores"]["live"]) > 0.9 and auc_score(y, r["scores"][COMBINED]) > 0.9
    assert r["weights"]["live"].gt(0).all() or r["weights"]["pooled"].gt(0).all()


def test_membership_row_certificate_resolves_an_fpr_of_exactly_one_over_its_out_datasets():
    "A certificate with exactly 100 OUT datasets resolves FPR 0.01 (one false positive): a Clopper-Pearson interval, not [0, 1]."
    from achilles.core.results import clopper_pearson
    from achilles.shadow.pool_attack import tpr_at_fpr_exact
    _, y, X = _planted(9, 500, 20, 0.6, 4)
    res = crossfit_record(X, y, {"a": np.arange(20)}, rng=4, certify=True)
    yc = y[res["certificate"]["index"]]
    assert int((yc == 0).sum()) == 100
    row = membership_row(res, y)
    tp, _ = tpr_at_fpr_exact(res["certificate"]["scores"], yc, 0.01)
    assert (row["tpr@0.01_low"], row["tpr@0.01_high"]) == clopper_pearson(tp, int(yc.sum()), 0.95) != (0.0, 1.0)


def test_the_eps_threshold_is_chosen_at_the_level_its_bound_is_stated(monkeypatch):
    "Each fold's ε threshold maximises the bound membership_row states (alpha / 4: four Clopper-Pearson bounds share alpha), not another."
    import achilles.shadow.pool_attack as pa
    seen, real = [], pa._choose_threshold
    def spy(s, y, alpha, delta):
        seen.append((alpha, delta)); return real(s, y, alpha, delta)
    monkeypatch.setattr(pa, "_choose_threshold", spy)
    g = np.random.default_rng(10)
    y = np.zeros(200, np.int64); y[:100] = 1
    X = (g.normal(size=(200, 8)) + 0.5 * y[:, None]).astype(np.float32)
    crossfit_record(X, y, {"a": np.arange(8)}, rng=1, alpha=0.08, delta=1e-3)
    assert len(seen) == 10 and set(seen) == {(0.02, 1e-3)}  # 5 folds x 2 directions


def test_queries_in_any_order_count_what_they_say(adult):
    "The kernel reuses the AND of a prefix shared with the previous query: shuffled queries (prefixes that come back after a gap,"
    " lengths that change mid-prefix) still count their own subsets."
    import dataclasses
    df, schema = adult
    plan = feature_plan(schema, order=3, attacks=("query", "exact"))
    g = np.random.default_rng(5)
    plan = dataclasses.replace(plan, subsets=plan.subsets[g.permutation(plan.n_query)], exact=plan.exact[g.permutation(plan.n_exact)])
    enc = encode(df, schema)
    syns = [enc.take(g.integers(0, 80, n)) for n in (64, 100)]
    targets = enc.take([0, 7])
    pd_, pt = np.repeat(np.arange(2), 2), np.tile(np.arange(2), 2)
    got = pair_features(stack_pool(syns), targets, pd_, pt, schema, plan)
    q = plan.n_query + plan.n_exact
    for j in range(len(pd_)):
        ref = reference(syns[pd_[j]], targets.cat[pt[j]], targets.cont[pt[j]], schema, plan)
        np.testing.assert_array_equal(got[j, :q], ref[:q])


def test_pair_features_fill_every_element_of_a_reused_buffer(adult):
    "`out` (the audit's reused chunk memory) is overwritten whole: a buffer full of NaN gives the fresh array's bits."
    df, schema = adult
    plan = feature_plan(schema, order=2, attacks=("query", "exact", "copy", "distance", "density", "groundhog"))
    enc = encode(df, schema)
    g = np.random.default_rng(2)
    pool = stack_pool([enc.take(g.integers(0, 300, 90)) for _ in range(3)])
    from achilles.shadow.set_features import groundhog_features
    gh = groundhog_features(pool, schema)
    pd_, pt = np.repeat(np.arange(3), 2), np.tile(np.arange(2), 3)
    fresh = pair_features(pool, enc.take([1, 2]), pd_, pt, schema, plan, groundhog=gh)
    out = np.full((6, plan.n_features), np.nan, np.float32)
    got = pair_features(pool, enc.take([1, 2]), pd_, pt, schema, plan, groundhog=gh, out=out)
    assert got is out
    np.testing.assert_array_equal(got, fresh)
    for bad in (np.zeros((6, plan.n_features)), np.zeros((5, plan.n_features), np.float32), np.zeros((plan.n_features, 6), np.float32).T):
        with pytest.raises(ValueError, match="out must be a C-contiguous float32 array"):
            pair_features(pool, enc.take([1, 2]), pd_, pt, schema, plan, groundhog=gh, out=bad)


def test_crossfit_reads_nothing_left_in_its_reused_memory():
    "crossfit_record keeps its transposed features in per-thread memory that the previous record wrote: garbage there changes nothing."
    from achilles.core.runtime import scratch
    g = np.random.default_rng(0)
    y = (g.random(300) < 0.5).astype(np.int64)
    X = g.normal(size=(300, 40)).astype(np.float32); X[:, 3] += 0.8 * y
    fam = {"a": np.arange(20), "b": np.arange(20, 40)}
    first = crossfit_record(X, y, fam, rng=1, certify=True)
    scratch("crossfit.Xt", (40, 300))[:] = np.nan; scratch("crossfit.sq", (40, 300))[:] = np.inf
    again = crossfit_record(X, y, fam, rng=1, certify=True)
    for k, v in first["scores"].items(): np.testing.assert_array_equal(again["scores"][k], v)
    np.testing.assert_array_equal(again["certificate"]["scores"], first["certificate"]["scores"])


def _crafted(cat, cont, tcat, tcont, tol):
    "A pool of one synthetic dataset and one target from raw encoded arrays, with one categorical and len(tol) continuous columns."
    import pandas as pd
    from achilles.shadow.pool_attack import FeaturePlan
    D = cont.shape[1]
    df = pd.DataFrame({"c": pd.Categorical(["a", "b"] * 2), **{f"x{k}": [0.0, 1.0, 0.5, 0.25] for k in range(D)}})
    schema = Schema.from_dataframe(df)
    combos = [(0,)] + [(1 + k,) for k in range(D)] + [(0, 1 + k) for k in range(D)]
    width = 2
    S = np.full((len(combos), width), -1, np.int64)
    for i, c in enumerate(combos): S[i, :len(c)] = c
    E = S[1:].copy()  # every subset with a continuous attribute, as an exact-value query
    plan = FeaturePlan(S, E, np.asarray(tol, np.float64), n_copy=2)
    syn = Encoded(np.asarray(cat, np.int32).reshape(-1, 1), np.asarray(cont, np.float64))
    t = Encoded(np.asarray([[tcat]], np.int32), np.asarray([tcont], np.float64))
    return schema, plan, syn, t


def test_counting_queries_follow_the_missing_value_rule_at_its_boundaries():
    """Issue 37's rule in the kernel: `<=` never lets a missing number (-1) match a present target, a missing target matches only
    missing numbers, and -0.5 (where values far below the range are floored) is present: it matches and is matched."""
    cont = np.array([[-1.0], [-0.5], [0.2], [-1.0], [0.9]])
    for tx, want in [(0.3, 2), (-0.5, 1), (-1.0, 2), (0.95, 3)]:  # present targets count -0.5 and the values below them; a missing one, the missing
        schema, plan, syn, t = _crafted([0, 0, 0, 0, 0], cont, 0, [tx], [1e-9])
        got = pair_features(stack_pool([syn]), t, np.array([0]), np.array([0]), schema, plan)[0]
        assert got[1] == want, (tx, got[1])
        assert got[2] == want  # the same count with the categorical column (every row matches it)


def test_an_exact_value_query_counts_strictly_within_the_tolerance():
    "A synthetic value exactly `tol` away from the record's is not equal (dyadic numbers: the distances are exact in binary)."
    schema, plan, syn, t = _crafted([0, 0, 0], np.array([[0.375], [0.25], [0.3125]]), 0, [0.25], [0.125])
    got = pair_features(stack_pool([syn]), t, np.array([0]), np.array([0]), schema, plan)[0]
    q = plan.n_query
    assert got[q] == 2  # 0.25 and 0.3125; 0.375 is exactly 0.125 away


def test_a_prefix_is_reused_only_by_a_query_of_the_same_length():
    "[(0,1,5), (0,1), (0,1,2)]: the third query's prefix (0,1) is the second query itself, not its prefix (0): it must be recomputed."
    import dataclasses
    df = load_adult().iloc[:400]
    schema = Schema.from_dataframe(df)
    plan = feature_plan(schema, order=1, attacks=("query",))
    S = np.array([[0, 1, 5], [0, 1, -1], [0, 1, 2], [3, -1, -1], [0, 1, 2]], np.int64)
    plan = dataclasses.replace(plan, subsets=S)
    enc = encode(df, schema)
    syn = enc.take(np.arange(300))
    got = pair_features(stack_pool([syn]), enc.take([5]), np.array([0]), np.array([0]), schema, plan)[0]
    ref = reference(syn, enc.cat[5], enc.cont[5], schema, plan)
    np.testing.assert_array_equal(got[:len(S)], ref[:len(S)])


def test_the_pair_kernel_stays_inside_its_arrays():
    "The kernel run with numba's bounds checks on (a fresh interpreter, its own cache): an index past a dataset's rows raises there."
    import os, subprocess, sys, tempfile, textwrap
    code = textwrap.dedent('''
        import numpy as np
        from achilles.core.data import Schema, encode, load_adult
        from achilles.shadow.pool_attack import feature_plan, pair_features, stack_pool
        df = load_adult().iloc[:300]; schema = Schema.from_dataframe(df); enc = encode(df, schema)
        plan = feature_plan(schema, order=2, attacks=("query", "exact", "copy", "distance", "density"))
        g = np.random.default_rng(0)
        pool = stack_pool([enc.take(g.integers(0, 300, n)) for n in (63, 64, 65, 1)])
        X = pair_features(pool, enc.take([0, 1]), np.repeat(np.arange(4), 2), np.tile(np.arange(2), 4), schema, plan, n_jobs=1)
        import dataclasses
        for nb in (1, 2, 3, 5):  # fewer bandwidths than the registers' four, and more (the array loop)
            Xb = pair_features(pool, enc.take([0, 1]), np.repeat(np.arange(4), 2), np.tile(np.arange(2), 4), schema,
                               dataclasses.replace(plan, n_bandwidths=nb), n_jobs=1)
        print("ok", np.isfinite(X).all())
    ''')
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=cache)
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0 and "ok True" in p.stdout, p.stderr[-2000:]


@pytest.mark.parametrize("missing", [0.0, 0.15])
def test_a_categorical_table_counts_rows_by_mismatches_and_equals_the_reference(adult, missing):
    """With no continuous column, `_one_pair` reads every distance feature from the number of rows at each mismatch count
    (`_from_mismatches`). Against the definitions: missing codes (a category of their own), empty and tiny datasets (fewer rows than
    the k smallest), duplicates, the target itself, and a radius and copy count at every level."""
    df, _ = adult
    d = df[["workclass", "education", "marital-status", "sex", "race", "income"]].copy()
    rng = np.random.default_rng(7)
    if missing:
        d = d.astype(object).mask(rng.random(d.shape) < missing)
    schema = Schema.from_dataframe(d)
    assert len(schema.cont_idx) == 0
    plan = feature_plan(schema, order=2, subsets=3, rng=3, attacks=("query", "exact", "copy", "distance", "density"))
    enc = encode(d, schema)
    sizes = (0, 1, 2, 4, 63, 64, 65, 300)
    syns = [enc.take(rng.integers(0, 40, n)) for n in sizes]
    targets = enc.take([0, 3, 39, 1_000, 20_000])
    pool = stack_pool(syns)
    pd_, pt = np.repeat(np.arange(len(syns)), targets.n), np.tile(np.arange(targets.n), len(syns))
    got = pair_features(pool, targets, pd_, pt, schema, plan, n_jobs=1)
    for j in range(len(pd_)):
        ref = reference(syns[pd_[j]], targets.cat[pt[j]], targets.cont[pt[j]], schema, plan)
        np.testing.assert_allclose(got[j], ref, rtol=2e-6, atol=2e-6, err_msg=f"pair {j} (size {sizes[pd_[j]]})")
    k = plan.n_query + plan.n_exact
    assert (got[pd_ == 0, k:k + plan.n_copy] == 0).all() and (got[pd_ == 1, k] <= 1).all()  # the empty dataset counts nothing
    loop = pair_features(pool, targets, pd_, pt, schema, plan, n_jobs=1, counting=False)  # the row loop, `bench`'s in-run baseline
    dens = [j for j, c in enumerate(plan.names(schema)) if c.startswith("log_density")]  # summed in another order
    assert len(dens) == plan.n_bandwidths
    np.testing.assert_array_equal(np.delete(loop, dens, axis=1), np.delete(got, dens, axis=1))
    np.testing.assert_allclose(loop[:, dens], got[:, dens], rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match="counting"):
        pair_features(pool, targets, pd_, pt, schema, plan, n_jobs=1, counting="no")


def test_log1p_of_counts_by_table_gives_numpys_bits_and_falls_back_otherwise():
    from achilles.shadow.pool_attack import _LOG1P, _log1p_counts
    g = np.random.default_rng(3)
    X = g.integers(0, len(_LOG1P), (300, 40)).astype(np.float32)
    X[0, :3] = [0, 1, len(_LOG1P) - 1]
    A, B = X.copy(), X.copy()
    _log1p_counts(A, 2, 30); np.log1p(B[:, 2:30], out=B[:, 2:30])
    np.testing.assert_array_equal(A.view(np.uint32), B.view(np.uint32))  # the same bits, and columns outside 2:30 untouched
    for bad in (2.5, -1.0, float(len(_LOG1P)), np.nan, 1e9, -0.0, np.inf):  # not a count the table holds: numpy's log1p for the whole block
        C = X.copy(); C[7, 9] = bad; D = C.copy()
        _log1p_counts(C, 2, 30); np.log1p(D[:, 2:30], out=D[:, 2:30])
        np.testing.assert_array_equal(C.view(np.uint32), D.view(np.uint32))  # the bits: log1p(-0.0) is -0.0
    E = X.astype(np.float64); F_ = E.copy()  # another dtype: numpy's own
    _log1p_counts(E, 0, 40); np.testing.assert_array_equal(E, np.log1p(F_))
    G = X.copy(); _log1p_counts(G, 5, 5); np.testing.assert_array_equal(G, X)  # an empty block changes nothing


def test_small_counts_says_which_blocks_the_table_holds():
    "The check before the table: every value of the block a whole number in 0..n-1, not -0.0; any other value anywhere says no."
    from achilles.shadow.pool_attack import _small_counts
    g = np.random.default_rng(5)
    X = g.integers(0, 100, (70, 12)).astype(np.float32)
    X[0, 3], X[69, 11], X[5, 5] = 0.0, 99.0, 0.0
    assert _small_counts(X, 0, 12, 100) is True and _small_counts(X, 2, 7, 100) and _small_counts(X, 4, 4, 1)  # an empty block: yes
    for bad in (100.0, -1.0, 0.5, 99.5, np.nan, np.inf, -np.inf, -0.0):
        for i, j in ((0, 0), (69, 11), (33, 6)):
            Y = X.copy(); Y[i, j] = bad
            assert _small_counts(Y, 0, 12, 100) is False, (bad, i, j)
            assert _small_counts(Y, 0, j, 100) if j else True  # outside the block it is not read
    assert _small_counts(X.astype(np.float64), 0, 12, 100) and not _small_counts(X, 0, 12, 99)  # n bounds the values


@pytest.mark.parametrize("n_genlra", [1, 2])
def test_a_categorical_table_with_gen_lra_keeps_the_record_loop(adult, n_genlra):
    "Gen-LRA reads each synthetic record's reference mass, so a categorical table with it cannot take the counting path: its ratios equal their definition."
    from achilles.shadow.pool_attack import StackedPool
    from achilles.shadow.set_features import reference_mass
    df, _ = adult
    d = df[["workclass", "education", "sex", "race"]]
    schema = Schema.from_dataframe(d)
    enc = encode(d, schema)
    plan = feature_plan(schema, order=1, attacks=("query", "distance", "density", "genlra"), n_genlra=n_genlra)
    assert plan.n_genlra == n_genlra and len(schema.cont_idx) == 0
    rng = np.random.default_rng(2)
    syns = [enc.take(rng.integers(0, 60, n)) for n in (1, 64, 130)]
    pool = stack_pool(syns)
    bw = [plan.h_max / 2 ** (m + 1) for m in range(n_genlra)]
    pool = StackedPool(pool.cat, pool.cont, pool.norm, pool.offsets, reference_mass(pool, enc.take(np.arange(300, 700)), schema, bw))
    targets = enc.take([0, 3, 59])
    pd_, pt = np.repeat(np.arange(len(syns)), targets.n), np.tile(np.arange(targets.n), len(syns))
    got = pair_features(pool, targets, pd_, pt, schema, plan, n_jobs=1)
    F = len(schema)
    for j in range(len(pd_)):
        syn, a, b = syns[pd_[j]], pool.offsets[pd_[j]], pool.offsets[pd_[j] + 1]
        np.testing.assert_allclose(got[j, :-n_genlra], reference(syn, targets.cat[pt[j]], targets.cont[pt[j]], schema, plan), rtol=2e-6, atol=2e-6)
        gower = (syn.cat != targets.cat[pt[j]]).sum(1) / F
        glr = [np.log1p(np.exp(-(gower / bw[m]) ** 2) / pool.refmass[m, a:b]).sum() for m in range(n_genlra)]
        np.testing.assert_allclose(got[j, -n_genlra:], glr, rtol=2e-5, atol=2e-6)


def test_transform_features_takes_log1p_of_exactly_the_count_columns(adult):
    "By name: counting queries, exact-value counts, copies and radius counts become log1p; distances, densities and the rest stay."
    from achilles.shadow.pool_attack import transform_features
    df, schema = adult
    plan = feature_plan(schema, order=2, rng=3, attacks=("query", "exact", "copy", "distance", "density", "genlra", "groundhog"))
    assert plan.n_query and plan.n_exact and plan.n_copy and plan.n_radii and plan.n_genlra and plan.n_groundhog
    names = plan.names(schema)
    X = np.random.default_rng(0).integers(0, 500, (50, plan.n_features)).astype(np.float32)
    Y = transform_features(X.copy(), plan)
    counted = np.array([n.startswith(("count[", "equal[", "copies_", "within_")) for n in names])
    np.testing.assert_array_equal(Y[:, counted], np.log1p(X[:, counted]))
    np.testing.assert_array_equal(Y[:, ~counted], X[:, ~counted])


def test_log1p_of_counts_checks_every_value_before_it_looks_one_up():
    from achilles.shadow.pool_attack import _log1p_counts
    X = np.full((6, 4), 3.0, np.float32)
    for bad in ((0, 0), (0, 3), (5, 3)):  # a value that is not a count, in the first row, the last column, the last row
        A = X.copy(); A[bad] = 2.5; B = A.copy()
        _log1p_counts(A, 0, 4); np.testing.assert_array_equal(A, np.log1p(B))
    for v in (0.5, -2.0, 7e4):  # a block of nothing but values the table does not hold
        A = np.full((3, 3), v, np.float32); B = A.copy()
        with np.errstate(invalid="ignore"):
            _log1p_counts(A, 0, 3); np.testing.assert_array_equal(A, np.log1p(B))
    E = np.full((3, 3), 5.0); _log1p_counts(E, 0, 3); np.testing.assert_array_equal(E, np.log1p(np.full((3, 3), 5.0)))  # float64: numpy's, in float64


def _row_order_densities(syn: Encoded, tc, tx, schema: Schema, plan) -> np.ndarray:
    "The kernel's own density terms summed one record after the other in float64 (its `exp_neg` once, squared per halving): its bits."
    from achilles.shadow.pool_attack import exp_neg
    F, D = len(schema), syn.cont.shape[1]
    mis = (syn.cat != tc).sum(1).astype(np.float64)
    gsum = np.zeros(syn.n)
    for f in range(D): gsum += np.abs(syn.cont[:, f] - tx[f])  # column by column, as the kernel adds them
    gd = (mis + gsum) / F
    inv_h2 = 1.0 / (plan.h_max * plan.h_max)
    dens = np.zeros(plan.n_bandwidths)
    for v in gd:
        e = float(exp_neg(np.array([-v * v * inv_h2]))[0])
        for m in range(plan.n_bandwidths):
            dens[m] += e; e = e * e; e = e * e
    return np.log(dens / max(syn.n, 1) + 1e-300).astype(np.float32)


@pytest.mark.parametrize("n_bw", [1, 2, 3, 4, 5])
def test_the_densities_are_the_row_order_sums_bit_for_bit_at_every_number_of_bandwidths(adult, n_bw):
    # four or fewer bandwidths (the default) are summed in registers, more in an array: both in row order, so the same bits
    import dataclasses
    df, schema = adult
    enc = encode(df, schema)
    plan = dataclasses.replace(feature_plan(schema, order=1, rng=0, attacks=("distance", "density")), n_bandwidths=n_bw)
    rng = np.random.default_rng(5)
    syns = [enc.take(rng.integers(0, len(df), n)) for n in (0, 1, 64, 65, 700)]
    targets = enc.take([0, 7, 30_000])
    pd_, pt = np.repeat(np.arange(len(syns)), targets.n), np.tile(np.arange(targets.n), len(syns))
    got = pair_features(stack_pool(syns), targets, pd_, pt, schema, plan)
    lo = int(plan.families()[DENSITY][0])
    for j in range(len(pd_)):
        want = _row_order_densities(syns[pd_[j]], targets.cat[pt[j]], targets.cont[pt[j]], schema, plan)
        np.testing.assert_array_equal(got[j, lo:lo + n_bw], want, err_msg=f"pair {j}")


def test_gen_lra_leaves_the_densities_bits_as_they_are(adult):
    # with Gen-LRA the kernel keeps the array loop; the densities must not notice
    import dataclasses
    from achilles.shadow.set_features import reference_mass
    df, schema = adult
    enc = encode(df, schema)
    rng = np.random.default_rng(6)
    syns = [enc.take(rng.integers(0, len(df), n)) for n in (3, 200, 513)]
    pool = stack_pool(syns)
    base = feature_plan(schema, order=1, rng=0, attacks=("distance", "density"))
    plan = dataclasses.replace(base, n_genlra=2)
    pool = dataclasses.replace(pool, refmass=reference_mass(pool, enc.take(np.arange(300)), schema, [base.h_max / 2, base.h_max / 4]))
    targets = enc.take([1, 2, 44_000])
    pd_, pt = np.repeat(np.arange(len(syns)), targets.n), np.tile(np.arange(targets.n), len(syns))
    idx = plan.families()[DENSITY]; lo, hi = int(idx[0]), int(idx[-1]) + 1
    with_g = pair_features(pool, targets, pd_, pt, schema, plan)
    without = pair_features(pool, targets, pd_, pt, schema, base)
    np.testing.assert_array_equal(with_g[:, lo:hi], without[:, lo:hi])
    np.testing.assert_array_equal(with_g[:, :lo], without[:, :lo])


def test_eq5_follows_the_zero_vector_convention_against_the_reference():
    # a record whose continuous values are all at their minimum is the zero vector after scaling: its cosine to another zero vector
    # is 1, to anything else 0 (`achilles.distance`'s convention); Adult's records almost never are, so this table has many
    import pandas as pd
    g = np.random.default_rng(11)
    x = g.integers(1, 6, (300, 2)); x[g.random(300) < 0.3] = 0; x[0] = 0; x[1] = [5, 5]
    df = pd.DataFrame({"c": g.choice(list("abc"), 300), "x1": x[:, 0].astype(float), "x2": x[:, 1].astype(float)})
    schema = Schema.from_dataframe(df)
    enc = encode(df, schema)
    if not (np.abs(enc.cont[0]).sum() == 0 and (np.abs(enc.cont).sum(1) == 0).sum() > 20): pytest.skip("the scaling does not map the minimum to 0")
    plan = feature_plan(schema, order=2, rng=0, attacks=("query", "exact", "copy", "distance", "density"))
    syns = [enc.take(g.integers(0, 300, n)) for n in (1, 40, 130)] + [enc.take(np.flatnonzero(np.abs(enc.cont).sum(1) == 0)[:5])]
    targets = enc.take([0, 1, 2])
    pd_, pt = np.repeat(np.arange(len(syns)), targets.n), np.tile(np.arange(targets.n), len(syns))
    got = pair_features(stack_pool(syns), targets, pd_, pt, schema, plan)
    for j in range(len(pd_)):
        ref = reference(syns[pd_[j]], targets.cat[pt[j]], targets.cont[pt[j]], schema, plan)
        np.testing.assert_allclose(got[j], ref, rtol=2e-6, atol=2e-6, err_msg=f"pair {j}")


def test_distances_and_densities_with_missing_numbers_equal_the_reference(adult):
    # a missing number is scaled to -1, so a cosine can be negative and Eq. 5's (mis + D - D cos) / F exceed 1; the kernel clips it
    # at 1, and a kept distance is never above 1 anyway (the k smallest start as ones: a missing neighbour counts as 1)
    df, _ = adult
    d = df[["workclass", "sex", "age", "hours-per-week", "capital-gain"]].copy()
    g = np.random.default_rng(12)
    for c in ("age", "hours-per-week", "capital-gain"): d.loc[g.random(len(d)) < 0.3, c] = np.nan
    schema = Schema.from_dataframe(d)
    enc = encode(d, schema)
    assert (enc.cont < 0).any()  # missing numbers are there, below every present one
    plan = feature_plan(schema, order=1, rng=0, attacks=("distance", "density"))
    syns = [enc.take(g.integers(0, 400, n)) for n in (1, 65, 300)]
    targets = enc.take(np.r_[np.flatnonzero((enc.cont < 0).all(1))[:2], np.flatnonzero((enc.cont >= 0).all(1))[:2]])
    pd_, pt = np.repeat(np.arange(len(syns)), targets.n), np.tile(np.arange(targets.n), len(syns))
    got = pair_features(stack_pool(syns), targets, pd_, pt, schema, plan)
    for j in range(len(pd_)):
        ref = reference(syns[pd_[j]], targets.cat[pt[j]], targets.cont[pt[j]], schema, plan)
        np.testing.assert_allclose(got[j], ref, rtol=2e-6, atol=2e-6, err_msg=f"pair {j}")


def test_a_record_exactly_at_the_last_radius_is_counted_and_one_beyond_it_is_not():
    # the radius counts keep the records whose ceil(d 2F - 1e-9) is below n_radii: one whose d 2F - 1e-9 is exactly n_radii - 1
    # is inside the last radius, the first one above it is not (the kernel counts in place only the records before the last bin)
    import dataclasses
    import pandas as pd
    from achilles.shadow.pool_attack import StackedPool
    schema = Schema.from_dataframe(pd.DataFrame({"x": [0.0, 1.0]}))
    plan = feature_plan(schema, order=1, rng=0, attacks=("distance",))
    F, top = len(schema), plan.n_radii - 1
    d = (top + 1e-9) / (2 * F)
    while d * 2 * F - 1e-9 < top: d = np.nextafter(d, np.inf)
    while d * 2 * F - 1e-9 > top: d = np.nextafter(d, -np.inf)
    assert d * 2 * F - 1e-9 == top
    beyond = d
    while beyond * 2 * F - 1e-9 <= top: beyond = np.nextafter(beyond, np.inf)  # the first float past the last radius
    cont = np.array([[d, beyond, 0.0]])
    pool = StackedPool(np.zeros((0, 3), np.int32), cont, np.abs(cont[0]), np.array([0, 3]))
    targets = encode(pd.DataFrame({"x": [0.0]}), schema)
    targets = dataclasses.replace(targets, cont=np.zeros((1, 1)))
    X = pair_features(pool, targets, np.array([0]), np.array([0]), schema, plan)
    names = plan.names(schema)
    within = X[0, [names.index(f"within_{i / 2:g}/F") for i in range(plan.n_radii)]]
    np.testing.assert_array_equal(within, [1] * top + [2])  # the record at 0 from the first radius on; the one at d from the last


def test_auc_score_is_the_mann_whitney_statistic_with_ties_and_nans():
    "The numba rank sum against sklearn's AUC and against average ranks by numpy, on ties, bool labels and edge sizes; NaN scores rank last (numpy's sort); one class gives nan."
    from scipy.stats import rankdata
    from achilles.shadow.pool_attack import auc_score
    for k in range(300):
        g = np.random.default_rng(k)
        n = int(g.integers(2, 400))
        y = (g.random(n) < g.random()).astype(bool if k % 3 == 0 else np.int64)
        if y.all() or not y.any(): y[0] = not y[0]
        s = g.integers(0, int(g.integers(1, 6)), n).astype(float) if k % 2 else g.normal(size=n)  # many ties / none
        got = auc_score(y, s)
        assert got == pytest.approx(roc_auc_score(y, s), abs=1e-12)
        n1 = int(y.sum())
        assert got == (rankdata(s)[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * (n - n1))  # exact: the ranks are halves of integers
    s = np.array([0.2, np.nan, 0.1, 0.9]); y = np.array([0, 1, 0, 1])
    assert auc_score(y, s) == 1.0  # the NaN sorts above every number, as numpy's argsort puts it
    with np.errstate(invalid="ignore", divide="ignore"):
        assert math.isnan(auc_score(np.ones(4, int), np.arange(4.0)))


def test_the_screen_keeps_the_largest_t_of_the_live_features_within_its_bounds():
    "`_screened` against the screen written out in numpy: dead features dropped, a Bonferroni bar on the live ones, at least `least` and at most `most`, ties by position."
    from scipy.special import ndtri
    from achilles.shadow.pool_attack import _screened
    def ref(cols, live, t, least, most):
        cols = cols[live[cols]]
        if len(cols) <= least: return cols
        passed = int((t[cols] >= -ndtri(0.025 / len(cols))).sum())
        keep = min(max(passed, least), most)
        return np.sort(cols[np.argsort(-t[cols], kind="stable")[:keep]])
    for k in range(300):
        g = np.random.default_rng(k)
        p = int(g.integers(1, 400))
        cols = np.sort(g.choice(p, int(g.integers(0, p + 1)), replace=False))
        live = g.random(p) < g.random()
        t = np.abs(g.standard_t(3, p)) * g.choice([1.0, 4.0])
        if k % 2: t = np.round(t)  # ties at the cut
        least, most = int(g.integers(0, 20)), int(g.integers(1, 60))
        bar = -ndtri(0.025 / np.arange(1, p + 2))
        got = _screened(cols, live, t, bar, least, most)
        np.testing.assert_array_equal(got, ref(cols, live, t, least, most))
        assert got.dtype == cols.dtype
    t = np.array([5.0, 5.0, 5.0, 0.0]); live = np.array([True, True, True, True])
    np.testing.assert_array_equal(_screened(np.arange(4), live, t, -ndtri(0.025 / np.arange(1, 6)), 1, 2), [0, 1])  # a tie: the first ones
    bar = -ndtri(0.025 / np.arange(1, 14)); t = np.r_[np.full(3, bar[11]), np.zeros(9)]  # three exactly at the bar for 12 live features: they pass
    np.testing.assert_array_equal(_screened(np.arange(12), np.ones(12, bool), t, bar, 1, 12), [0, 1, 2])
    # exactly `least` live features: all of them, even above `most` (no screen runs below its floor)
    np.testing.assert_array_equal(_screened(np.arange(4), live, t, -ndtri(0.025 / np.arange(1, 6)), 4, 2), [0, 1, 2, 3])


def test_the_screens_shortcuts_give_the_sort_s_features():
    "`_screened`'s two shortcuts (the features at the bar, no order needed; a few kept by |t| alone, by insertion) against the stable sort, on columns in any order, ties, NaN and infinite |t|, and floors on both sides of the insertion's limit of 32."
    from achilles.shadow.pool_attack import _screened
    def ref(cols, live, t, bar, least, most):
        cols = cols[live[cols]]
        if len(cols) <= least: return cols
        passed = int((t[cols] >= bar[len(cols) - 1]).sum())
        keep = min(max(passed, least), most)
        return np.sort(cols[np.argsort(-t[cols], kind="stable")[:keep]])
    seen = set()
    for k in range(600):
        g = np.random.default_rng(10_000 + k)
        p = int(g.integers(1, 300))
        cols = g.permutation(p)[:int(g.integers(0, p + 1))]  # in any order (the pooled model's are sorted, a caller's need not be)
        live = g.random(p) < g.random()
        t = np.abs(g.standard_t(3, p)) * g.choice([1.0, 3.0])
        if k % 3 == 0: t = np.round(t)  # ties everywhere, at the bar too
        if k % 7 == 0: t[g.integers(0, p, 3)] = np.inf
        if k % 11 == 0: t[g.integers(0, p, 2)] = np.nan
        bar = np.sort(np.abs(g.normal(2.5, 1.0, p + 1)))
        least, most = int(g.integers(0, 45)), int(g.integers(0, 60))  # most = 0 too: nothing kept (the audit's `screen` is at least 1)
        got = _screened(cols, live, t, bar, least, most)
        want = ref(cols, live, t, bar, least, most)
        np.testing.assert_array_equal(got, want)
        m = int(live[cols].sum()); passed = int((t[cols[live[cols]]] >= bar[m - 1]).sum()) if m else 0
        keep = min(max(passed, least), most)
        seen.add("floor" if m <= least else "none" if keep == 0 else "bar" if keep == passed else "insertion" if keep <= 32 else "sort")
    assert seen == {"floor", "none", "bar", "insertion", "sort"}  # every path taken
    # the insertion keeps the earlier of two equal |t| and drops a later equal one once full, as the stable sort does
    t = np.array([1.0, 2.0, 2.0, 1.0, 2.0]); live = np.ones(5, bool); bar = np.full(6, 9.0)
    np.testing.assert_array_equal(_screened(np.array([4, 3, 2, 1, 0]), live, t, bar, 2, 3), [2, 4])
    np.testing.assert_array_equal(_screened(np.array([0, 1, 2, 3, 4]), live, t, bar, 2, 3), [1, 2])


def test_lda_on_features_without_variance_gives_no_direction():
    "Nothing varies (a zero covariance, trace 0): the weights are zero and the score is the prior log odds, not a singular solve."
    from achilles.shadow.pool_attack import lda_fit
    y = np.r_[np.ones(4, bool), np.zeros(6, bool)]
    w, b = lda_fit(np.ones((10, 3)), y)
    np.testing.assert_array_equal(w, 0.0)
    assert b == pytest.approx(math.log(4 / 6))


def test_fold_stats_equal_the_numpy_formulas_bit_for_bit():
    "`_fold_stats` (one numba pass) against its formulas in numpy, on every mix of blocks, zero-variance and all-zero features, and means far from zero."
    from achilles.shadow.pool_attack import _fold_stats
    def ref(S1, S2, N, odd, gm, train):
        c1, c0 = train & odd, train & ~odd
        n1, n0 = N[c1].sum(), N[c0].sum()
        mu1, mu0 = S1[c1].sum(0) / n1, S1[c0].sum(0) / n0
        v1, v0 = np.maximum(S2[c1].sum(0) / n1 - mu1 ** 2, 0.0), np.maximum(S2[c0].sum(0) / n0 - mu0 ** 2, 0.0)
        mu = (n1 * mu1 + n0 * mu0) / (n1 + n0)
        var = np.maximum((S2[c1].sum(0) + S2[c0].sum(0)) / (n1 + n0) - mu ** 2, 0.0)
        live = var > 1e-12 * np.maximum(1.0, (mu + gm) ** 2)
        return n1, n0, mu, var, live, np.abs(mu1 - mu0) / np.sqrt(v1 / n1 + v0 / n0 + 1e-300)
    dead = 0
    for k in range(400):
        g = np.random.default_rng(k)
        B, p = 2 * int(g.integers(2, 8)), int(g.integers(1, 300))
        N = g.integers(1, 200, B).astype(float)
        S1 = (g.normal(size=(B, p)) * N[:, None] * 0.1 + g.normal(size=p) * g.choice([1e-8, 1.0, 1e4])).astype(np.float32).astype(np.float64)
        S2 = np.abs(g.normal(size=(B, p))) * N[:, None] + S1 ** 2 / N[:, None]
        if k % 5 == 0: S2[:, : p // 3] = S1[:, : p // 3] ** 2 / N[:, None]  # no variance left (up to rounding)
        if k % 7 == 0: S1[:, 0] = 0.0; S2[:, 0] = 0.0
        if k % 11 == 0: S1[:, -1] = -0.0; S2[:, -1] = -0.0  # signed zeros: numpy's sums start from +0.0
        odd = np.arange(B) % 2 == 1
        gm = g.normal(size=p) * g.choice([0.0, 1.0, 1e6])
        train = g.random(B) < 0.8; train[:2] = True
        want, got = ref(S1, S2, N, odd, gm, train), _fold_stats(S1, S2, N, odd, gm, train)
        assert want[:2] == got[:2]
        for a, b in zip(want[2:], got[2:]):
            np.testing.assert_array_equal(a, b); np.testing.assert_array_equal(np.signbit(a), np.signbit(b))  # bit for bit, zeros' signs too
        dead += int((~got[4]).sum())
    assert dead > 100  # the cases reach features the screen calls dead
    odd, two = np.array([False, True]), np.ones(2, bool)
    # the edges, each against numpy: a variance below zero by rounding (0.1 squared exceeds 0.01), variances exactly at the bar
    # (1e-12 of max(1, squared mean)) and between the floor and a squared mean of 1.5, and a negative count (-0.0 differences)
    S1 = np.array([[0.1, 0.0, 0.0, 0.0, 0.0], [0.1, 0.0, 0.0, 0.0, 0.0]]); S2 = np.array([[0.01, 1e-12, 1.5e-12, 1.2e-12, 0.0]] * 2)
    gm = np.array([0.0, 0.0, 0.0, math.sqrt(1.5), 0.0])
    for N in (np.ones(2), np.array([-1.0, -1.0])):
        want, got = ref(S1, S2, N, odd, gm, two), _fold_stats(S1, S2, N, odd, gm, two)
        for a, b in zip(want[2:], got[2:]):
            np.testing.assert_array_equal(a, b); np.testing.assert_array_equal(np.signbit(a), np.signbit(b))
    assert got[3][0] == 0.0 and ref(S1, S2, np.ones(2), odd, gm, two)[4].tolist() == [False, False, True, False, False]


def test_the_screen_bar_is_the_bonferroni_corrected_two_sided_normal_quantile():
    "`screen_bar(p)[m - 1]`: the |t| a feature needs among m live ones, the normal quantile of 1 - 0.025 / m (scipy.stats, independently)."
    from scipy.stats import norm
    from achilles.shadow.pool_attack import screen_bar
    bar = screen_bar(999)
    assert bar.shape == (1000,)
    np.testing.assert_allclose(bar, norm.isf(0.025 / np.arange(1, 1001)), rtol=1e-12)
    assert bar[0] == pytest.approx(1.959964, abs=1e-6) and (np.diff(bar) > 0).all()


def test_exp_neg_is_within_one_ulp_of_numpys_exp_and_exact_at_its_ends():
    from achilles.shadow.pool_attack import exp_neg
    g = np.random.default_rng(11)
    x = np.concatenate([-g.random(2_000_000) * 40, -g.random(1_000_000) * 707.99, -g.random(10_000) * 1e-12,
                        -np.exp(g.uniform(-700, 6.5, 10_000)), [-0.5 * math.log(2), -1.5 * math.log(2), -707.99]])  # r at its bound
    got, want = exp_neg(x), np.exp(x)
    ulps = np.abs(got.view(np.int64) - want.view(np.int64))
    assert ulps.max() <= 1, (ulps.max(), x[ulps.argmax()])
    assert (ulps == 0).mean() > 0.8  # mostly libm's very bits
    assert exp_neg(np.array([0.0, -0.0])).tolist() == [1.0, 1.0]
    assert exp_neg(np.array([-708.0, -708.5, -745.2, -1e300, -np.inf])).tolist() == [0.0] * 5  # below -708: 0 (libm: < 3.4e-308)
    assert exp_neg(np.zeros(0)).shape == (0,)


def test_pairs_in_any_order_give_the_same_rows_bit_for_bit(adult):
    # the kernel visits pairs sorted by dataset; each pair writes its own row, so any order of the same pairs gives the same rows
    df, schema = adult
    enc = encode(df, schema)
    plan = feature_plan(schema, order=2, rng=0, attacks=("query", "exact", "copy", "distance", "density"))
    g = np.random.default_rng(12)
    syns = [enc.take(g.integers(0, len(df), n)) for n in (5, 64, 300, 129)]
    pool, targets = stack_pool(syns), enc.take([0, 4, 4, 31_000, 17])
    pd_, pt = np.repeat(np.arange(len(syns)), targets.n), np.tile(np.arange(targets.n), len(syns))
    base = pair_features(pool, targets, pd_, pt, schema, plan, n_jobs=1)
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(len(pd_))
        for jobs in (1, 2):
            np.testing.assert_array_equal(pair_features(pool, targets, pd_[perm], pt[perm], schema, plan, n_jobs=jobs), base[perm])


def test_a_query_over_an_empty_bitset_counts_zero_wherever_the_empty_row_sits(adult):
    # the kernel answers a subset holding an all-zero row at once: as its last row (an exact value no synthetic record has) or in
    # its prefix; every count must still equal the definition's
    df, schema = adult
    enc = encode(df, schema)
    plan = feature_plan(schema, order=3, rng=0, attacks=("query", "exact"))
    g = np.random.default_rng(13)
    syn = enc.take(g.integers(0, 2_000, 150))
    t = enc.take([40_000, int(g.integers(0, 2_000))])  # one outside the synthetic rows' source, one inside it
    t.cont[0, 0] = 0.123456789  # an age no synthetic record has: its `==` row is empty
    got = pair_features(stack_pool([syn]), t, np.array([0, 0]), np.array([0, 1]), schema, plan, n_jobs=1)
    for j in range(2):
        want = reference(syn, t.cat[j], t.cont[j], schema, plan)
        np.testing.assert_array_equal(got[j, :plan.n_query + plan.n_exact], want[:plan.n_query + plan.n_exact])
    assert (got[0, :plan.n_query + plan.n_exact] == 0).any() and (got[1, :plan.n_query + plan.n_exact] > 0).any()


def _exp_neg_python(x: float) -> float:
    "`_exp_neg` in plain Python (IEEE double arithmetic, the bit casts by `struct`): its definition, operation for operation."
    import struct
    f2i = lambda v: struct.unpack("<q", struct.pack("<d", v))[0]
    i2f = lambda v: struct.unpack("<d", struct.pack("<q", v))[0]
    shift = 6755399441055744.0  # 1.5 * 2**52
    xc = x if x > -708.0 else -708.0
    y = xc * 1.4426950408889634 + shift
    k = y - shift
    r = (xc - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10
    c = [1.0 / math.factorial(j) for j in range(14)]
    p = c[13] * r + c[12]
    for j in range(11, -1, -1): p = p * r + c[j]
    return p * i2f(((f2i(y) - f2i(shift)) + 1023) << 52) if x > -708.0 else 0.0


def test_exp_neg_is_its_plain_python_definition_bit_for_bit():
    # the same bits on every machine is the point of our own exp: its kernel must be exactly this arithmetic, ties included
    # (x log2(e) exactly halfway between two integers rounds to the even one, and the other reduction gives another last bit)
    from achilles.shadow.pool_attack import exp_neg
    L2E = 1.4426950408889634
    ties = [v for t in np.arange(-1021, 0) + 0.5 for v in np.nextafter(t / L2E, [-np.inf, 0.0, np.inf]).tolist() + [t / L2E]
            if v * L2E == t and -708.0 < v <= 0.0]
    assert len(ties) > 500
    g = np.random.default_rng(14)
    x = np.concatenate([ties, -g.random(3000) * 708.5, -g.random(500) * 1e-3, [0.0, -0.0, -708.0, -707.9999999999999, -1e-320]])
    got = exp_neg(x)
    want = np.array([_exp_neg_python(float(v)) for v in x])
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


def test_eq5_follows_the_zero_vector_convention_for_the_target_and_for_a_synthetic_record(adult):
    # a record whose numbers are all at their columns' minimum has a zero vector: two zero vectors are at cosine 1, a zero and a
    # non-zero one at cosine 0 (`achilles.distance`'s convention); with categorical mismatches Eq. 5 then differs from Gower's
    df, _ = adult
    d = df[["age", "hours-per-week", "sex", "race", "workclass"]]
    schema = Schema.from_dataframe(d)
    plan = feature_plan(schema, order=1, rng=0, attacks=("distance",))
    enc = encode(d, schema)
    syn = enc.take(np.arange(40))
    syn.cont[:6] = 0.0  # six zero vectors, with whatever categories they have
    syn.cat[:3] = (enc.cat[100] + 1) % 2  # three of them mismatch the target on every categorical column they can
    targets = enc.take([100, 100])
    targets.cont[0] = 0.0  # a zero target (cosine 1 to the six, 0 to the rest) and the record as it is (cosine 0 to the six)
    got = pair_features(stack_pool([syn]), targets, np.array([0, 0]), np.array([0, 1]), schema, plan, n_jobs=1)
    for j in range(2):
        np.testing.assert_allclose(got[j], reference(syn, targets.cat[j], targets.cont[j], schema, plan), rtol=2e-6, atol=2e-6)
    lo = plan.families()["distance"][0] + plan.k_gower
    assert got[0, lo] != got[1, lo]  # the Eq. 5 nearest distance tells the two conventions apart
