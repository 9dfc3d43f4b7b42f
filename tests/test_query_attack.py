"""Counting-query kernels against brute force, and oracle, determinism and input checks for the query-based attack."""
import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression

from achilles.core.data import Column, Encoded, Schema, encode
from achilles.core.results import RiskResult, plot_roc, tpr_at_fpr
from achilles.core.base import MembershipAttack
from achilles.shadow.query_attack import QueryAttack
from achilles.queries import match_masks, query_features, query_features_batch, sample_subsets, subset_columns


# --- random tables with many ties -----------------------------------------------------------------------------
def random_table(n, kinds, rng, card=3, cont_levels=4):
    "A DataFrame with small categorical domains and integer-valued continuous columns (so ties are common)."
    cols = {}
    for j, k in enumerate(kinds):
        if k == "c": cols[f"a{j}"] = pd.Categorical(rng.choice([f"v{i}" for i in range(card)], n),
                                                     categories=[f"v{i}" for i in range(card)])
        else: cols[f"a{j}"] = rng.integers(0, cont_levels, n).astype(np.int64)
    return pd.DataFrame(cols)


def schema_for(kinds, card=3, cont_levels=4):
    cols = [Column(f"a{j}", "categorical", tuple(f"v{i}" for i in range(card))) if k == "c"
            else Column(f"a{j}", "continuous", lower=0.0, upper=float(cont_levels - 1), integer=True)
            for j, k in enumerate(kinds)]
    return Schema(tuple(cols))


def brute_force(df, target, schema, masks):
    "Q^A by a pandas filter per mask: == on categorical, <= on continuous, on the raw values."
    t = target.iloc[0]
    out = []
    for m in masks:
        ok = pd.Series(True, index=df.index)
        for c in subset_columns(int(m), schema):
            ok &= (df[c] == t[c]) if schema[c].is_categorical else (df[c] <= t[c])
        out.append(int(ok.sum()))
    return np.array(out, dtype=np.int64)


KINDS = ["c", "k", "ck", "kc", "cck", "ckkc", "ccckkc", "ckckckck"]


@pytest.mark.parametrize("kinds", KINDS)
@pytest.mark.parametrize("n", [0, 1, 2, 37, 200])
def test_all_subsets_equal_brute_force(kinds, n):
    rng = np.random.default_rng(hash((kinds, n)) % 2**32)
    schema = schema_for(kinds)
    df = random_table(n, kinds, rng)
    df = pd.concat([df, df.iloc[: n // 3]], ignore_index=True)  # exact duplicates
    pool = random_table(5, kinds, rng)
    for target in ([df.iloc[[0]]] if len(df) else []) + [pool.iloc[[1]]]:  # target in the data, and not
        masks = np.arange(2 ** len(kinds))
        expected = brute_force(df, target, schema, masks)
        np.testing.assert_array_equal(query_features(df, target, schema), expected)
        for method in ("zeta", "direct", "auto"):
            np.testing.assert_array_equal(query_features(df, target, schema, subsets=masks[::-1], method=method),
                                          expected[::-1])
        enc, tenc = encode(df, schema), encode(target, schema)
        np.testing.assert_array_equal(query_features(enc, tenc, schema), expected)
        assert query_features(df, target, schema)[0] == len(df)


def numpy_zeta(masks, F):
    "The plain numpy reference: a histogram of the match masks, then one superset-sum pass per bit."
    h = np.bincount(masks, minlength=1 << F).astype(np.int64)
    for j in range(F):
        v = h.reshape(-1, 2, 1 << j)
        v[:, 0, :] += v[:, 1, :]
    return h


@pytest.mark.parametrize("F", list(range(1, 19)))
def test_blocked_zeta_equals_numpy_reference(F):
    "Both kernel paths (plain below F = 10 or with many records, blocked above) against numpy, with ties and edge sizes."
    from achilles.queries import _all_counts
    rng = np.random.default_rng(F)
    full = (1 << F) - 1
    for n in (0, 1, 2, 63, 64, 65, 1000, 5000):
        for kind in ("random", "ties", "all", "none"):
            m = rng.integers(0, 1 << F, n).astype(np.int64)
            if kind == "ties": m = rng.choice(m[:3] if n >= 3 else m, n) if n else m  # three distinct masks, repeated
            if kind == "all": m[:] = full  # every record equals the target (the identity generator)
            if kind == "none": m[:] = 0
            np.testing.assert_array_equal(_all_counts(m, F), numpy_zeta(m, F), err_msg=f"F={F} n={n} {kind}")


def test_continuous_ties_at_target_value_count():
    schema = schema_for("k", cont_levels=10)
    df = pd.DataFrame({"a0": np.array([3, 3, 3, 2, 4, 9, 0], dtype=np.int64)})
    q = query_features(df, df.iloc[[0]], schema)
    np.testing.assert_array_equal(q, [7, 5])  # 3, 3, 3, 2, 0 are <= 3


def test_out_of_range_and_unseen_values_keep_their_meaning():
    schema = schema_for("ck", cont_levels=4)  # continuous range [0, 3]
    synth = pd.DataFrame({"a0": ["v0", "new", "v0", "v1"], "a1": np.array([3, 0, 7, -5], dtype=np.int64)})
    target = pd.DataFrame({"a0": ["v0"], "a1": np.array([3], dtype=np.int64)})
    # 7 > 3 must not count as a tie (no clipping), -5 <= 3 counts, "new" matches nothing
    np.testing.assert_array_equal(query_features(synth, target, schema), [4, 2, 3, 1])
    np.testing.assert_array_equal(match_masks(synth, target, schema), [3, 2, 1, 2])


def test_batch_equals_single_for_threads_dtypes_and_sizes():
    rng = np.random.default_rng(7)
    kinds = "cckkc"
    schema = schema_for(kinds)
    sets = [random_table(int(n), kinds, rng) for n in [0, 1, 5, 100, 300, 2, 64]]
    target = random_table(1, kinds, rng)
    expected = np.stack([query_features(s, target, schema) for s in sets])
    encs = [encode(s, schema) for s in sets]
    for n_jobs in (1, 2, -1, None):
        np.testing.assert_array_equal(query_features_batch(encs, encode(target, schema), schema=schema, n_jobs=n_jobs),
                                      expected)
    sub = sample_subsets(len(kinds), 10, rng=1)
    for method in ("zeta", "direct"):
        got = query_features_batch(sets, target, sub, schema=schema, dtype=np.float32, method=method, chunk=3)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got, expected[:, sub])


def test_wide_table_falls_back_to_direct_counting():
    rng = np.random.default_rng(3)
    kinds = "ck" * 15  # F = 30: no 2^F table
    schema = schema_for(kinds, card=2, cont_levels=3)
    df = random_table(300, kinds, rng, card=2, cont_levels=3)
    target = df.iloc[[5]]
    masks = np.concatenate([[0, 2**30 - 1], sample_subsets(30, 40, rng=0)])
    np.testing.assert_array_equal(query_features(df, target, schema, subsets=masks), brute_force(df, target, schema, masks))
    with pytest.raises(ValueError, match="max_zeta_features"):
        query_features(df, target, schema)
    with pytest.raises(ValueError, match="subsets=N"):
        QueryAttack(target, schema).fit([df, df], [0, 1])


def test_sample_subsets():
    a = sample_subsets(17, 100_000, rng=0)
    assert len(a) == 100_000 and len(np.unique(a)) == 100_000 and a.min() >= 1 and a.max() < 2**17
    np.testing.assert_array_equal(a, sample_subsets(17, 100_000, rng=0))
    assert not np.array_equal(a, sample_subsets(17, 100_000, rng=1))
    np.testing.assert_array_equal(sample_subsets(4, 10**6), np.arange(1, 16))
    b = sample_subsets(50, 1000, rng=2)
    assert len(np.unique(b)) == 1000 and b.min() >= 1 and b.max() < 2**50


# --- the attack -----------------------------------------------------------------------------------------------
def game(kinds, m, n, rng, with_target=True, target=None):
    "Datasets of n random rows; IN ones have the target (a value no random row has) as their last row."
    rng = np.random.default_rng(rng)
    schema = schema_for(kinds, card=4, cont_levels=6)
    if target is None:
        target = random_table(1, kinds, np.random.default_rng(99), card=4, cont_levels=6)
        target["a0"] = pd.Categorical(["v3"], categories=[f"v{i}" for i in range(4)])  # random rows only use v0..v2
    labels = np.tile([1, 0], m // 2)
    sets = []
    for y in labels:
        d = random_table(n, kinds, rng, card=3, cont_levels=6)
        if y and with_target: d = pd.concat([d.iloc[:-1], target], ignore_index=True)
        d["a0"] = pd.Categorical(d["a0"].astype(str), categories=[f"v{i}" for i in range(4)])
        sets.append(d)
    return sets, labels, target, schema


def test_oracle_target_copied_gives_auc_one():
    tr, ytr, target, schema = game("cckkck", 60, 100, 0)
    te, yte, _, _ = game("cckkck", 60, 100, 1)
    te = [encode(d, schema) for d in te]  # Encoded and DataFrames both work
    res = QueryAttack(target, schema, rng=0, classifier=RandomForestClassifier(n_estimators=25, max_depth=10)).fit(
        tr, ytr).score(te, yte)
    assert res.auc == 1.0 and res.accuracy == 1.0 and res.tpr_at_low_fpr == 1.0


def test_labels_independent_of_data_give_auc_near_half():
    tr, ytr, target, schema = game("cckkck", 100, 100, 2, with_target=False)
    te, yte, _, _ = game("cckkck", 200, 100, 3, with_target=False)
    res = QueryAttack(target, schema, rng=0, classifier=RandomForestClassifier(n_estimators=25, max_depth=10)).fit(
        tr, ytr).score(te, yte)
    assert abs(res.auc - 0.5) < 0.15, res


def test_determinism_and_thread_independence():
    tr, ytr, target, schema = game("ckkck", 40, 80, 4)
    te, _, _, _ = game("ckkck", 20, 80, 5)
    p = [QueryAttack(target, schema, subsets=12, rng=11, n_jobs=j).fit(tr, ytr).predict_proba(te) for j in (1, 1, 2)]
    np.testing.assert_array_equal(p[0], p[1])
    np.testing.assert_array_equal(p[0], p[2])
    a, b = QueryAttack(target, schema, subsets=12, rng=11).fit(tr, ytr), QueryAttack(target, schema, subsets=12, rng=12).fit(tr, ytr)
    assert len(a.subsets_) == 12 and not np.array_equal(a.subsets_, b.subsets_)
    g1, g2 = np.random.default_rng(5), np.random.default_rng(5)
    np.testing.assert_array_equal(QueryAttack(target, schema, rng=g1).fit(tr, ytr).predict_proba(te),
                                  QueryAttack(target, schema, rng=g2).fit(tr, ytr).predict_proba(te))


def test_constant_columns_dropped_and_kept():
    tr, ytr, target, schema = game("ckk", 20, 50, 6)
    a = QueryAttack(target, schema, rng=0).fit(tr, ytr)
    X = a.extract_features([encode(d, schema) for d in tr])
    np.testing.assert_array_equal(a.keep_, np.flatnonzero(X.min(0) != X.max(0)))
    np.testing.assert_array_equal(a.features_, a.subsets_[a.keep_])
    assert 0 not in a.features_  # the empty query is the dataset size: constant
    b = QueryAttack(target, schema, rng=0, drop_constant=False).fit(tr, ytr)
    assert len(b.keep_) == 2**3
    # every dataset identical: all columns constant, the attack still fits and predicts (about) the base rate
    same = [tr[0]] * 6
    p = QueryAttack(target, schema, rng=0).fit(same, [1, 0] * 3).predict_proba(same)
    assert np.all(p == p[0]) and abs(p[0] - 0.5) < 0.1  # the bootstrap base rate, the same for every dataset


def test_any_sklearn_classifier_is_cloned():
    tr, ytr, target, schema = game("cckk", 40, 60, 7)
    lr = LogisticRegression(max_iter=2000)
    att = QueryAttack(target, schema, classifier=lr).fit(tr, ytr)
    assert not hasattr(lr, "coef_") and hasattr(att.classifier_, "coef_")
    assert att.score(tr, ytr).auc > 0.9
    rf = RandomForestClassifier(n_estimators=5)
    att = QueryAttack(target, schema, classifier=rf, rng=3).fit(tr, ytr)
    assert rf.random_state is None and att.classifier_.random_state is not None


def test_feature_extractor_hook():
    class SizeOnly(QueryAttack):
        def extract_features(self, datasets):
            return np.array([[d.n, d.n % 2] for d in datasets], dtype=np.float32)
    tr, ytr, target, schema = game("ck", 10, 20, 8)
    tr = [d.iloc[: 10 + y] for d, y in zip(tr, ytr)]  # IN datasets are one record longer
    att = SizeOnly(target, schema, rng=0).fit(tr, ytr)
    assert att.score(tr, ytr).auc == 1.0 and att.features_ is None


def test_bad_inputs_raise_clear_errors():
    tr, ytr, target, schema = game("ckc", 10, 20, 9)
    att = QueryAttack(target, schema, rng=0)
    with pytest.raises(NotFittedError, match="not fitted"): att.predict_proba(tr)
    with pytest.raises(ValueError, match="both IN"): att.fit(tr, np.ones(10, int))
    with pytest.raises(ValueError, match="0 \\(OUT\\) or 1 \\(IN\\)"): att.fit(tr, np.arange(10))
    with pytest.raises(ValueError, match="9 entries but there are 10"): att.fit(tr, ytr[:9])
    with pytest.raises(ValueError, match="empty"): att.fit([], [])
    with pytest.raises(TypeError, match="list of Encoded"): att.fit(tr[0], ytr)
    with pytest.raises(TypeError, match="datasets\\[1\\]"): att.fit([tr[0], tr[1].to_numpy()] + tr[2:], ytr)
    bad = Encoded(np.zeros((5, 1), np.int32), np.zeros((5, 1)))
    with pytest.raises(ValueError, match="datasets\\[0\\] is an Encoded"): att.fit([bad] + tr[1:], ytr)
    with pytest.raises(ValueError, match="one record"): QueryAttack(tr[0], schema).fit(tr, ytr)
    with pytest.raises(TypeError, match="schema must be"): QueryAttack(target, "schema").fit(tr, ytr)
    with pytest.raises(ValueError, match="mask 8"): QueryAttack(target, schema, subsets=[1, 8]).fit(tr, ytr)
    with pytest.raises(ValueError, match="n=0"): QueryAttack(target, schema, subsets=0).fit(tr, ytr)
    with pytest.raises(TypeError, match="predict_proba"): QueryAttack(target, schema, classifier=object()).fit(tr, ytr)
    with pytest.raises(ValueError, match="n_jobs=0"): QueryAttack(target, schema, n_jobs=0).fit(tr, ytr)
    with pytest.raises(ValueError, match="not in the schema's domain"):
        QueryAttack(target.assign(a0=["zzz"]), schema).fit(tr, ytr)
    att.fit(tr, ytr)
    with pytest.raises(ValueError, match="both IN"): att.score(tr[:2], [1, 1])
    with pytest.raises(NotImplementedError, match="_fit"): MembershipAttack(target, schema).fit(tr, ytr)


def test_attack_result_matches_an_independent_roc():
    rng = np.random.default_rng(0)
    y = np.tile([1, 0], 200)
    s = rng.random(400) + 0.3 * y
    r = RiskResult.from_scores(s, y)
    # AUC as the probability that an IN score beats an OUT score (ties count one half)
    d = s[y == 1][:, None] - s[y == 0][None, :]
    assert np.isclose(r.auc, (d > 0).mean() + 0.5 * (d == 0).mean())
    assert np.isclose(r.accuracy, np.mean((s > 0.5) == (y == 1)))
    # TPR at 1% FPR: with 200 OUT scores, 1% FPR is exactly 2 false positives (a ROC point, no interpolation needed)
    thr = np.sort(s[y == 0])[::-1][2]  # the third highest OUT score: above it, exactly 2 OUT
    assert np.isclose(r.tpr_at_low_fpr, np.mean(s[y == 1] > thr))
    assert {"auc", "accuracy", "tpr_at_low_fpr", "fpr_level", "n_datasets", "n_in"} <= set(r.to_row())
    assert all(isinstance(v, (int, float, str)) for v in r.to_row().values())
    fpr, tpr, _ = r.roc_curve()
    assert tpr_at_fpr(fpr, tpr, 1.0) == 1.0 and tpr_at_fpr(fpr, tpr, 0.0) == tpr[fpr == 0].max()
    ax = plot_roc([r, r])
    assert len(ax.get_lines()) == 3


# --- edges the mutation run found untested (tests/MUTATION.md) ---------------------------------------------------------------

def test_all_subsets_up_to_the_zeta_limit_and_a_clear_error_above():
    from achilles.queries import ZETA_MAX_FEATURES
    for F, ok in ((ZETA_MAX_FEATURES, True), (ZETA_MAX_FEATURES + 1, False)):
        schema = schema_for("c" * F)
        target = random_table(1, "c" * F, np.random.default_rng(0))
        att = QueryAttack(target, schema)
        if ok: assert len(att._resolve_subsets(np.random.default_rng(0))) == 2**F
        else:
            with pytest.raises(ValueError, match=f"all 2\\*\\*{F} subsets"): att._resolve_subsets(np.random.default_rng(0))


def test_the_default_classifier_is_the_papers_forest():
    "The paper's attack (Sec. 4): a random forest of 100 trees of depth at most 10."
    tr, ytr, target, schema = game("ck", 10, 20, 8)
    clf = QueryAttack(target, schema, rng=0)._make_classifier(np.random.default_rng(0))
    assert isinstance(clf, RandomForestClassifier) and clf.n_estimators == 100 and clf.max_depth == 10


def test_a_classifier_needs_fit_and_predict_proba_and_keeps_its_own_seed():
    from sklearn.neighbors import KNeighborsClassifier
    tr, ytr, target, schema = game("cckk", 40, 60, 7)
    class FitOnly:
        def fit(self, X, y): return self
    with pytest.raises(TypeError, match="needs fit and predict_proba"):
        QueryAttack(target, schema, classifier=FitOnly()).fit(tr, ytr)
    att = QueryAttack(target, schema, classifier=RandomForestClassifier(n_estimators=5, random_state=123), rng=3).fit(tr, ytr)
    assert att.classifier_.random_state == 123  # a seed the user chose is kept
    att = QueryAttack(target, schema, classifier=KNeighborsClassifier(3), rng=3).fit(tr, ytr)  # no random_state at all
    assert att.score(tr, ytr).auc > 0.5


def test_all_constant_features_keep_the_first_query():
    tr, ytr, target, schema = game("ckk", 20, 50, 6)
    a = QueryAttack(target, schema, rng=0).fit([tr[0]] * 6, [1, 0] * 3)
    np.testing.assert_array_equal(a.keep_, [0])
    np.testing.assert_array_equal(a.features_, a.subsets_[[0]])
