"""The neighbour engine against plain numpy / scikit-learn references on data with ties, duplicates, missing values and
edge sizes; agreement with `achilles.distance` (cosine, Minkowski, V_k); determinism across thread counts; bad input."""
import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Column, Schema, load_adult
from achilles.distance import knn, vulnerability_scores
from achilles.neighbours import NeighbourData, count_matches, count_within, nearest

ENGINE_METRICS = ["gower", "hamming", "euclidean", "sphere", "cosine", "minkowski1", "minkowski2", "minkowski3", "minkowski4"]
MISSING_METRICS = ["gower", "hamming"]


# ---------------------------------------------------------------- references (no achilles kernel code) ------
def embed(df: pd.DataFrame, schema: Schema, cols):
    "Codes (float, NaN = missing) of the categorical columns and scaled values of the continuous ones, built with pandas."
    cat = np.stack([pd.Categorical(df[c], categories=list(schema[c].categories)).codes.astype(float)
                    for c in cols if schema[c].is_categorical], 1) if any(schema[c].is_categorical for c in cols) else np.zeros((len(df), 0))
    cat[cat < 0] = np.nan
    cont = np.stack([(df[c].to_numpy(float) - schema[c].lower) / ((schema[c].upper - schema[c].lower) or 1.0)
                     for c in cols if not schema[c].is_categorical], 1) if any(not schema[c].is_categorical for c in cols) else np.zeros((len(df), 0))
    return cat, cont


def ref_distances(A: pd.DataFrame, B: pd.DataFrame, schema: Schema, metric: str, cols=None) -> np.ndarray:
    "The full distance matrix, from the formulas in the notebook (O(n_a n_b F) memory)."
    cols = cols or schema.names
    ca, xa = embed(A, schema, cols); cb, xb = embed(B, schema, cols)
    C, D = ca.shape[1], xa.shape[1]; F = C + D
    neq = ca[:, None, :] != cb[None, :, :]  # NaN != anything: a missing code mismatches everything
    mis = neq.sum(-1).astype(float)
    diff = xa[:, None, :] - xb[None, :, :]
    if metric == "gower":
        return (mis + np.where(np.isnan(diff), 1.0, np.abs(diff)).sum(-1)) / F
    if metric == "hamming":
        return (mis + (xa[:, None, :] != xb[None, :, :]).sum(-1)) / F
    if metric == "euclidean":
        return np.sqrt(2 * mis + (diff ** 2).sum(-1))
    if metric == "sphere":
        return np.where(mis > 0, np.inf, np.sqrt((diff ** 2).sum(-1)))
    if metric == "cosine":
        na, nb = np.linalg.norm(xa, axis=1), np.linalg.norm(xb, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = (xa @ xb.T) / np.outer(na, nb)
        s[(na == 0)[:, None] | (nb == 0)[None, :]] = 0.0
        s[(na == 0)[:, None] & (nb == 0)[None, :]] = 1.0
        return np.clip((F - (C - mis) - D * np.minimum(s, 1.0)) / F, 0, 1)
    p = int(metric[-1])
    return C / F * (2 * mis) ** (1 / p) + D / F * (np.abs(diff) ** p).sum(-1) ** (1 / p)


def ref_nearest(Dm: np.ndarray, k: int, exclude_self: bool):
    "k smallest per row, ties by the lower index (distances rounded to 9 decimals to decide ties)."
    j = np.broadcast_to(np.arange(Dm.shape[1]), Dm.shape)
    me = (j == np.arange(Dm.shape[0])[:, None]) if exclude_self else np.zeros(Dm.shape, bool)  # the row itself goes last
    order = np.lexsort((j, np.round(Dm, 9), me), axis=1)[:, :k]
    return np.take_along_axis(Dm, order, 1), order


def check_nearest(dist, idx, Dm, k, exclude_self, exact_ties=True):
    "Distances as the reference's k smallest; rows sorted by (distance, index); with exact ties, the reference's indices."
    want_d, want_i = ref_nearest(Dm, k, exclude_self)
    assert dist.shape == (Dm.shape[0], k) and idx.dtype == np.int64 and dist.dtype == np.float64
    np.testing.assert_allclose(dist, want_d, atol=1e-12, rtol=0)
    np.testing.assert_allclose(np.take_along_axis(Dm, idx, 1), dist, atol=1e-12, rtol=0)  # real neighbours
    if exclude_self: assert not (idx == np.arange(Dm.shape[0])[:, None]).any()
    assert (dist[:, 1:] >= dist[:, :-1]).all()
    assert (idx[:, 1:] > idx[:, :-1])[dist[:, 1:] == dist[:, :-1]].all()  # equal distances (inf too): increasing index
    if exact_ties: np.testing.assert_array_equal(idx, want_i)  # the lower index wins a tie


def random_frame(rng, n, cards=(3, 2, 5), n_cont=2, levels=5, missing=0.0, dup=True):
    """Mixed data with many ties: codes from small domains, numbers on a small grid (ranges fixed to [0, 10], so that with
    levels=5 every scaled value is a multiple of 1/4 and equal sums are exactly equal); exact duplicates; missing values."""
    d = {f"c{i}": pd.Categorical(rng.choice([f"v{v}" for v in range(c)], n), categories=[f"v{v}" for v in range(c)])
         for i, c in enumerate(cards)}
    d.update({f"x{i}": rng.integers(0, levels, n) * (10.0 / (levels - 1)) for i in range(n_cont)})
    df = pd.DataFrame(d)
    if dup and n > 4: df.iloc[-2:] = df.iloc[:2].to_numpy()
    schema = Schema(tuple(c if c.is_categorical else Column(c.name, c.kind, lower=0.0, upper=10.0)
                          for c in Schema.from_dataframe(df).columns))
    if missing:
        df = df.astype({c: object for c in df.columns if c.startswith("c")})
        for c in df.columns:
            df.loc[rng.random(n) < missing, c] = None if c.startswith("c") else np.nan
        df = df.astype({c: float for c in df.columns if c.startswith("x")})
    return df, schema


SHAPES = [  # (n, cards, n_cont)
    (40, (3, 2, 5), 2),
    (37, (4,), 0),  # one column, categorical only
    (33, (), 1),  # one column, continuous only
    (50, (2, 2, 3, 2), 0),  # only categorical, heavy duplicates
    (45, (), 3),  # only continuous
    (1, (3, 2), 2),  # a single row
    (1500, (3, 7, 2), 3),  # many profiles, several rounds of mismatch levels
    (300, (4,) * 12, 1),  # twelve categorical columns: levels 0..12, every round of the level search
    (400, (2,), 2),  # two profiles of ~200 rows: queries of one profile split into several work items
]


@pytest.mark.parametrize("metric", ENGINE_METRICS)
@pytest.mark.parametrize("shape", SHAPES)
def test_nearest_matches_reference(metric, shape):
    n, cards, n_cont = shape
    rng = np.random.default_rng(n + 3 * len(cards) + n_cont)
    df, schema = random_frame(rng, n, cards, n_cont)
    qs = random_frame(rng, 23, cards, n_cont, dup=False)[0]
    nd = NeighbourData.from_frame(df, schema)
    for Q, excl in ((df, True), (qs, False)):
        Dm = ref_distances(Q, df, schema, metric)
        kmax = n - 1 if excl else n
        for k in sorted({1, 3, kmax} & set(range(1, kmax + 1))):
            dist, idx = nearest(Q if Q is qs else nd, nd, k=k, metric=metric, exclude_self=excl)
            # cosine and Minkowski: mathematically equal distances may differ in the last bit (roots, parallel vectors),
            # so the reference cannot tell ties; the other metrics sum exact multiples of 1/16 on this grid
            check_nearest(dist, idx, Dm, k, excl, exact_ties=metric in ("gower", "hamming", "euclidean", "sphere"))


@pytest.mark.parametrize("metric", MISSING_METRICS)
def test_missing_values(metric):
    rng = np.random.default_rng(1)
    df, schema = random_frame(rng, 120, (3, 4), 2, missing=0.15)
    Dm = ref_distances(df, df, schema, metric)
    dist, idx = nearest(df, df, k=4, metric=metric, schema=schema, exclude_self=True)
    check_nearest(dist, idx, Dm, 4, True)
    for r in (0.0, 0.26, 0.51):
        np.testing.assert_array_equal(count_within(df, df, r, metric=metric, schema=schema), (Dm <= r + 1e-12).sum(1))
    # a row with a missing value is not at distance 0 from itself
    has_missing = df.isna().any(axis=1).to_numpy()
    assert (np.diag(Dm)[has_missing] > 0).all()


@pytest.mark.parametrize("metric", ["cosine", "minkowski1", "minkowski2", "euclidean", "sphere"])
def test_missing_values_refused(metric):
    rng = np.random.default_rng(2)
    df, schema = random_frame(rng, 30, (3,), 2, missing=0.1)
    with pytest.raises(ValueError, match="missing values"):
        nearest(df, df, metric=metric, schema=schema)


@pytest.mark.parametrize("metric", ENGINE_METRICS)
def test_count_within_matches_reference(metric):
    rng = np.random.default_rng(4)
    df, schema = random_frame(rng, 300, (3, 2), 2)
    qs = random_frame(rng, 50, (3, 2), 2, dup=False)[0]
    Dm = ref_distances(qs, df, schema, metric)
    for r in (0.0, 0.1234, 0.25, 0.3337, 0.5, 0.77, 1.91, np.inf):
        got = count_within(qs, df, r, metric=metric, schema=schema)
        assert ((Dm <= r - 1e-12).sum(1) <= got).all() and (got <= (Dm <= r + 1e-12).sum(1)).all()
        if metric != "cosine": np.testing.assert_array_equal(got, (Dm <= r).sum(1))  # exact on the dyadic grid


def test_count_matches_reference():
    rng = np.random.default_rng(5)
    df, schema = random_frame(rng, 200, (2, 3), 1, levels=3, missing=0.05)
    qs = random_frame(rng, 60, (2, 3), 1, levels=3, missing=0.05)[0]
    for cols in (None, ["c0"], ["c1", "x0"], ["x0"]):
        use = cols or schema.names
        a, b = qs[use].astype(object).where(qs[use].notna(), "<NA>"), df[use].astype(object).where(df[use].notna(), "<NA>")
        want = [(b == a.iloc[i]).all(axis=1).sum() for i in range(len(a))]
        np.testing.assert_array_equal(count_matches(qs, df, columns=cols, schema=schema), want)
    # a table against itself: every row matches at least itself
    assert (count_matches(df, df, schema=schema) >= 1).all()


def test_sklearn_reference():
    "euclidean = sklearn on one-hot + scaled data; gower = manhattan on (one-hot / 2, scaled) / F; hamming = sklearn hamming on codes."
    from sklearn.neighbors import NearestNeighbors
    rng = np.random.default_rng(6)
    df, schema = random_frame(rng, 400, (3, 5, 2), 3, levels=50, dup=False)
    qs = random_frame(rng, 80, (3, 5, 2), 3, levels=50, dup=False)[0]
    cat_cols, cont_cols = schema.categorical, schema.continuous
    H = pd.get_dummies(pd.concat([qs, df])[cat_cols]).to_numpy(float)
    X = np.concatenate([H, embed(pd.concat([qs, df]), schema, cont_cols)[1]], 1)
    Xq, Xr = X[:80], X[80:]
    F = len(schema)
    d_sk, _ = NearestNeighbors(n_neighbors=5, algorithm="brute").fit(Xr).kneighbors(Xq)
    np.testing.assert_allclose(nearest(qs, df, 5, "euclidean", schema=schema)[0], d_sk, atol=1e-12)
    W = np.concatenate([H * 0.5, X[:, H.shape[1]:]], 1)
    d_sk, _ = NearestNeighbors(n_neighbors=5, algorithm="brute", metric="manhattan").fit(W[80:]).kneighbors(W[:80])
    np.testing.assert_allclose(nearest(qs, df, 5, "gower", schema=schema)[0], d_sk / F, atol=1e-12)
    codes = np.concatenate([embed(pd.concat([qs, df]), schema, cat_cols)[0], X[:, H.shape[1]:]], 1)
    d_sk, _ = NearestNeighbors(n_neighbors=5, algorithm="brute", metric="hamming").fit(codes[80:]).kneighbors(codes[:80])
    np.testing.assert_allclose(nearest(qs, df, 5, "hamming", schema=schema)[0], d_sk, atol=1e-12)


@pytest.mark.parametrize("metric", ["cosine", "minkowski1", "minkowski2", "minkowski3", "minkowski4"])
def test_agrees_with_distance_knn_and_vk(metric):
    adult = load_adult()
    schema = Schema.from_dataframe(adult)  # the whole table's ranges: `distance` clips values outside them, we keep them
    df = adult.iloc[:1500].reset_index(drop=True)
    d0, _ = knn(df, schema, 5, metric=metric)
    d1, i1 = nearest(df, df, 5, metric=metric, schema=schema, exclude_self=True)
    np.testing.assert_allclose(d1, d0, atol=1e-12, rtol=0)
    assert np.array_equal(d1.mean(1), vulnerability_scores(df, schema, 5, metric=metric))  # bit-identical V_5
    q = adult.iloc[1500:1700]
    d0, _ = knn(q, schema, 3, metric=metric, Y=df)
    np.testing.assert_allclose(nearest(q, df, 3, metric=metric, schema=schema)[0], d0, atol=1e-12, rtol=0)


def test_column_subsets_without_reencoding():
    rng = np.random.default_rng(7)
    df, schema = random_frame(rng, 500, (3, 4, 2), 3, levels=6)
    nd = NeighbourData.from_frame(df, schema)
    for cols in (["c0"], ["x1"], ["c2", "x0", "c0"], ["x2", "x0"]):
        sub = Schema(tuple(c for c in schema.columns if c.name in cols))
        for metric in ("gower", "cosine", "sphere"):
            a = nearest(nd, nd, 3, metric, columns=cols, exclude_self=True)
            b = nearest(df[sub.names], df[sub.names], 3, metric, schema=sub, exclude_self=True)
            np.testing.assert_array_equal(a[0], b[0]); np.testing.assert_array_equal(a[1], b[1])
            np.testing.assert_array_equal(count_within(nd, nd, 0.2, metric, columns=cols),
                                          count_within(df, df, 0.2, metric, schema=sub))


def test_same_result_for_any_n_jobs():
    rng = np.random.default_rng(8)
    df, schema = random_frame(rng, 2100, (3, 7, 2), 3)
    nd = NeighbourData.from_frame(df, schema)
    for metric in ("gower", "cosine"):
        a = nearest(nd, nd, 7, metric, exclude_self=True, n_jobs=1)
        b = nearest(nd, nd, 7, metric, exclude_self=True, n_jobs=-1)
        np.testing.assert_array_equal(a[0], b[0]); np.testing.assert_array_equal(a[1], b[1])
        np.testing.assert_array_equal(count_within(nd, nd, 0.3, metric, n_jobs=1), count_within(nd, nd, 0.3, metric, n_jobs=2))


def test_out_of_range_values_are_kept():
    schema = Schema.from_dataframe(pd.DataFrame({"x": [0.0, 10.0]}))
    q = pd.DataFrame({"x": [20.0]})
    d, _ = nearest(q, pd.DataFrame({"x": [0.0, 10.0]}), 1, "gower", schema=schema)
    assert d[0, 0] == pytest.approx(1.0)  # (20 - 10) / 10: not clipped to 0


def test_empty_and_single():
    df, schema = random_frame(np.random.default_rng(9), 5, (2,), 1)
    d, i = nearest(df.iloc[:0], df, 2, schema=schema)
    assert d.shape == (0, 2) and i.shape == (0, 2)
    assert count_within(df.iloc[:0], df, 0.1, schema=schema).shape == (0,)
    d, i = nearest(df.iloc[:1], df.iloc[:1], 1, schema=schema)
    assert d[0, 0] == 0.0 and i[0, 0] == 0
    np.testing.assert_array_equal(count_matches(df, df.iloc[:0], schema=schema), 0)


def test_bad_input():
    df, schema = random_frame(np.random.default_rng(10), 6, (2, 3), 1)
    other = Schema.from_dataframe(df.assign(x0=df["x0"] + 100))
    with pytest.raises(ValueError, match="metric='l7'"): nearest(df, df, schema=schema, metric="l7")
    with pytest.raises(ValueError, match="'zz'"): nearest(df, df, schema=schema, columns=["c0", "zz"])
    with pytest.raises(ValueError, match="repeats"): nearest(df, df, schema=schema, columns=["c0", "c0"])
    with pytest.raises(TypeError, match="list of column names"): nearest(df, df, schema=schema, columns="c0")
    with pytest.raises(ValueError, match="k=6 is out of range"): nearest(df, df, 6, schema=schema, exclude_self=True)
    with pytest.raises(ValueError, match="k=7 is out of range"): nearest(df, df, 7, schema=schema)
    with pytest.raises(ValueError, match="k=0 is out of range"): nearest(df, df, 0, schema=schema)
    with pytest.raises(TypeError, match="k=1.5"): nearest(df, df, 1.5, schema=schema)
    with pytest.raises(ValueError, match="no neighbours"): nearest(df, df.iloc[:0], 1, schema=schema)
    with pytest.raises(ValueError, match="different schemas"):
        nearest(NeighbourData.from_frame(df, schema), NeighbourData.from_frame(df, other))
    with pytest.raises(ValueError, match="different schema"): nearest(NeighbourData.from_frame(df, schema), df, schema=other)
    # the message says where the schemas differ: a column's range, or the column names
    with pytest.raises(ValueError, match="column 'x0': .* vs "): nearest(NeighbourData.from_frame(df, schema), df, schema=other)
    renamed = Schema.from_dataframe(df.rename(columns={"c0": "k0"}))
    with pytest.raises(ValueError, match=r"columns \['c0', 'c1', 'x0'\] vs \['k0'"):
        nearest(NeighbourData.from_frame(df, schema), df.rename(columns={"c0": "k0"}), schema=renamed)
    with pytest.raises(ValueError, match="radius=-0.5"): count_within(df, df, -0.5, schema=schema)
    with pytest.raises(ValueError, match="radius=nan"): count_within(df, df, float("nan"), schema=schema)
    with pytest.raises(ValueError, match="same table"): nearest(df, df.iloc[::-1], 1, schema=schema, exclude_self=True)
    with pytest.raises(TypeError, match="schema is needed"): nearest(df, df)
    with pytest.raises(TypeError, match="DataFrame or a NeighbourData"): nearest(df.to_numpy(), df, schema=schema)
    with pytest.raises(ValueError, match="n_jobs=0"): nearest(df, df, schema=schema, n_jobs=0)
    with pytest.raises(ValueError, match="lacks schema column"): nearest(df[["c0"]], df, schema=schema)
    with pytest.raises(ValueError, match="not in the schema's domain"): nearest(df.assign(c0="new"), df, schema=schema)


def test_cosine_distance_stays_within_one_out_of_range():
    "Values outside the schema's range are kept, so continuous parts can point apart (cos < 0): Eq. 5 is still clamped to [0, 1]."
    schema = Schema((Column("c", "categorical", ("a", "b")), Column("x", "continuous", lower=0.0, upper=1.0),
                     Column("y", "continuous", lower=0.0, upper=1.0)))
    ref = pd.DataFrame({"c": ["a", "a"], "x": [1.0, 0.5], "y": [1.0, 0.5]})
    q = pd.DataFrame({"c": ["b"], "x": [-1.0], "y": [-1.0]})  # pointing away from both references
    d, i = nearest(q, ref, 2, schema=schema, metric="cosine")
    assert d.tolist() == [[1.0, 1.0]] and i.tolist() == [[0, 1]]


def test_exclude_self_on_an_equal_copy_with_missing_values():
    "exclude_self needs the same table: an equal copy counts, missing values (NaN) included."
    df, schema = random_frame(np.random.default_rng(12), 30, (2, 3), 2)
    df.loc[[3, 7], "x0"] = np.nan
    a = nearest(df, df, 2, schema=schema, metric="gower", exclude_self=True)
    b = nearest(df, df.copy(), 2, schema=schema, metric="gower", exclude_self=True)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_a_continuous_column_of_text_is_refused_in_our_words():
    "Issue 37 mutation round (#29, #30): text in a column the schema calls continuous names the column and a value."
    schema = Schema((Column("x", "continuous", lower=0.0, upper=1.0),))
    with pytest.raises(ValueError, match=r"column 'x' is continuous in the schema but has dtype object \(e.g. value 'abc' at row 1\)"):
        NeighbourData.from_frame(pd.DataFrame({"x": ["0.5", "abc"]}, dtype=object), schema)
    got = NeighbourData.from_frame(pd.DataFrame({"x": ["0.25", None]}, dtype=object), schema).cont[0]  # numbers as text: read
    assert got[0] == 0.25 and np.isnan(got[1])


def test_a_nullable_integer_column_with_missing_values_is_encoded():
    "pandas' nullable Int64 (pd.NA) reads as numbers with NaN, also where the schema knows missing values."
    df = pd.DataFrame({"x": pd.array([1, None, 3], dtype="Int64")})
    for missing in (False, True):
        schema = Schema((Column("x", "continuous", lower=1.0, upper=3.0, missing=missing),))
        got = NeighbourData.from_frame(df, schema).cont[0]
        assert got[0] == 0.0 and got[2] == 1.0 and (got[1] == -1.0 if missing else np.isnan(got[1]))


def test_a_constant_column_encodes_as_zero_and_a_far_low_value_is_never_read_as_missing():
    "#37, #39: a column without range (lower == upper) encodes every value as 0 (not NaN, not 1); #40: with missing values in the "
    "schema, a value one range or more below the minimum is clamped to -0.5, apart from the missing value's -1."
    schema = Schema((Column("c", "continuous", lower=5.0, upper=5.0),))
    nd = NeighbourData.from_frame(pd.DataFrame({"c": [5.0, 5.0, 7.0]}), schema)
    assert nd.cont[0].tolist() == [0.0, 0.0, 0.0] and nd.missing()["c"] == 0
    schema = Schema((Column("x", "continuous", lower=0.0, upper=10.0, missing=True),))
    nd = NeighbourData.from_frame(pd.DataFrame({"x": [-10.0, -30.0, np.nan, 4.0]}), schema)
    assert nd.cont[0].tolist() == [-0.5, -0.5, -1.0, 0.4] and nd.missing()["x"] == 1


def test_missing_counts_every_column_by_its_own_rule():
    "Issue 37 mutation round (#52-#59): `missing()` counts each column's missing values, whether the schema knows missing values "
    "there (a category of its own; the value -1) or not (code -1; NaN), in the schema's column order."
    ref = pd.DataFrame({"a": ["x", None, "y", "x"], "b": ["u", "v", "u", "v"], "c": ["p", "q", "p", "q"],
                        "x": [1.0, np.nan, 3.0, 2.0], "y": [0.0, 1.0, 2.0, 3.0], "z": [5.0, 6.0, 7.0, 8.0]})
    schema = Schema.from_dataframe(ref)
    assert [c.missing for c in schema.columns] == [True, False, False, True, False, False]
    df = pd.DataFrame({"a": [None, "x", None, "y", "x"], "b": ["u", None, "v", "u", "v"], "c": [None, None, None, "p", "q"],
                       "x": [np.nan, np.nan, 1.0, np.nan, 2.0], "y": [0.5, 1.0, np.nan, 2.0, 3.0], "z": [5.0] * 5})
    got = NeighbourData.from_frame(df, schema).missing()  # three columns of each kind: an index that runs backwards reads another
    assert got.to_dict() == {"a": 2, "b": 1, "c": 3, "x": 3, "y": 1, "z": 0} and list(got.index) == ["a", "b", "c", "x", "y", "z"]


def test_cosine_with_missing_numbers_has_negative_cosines_and_matches_knn():
    """A missing number is `MISSING_SCALED`, below every number, so a query missing one has negative cosines with references that
    hold it: the engine's multiplication-only screen must stay below the exact distance there too (a screen of the wrong scale,
    e.g. the query's inverse norm doubled, rejects true neighbours). Checked against `achilles.distance.knn`, exact by its key."""
    df = load_adult().iloc[:400].reset_index(drop=True)
    rng = np.random.default_rng(3)
    for c in ("age", "hours-per-week", "education-num"):
        df[c] = df[c].astype(float); df.loc[rng.random(len(df)) < 0.4, c] = np.nan
    schema = Schema.from_dataframe(df)
    nd = NeighbourData.from_frame(df, schema)
    assert (nd.cont < 0).any()  # missing numbers sit below every number: negative coordinates, negative dot products
    d1, _ = nearest(df, df, 5, "cosine", schema=schema)
    d2, _ = knn(df, schema, 5, "cosine", df)
    np.testing.assert_allclose(d1, d2, atol=1e-12, rtol=0)


def test_cosine_every_cosine_negative():
    "Queries missing every number against references holding them all: every cosine is negative, every neighbour found through the screen."
    rng = np.random.default_rng(5)
    n = 60
    cats = lambda m: {f"c{j}": pd.Categorical(rng.choice(["a", "b"], m), categories=["a", "b"]) for j in range(5)}  # C = 5 > D / 2: distances below 1
    ref = pd.DataFrame({**cats(n), "x0": rng.uniform(1, 10, n), "x1": rng.uniform(1, 10, n)})
    qry = pd.DataFrame({**cats(20), "x0": np.nan, "x1": np.nan})
    schema = Schema.from_dataframe(pd.concat([ref, qry], ignore_index=True))
    q, r = NeighbourData.from_frame(qry, schema), NeighbourData.from_frame(ref, schema)
    assert (q.cont < 0).all() and (r.cont >= 0).all() and (r.cont.sum(0) > 0).mean() > 0.9  # negative dot products (all but a zero vector or two)
    d1, i1 = nearest(q, r, 4, "cosine")
    d2, i2 = knn(qry, schema, 4, "cosine", ref)
    assert (d2 < 0.9).all() and len(np.unique(d2.round(9))) > 20  # real distances, not the clip at 1
    np.testing.assert_allclose(d1, d2, atol=1e-12, rtol=0)
