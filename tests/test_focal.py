"""The generator's own marginals ("focal points", MAMA-MIA, Golob et al., arXiv 2410.05506): BayNet and PrivBayes measure a marginal of
each attribute with its parents and reproduce it most faithfully, so the audit counts those subsets too when they are larger than the
low-order queries (a degree-2 network on a table of 21 or more columns, where `order="auto"` is 2; any degree above `order`). Measured
(34_audit): Adult x BayNet, 40 random records, the plain attacker under-reported up to 0.098 of AUC. These tests fail if the subsets are
wrong, dropped, chosen with labels, or change a run that has none to add."""
import warnings

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, load_adult
from achilles.generators import make_generator
from achilles.shadow import audit as A
from achilles.shadow.game import ScaleWarning
from achilles.shadow.pool_attack import feature_plan


@pytest.fixture(scope="module")
def adult():
    df = load_adult().iloc[:1500].reset_index(drop=True)
    return df, Schema.from_dataframe(df)


@pytest.mark.parametrize("gen,degree", [("baynet", 2), ("baynet", 3), ("privbayes", 2)])
def test_focal_subsets_are_each_attribute_with_its_parents(adult, gen, degree):
    df, schema = adult
    g = make_generator(gen, schema, degree=degree).fit(df.iloc[:500], rng=1)
    foc = g.focal_subsets()
    want = {tuple(sorted(g.parents_[a] + (int(a),))) for a in g.order_[degree:]}
    assert set(foc) == want and len(foc) == len(want) and all(len(c) == degree + 1 for c in foc)
    assert foc == sorted(foc, key=lambda c: (len(c), c))
    net = g.network()  # the same network, by name
    for c in foc:
        names = {schema.names[i] for i in c}
        assert any({r.attribute, *[p for p in r.parents.split(", ") if p]} == names for r in net.itertuples())


def test_the_plan_adds_only_focal_subsets_larger_than_its_order(adult):
    _, schema = adult
    base = feature_plan(schema, order=2)
    same = feature_plan(schema, order=2, focal=[(0, 1), (3,), (4, 2)])
    assert same.n_features == base.n_features and np.array_equal(same.subsets, base.subsets)
    more = feature_plan(schema, order=2, focal=[(5, 1, 0), (0, 1, 5), (2, 3, 4, 7), (1, 2)])
    assert more.n_query == base.n_query + 2
    tail = [tuple(int(v) for v in r if v >= 0) for r in more.subsets[-2:]]
    assert tail == [(0, 1, 5), (2, 3, 4, 7)]  # once each, sorted, in (size, positions) order
    cont = set(schema.cont_idx.tolist())
    assert more.n_exact == base.n_exact + sum(bool(cont & set(c)) for c in tail)  # their exact-value twins where a number is in them
    rand = feature_plan(schema, order=2, subsets=4, rng=1)  # a focal subset among the random larger ones is queried once
    drawn = [tuple(int(v) for v in r if v >= 0) for r in rand.subsets[-4:]]
    again = feature_plan(schema, order=2, subsets=4, rng=1, focal=drawn[:2])
    assert again.n_query == rand.n_query and np.array_equal(again.subsets, rand.subsets)
    for bad, err in [([(0, 0, 1)], ValueError), ([(0, len(schema))], ValueError), ([(-1, 2)], ValueError), ([()], ValueError),
                     ([("a", 1)], TypeError), ([3], TypeError)]:
        with pytest.raises(err, match="focal"):
            feature_plan(schema, order=2, focal=bad)


def test_focal_subsets_of_the_pool_are_seeded_and_label_free(adult):
    df, schema = adult
    pm = A.PoolModel(df, schema, "baynet", {"degree": 2}, dataset_size=400)
    a, b, c = A.focal_subsets(pm, 3), A.focal_subsets(pm, 3), A.focal_subsets(pm, 4)
    assert a == b and len(a) >= len(schema) - 2 and all(len(s) == 3 for s in a)
    one = A.focal_subsets(pm, 3, fits=1)
    assert set(one) <= set(a)  # the fits are pooled
    assert A.focal_subsets(A.PoolModel(df, schema, "synthpop"), 3) == []  # a generator that does not say
    assert A.focal_subsets(A.PoolModel(df, schema, "independent"), 3) == []


def _audit(df, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)
        return A.audit(df, kw.pop("generator", "baynet"), **dict(dict(records=8, n_datasets=30, dataset_size=200, selectors=(), rng=2,
                                                                       verbose=False), **kw))


def test_an_audit_queries_the_generators_marginals_and_names_them_in_its_run(adult):
    df, _ = adult
    auto = _audit(df, generator_params={"degree": 2}, order=2)
    none = _audit(df, generator_params={"degree": 2}, order=2, focal="none")
    cfg = auto.attrs["config"]
    assert "focal" in cfg and all(len(c) == 3 for c in cfg["focal"]) and "focal" not in none.attrs["config"]
    assert cfg["n_queries"] == none.attrs["config"]["n_queries"] + len(cfg["focal"])
    assert auto.attrs["run_id"] != none.attrs["run_id"]
    names = [tuple(df.columns[i] for i in c) for c in cfg["focal"][:3]]
    given = _audit(df, generator_params={"degree": 2}, order=2, focal=names)
    assert given.attrs["config"]["focal"] == cfg["focal"][:3]


def test_a_run_with_nothing_to_add_keeps_its_run_id_and_rows(adult):
    df, _ = adult
    auto, none = _audit(df), _audit(df, focal="none")  # BayNet's default degree 1 measures pairs; order "auto" is 3 here
    assert auto.attrs["run_id"] == none.attrs["run_id"] and "focal" not in auto.attrs["config"]
    pd.testing.assert_frame_equal(auto, none)


def test_focal_is_checked_before_any_work(adult, monkeypatch):
    df, _ = adult
    monkeypatch.setattr(A, "generate_datasets", lambda *a, **k: pytest.fail("work began before the check"))
    monkeypatch.setattr(A, "focal_subsets", lambda *a, **k: pytest.fail("the generator was fitted before the check"))
    with pytest.raises(ValueError, match="focal"):
        _audit(df, focal="some")
    with pytest.raises(ValueError, match="nosuch"):
        _audit(df, focal=[("age", "nosuch")])
    with pytest.raises(ValueError, match="focal"):
        A.loo_audit(df, "baynet", records=2, n_seeds=10, focal="yes", verbose=False)


def test_the_command_line_passes_focal(adult, tmp_path, capsys, monkeypatch):
    from achilles import cli
    df, _ = adult
    data = tmp_path / "t.csv"; df.iloc[:400].to_csv(data, index=False)
    seen = []

    class Called(Exception): pass

    def fake(*a, **k):
        seen.append(k["focal"]); raise Called

    monkeypatch.setattr(A, "audit", fake)
    argv = ["audit", "--csv", str(data), "--generator", "baynet", "--records", "1,2", "--cache-dir", "", "--results", "", "--quiet"]
    for flag, want in (([], "auto"), (["--focal", "none"], "none")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the CSV's typing notes
            assert cli.main(argv + flag + ["--out", str(tmp_path / f"o{len(flag)}.csv")]) != 0  # the stand-in stops the command there
        assert seen[-1] == want
    capsys.readouterr()
    assert cli.main(argv + ["--focal", "maybe"]) == 2
    assert "--focal" in capsys.readouterr().err


def test_the_focal_fits_train_on_their_documented_draws(adult, monkeypatch):
    "Fit f trains on the rows seed_child(root, 2f) draws (distinct, re-indexed 0..n-1) and is seeded by seed_child(root, 2f + 1)."
    from achilles.core.rng import seed_child, seed_root
    from achilles.generators.baynet import BayNet
    df, schema = adult
    seen, real = [], BayNet.fit
    def rec(self, d, rng=None):
        seen.append((d.copy(), rng.bit_generator.state["state"]["state"]))
        return real(self, d, rng=rng)
    monkeypatch.setattr(BayNet, "fit", rec)
    pm = A.PoolModel(df, schema, "baynet", {"degree": 2}, dataset_size=300)
    A.focal_subsets(pm, 11, fits=3)
    root = seed_root(11)
    assert len(seen) == 3
    for f, (d, state) in enumerate(seen):
        rows = np.sort(np.random.default_rng(seed_child(root, 2 * f)).choice(len(df), 300, replace=False))
        pd.testing.assert_frame_equal(d, df.iloc[rows].reset_index(drop=True))
        assert state == np.random.default_rng(seed_child(root, 2 * f + 1)).bit_generator.state["state"]["state"]
    assert len({tuple(d.index) for d, _ in seen}) == 1 and len({s for _, s in seen}) == 3


def test_which_focal_subsets_a_run_adds(adult, monkeypatch):
    from achilles.core.rng import seed_child, seed_root
    df, schema = adult
    pm = A.PoolModel(df, schema, "baynet", {"degree": 2}, dataset_size=200)
    assert A._plan_focal("none", pm, ("query",), 1, seed_root(0)) == []
    run = _audit(df, generator_params={"degree": 2}, order=2)  # rng=2: the audit's focal fits are seeded by seed_child(root, 13)
    want = [list(c) for c in A.focal_subsets(pm, seed_child(seed_root(2), 13)) if len(c) > 2]
    assert run.attrs["config"]["focal"] == want
    none = _audit(df, generator_params={"degree": 2}, order=2, attacks=("distance", "density"))  # no counting query to add them to
    assert "focal" not in none.attrs["config"]
    pairs = _audit(df, order=2)  # degree 1 measures pairs: order 2 reads them already
    assert "focal" not in pairs.attrs["config"]
    got = []  # the plan's random larger subsets keep their own stream, seed_child(root, 2)
    real = A.audit_plan
    monkeypatch.setattr(A, "audit_plan", lambda *a, **k: got.append(a[4].integers(2**62)) or real(*a, **k))
    _audit(df, order=2, subsets=3, focal="none")
    assert got[-1] == np.random.default_rng(seed_child(seed_root(2), 2)).integers(2**62)


def test_a_fully_connected_network_measures_one_joint():
    "degree = columns - 1: the last attribute's parents are all the others, and that one joint holds every other table BayNet keeps."
    df = load_adult().iloc[:400][["sex", "race", "income", "workclass"]]
    g = make_generator("baynet", Schema.from_dataframe(df), degree=3).fit(df, rng=0)
    assert g.focal_subsets() == [(0, 1, 2, 3)]
