"""Selectors: registry, determinism under a seed, ranking on hand-made data, bad input."""
import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, load_adult
from achilles.distance import vulnerability_scores
from achilles.selectors import SELECTORS, Selection, loglikelihood_scores, rank_by_score, rare_value_scores, select_records


@pytest.fixture(scope="module")
def small():
    rng = np.random.default_rng(0)
    n = 200
    df = pd.DataFrame({
        "c1": pd.Categorical(rng.choice(list("abc"), n, p=[0.6, 0.35, 0.05])),
        "c2": pd.Categorical(rng.choice(list("uv"), n)),
        "x": rng.integers(0, 50, n),
        "y": rng.normal(size=n),
    })
    return df, Schema.from_dataframe(df)


def test_registry():
    assert set(SELECTORS) == {"random", "rare", "rare_sampled", "loglik", "distance"}


@pytest.mark.parametrize("method", sorted(SELECTORS))
def test_selection_shape_and_order(small, method):
    df, schema = small
    sel = select_records(df, schema, method, n=15, rng=1)
    assert isinstance(sel, Selection) and sel.method == method
    assert sel.indices.dtype == np.int64 and len(sel) == 15 and len(set(sel.indices.tolist())) == 15
    assert (np.diff(sel.scores) <= 0).all()  # most vulnerable first
    full = select_records(df, schema, method, n=None, rng=1)
    assert sorted(full.indices.tolist()) == list(range(len(df)))  # a ranking of every record
    np.testing.assert_array_equal(full.indices[:15], sel.indices)
    fr = sel.to_frame()
    assert list(fr["rank"]) == list(range(1, 16)) and (fr["index"].to_numpy() == sel.indices).all()


@pytest.mark.parametrize("method", sorted(SELECTORS))
def test_deterministic_under_seed(small, method):
    df, schema = small
    a = select_records(df, schema, method, n=20, rng=123)
    b = select_records(df, schema, method, n=20, rng=np.random.default_rng(123))
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.scores, b.scores)


def test_random_depends_on_seed(small):
    df, schema = small
    a = select_records(df, schema, "random", n=20, rng=1).indices
    b = select_records(df, schema, "random", n=20, rng=2).indices
    assert not np.array_equal(a, b)


def test_ties_broken_by_index():
    np.testing.assert_array_equal(rank_by_score([1.0, 3.0, 3.0, 2.0, 3.0]), [1, 2, 4, 3, 0])
    with pytest.raises(ValueError, match="NaN"):
        rank_by_score([1.0, np.nan])


def test_rare_value_ranking_by_hand():
    df = pd.DataFrame({"a": pd.Categorical(list("aaaaaaaaaaaaaaaaaabc")),  # b, c: 1/20 each
                       "n": [1] * 17 + [1, 5, 1]})  # 5 is above the 95th percentile; tail 1/20
    schema = Schema.from_dataframe(df)
    s = rare_value_scores(df, schema, threshold=0.06)
    np.testing.assert_allclose(s[[18, 19]], np.log(20))  # b (and n=5), c
    assert (s[:18] == 0).all()
    assert rare_value_scores(df, schema, threshold=0.04).max() == pytest.approx(np.log(20))  # n=5 via the percentile rule
    df2 = df.assign(n=[1] * 18 + [5, 5])  # the 95th percentile is 5 itself: nothing strictly above it
    assert (rare_value_scores(df2, schema, threshold=0.04) == 0).all()  # and b/c are at 0.05 >= 0.04
    sel = select_records(df, schema, "rare", n=3, threshold=0.06)
    np.testing.assert_array_equal(sel.indices, [18, 19, 0])


def test_loglik_by_hand():
    df = pd.DataFrame({"a": pd.Categorical(list("aaab")), "b": pd.Categorical(list("xyyy"))})
    schema = Schema.from_dataframe(df)
    s = loglikelihood_scores(df, schema)
    want = -np.log([0.75 * 0.25, 0.75 * 0.75, 0.75 * 0.75, 0.25 * 0.75])
    np.testing.assert_allclose(s, want)
    np.testing.assert_array_equal(select_records(df, schema, "loglik", n=4).indices, [0, 3, 1, 2])


def test_loglik_continuous_percentile_bins():
    df = pd.DataFrame({"x": np.arange(100)})
    schema = Schema.from_dataframe(df)
    np.testing.assert_allclose(loglikelihood_scores(df, schema, bins=10), np.log(10))  # deciles: 10 records each
    np.testing.assert_allclose(loglikelihood_scores(df, schema, bins=4), np.log(4))


def test_distance_selector_is_vk(small):
    df, schema = small
    sel = select_records(df, schema, "distance", n=10, k=3, metric="minkowski2")
    V = vulnerability_scores(df, schema, k=3, metric="minkowski2")
    np.testing.assert_allclose(sel.scores, np.sort(V)[::-1][:10])
    assert sel.params == dict(k=3, metric="minkowski2")


def test_adult_selectors_run():
    df = load_adult().iloc[:2000]
    schema = Schema.from_dataframe(df)
    for m in SELECTORS:
        sel = select_records(df, schema, m, n=10, rng=0)
        assert len(sel) == 10 and np.isfinite(sel.scores).all()


def test_bad_input(small):
    df, schema = small
    with pytest.raises(ValueError, match="method='groundhog'"):
        select_records(df, schema, "groundhog")
    with pytest.raises(ValueError, match="n=0"):
        select_records(df, schema, "rare", n=0)
    with pytest.raises(ValueError, match="n=201"):
        select_records(df, schema, "rare", n=201)
    with pytest.raises(TypeError, match=r"no parameter\(s\) \['k'\]"):
        select_records(df, schema, "loglik", k=3)
    with pytest.raises(TypeError, match="schema must be a Schema"):
        select_records(df, None, "rare")
    with pytest.raises(TypeError, match="df must be a pandas DataFrame"):
        select_records(df.to_numpy(), schema, "rare")
    with pytest.raises(ValueError, match="bins=0"):
        select_records(df, schema, "loglik", bins=0)
    with pytest.raises(ValueError, match="percentile=100"):
        select_records(df, schema, "rare", percentile=100)
    with pytest.raises(ValueError, match="'x'.*missing"):
        select_records(df.assign(x=df["x"].astype(float).where(df.index != 3)), schema, "loglik")
    with pytest.raises(ValueError, match="k=200 is out of range"):
        select_records(df, schema, "distance", k=200)
    with pytest.raises(TypeError, match="rng="):
        select_records(df, schema, "random", rng="seed")


# --- edges the mutation run found untested (tests/MUTATION.md) ---------------------------------------------------------------

def test_rare_value_parameter_edges(small):
    df, schema = small
    rare_value_scores(df, schema, threshold=1.0)  # (0, 1]: 1 is allowed
    rare_value_scores(df, schema, percentile=0.0)  # [0, 100): 0 is allowed
    for kw in (dict(threshold=0.0), dict(threshold=1.5), dict(percentile=100.0), dict(percentile=-0.5)):
        with pytest.raises(ValueError, match=next(iter(kw))):
            rare_value_scores(df, schema, **kw)


def test_a_value_exactly_at_the_threshold_is_not_rare():
    "threshold is strict (a value is rare *below* it): one record in 20 is 0.05, not rare at 0.05, rare at 0.051."
    df = pd.DataFrame({"c": pd.Categorical(["a"] * 19 + ["b"])})
    schema = Schema.from_dataframe(df)
    assert rare_value_scores(df, schema, threshold=0.05)[-1] == 0.0
    assert rare_value_scores(df, schema, threshold=0.051)[-1] == pytest.approx(-np.log(0.05))


def test_records_without_a_rare_value_score_plus_zero(small):
    df, schema = small
    s = rare_value_scores(df, schema)
    none = s == 0
    assert none.any() and not np.signbit(s[none]).any()  # +0.0, never -0.0 (which prints as "-0" in every table)


def test_percentile_bins_against_numpy_quantiles():
    from achilles.selectors import _percentile_bins
    x = np.arange(1000) / 1000.0
    for bins in (1, 2, 4, 10):
        edges = np.unique(np.quantile(x, np.arange(1, bins) / bins))
        np.testing.assert_array_equal(_percentile_bins(x, bins), np.searchsorted(edges, x, side="right"))
    assert _percentile_bins(x, 10)[100] == 1 and _percentile_bins(x, 10)[99] == 0  # deciles: 0.1 lies above the 10th percentile 0.0999


def test_loglik_one_bin_is_allowed_and_matches_a_pandas_reference(small):
    df, schema = small
    ll1 = loglikelihood_scores(df, schema, bins=1)
    ref = -sum(np.log(df[c].map(df[c].value_counts(normalize=True)).to_numpy(np.float64)) for c in ("c1", "c2"))
    np.testing.assert_allclose(ll1, ref)  # one bin: the continuous columns add log 1 = 0
    with pytest.raises(ValueError, match="bins"):
        loglikelihood_scores(df, schema, bins=0)


def test_distance_k_at_most_n_minus_one():
    from achilles.selectors import distance_scores
    df = pd.DataFrame({"c": pd.Categorical(list("aabbc")), "x": [1.0, 2.0, 3.0, 4.0, 5.0]})
    schema = Schema.from_dataframe(df)
    assert distance_scores(df, schema, k=4).shape == (5,)
    with pytest.raises(ValueError, match="k"):
        distance_scores(df, schema, k=5)
    two = df.iloc[:2]
    assert distance_scores(two, Schema.from_dataframe(two), k=1).shape == (2,)
    with pytest.raises(ValueError, match="k"):
        distance_scores(two, Schema.from_dataframe(two), k=2)


def test_distance_checks_the_memory_it_needs(monkeypatch, small):
    "16 bytes per (record, neighbour): a float64 distance and an int64 index."
    import achilles.core.runtime as rt
    from achilles.selectors import distance_scores
    df, schema = small
    seen = []
    monkeypatch.setattr(rt, "check_memory", lambda what, nbytes, hint="": seen.append(nbytes))
    distance_scores(df, schema, k=7)
    assert seen == [16.0 * len(df) * 7]


def test_the_engine_applies_only_where_it_gives_the_kernels_numbers(small):
    from achilles.selectors import _engine_applies
    df, schema = small
    assert _engine_applies(df, schema, "cosine") is True
    assert _engine_applies(df.to_numpy(), schema, "cosine") is False  # not a DataFrame
    assert _engine_applies(df, None, "cosine") is False
    assert _engine_applies(df.iloc[:1], schema, "cosine") is False
    assert _engine_applies(df.iloc[:2], schema, "cosine") is True
    assert _engine_applies(df, schema, "not-a-metric") is False
    out = df.copy(); out.loc[0, "x"] = 10_000  # outside the schema's range: `encode` clips, the engine would not
    assert _engine_applies(out, schema, "cosine") is False


def test_rare_sampled_puts_every_rare_record_first_whatever_its_threshold():
    from achilles.selectors import rare_sampled_scores
    df = pd.DataFrame({"c": pd.Categorical(["a"] * 6 + ["b"] * 4)})  # b: frequency 0.4, rare below 0.5 (score 0.92 < 1)
    schema = Schema.from_dataframe(df)
    s = rare_sampled_scores(df, schema, rng=0, threshold=0.5)
    assert s[6:].min() > s[:6].max()
