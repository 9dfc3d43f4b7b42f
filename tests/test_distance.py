"""Kernels of `achilles.distance` against plain numpy references that build one-hot vectors explicitly."""
import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Encoded, Schema, encode, load_adult
from achilles.distance import DISTANCES, Metric, MINKOWSKI, distances_to, paper_metrics, knn, neighbour_distances, pairwise_distances, vulnerability_scores


# ---------------------------------------------------------------- references (no achilles code) ------
def onehot(cat: np.ndarray) -> np.ndarray:
    "Explicit one-hot of each categorical column (Eq. 1-2); code -1 gets its own position."
    blocks = []
    for f in range(cat.shape[1]):
        vals = np.unique(cat[:, f])
        blocks.append((cat[:, f][:, None] == vals[None, :]).astype(float))
    return np.concatenate(blocks, axis=1) if blocks else np.zeros((cat.shape[0], 0))


def ref_cos(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    "Cosine similarity with the documented zero-vector convention (1 if both zero, 0 if one is)."
    na, nb = np.linalg.norm(A, axis=1), np.linalg.norm(B, axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = (A @ B.T) / np.outer(na, nb)
    za, zb = na == 0, nb == 0
    s[za[:, None] | zb[None, :]] = 0.0
    s[za[:, None] & zb[None, :]] = 1.0
    return s


def ref_minkowski(A, B, p):
    return (np.abs(A[:, None, :] - B[None, :, :]) ** p).sum(-1) ** (1.0 / p)


def ref_pairwise(ex: Encoded, ey: Encoded, metric: str) -> np.ndarray:
    C, D = ex.cat.shape[1], ex.cont.shape[1]
    F = C + D
    H = onehot(np.concatenate([ex.cat, ey.cat]))
    hx, hy = H[: ex.n], H[ex.n:]
    m = DISTANCES[metric]
    out = np.zeros((ex.n, ey.n))
    if m.p == 0:
        out[:] = 1.0
        if C: out -= C / F * ref_cos(hx, hy)
        if D: out -= D / F * ref_cos(ex.cont, ey.cont)
        return out
    if C: out += C / F * ref_minkowski(hx, hy, m.p)
    if D: out += D / F * ref_minkowski(ex.cont, ey.cont, m.p)
    return out


def random_encoded(rng, n, cards=(3, 2, 5), n_cont=2, levels=4, zero_rows=2):
    "Mixed data with many ties/duplicates: continuous values on a small grid, a few all-zero continuous rows."
    cat = np.stack([rng.integers(0, c, n) for c in cards], axis=1).astype(np.int32) if cards else np.zeros((n, 0), np.int32)
    cont = rng.integers(0, levels, (n, n_cont)) / (levels - 1)
    cont[: min(zero_rows, n)] = 0.0
    if n > 4:  # exact duplicates
        cat[-2:] = cat[:2]; cont[-2:] = cont[:2]
    return Encoded(np.ascontiguousarray(cat), np.ascontiguousarray(cont))


SHAPES = [  # (n, cards, n_cont)
    (40, (3, 2, 5), 2),
    (37, (4,), 0),  # one column, categorical only
    (33, (), 1),  # one column, continuous only
    (50, (2, 2, 3, 2), 0),  # only categorical, heavy duplicates
    (45, (), 3),  # only continuous
    (1, (3, 2), 2),  # a single row
    (1500, (3, 7, 2), 3),  # more than one candidate block
]


@pytest.mark.parametrize("metric", sorted(paper_metrics()))
@pytest.mark.parametrize("shape", SHAPES)
def test_pairwise_matches_reference(metric, shape):
    n, cards, n_cont = shape
    rng = np.random.default_rng(n + len(cards))
    n = min(n, 300)  # the reference is O(n^2 F) memory
    ex = random_encoded(rng, n, cards, n_cont)
    ey = random_encoded(rng, 17, cards, n_cont, zero_rows=1)
    D = pairwise_distances(ex, metric=metric)
    np.testing.assert_allclose(D, ref_pairwise(ex, ex, metric), atol=1e-12, rtol=0)
    np.testing.assert_allclose(D, D.T, atol=1e-12, rtol=0)  # symmetry
    np.testing.assert_array_equal(np.diag(D), 0.0)  # identical records: exactly 0
    Dxy = pairwise_distances(ex, ey, metric=metric)
    np.testing.assert_allclose(Dxy, ref_pairwise(ex, ey, metric), atol=1e-12, rtol=0)
    np.testing.assert_allclose(distances_to(ex, ey.take([3]), metric=metric), Dxy[:, 3], atol=1e-15, rtol=0)
    if metric == "cosine":
        assert D.min() >= 0.0 and D.max() <= 1.0
    # duplicates (rows equal in codes and values) are at exactly 0
    same = (ex.cat[:, None, :] == ex.cat[None, :, :]).all(-1) & (ex.cont[:, None, :] == ex.cont[None, :, :]).all(-1)
    assert (D[same] == 0.0).all()
    if DISTANCES[metric].family == MINKOWSKI:
        assert (D[~same] > 0).all()  # Minkowski: zero only for identical records


def brute_knn_dist(D, k, self_exclude):
    D = D.copy()
    if self_exclude: np.fill_diagonal(D, np.inf)
    return np.sort(D, axis=1)[:, :k]


@pytest.mark.parametrize("metric", sorted(paper_metrics()))
@pytest.mark.parametrize("shape", [s for s in SHAPES if s[0] > 1])
def test_knn_and_vk_match_bruteforce(metric, shape):
    n, cards, n_cont = shape
    rng = np.random.default_rng(7 * n)
    ex = random_encoded(rng, n, cards, n_cont)
    D = pairwise_distances(ex, metric=metric)
    for k in sorted({1, 3, min(7, n - 1), n - 1} if n < 100 else {1, 5, 30}):
        dist, idx = knn(ex, None, k, metric=metric)
        want = brute_knn_dist(D, k, True)
        np.testing.assert_allclose(dist, want, atol=1e-12, rtol=0)  # distances, not indices (ties)
        # indices are real neighbours at the reported distances, never the record itself
        np.testing.assert_allclose(np.take_along_axis(D, idx, 1), dist, atol=1e-12, rtol=0)
        assert not (idx == np.arange(n)[:, None]).any()
        assert (np.diff(dist, axis=1) >= 0).all()
        assert (np.diff(idx, axis=1)[np.diff(dist, axis=1) == 0] > 0).all()  # ties ordered by index
        V = vulnerability_scores(ex, None, k=k, metric=metric)
        np.testing.assert_allclose(V, want.mean(1), atol=1e-12, rtol=0)
        V0 = vulnerability_scores(ex, None, k=k, metric=metric, dedup=False)
        np.testing.assert_allclose(V0, V, atol=1e-12, rtol=0)  # unique-weighting path == direct path


@pytest.mark.parametrize("metric", ["cosine", "minkowski1", "minkowski3"])
def test_knn_between_tables(metric):
    rng = np.random.default_rng(3)
    ex, ey = random_encoded(rng, 60, n_cont=2), random_encoded(rng, 1100, n_cont=2)
    dist, idx = knn(ex, None, 4, metric=metric, Y=ey)
    D = pairwise_distances(ex, ey, metric=metric)
    np.testing.assert_allclose(dist, brute_knn_dist(D, 4, False), atol=1e-12, rtol=0)
    np.testing.assert_allclose(np.take_along_axis(D, idx, 1), dist, atol=1e-12, rtol=0)
    assert (np.diff(idx, axis=1)[np.diff(dist, axis=1) == 0] > 0).all()


def test_heavy_duplicates_weighting():
    "Few unique records with large multiplicities: V_k must count every copy (more copies than k, fewer than k)."
    rng = np.random.default_rng(11)
    base = random_encoded(rng, 6, (2, 3), 0, zero_rows=0)
    reps = np.repeat(np.arange(6), [1, 2, 3, 7, 1, 20])
    ex = base.take(rng.permutation(reps))
    D = pairwise_distances(ex)
    for k in (1, 2, 5, 10, 33):
        want = brute_knn_dist(D, k, True).mean(1)
        np.testing.assert_allclose(vulnerability_scores(ex, None, k=k), want, atol=1e-12, rtol=0)
        np.testing.assert_allclose(vulnerability_scores(ex, None, k=k, dedup=False), want, atol=1e-12, rtol=0)


def test_adult_sample_matches_reference():
    df = load_adult().iloc[:600]
    schema = Schema.from_dataframe(df)
    ex = encode(df, schema)
    for metric in ("cosine", "minkowski2"):
        want = brute_knn_dist(ref_pairwise(ex, ex, metric), 5, True).mean(1)
        np.testing.assert_allclose(vulnerability_scores(df, schema, k=5, metric=metric), want, atol=1e-12, rtol=0)


def test_parallel_vectors_cosine_zero():
    "Documented property of Eq. 5: parallel continuous parts with equal codes are at cosine distance 0."
    ex = Encoded(np.zeros((2, 1), np.int32), np.array([[0.2, 0.4], [0.1, 0.2]]))
    assert pairwise_distances(ex)[0, 1] == pytest.approx(0.0, abs=1e-15)
    assert pairwise_distances(ex, metric="minkowski2")[0, 1] > 0


def test_constant_columns():
    "A constant categorical column scales every cosine distance by F/(F+1) (rankings unchanged); constant continuous ones are finite."
    rng = np.random.default_rng(5)
    ex = random_encoded(rng, 80, (3, 4), 2)
    F = 4
    ec = Encoded(np.ascontiguousarray(np.concatenate([ex.cat, np.zeros((80, 1), np.int32)], 1)), ex.cont)
    np.testing.assert_allclose(pairwise_distances(ec), pairwise_distances(ex) * F / (F + 1), atol=1e-12)
    np.testing.assert_allclose(vulnerability_scores(ec, None, 3), vulnerability_scores(ex, None, 3) * F / (F + 1), atol=1e-12)
    ek = Encoded(ex.cat, np.ascontiguousarray(np.concatenate([ex.cont, np.zeros((80, 1))], 1)))
    for metric in ("cosine", "minkowski2"):
        Dk = pairwise_distances(ek, metric=metric)
        assert np.isfinite(Dk).all()
        np.testing.assert_allclose(Dk, ref_pairwise(ek, ek, metric), atol=1e-12)


def test_unseen_code_is_one_value():
    ex = Encoded(np.array([[-1, 0], [-1, 1], [0, 1]], np.int32), np.zeros((3, 0)))
    D = pairwise_distances(ex)
    assert D[0, 1] == pytest.approx(0.5) and D[1, 2] == pytest.approx(0.5) and D[0, 2] == pytest.approx(1.0)


def test_bad_input():
    df = pd.DataFrame({"a": pd.Categorical(["x", "y", "x"]), "b": [1.0, 2.0, 3.0]})
    schema = Schema.from_dataframe(df)
    with pytest.raises(ValueError, match="k=3 is out of range"):
        vulnerability_scores(df, schema, k=3)
    with pytest.raises(ValueError, match="k=4 is out of range"):
        knn(df, schema, 4, Y=df)
    with pytest.raises(TypeError, match="k=2.0"):
        knn(df, schema, 2.0)
    with pytest.raises(ValueError, match="'b'.*missing"):
        vulnerability_scores(df.assign(b=[1.0, np.nan, 3.0]), schema)
    with pytest.raises(ValueError, match="achilles.neighbours"):  # registered, but computed by the neighbour engine
        vulnerability_scores(df, schema, k=1, metric="gower")
    with pytest.raises(ValueError, match="metric='manhattan'"):
        pairwise_distances(df, schema=schema, metric="manhattan")
    with pytest.raises(TypeError, match="schema must be a Schema"):
        vulnerability_scores(df, None)
    with pytest.raises(ValueError, match="exactly one row"):
        e = encode(df, schema); distances_to(e, e)
    with pytest.raises(ValueError, match="different columns"):
        e = encode(df, schema); pairwise_distances(e, Encoded(e.cat, np.zeros((3, 0))))


@pytest.mark.parametrize("metric", ["cosine", "minkowski2"])
@pytest.mark.parametrize("nc", [1024, 1025, 2049])
def test_knn_block_edges(metric, nc):
    "Candidates one row past a 1,024-row block (the last row alone in its block is still seen); 65 queries, one past a 64-row block."
    rng = np.random.default_rng(nc)
    ey = random_encoded(rng, nc)
    cont = ey.cont.copy(); cont[-1] = [0.37, 0.91]  # off the grid of the other rows: the last row is its own only match
    ey = Encoded(ey.cat, np.ascontiguousarray(cont))
    ex = ey.take(np.r_[nc - 1, np.arange(64)])
    dist, idx = knn(ex, None, 1, metric=metric, Y=ey)
    D = pairwise_distances(ex, ey, metric=metric)
    np.testing.assert_allclose(dist[:, 0], D.min(1), atol=1e-12, rtol=0)
    np.testing.assert_allclose(np.take_along_axis(D, idx, 1)[:, 0], dist[:, 0], atol=1e-12, rtol=0)
    assert idx[0, 0] == nc - 1 and dist[0, 0] == 0.0
    # the same table with itself: the last row's nearest other row, found through the wrapped visiting order
    ds, js = knn(ey, None, 1, metric=metric)
    Dy = pairwise_distances(ey, metric=metric); np.fill_diagonal(Dy, np.inf)
    np.testing.assert_allclose(ds[:, 0], Dy.min(1), atol=1e-12, rtol=0)


def test_knn_between_tables_orders_tied_candidates_by_index():
    "Two identical candidates in different candidate blocks: both returned, the lower index first (`_finalize`'s sort)."
    ey = random_encoded(np.random.default_rng(5), 3000)
    cat, cont = ey.cat.copy(), ey.cont.copy()
    cat[[1500, 2500]] = [0, 1, 4]; cont[[1500, 2500]] = [0.37, 0.91]  # off the grid: no other row is as near
    ey = Encoded(cat, cont)
    for metric in ("cosine", "minkowski1"):
        dist, idx = knn(ey.take([2500, 1500]), None, 3, metric=metric, Y=ey)
        assert idx[:, :2].tolist() == [[1500, 2500], [1500, 2500]] and (dist[:, :2] == 0.0).all() and (dist[:, 2] > 0).all()


def test_metric_families_are_distinct():
    "Each family code selects one computation (the neighbour engine tests them in order): no two may share a code."
    from achilles.distance import COSINE, EUCLIDEAN, GOWER, HAMMING, SPHERE
    codes = (COSINE, MINKOWSKI, GOWER, HAMMING, EUCLIDEAN, SPHERE)
    assert len(set(codes)) == len(codes)
    assert len({(m.family, m.p) for m in DISTANCES.values()}) == len(DISTANCES)


def test_row_identity_for_dedup():
    "Equal rows are one row to the deduplication (-0.0 is 0.0); rows that differ by a denormal are two."
    from achilles.distance import _unique_rows
    cont = np.array([[0.0], [-0.0], [1e-300], [0.5], [0.5]])
    enc = Encoded(np.zeros((5, 1), np.int32), cont)
    first, inverse, counts = _unique_rows(enc)
    assert len(first) == 3 and sorted(counts.tolist()) == [1, 2, 2]
    assert inverse[0] == inverse[1] != inverse[2] and inverse[3] == inverse[4]


@pytest.mark.parametrize("missing", [0.0, 0.1])
def test_vk_over_many_candidate_blocks_matches_reference(missing):
    """3,000 Adult records (three candidate blocks of 1,024), complete and with 10 % of cells missing: from the second block on,
    most candidates cannot enter on their categorical part alone and only the few that can get a dot product (the per-candidate
    screen); V_5 must equal the brute-force reference exactly as on one block."""
    from achilles.perf import with_missing
    df = load_adult().iloc[:3000].reset_index(drop=True)
    if missing: df = with_missing(df, missing, 0)
    schema = Schema.from_dataframe(df)
    ex = encode(df, schema)
    want = brute_knn_dist(ref_pairwise(ex, ex, "cosine"), 5, True).mean(1)
    for dedup in (False, True):
        np.testing.assert_allclose(vulnerability_scores(ex, None, k=5, metric="cosine", dedup=dedup), want, atol=1e-12, rtol=0)


@pytest.mark.parametrize("blocks", ["dense", "sparse"])
def test_cosine_knn_is_exact_when_screens_round_differently(blocks):
    """Two candidates at the same exact Eq. 5 distance (one categorical mismatch, continuous vectors parallel to the query's),
    in different candidate blocks, among 2,046 others that cannot enter: sparse, every code differs (only the two get a dot
    product); dense, they share the query's codes (every candidate gets one) but point more than 60 degrees away. The
    multiply-only screens of the two round differently; the kernel used to keep the one with the smaller *screen*: one ulp
    farther in exact distance, or tied with a higher index. `knn` with k = 1 must return the exact minimum of all pairwise
    distances (an exact tie: the lower index, visited first), and k = 2 both."""
    g = np.random.default_rng(0)
    n, hits = 2048, 0
    for trial in range(40):
        a, b = g.uniform(0.05, 0.25), g.uniform(0.6, 1.0)
        s1, s2 = g.uniform(0.1, 1, 2)
        c1, c2 = ("w", "w") if blocks == "sparse" else ("x", "z")
        Y = pd.DataFrame({"c1": [c1] * n, "c2": [c2] * n, "u": g.uniform(0.5, 1, n), "v": g.uniform(0, 0.05, n)})
        Y.loc[5, ["c1", "c2", "u", "v"]] = ["w", "w", 0.0, 0.0]  # the range [0, 1], so that scaling keeps vectors parallel
        Y.loc[6, ["c1", "c2", "u", "v"]] = ["w", "w", 1.0, 1.0]
        for j, s in ((0, s1), (1024, s2)):
            Y.loc[j, ["c1", "c2", "u", "v"]] = ["x", "q", a * s, b * s]
        X = pd.DataFrame({"c1": ["x"], "c2": ["z"], "u": [a], "v": [b]})
        schema = Schema.from_dataframe(pd.concat([X, Y], ignore_index=True))
        all_d = pairwise_distances(X, Y, schema, "cosine")[0]
        assert sorted(np.argsort(all_d, kind="stable")[:2]) == [0, 1024]  # the two are the nearest
        d1, i1 = knn(X, schema, 1, "cosine", Y)
        assert d1[0, 0] == all_d.min(), (trial, d1[0, 0], all_d.min())
        assert all_d[i1[0, 0]] == all_d.min()
        assert i1[0, 0] == np.flatnonzero(all_d == all_d.min())[0]  # an exact tie goes to the first visited: the lower index
        d2, i2 = knn(X, schema, 2, "cosine", Y)
        assert sorted(i2[0]) == [0, 1024]
        np.testing.assert_array_equal(d2[0], np.sort(all_d)[:2])
        hits += all_d[0] == all_d[1024]  # the exact distances tie: the case the screens could order either way
    assert hits >= 5  # the construction does produce ties


@pytest.mark.parametrize("share", [0.0, 0.9])
def test_cosine_knn_with_negative_cosines(share):
    """A query missing a number (encoded one range-width below the minimum, -1) against candidates that have it: every cosine
    is negative, so the multiply-only screen lies *above* the exact key whenever its scale is off; the screen must never reject
    a candidate that belongs to the k nearest (dense blocks; with `share` of the candidates' codes changed, sparse ones)."""
    g = np.random.default_rng(4)
    n = 3000
    Y = pd.DataFrame({"c": np.where(g.random(n) < share, "b", "a"), "u": g.uniform(0.4, 1, n), "v": g.uniform(0, 0.3, n)})
    Y.loc[0, ["c", "u"]] = ["z", np.nan]  # the schema knows missing numbers; far from every query (another code)
    Y.loc[1, ["c", "u"]] = ["z", 0.0]  # the range of u starts at 0: every other candidate's u is at least 0.4 of it
    X = pd.DataFrame({"c": ["a", "a", "b"], "u": [np.nan, np.nan, np.nan], "v": [0.005, 0.01, 0.02]})
    schema = Schema.from_dataframe(pd.concat([X, Y], ignore_index=True))
    all_d = pairwise_distances(X, Y, schema, "cosine")
    eq = (X.c.to_numpy()[:, None] == Y.c.to_numpy()[None, :]).astype(float)
    assert ((3 * all_d - 2)[eq == 1] > 0).mean() > 0.99  # negative cosines: F d > F - eq - 0 (F = 3) for the same code
    for k in (1, 5, 20):
        d, i = knn(X, schema, k, "cosine", Y)
        np.testing.assert_array_equal(d, np.sort(all_d, axis=1)[:, :k])
