"""The disclosure metrics' parts, checked one by one (SDMetrics' CAP family, synthcity's cluster metrics): the edges the
mutation run found untested (tests/MUTATION.md, nobox/disclosure). The peers' own code is the oracle in
tests/test_peer_metrics.py; here every figure is computed by hand or restated from its definition."""
import math

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema
from achilles.nobox.disclosure import (CAP, DeltaPresence, DisclosureProtection, KAnonymity, KMap, LDiversity, _features,
                                       cap_scores, cluster_labels, delta_presence, k_anonymity, k_map, l_diversity)


@pytest.fixture
def cap_tables():
    syn = pd.DataFrame({"k": list("aab"), "s": list("uvu")})
    real = pd.DataFrame({"k": list("abc"), "s": list("uuv")})
    ctl = pd.DataFrame({"k": list("ab"), "s": list("vw")})
    return real, syn, ctl


def test_attribution_and_cluster_metrics_need_a_control_table(cap_tables):
    real, syn, _ = cap_tables
    for m in (CAP(n_boot=10), DisclosureProtection(n_boot=10), KAnonymity(n_boot=10), KMap(n_boot=10)):
        with pytest.raises(ValueError, match="needs a control table"):
            m.evaluate(real, syn, None, rng=0)


def test_smallest_bins_and_bootstrap_are_allowed(cap_tables):
    real, syn, ctl = cap_tables
    assert CAP(bins=1, n_boot=10).evaluate(real, syn, ctl, rng=0).n == 3  # bins=1 and n_boot=10 are the documented lower bounds
    with pytest.raises(ValueError, match="bins"): CAP(bins=0)
    with pytest.raises(ValueError, match="n_boot"): KAnonymity(n_boot=9)
    assert KAnonymity(n_boot=10).n_boot == 10


def test_generalized_cap_against_a_one_record_release():
    real = pd.DataFrame({"k": list("ab"), "s": list("uv")})
    syn = pd.DataFrame({"k": ["a"], "s": ["v"]})
    sch = Schema.from_dataframe(pd.concat([real, syn]))
    # both real records' nearest synthetic record is the only one (distance 0 and 1); its secret is v
    assert cap_scores(real, syn, ["k"], ["s"], sch, "generalized_cap").tolist() == [0.0, 1.0]


def test_disclosure_protection_over_the_random_guess(cap_tables):
    real, syn, ctl = cap_tables
    real4 = pd.concat([real, pd.DataFrame({"k": ["a"], "s": ["w"]})], ignore_index=True)  # secrets u, u, v, w: 3 values
    r = DisclosureProtection(secret="s", n_boot=10).evaluate(real4, syn, ctl, rng=0)
    cap = 1 - np.nanmean(cap_scores(real4, syn, ["k"], ["s"], Schema.from_dataframe(pd.concat([real4, syn])), "cap"))
    assert r.metrics["baseline_protection"] == pytest.approx(1 - 1 / 3)
    assert r.metrics["cap_protection"] == pytest.approx(cap)
    assert r.attack_rate == pytest.approx(min(cap / (2 / 3), 1.0))
    # a release that never carries the secret: protection 1 over 2/3 is capped at 1
    never = pd.DataFrame({"k": list("abc"), "s": list("vvu")})  # no key carries a record's own secret
    assert DisclosureProtection(secret="s", n_boot=10).evaluate(real4, never, ctl, rng=0).attack_rate == 1.0


def test_features_one_hot_and_scaled():
    sch = Schema.from_dataframe(pd.DataFrame({"c": list("xyz"), "x": [2.0, 4.0, 6.0], "k": [5.0, 5.0, 5.0]}))
    df = pd.DataFrame({"c": ["x", "z", "q"], "x": [2.0, 3.0, 6.0], "k": [5.0, 5.0, 5.0]})  # q: outside the domain
    f = _features(df, sch, ["c", "x", "k"])
    assert f.tolist() == [[1, 0, 0, 0.0, 0.0], [0, 0, 1, 0.25, 0.0], [0, 0, 0, 1.0, 0.0]]  # a constant column: x - lower
    assert _features(df, sch, []).shape == (3, 0)


def test_cluster_labels_apply_each_clustering_with_ten_records_per_cluster():
    from sklearn.cluster import KMeans
    X = np.random.default_rng(0).normal(size=(200, 3))
    lab = cluster_labels(X)
    assert lab.shape == (200, 4) and [len(np.unique(lab[:, j])) for j in range(4)] == [2, 5, 10, 15]
    ref = KMeans(n_clusters=5, init="k-means++", random_state=0, n_init=1).fit(X).labels_  # synthcity's settings
    assert (lab[:, 1] == ref).all()
    assert cluster_labels(X[:50]).shape == (50, 2)  # 50 / 5 = 10 applies, 50 / 10 does not
    assert cluster_labels(X[:50], n_clusters=(10, 2)).shape == (50, 1)  # a clustering that does not apply is skipped, not the end
    Y = X[:7] + 0.01
    assert (cluster_labels(X, Y)[:, 0] == KMeans(2, random_state=0, n_init=1).fit(X).predict(Y)).all()


def test_cluster_figures_by_hand():
    none = np.zeros((4, 0), dtype=np.int64)
    assert k_anonymity(none) == 999 and l_diversity(np.zeros((4, 1), dtype=np.int64)) == 999 and k_map(none) == 0.0
    gappy = np.array([[0], [0], [2]])  # cluster 1 is empty
    assert k_anonymity(gappy) == 1.0 and k_map(gappy) == 1.0
    two = np.array([[0, 0], [0, 1], [1, 2], [1, 3], [1, 4]])  # the 2- and 5-cluster labels
    assert k_anonymity(two) == 1.0
    # secrets: cluster 0 of the 2-clustering holds {7, 8}, cluster 1 holds {7}; the 5-clustering's clusters one record each
    assert l_diversity(np.c_[two, [7, 8, 7, 7, 7]]) == 1.0
    assert l_diversity(np.c_[two[:, :1], [7, 8, 7, 8, 7]]) == 2.0
    real = np.array([[0], [0], [0], [1], [2]]); syn = np.array([[0], [1], [1], [1], [3]])
    # both tables have clusters 0 and 1: ratios 3 / 1 and 1 / 3; cluster 2 (real only) and 3 (synthetic only) do not count
    assert delta_presence(real, syn) == pytest.approx(3 / (1 + 1e-8))
    assert delta_presence(np.array([[0]]), np.array([[1]])) != delta_presence(np.array([[0]]), np.array([[1]]))  # NaN


def test_cluster_metrics_value_is_eq8_with_their_best():
    tr = pd.DataFrame({"q": ["a"] * 30 + ["b"] * 10, "s": list("uvw") * 10 + ["u"] * 10})
    sy = pd.DataFrame({"q": ["a"] * 37 + ["b"] * 3, "s": list("uv") * 20})
    ct = pd.DataFrame({"q": ["a"] * 20 + ["b"] * 20, "s": list("uv") * 20})
    k = KAnonymity(secret="s", n_boot=10).evaluate(tr, sy, ct, rng=0)
    assert (k.attack_rate, k.control_rate, k.metrics["figure_best"]) == (3.0, 20.0, 1.0)
    assert k.value == pytest.approx((3 - 20) / (1 - 20)) and k.metrics["gt"] == 10.0
    m = KMap(secret="s", n_boot=10).evaluate(tr, sy, ct, rng=0)
    # the control figure: the control table's clusters, the synthetic records in them (37 a, 3 b)
    assert (m.attack_rate, m.control_rate) == (3.0, 3.0) and set(m.metrics) == {"figure_train", "figure_control", "figure_best"}
    d = DeltaPresence(secret="s", n_boot=10).evaluate(tr, sy, ct, rng=0)
    assert d.metrics["figure_best"] == 0.0 and d.control_rate == pytest.approx(20 / (3 + 1e-8), rel=1e-9)
    assert d.value == pytest.approx((d.attack_rate - d.control_rate) / (0.0 - d.control_rate))


def test_one_kmeans_initialisation_as_synthcity():
    from sklearn.cluster import KMeans
    X = np.random.default_rng(3).normal(size=(60, 2))  # data on which a second initialisation changes 59 of the 60 labels
    ref = KMeans(5, init="k-means++", random_state=0, n_init=1).fit(X).labels_
    assert (cluster_labels(X)[:, 1] == ref).all()


def test_features_scale_a_narrow_range_and_shift_a_constant_one():
    sch = Schema.from_dataframe(pd.DataFrame({"x": [0.2, 0.7], "k": [5.0, 5.0]}))
    df = pd.DataFrame({"x": [0.2, 0.45, 0.7], "k": [5.0, 5.0, 7.0]})
    assert np.allclose(_features(df, sch, ["x", "k"]), [[0, 0], [0.5, 0], [1, 2]])  # a range under 1 is still divided by


def test_l_diversity_and_delta_presence_pick_the_right_cluster():
    # 2-clustering: both clusters hold the secrets {1, 2, 3}; 5-clustering: clusters 0-3 hold one secret each
    assert l_diversity(np.c_[[0, 0, 0, 1, 1, 1], [0, 1, 2, 3, 4, 4], [1, 2, 3, 1, 2, 3]]) == 1.0
    # cluster 1 has one real and one synthetic record: its ratio 1 beats cluster 0's 2 / 6
    assert delta_presence(np.array([[0], [0], [1]]), np.array([[0]] * 6 + [[1]])) == pytest.approx(1 / (1 + 1e-8))
