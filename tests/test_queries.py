"""`achilles.queries`' small public helpers and its method choice, at their edges: subset masks and names, the checks on
masks, when the zeta transform is used, the batch's argument checks, and both ways of sampling subsets. The counting kernels
themselves are checked against brute force in tests/test_query_attack.py."""
import numpy as np
import pandas as pd
import pytest

import achilles.queries as Q
from achilles.core.data import Column, Encoded, Schema
from achilles.queries import query_features, query_features_batch, sample_subsets, subset_columns, subset_mask


@pytest.fixture(scope="module")
def schema():
    return Schema((Column("a", "categorical", ("x", "y")), Column("b", "continuous", lower=0.0, upper=3.0),
                   Column("c", "categorical", ("u", "v", "w"))))


def _data(n=30, seed=0):
    g = np.random.default_rng(seed)
    return pd.DataFrame({"a": pd.Categorical(g.choice(["x", "y"], n), categories=["x", "y"]),
                         "b": g.integers(0, 4, n).astype(float),
                         "c": pd.Categorical(g.choice(["u", "v", "w"], n), categories=["u", "v", "w"])})


def test_masks_and_names_round_trip(schema):
    assert subset_columns(0, schema) == []  # the empty query is a subset
    assert subset_columns(0b101, schema) == ["a", "c"] and subset_columns(7, schema) == ["a", "b", "c"]
    assert subset_mask(["c", "a"], schema) == 0b101 and subset_mask(["b", "b"], schema) == 0b010 and subset_mask([], schema) == 0
    for m in range(8): assert subset_mask(subset_columns(m, schema), schema) == m
    for bad in (-1, 8):
        with pytest.raises(ValueError, match=f"mask={bad}"): subset_columns(bad, schema)
    with pytest.raises(ValueError, match="'z'"): subset_mask(["a", "z"], schema)


def test_bad_mask_named_in_the_message(schema):
    df = _data()
    with pytest.raises(ValueError, match="holds mask 8,"): query_features(df, df.iloc[[0]], schema, subsets=[0, 3, 8])
    with pytest.raises(ValueError, match="holds mask -2,"): query_features(df, df.iloc[[0]], schema, subsets=[0, -2, 9])


def test_method_choice():
    assert Q._use_zeta("zeta", 30, 10, 10, 24, False) is True  # forced, even where auto would not
    assert Q._use_zeta("direct", 3, 10**6, 8, 24, False) is False
    # auto: the 2^F table when F 2^F <= 4 n q (and F within the limit)
    assert Q._use_zeta("auto", 4, 4, 4, 24, False) is True  # 64 <= 64
    assert Q._use_zeta("auto", 4, 3, 5, 24, False) is False  # 64 > 60
    assert Q._use_zeta("auto", 4, 0, 16, 24, False) is True  # an empty dataset counts as one record
    assert Q._use_zeta("auto", 4, 8, 0, 24, False) is False  # and no queries as one query: 64 > 32
    assert Q._use_zeta("auto", 5, 10**6, 10**6, 4, False) is False  # above max_zeta_features: never
    assert Q._use_zeta("auto", 4, 10**6, 10**6, 4, True) is True  # all 2^F answers at exactly the limit
    with pytest.raises(ValueError, match="max_zeta_features=4"): Q._use_zeta("auto", 5, 1, 1, 4, True)
    with pytest.raises(ValueError, match="method='fast'"): Q._use_zeta("fast", 4, 1, 1, 24, False)


def test_zeta_and_direct_agree(schema):
    df = _data(200, seed=3)
    t = df.iloc[[4]]
    masks = np.arange(8)
    z = query_features(df, t, schema, subsets=masks, method="zeta")
    d = query_features(df, t, schema, subsets=masks, method="direct")
    np.testing.assert_array_equal(z, d)
    np.testing.assert_array_equal(query_features(df, t, schema, max_zeta_features=3), z)  # all 2^F at the limit F = 3


def test_batch_arguments(schema):
    sets = [_data(20, s) for s in range(3)]
    t = sets[0].iloc[[0]]
    want = np.stack([query_features(d, t, schema) for d in sets])
    np.testing.assert_array_equal(query_features_batch(sets, t, schema=schema, chunk=1), want)  # one dataset per call
    with pytest.raises(ValueError, match="chunk=0"): query_features_batch(sets, t, schema=schema, chunk=0)
    with pytest.raises(TypeError, match="list of Encoded"): query_features_batch((d for d in sets), t, schema=schema)
    with pytest.raises(TypeError, match="list of Encoded"): query_features_batch({0: sets[0]}, t, schema=schema)
    # explicit masks on a table wider than max_zeta_features: allowed (only "all 2^F answers" is refused)
    got = query_features_batch(sets, t, subsets=[1, 5], schema=schema, max_zeta_features=2)
    np.testing.assert_array_equal(got, want[:, [1, 5]])
    with pytest.raises(ValueError, match="max_zeta_features=2"): query_features_batch(sets, t, schema=schema, max_zeta_features=2)


def test_batch_without_a_schema_on_one_dataset():
    "Encoded data without a schema: the columns are read from the first dataset (a list of one is enough)."
    e = Encoded(np.array([[0, 1], [1, 1], [0, 0]], np.int32), np.array([[0.2], [0.5], [0.9]]))
    t = Encoded(np.array([[0, 1]], np.int32), np.array([[0.5]]))
    out = query_features_batch([e], t)
    assert out.shape == (1, 8)
    assert out[0, 0] == 3 and out[0, 0b001] == 2 and out[0, 0b100] == 2 and out[0, 0b111] == 1  # c0 = 0; x0 <= 0.5; all three


def test_sample_one_subset_and_the_wide_way(monkeypatch):
    assert len(sample_subsets(5, 1, rng=0)) == 1
    with pytest.raises(ValueError, match="n=0"): sample_subsets(5, 0)
    # the way for populations above _CHOICE_MAX (draws, repeats dropped): distinct, in range, and every mask reachable
    monkeypatch.setattr(Q, "_CHOICE_MAX", 0)
    seen = set()
    for seed in range(30):
        s = sample_subsets(3, 6, rng=seed)
        assert len(s) == 6 and len(np.unique(s)) == 6 and s.min() >= 1 and s.max() <= 7 and np.all(np.diff(s) > 0)
        seen |= set(s.tolist())
    assert seen == set(range(1, 8))
