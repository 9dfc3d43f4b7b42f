"""The privacy game: no target leakage (duplicates included), balanced labels, seeds, n_jobs/backend independence,
cache keys, and resuming after a kill."""
import numpy as np
import pandas as pd
import pytest

import achilles.shadow.game as game
from achilles.core.data import Encoded, Schema, load_adult
from achilles.shadow.game import DatasetCache, ThreatModel, compact, dataset_key, expand, matching_rows, plan_datasets, play_game, split_population
from achilles.core.rng import seed_child, seed_root

# the games here are small on purpose (tests/test_faults_cache.py checks the ScaleWarning itself)
pytestmark = pytest.mark.filterwarnings("ignore::achilles.shadow.game.ScaleWarning")

@pytest.fixture(scope="module")
def small(adult):
    "2,000 Adult records, with 4 extra exact copies of record 0 (the target of most tests)."
    df, schema = adult
    pop = pd.concat([df.iloc[:2000], df.iloc[[0, 0, 0, 0]]], ignore_index=True)
    return pop, schema


def tm_of(small, generator="identity", **kw):
    pop, schema = small
    sizes = dict(dataset_size=50, n_aux=800, n_test_pool=400, n_shadow=20, n_test=10)
    sizes.update(kw)
    return ThreatModel(pop, schema, generator=generator, name="adult-small", **sizes)


def test_target_and_duplicates_never_leak(small):
    tm = tm_of(small)
    t = tm.encoded.take([0])
    assert matching_rows(tm.encoded, t).sum() == 5  # the target and its 4 copies
    g = play_game(tm, 0, rng=1, verbose=False)
    assert not matching_rows(tm.encoded.take(np.r_[g.aux_ids, g.test_ids]), t).any()
    for s in g.shadow_specs + g.test_specs:
        assert not matching_rows(tm.encoded.take(s.rows), t).any()  # the real records never include x_T or a copy
    # identity publishes its training data: the target is in exactly the IN synthetic datasets, once
    for d, y in zip(g.shadow + g.test, np.r_[g.shadow_labels, g.test_labels]):
        assert matching_rows(d, t).sum() == y


def test_target_given_as_dataframe_with_duplicates(small):
    tm = tm_of(small)
    pop, _ = small
    g = play_game(tm, pop.iloc[[0]], rng=2, verbose=False)
    assert g.target_id is None
    assert not matching_rows(tm.encoded.take(np.r_[g.aux_ids, g.test_ids]), tm.encoded.take([0])).any()


def test_shared_out_excludes_every_target(small):
    tm = tm_of(small)
    targets = [0, 5, 9]
    cache = DatasetCache(None)
    games = [play_game(tm, t, rng=10 + t, cache=cache, exclude=targets, shared_rng=77, verbose=False) for t in targets]
    assert games[0].stats["generated"] == 30 and all(g.stats["generated"] == 15 for g in games[1:])
    for g in games:
        np.testing.assert_array_equal(g.aux_ids, games[0].aux_ids)
        for t in targets:  # no target, nor any copy, in the shared pools or the shared OUT datasets
            te = tm.encoded.take([t])
            assert not matching_rows(tm.encoded.take(np.r_[g.aux_ids, g.test_ids]), te).any()
            for d, y in zip(g.shadow + g.test, np.r_[g.shadow_labels, g.test_labels]):
                if y == 0: assert not matching_rows(d, te).any()
    with pytest.raises(ValueError, match="exclude must list every target"):
        play_game(tm, 3, rng=1, exclude=targets, shared_rng=77, verbose=False)


def test_labels_balanced_and_sizes(small):
    tm = tm_of(small, generator="independent", n_shadow=12, n_test=6)
    g = play_game(tm, 0, rng=0, verbose=False)
    assert g.shadow_labels.tolist() == [1] * 6 + [0] * 6 and g.test_labels.tolist() == [1] * 3 + [0] * 3
    assert all(d.n == 50 and d.cat.dtype == np.int32 and d.cont.dtype == np.float64 for d in g.shadow + g.test)
    assert all(len(s.rows) == (49 if s.label else 50) for s in g.shadow_specs)
    with pytest.raises(ValueError, match="must be even"):
        tm_of(small, n_shadow=11)
    with pytest.raises(ValueError, match="n_test=0"):
        tm_of(small, n_test=0)


def test_seeds_independent_and_reproducible(small):
    tm = tm_of(small, generator="independent")
    g = play_game(tm, 0, rng=5, verbose=False)
    specs = g.shadow_specs + g.test_specs
    keys = [tuple(s.seed.spawn_key) for s in specs]
    assert len(set(keys)) == len(keys)  # every dataset has its own seed
    assert len({s.key for s in specs}) == len(specs)
    assert len({tuple(s.rows[:5]) for s in specs}) == len(specs)  # and draws its own records
    states = [seed_child(s.seed, 1).generate_state(2).tolist() for s in specs]
    assert len({tuple(x) for x in states}) == len(states)
    same = play_game(tm, 0, rng=5, verbose=False)
    for a, b in zip(g.shadow + g.test, same.shadow + same.test):
        np.testing.assert_array_equal(a.cat, b.cat); np.testing.assert_array_equal(a.cont, b.cont)
    other = play_game(tm, 0, rng=6, verbose=False)
    assert not np.array_equal(other.aux_ids, g.aux_ids)
    assert not np.array_equal(other.shadow[0].cat, g.shadow[0].cat)
    # a Generator as rng: one draw, then reproducible from the same state
    a = play_game(tm, 0, rng=np.random.default_rng(3), verbose=False)
    b = play_game(tm, 0, rng=np.random.default_rng(3), verbose=False)
    np.testing.assert_array_equal(a.shadow[0].cont, b.shadow[0].cont)


def test_same_datasets_for_any_n_jobs(small):
    tm = tm_of(small, generator="baynet", n_shadow=16, n_test=8)
    one = play_game(tm, 0, rng=11, jobs=1, verbose=False)
    two = play_game(tm, 0, rng=11, jobs=2, batch_size=3, verbose=False)
    for a, b in zip(one.shadow + one.test, two.shadow + two.test):
        np.testing.assert_array_equal(a.cat, b.cat); np.testing.assert_array_equal(a.cont, b.cont)


def test_cache_key_changes_with_every_input(small, monkeypatch):
    tm = tm_of(small)
    pop, schema = small
    rows = np.arange(10, 59)
    t = tm.encoded.take([0])
    ss = seed_root(1)
    base = dataset_key(tm, rows, t, ss)
    assert dataset_key(tm, rows, t, seed_root(1)) == base  # deterministic
    changed_pop = pop.copy(); changed_pop.loc[1500, "age"] = changed_pop.loc[1500, "age"] + 1
    age = schema["age"]
    other_schema = Schema(tuple(c if c.name != "age" else type(c)(c.name, c.kind, lower=c.lower, upper=c.upper + 1,
                                                                    integer=c.integer) for c in schema.columns))
    variants = [
        dataset_key(tm.replace(population=changed_pop), rows, t, ss),  # population
        dataset_key(tm.replace(schema=other_schema), rows, t, ss),  # schema (domain of a column)
        dataset_key(tm.replace(generator="independent"), rows, t, ss),  # generator
        dataset_key(tm_of(small, generator="independent", generator_params=dict(histogram_bins=5)), rows, t, ss),  # params
        dataset_key(tm.replace(dataset_size=60), rows, t, ss),  # size
        dataset_key(tm, np.arange(11, 60), t, ss),  # which records
        dataset_key(tm, rows, tm.encoded.take([1]), ss),  # target
        dataset_key(tm, rows, None, ss),  # IN vs OUT
        dataset_key(tm, rows, t, seed_root(2)),  # seed
        dataset_key(tm, rows, t, seed_child(ss, 0)),  # seed node (role / index)
    ]
    assert dataset_key(tm_of(small, generator="independent"), rows, t, ss) != variants[3]
    monkeypatch.setattr(game, "__version__", "99.0")
    variants.append(dataset_key(tm, rows, t, ss))  # achilles version
    assert base not in variants and len(set(variants)) == len(variants)


def test_cache_roundtrip_is_exact(small, tmp_path):
    tm = tm_of(small, generator="independent")
    fresh = play_game(tm, 0, rng=4, verbose=False)
    cached = play_game(tm, 0, rng=4, cache=tmp_path, verbose=False)
    again = play_game(tm, 0, rng=4, cache=tmp_path, verbose=False)
    assert again.stats == {**again.stats, "cached": 30, "generated": 0}
    for a, b, c in zip(fresh.shadow, cached.shadow, again.shadow):
        np.testing.assert_array_equal(a.cont, c.cont); np.testing.assert_array_equal(a.cat, c.cat)
        np.testing.assert_array_equal(b.cont, c.cont)
    files = list(tmp_path.glob("*/*.npz"))
    assert len(files) == 30
    with np.load(files[0]) as z: assert z["cat"].dtype == np.uint8 and z["cont"].dtype == np.float64
    e = Encoded(np.array([[70000]], np.int32), np.zeros((1, 0)))
    assert compact(e).cat.dtype == np.uint32 and expand(compact(e)).cat.dtype == np.int32


def test_resume_after_kill_loses_and_duplicates_nothing(small, tmp_path, monkeypatch):
    tm = tm_of(small, generator="independent")
    clean = play_game(tm, 0, rng=8, verbose=False)
    calls = {"n": 0}
    real_put = DatasetCache.put

    def dying_put(self, key, enc, meta=None):
        if calls["n"] == 7: raise KeyboardInterrupt("simulated kill")
        calls["n"] += 1
        real_put(self, key, enc, meta)

    monkeypatch.setattr(DatasetCache, "put", dying_put)
    with pytest.raises(KeyboardInterrupt):
        play_game(tm, 0, rng=8, cache=tmp_path, batch_size=2, verbose=False)
    monkeypatch.setattr(DatasetCache, "put", real_put)
    assert len(list(tmp_path.glob("*/*.npz"))) == 7
    assert not list(tmp_path.glob("*/.*.tmp"))  # no half-written file
    generated = []
    real_batch = game._fit_sample_batch
    monkeypatch.setattr(game, "_fit_sample_batch", lambda *a, **k: generated.extend(a[-1]) or real_batch(*a, **k))
    resumed = play_game(tm, 0, rng=8, cache=tmp_path, batch_size=2, verbose=False)
    assert resumed.stats["cached"] == 7 and resumed.stats["generated"] == 23 and len(generated) == 23
    assert len(list(tmp_path.glob("*/*.npz"))) == 30
    for a, b in zip(clean.shadow + clean.test, resumed.shadow + resumed.test):
        np.testing.assert_array_equal(a.cat, b.cat); np.testing.assert_array_equal(a.cont, b.cont)


def test_workers_write_the_cache_where_they_see_its_folder(small, tmp_path, monkeypatch):
    """Issue 39: a worker writes each dataset it makes into the cache folder where it sees it (same machine or shared storage), so
    the client only stacks them (the client's compression and fsync per dataset capped generation on 2 workers); where a worker
    does not see the folder, the client writes it. Either way every dataset is stored once and loads as it was made."""
    tm = tm_of(small, generator="independent")
    client_puts, real_put = [], DatasetCache.put
    monkeypatch.setattr(DatasetCache, "put", lambda self, key, enc, meta=None: client_puts.append(key) or real_put(self, key, enc, meta))
    made = play_game(tm, 0, rng=8, cache=tmp_path / "a" / "new", jobs=2, batch_size=4, verbose=False)  # loky workers: other processes; a folder (and its parent) made for them
    assert client_puts == [] and len(list((tmp_path / "a" / "new").glob("*/*.npz"))) == 30
    real_batch = game._fit_sample_batch
    elsewhere = tmp_path / "not_on_this_worker"
    monkeypatch.setattr(game, "_fit_sample_batch",
                        lambda *a, cache=None, keys=None, **k: real_batch(*a, cache=None if cache is None else str(elsewhere), keys=keys, **k))
    play_game(tm, 0, rng=8, cache=tmp_path / "b", jobs=1, batch_size=4, verbose=False)
    assert len(client_puts) == 30 and len(set(client_puts)) == 30 and not elsewhere.exists()
    monkeypatch.setattr(game, "_fit_sample_batch", real_batch)
    for folder in ("a/new", "b"):
        again = play_game(tm, 0, rng=8, cache=tmp_path / folder, verbose=False)
        assert again.stats["cached"] == 30 and again.stats["generated"] == 0
        for x, y in zip(made.shadow + made.test, again.shadow + again.test):
            np.testing.assert_array_equal(x.cat, y.cat); np.testing.assert_array_equal(x.cont, y.cont)


def test_validation(small):
    tm = tm_of(small)
    with pytest.raises(ValueError, match="target=99999"): play_game(tm, 99999, verbose=False)
    with pytest.raises(TypeError, match="row id"): play_game(tm, 1.5, verbose=False)
    with pytest.raises(ValueError, match="one record"): play_game(tm, small[0].iloc[:2], verbose=False)
    with pytest.raises(TypeError, match="cache="): play_game(tm, 0, cache=3, verbose=False)
    with pytest.raises(TypeError, match="no hyperparameter"):
        play_game(tm_of(small, generator="independent", generator_params=dict(bins=3)), 0, verbose=False)
    with pytest.raises(ValueError, match="only .* records of Ω remain"):
        split_population(tm_of(small, n_aux=1600, n_test_pool=400), tm.encoded.take([0]), rng=0)


def test_dask_distributed_backend_gives_identical_datasets(small):
    distributed = pytest.importorskip("distributed")
    from joblib import parallel_config
    tm = tm_of(small, generator="baynet", n_shadow=12, n_test=6)
    local = play_game(tm, 0, rng=21, jobs=1, verbose=False)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with parallel_config(backend="dask"), distributed.get_task_stream(client) as ts:
            remote = play_game(tm, 0, rng=21, jobs=-1, batch_size=4, verbose=False)
        assert len(ts.data) >= 5  # the 18 datasets really ran as tasks on the cluster (5 batches of <= 4)
    for a, b in zip(local.shadow + local.test, remote.shadow + remote.test):
        np.testing.assert_array_equal(a.cat, b.cat); np.testing.assert_array_equal(a.cont, b.cont)


def test_a_dataset_is_fitted_with_seed_child_1_and_sampled_with_child_2_and_its_key_says_whether_the_target_was_added():
    "The seed stream every cache entry depends on, pinned: fit on child 1, sample on child 2; IN and OUT datasets of the same rows never share a key."
    from achilles.generators import make_generator
    from achilles.shadow.audit import PoolModel
    df = load_adult().iloc[:200].reset_index(drop=True)
    schema = Schema.from_dataframe(df)
    pm = PoolModel(df, schema, "independent", dataset_size=50)
    ss = seed_child(seed_root(11), 3)
    rows = np.arange(50)
    spec = game.DatasetSpec("pool", 0, 0, rows, ss, dataset_key(pm, rows, None, ss))
    got, _ = game.generate_datasets(pm, [spec], pm.encoded.take([0]), jobs=1, verbose=False)
    gen = make_generator("independent", schema)
    gen.fit_encoded(pm.encoded.take(rows), rng=np.random.default_rng(seed_child(ss, 1)))
    want = gen.sample_encoded(50, rng=np.random.default_rng(seed_child(ss, 2)))
    np.testing.assert_array_equal(got[0].cat, want.cat); np.testing.assert_array_equal(got[0].cont, want.cont)
    assert dataset_key(pm, rows, pm.encoded.take([0]), ss) != dataset_key(pm, rows, None, ss)


def test_a_dataset_key_is_the_documented_hash_of_its_fields():
    """The cache key is SHA-256 of the JSON of its fields (achilles version, population, generator, params, sizes, seed, whether the
    target was added, and `own_size` only for pools that size datasets as trained), then the row ids and the target's values."""
    import hashlib, json
    from achilles import __version__
    from achilles.core.rng import seed_id
    from achilles.shadow.audit import PoolModel
    df = load_adult().iloc[:200].reset_index(drop=True)
    schema = Schema.from_dataframe(df)
    ss, rows = seed_child(seed_root(5), 1), np.arange(7, 57)
    def want(tm, target, own):
        meta = dict(achilles=__version__, population=tm.fingerprint, generator=tm.generator, params=tm.generator_params,
                    dataset_size=tm.dataset_size, seed=seed_id(ss), target_added=target is not None, **({"own_size": True} if own else {}))
        h = hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode())
        h.update(rows.astype(np.int64).tobytes())
        if target is not None: h.update(np.ascontiguousarray(target.cat).tobytes()); h.update(np.ascontiguousarray(target.cont).tobytes())
        return h.hexdigest()
    own = PoolModel(df, schema, "independent", dataset_size=50, own_size=True)
    plain = PoolModel(df, schema, "independent", dataset_size=50)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", game.ScaleWarning)  # a toy game on purpose
        tm = ThreatModel(df, schema, "independent", dataset_size=50, n_aux=50, n_test_pool=100, n_shadow=10, n_test=4)  # no own_size attribute
    t = own.encoded.take([3])
    assert dataset_key(own, rows, None, ss) == want(own, None, True) and dataset_key(own, rows, t, ss) == want(own, t, True)
    assert dataset_key(plain, rows, None, ss) == want(plain, None, False)
    assert dataset_key(tm, rows, t, ss) == want(tm, t, False)
