"""Issue 38 item 3: the leave-one-out game on the table itself (`loo_audit`): the record's OUT releases never hold it or a copy,
every IN release does; the rows do not depend on threads; a rerun resumes from the store; bad arguments fail before any work."""
import time
import warnings

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, load_adult
from achilles.core.results import ResultsStore
from achilles.shadow.audit import loo_audit
from achilles.shadow.game import ScaleWarning

KW = dict(n_seeds=30, order=1, rng=1, verbose=False)


@pytest.fixture(scope="module")
def table():
    df = load_adult().iloc[:200].reset_index(drop=True)
    df = pd.concat([df, df.iloc[[7, 7]]], ignore_index=True)  # rows 200 and 201 copy row 7
    return df


def _loo(df, gen, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)  # small games on purpose
        return loo_audit(df, gen, **dict(KW, **kw))


def test_identity_finds_every_record_copies_excluded_from_out(table):
    "The identity generator publishes its training set: a record with copies scores 1.0 only if its OUT releases hold no copy."
    r = _loo(table, "identity", records=[7, 200, 3])
    assert (r["auc"] == 1.0).all() and (r["auc_dcr"] == 1.0).all(), r[["record", "auc", "auc_dcr"]]
    assert (r["n_in"] == 30).all() and (r["n_out"] == 30).all()
    assert r.attrs["config"]["release_size"] == 202 and r.attrs["config"]["design"] == "loo"


def test_identity_finds_record_0_its_out_releases_add_no_target(table):
    "The OUT releases are the table without the record, nothing added: the identity generator finds record 0 (the stand-in target) too."
    r = _loo(table, "identity", records=[0, 1])
    assert (r["auc"] == 1.0).all(), r[["record", "auc"]]


def test_making_the_shared_releases_counts_as_generation(table, monkeypatch):
    "The shared releases' time is part of `seconds['generation']` (made to take 0.3 s here), not subtracted nor lost."
    import achilles.shadow.audit as A
    real = A.generate_datasets
    def slow(pm, specs, *a, **k):
        if specs and specs[0].role == "loo-in": time.sleep(0.3)
        return real(pm, specs, *a, **k)
    monkeypatch.setattr(A, "generate_datasets", slow)
    sec = _loo(table, "independent", records=[3], n_seeds=10).attrs["seconds"]
    assert sec["generation"] >= 0.3 and sec["generation"] <= sec["total"], sec


def test_rows_do_not_depend_on_threads_and_a_rerun_resumes(table, tmp_path):
    one = _loo(table, "independent", records=[3, 50], n_jobs=1)
    two = _loo(table, "independent", records=[3, 50], n_jobs=2)
    np.testing.assert_array_equal(one["auc"].to_numpy(), two["auc"].to_numpy())
    store = ResultsStore(tmp_path / "r.sqlite")
    a = _loo(table, "independent", records=[3], store=store, cache_dir=tmp_path / "c")
    b = _loo(table, "independent", records=[3, 50], store=store, cache_dir=tmp_path / "c")  # record 3 read back, 50 scored
    assert b.attrs["run_id"] == a.attrs["run_id"]
    np.testing.assert_array_equal(b["auc"].to_numpy(), one["auc"].to_numpy())
    c = _loo(table, "independent", records=[3], n_seeds=40, store=store)
    assert c.attrs["run_id"] != a.attrs["run_id"]


def test_the_in_releases_are_shared_and_seeded_apart_from_the_out_ones(table, tmp_path):
    "Two records share their IN releases (generated once, cached once) and each has its own OUT releases."
    from achilles.shadow.game import cache_info
    _loo(table, "independent", records=[3, 50], cache_dir=tmp_path / "c")
    assert cache_info(tmp_path / "c")["entries"] == 30 + 2 * 30


@pytest.mark.parametrize("kw, err, msg", [
    (dict(n_seeds=5), ValueError, "n_seeds=5"),
    (dict(rng=None), TypeError, "must be an int seed"),
    (dict(release_size=1), ValueError, "release_size=1"),
])
def test_bad_arguments_fail_before_any_work(table, kw, err, msg):
    with pytest.raises(err, match=msg): _loo(table, "independent", records=[3], **kw)


def test_a_tiny_table_is_refused():
    with pytest.raises(ValueError, match="at least 10"): _loo(load_adult().iloc[:9], "independent", records=[1])


def test_the_releases_follow_the_pinned_seed_stream(table, tmp_path):
    """IN release j: the whole table, fitted on child 1 and sampled on child 2 of seed_child(seed_child(root, 3), j), nothing added;
    OUT release j of record r: the table without r and its copies, from seed_child(seed_child(seed_child(root, 4), r), j)."""
    from achilles.core.data import encode
    from achilles.core.rng import seed_child, seed_root
    from achilles.generators import make_generator
    from achilles.shadow.audit import PoolModel
    from achilles.shadow.game import DatasetCache, dataset_key
    _loo(table, "independent", records=[7], cache_dir=tmp_path / "c", rng=4)
    schema = Schema.from_dataframe(table)
    pm = PoolModel(table, schema, "independent", dataset_size=len(table))
    enc, root, N = pm.encoded, seed_root(4), len(table)
    def made(rows, ss):
        g = make_generator("independent", schema)
        g.fit_encoded(enc.take(rows), rng=np.random.default_rng(seed_child(ss, 1)))
        return g.sample_encoded(N, rng=np.random.default_rng(seed_child(ss, 2)))
    cache = DatasetCache(tmp_path / "c")
    whole, without = np.arange(N, dtype=np.int32), np.setdiff1d(np.arange(N), [7, 200, 201]).astype(np.int32)
    for rows, ss in ((whole, seed_child(seed_child(root, 3), 2)), (without, seed_child(seed_child(seed_child(root, 4), 7), 5))):
        got, want = cache.get(dataset_key(pm, rows, None, ss)), made(rows, ss)
        np.testing.assert_array_equal(got.cat, want.cat); np.testing.assert_allclose(got.cont, want.cont)


def test_boundaries_paths_order_and_times(table, tmp_path, capsys):
    "The smallest allowed sizes run; a store given as a path is used; rows come sorted by record; the times add up; nothing printed."
    r = _loo(table.iloc[:10], "independent", records=[6, 2], n_seeds=4, folds=2, release_size=2, store=str(tmp_path / "s.sqlite"))
    assert r["record"].tolist() == [2, 6] and len(ResultsStore(tmp_path / "s.sqlite").read("loo")) == 2
    sec = r.attrs["seconds"]
    assert all(0 <= sec[k] <= sec["total"] for k in ("generation", "features", "classifiers")) and sec["generation"] > 0
    assert len(r.attrs["run_id"]) == 16 and len(r.attrs["config"]["population"]) == 16
    assert sum(sec[k] for k in ("generation", "dataset signals", "features", "classifiers")) <= sec["total"]  # stages run one after another
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""  # verbose=False: no bar from the releases' generation either
    import hashlib, json
    want = hashlib.sha256(json.dumps(r.attrs["config"], sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert r.attrs["run_id"] == want  # the documented hash: a rerun on a store made by another run finds its rows
    r = _loo(table.iloc[:10], "independent", records=[2], n_seeds=4, folds=2, release_size=2, n_jobs=None)  # n_jobs=None is allowed
    assert r["record"].tolist() == [2]
    r = _loo(table, "independent", records=[3], attacks=("query", "distance", "rarest"))
    assert np.isfinite(r["auc_rarest"]).all()  # the record's rarest column is read


@pytest.mark.parametrize("attacks", ["default", ("query", "distance", "rarest")])
def test_a_row_is_the_documented_computation_by_hand(table, tmp_path, attacks):
    """Record 7's row, rebuilt step by step from the documented seed children: the plan from child 2 (no random subsets), the IN and
    OUT releases (pinned above), the stack of IN then OUT, the pool-level signals, the pair features, and the per-record model
    on child r of child 5, one thread. Every figure of the row must come out equal."""
    from achilles.core.rng import seed_child, seed_root
    from achilles.shadow.audit import PoolModel, _value_groups
    from achilles.shadow.game import DatasetCache, dataset_key
    from achilles.shadow.pool_attack import (DEFAULT_ATTACKS, audit_plan, exact_tolerance, score_record, stack_pool,
                                             _dataset_signals, _pair_block, _rarest_columns)
    t0 = __import__("time").perf_counter()
    attacks = DEFAULT_ATTACKS if attacks == "default" else attacks  # the query family reads the plan's subsets: none here
    row = _loo(table, "independent", records=[7], cache_dir=tmp_path / "c", rng=4, attacks=attacks)
    wall = __import__("time").perf_counter() - t0
    assert "index" not in row.columns and row.attrs["seconds"]["total"] <= wall  # the total is the call's own time
    schema = Schema.from_dataframe(table)
    pm = PoolModel(table, schema, "independent", dataset_size=len(table))
    root, N, r, S = seed_root(4), len(table), 7, KW["n_seeds"]
    plan = audit_plan(schema, attacks, 1, 0, np.random.default_rng(seed_child(root, 2)), tol=exact_tolerance(schema, pm.encoded))
    assert row.attrs["config"]["n_features"] == plan.n_features  # no random subsets (a constant count on a small table would hide one)
    cache = DatasetCache(tmp_path / "c")
    whole = np.arange(N, dtype=np.int32)
    group = _value_groups(pm.encoded); without = np.flatnonzero(group != group[r]).astype(np.int32)
    ins = [cache.get(dataset_key(pm, whole, None, seed_child(seed_child(root, 3), j))) for j in range(S)]
    outs = [cache.get(dataset_key(pm, without, None, seed_child(seed_child(seed_child(root, 4), r), j))) for j in range(S)]
    times = {"dataset signals": 0.0, "features": 0.0}
    stacked, ref, gh = _dataset_signals(pm, plan, stack_pool(ins + outs, compact=True), root, 1000, 1, times)
    X = _pair_block(pm, plan, stacked, ref, gh, np.array([r]), np.arange(2 * S), np.zeros(2 * S, np.int64), root, 1, times)
    y = np.r_[np.ones(S, np.int64), np.zeros(S, np.int64)]
    fig = score_record(X, y, plan, attacks, "lda", 5, 150, rng=np.random.default_rng(seed_child(seed_child(root, 5), r)),
                       n_jobs=1, rarest=int(_rarest_columns(pm, plan, attacks)[r]))
    got = row.iloc[0]
    for k, v in fig.items():
        if isinstance(v, float) and np.isnan(v): assert np.isnan(got[k]), k
        else: assert got[k] == v, (k, got[k], v)


@pytest.mark.parametrize("attacks", ["default", ("query", "density", "genlra", "groundhog", "classifier")])
def test_records_after_the_first_reuse_the_shared_releases_exactly(table, attacks, capfd):
    """The IN releases are stacked, and their Groundhog features, Gen-LRA reference masses and the forest's reference computed, once
    for all records (`join_pools` then puts each record's OUT pool after them): the rows of three records in one call equal those of
    each record alone, where the shared part is fresh. Gen-LRA and the forest read per-row masses and per-dataset seeds."""
    from achilles.shadow.pool_attack import DEFAULT_ATTACKS
    attacks = DEFAULT_ATTACKS if attacks == "default" else attacks
    together = _loo(table, "independent", records=[3, 7, 50], attacks=attacks, n_seeds=12)
    assert capfd.readouterr().err == ""  # verbose=False: not a bar, not a line, for the shared releases or a record's own
    sec = together.attrs["seconds"]
    assert all(0 <= v <= sec["total"] for v in sec.values()), sec  # each stage a part of the call's time (the forest's counts twice)
    alone = pd.concat([_loo(table, "independent", records=[r], attacks=attacks, n_seeds=12) for r in (3, 7, 50)], ignore_index=True)
    cols = [c for c in together.columns if c not in ("q_value",)]
    pd.testing.assert_frame_equal(together[cols].reset_index(drop=True), alone[cols].reset_index(drop=True))


@pytest.mark.parametrize("folds", [1, 51])
def test_folds_outside_2_to_50_are_refused(table, folds):
    with pytest.raises(ValueError, match=f"folds={folds}"): _loo(table, "independent", records=[3], folds=folds)
