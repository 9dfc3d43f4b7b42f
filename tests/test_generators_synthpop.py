"""SynthPop's donor draw (`_draw_donors`), by its distribution: every donor of a leaf is reachable, each equally likely, and the
draw agrees with a plain numpy reference; and the fitted generator's draws within a leaf follow the leaf's donors."""
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from achilles.core.data import Schema
from achilles.generators.synthpop import SynthPop, _draw_donors


def _leaves():
    "Three leaves of 1, 4 and 7 donors, laid out in the pool out of order; each donor value is distinct."
    count = np.array([4, 1, 7], np.int64)
    start = np.array([8, 0, 1], np.int64)  # leaf 1 first, then leaf 2, then leaf 0
    pool = np.arange(12, dtype=np.float64) * 10
    return start, count, pool


def test_draw_donors_matches_numpy():
    start, count, pool = _leaves()
    g = np.random.default_rng(0)
    leaf = g.integers(0, 3, 5000).astype(np.int64)
    u = g.random(5000)
    ref = pool[start[leaf] + np.floor(u * count[leaf]).astype(np.int64)]
    np.testing.assert_array_equal(_draw_donors(leaf, start, count, pool, u), ref)


def test_draw_donors_edges():
    start, count, pool = _leaves()
    leaf = np.array([0, 0, 2, 2, 1, 1], np.int64)
    u = np.array([0.0, np.nextafter(1.0, 0.0), 0.0, np.nextafter(1.0, 0.0), 0.0, 0.999])
    assert _draw_donors(leaf, start, count, pool, u).tolist() == [80.0, 110.0, 10.0, 70.0, 0.0, 0.0]
    # u = 1 (never drawn by Generator.random, but a caller could pass it): the last donor, never past the leaf
    assert _draw_donors(np.array([0, 2], np.int64), start, count, pool, np.array([1.0, 1.0])).tolist() == [110.0, 70.0]
    assert _draw_donors(np.zeros(0, np.int64), start, count, pool, np.zeros(0)).shape == (0,)


@pytest.mark.parametrize("which", [0, 2])
def test_every_donor_is_reachable_and_equally_likely(which):
    start, count, pool = _leaves()
    n = 70_000
    u = np.random.default_rng(which).random(n)
    got = _draw_donors(np.full(n, which, np.int64), start, count, pool, u)
    donors = pool[start[which]: start[which] + count[which]]
    freq = np.array([(got == v).sum() for v in donors])
    assert freq.sum() == n  # only this leaf's donors
    assert (freq > 0).all()  # every one reachable (u * (c - 1) would never reach the last)
    assert stats.chisquare(freq).pvalue > 1e-3  # uniform within the leaf
    assert np.abs(freq / n - 1 / count[which]).max() < 0.01


def test_sampled_values_follow_the_donors_of_their_leaf():
    """A two-column table where the second column depends only on the first: with leaves of 100 records (one per value of the
    first column), the values drawn for each first-column value follow that value's training values."""
    g = np.random.default_rng(1)
    a = np.repeat(["p", "q", "r"], 400)
    b = np.where(a == "p", g.choice([1.0, 2.0], 1200), np.where(a == "q", g.choice([5.0, 6.0, 7.0], 1200), 9.0))
    df = pd.DataFrame({"a": pd.Categorical(a), "b": b})
    gen = SynthPop(Schema.from_dataframe(df), min_samples_leaf=100).fit(df, rng=0)
    s = gen.sample(30_000, rng=1)
    for v, allowed in (("p", {1.0, 2.0}), ("q", {5.0, 6.0, 7.0}), ("r", {9.0})):
        got = s.loc[s["a"] == v, "b"]
        assert set(got.unique()) == allowed
        want = df.loc[df["a"] == v, "b"].value_counts(normalize=True).sort_index()
        have = got.value_counts(normalize=True).sort_index()
        assert np.abs(have.to_numpy() - want.to_numpy()).max() < 0.02, (v, have, want)
