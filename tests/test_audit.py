"""The shared-pool audit: copies IN together, dask, resuming after kill -9, and clear errors before any work."""
import signal, subprocess, sys, warnings
from pathlib import Path

import numpy as np
import pytest

from achilles.core.data import Schema, encode, load_adult
from achilles.core.results import ResultsStore
from helpers import wait_rows
from achilles.shadow.audit import PoolModel, audit, plan_pool

ACHILLES = str(Path(sys.executable).parent / "achilles")


@pytest.fixture(scope="module")
def adult():
    df = load_adult()
    return df, Schema.from_dataframe(df)


def test_plan_pool_balances_and_excludes_copies(adult):
    df, schema = adult
    pm = PoolModel(df.iloc[:3000], schema, "independent", dataset_size=300)
    pool = plan_pool(pm, np.arange(200), 400, rng=3)
    assert abs(pool.membership.mean() - 0.5) < 0.02
    assert 150 < pool.membership.sum(axis=0).min()  # every record IN of about half the datasets
    for j, s in enumerate(pool.specs[:50]):
        assert set(s.rows) & set(range(200)) == set(np.flatnonzero(pool.membership[j]))


def test_dask_cluster_gives_the_same_audit(adult):
    distributed = pytest.importorskip("distributed")
    from joblib import parallel_config
    df, schema = adult
    kw = dict(records=12, n_datasets=40, dataset_size=200, order=2, selectors=(), rng=5, verbose=False)
    local = audit(df, "baynet", n_jobs=1, **kw)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        with parallel_config(backend="dask"):
            remote = audit(df, "baynet", n_jobs=-1, **kw)
    cols = ["auc", "auc_query", "auc_distance", "auc_density", "eps_lower"]
    np.testing.assert_array_equal(local[cols].to_numpy(), remote[cols].to_numpy())


def test_kill_9_then_resume_equals_a_clean_run(tmp_path):
    # enough records that the kill lands mid-run (60 were sometimes all stored between two polls of the store)
    cmd = [ACHILLES, "audit", "--records", "240", "--n-datasets", "120", "--dataset-size", "200", "--order", "2", "--quiet", "--interval", "calibrated",
           "--cache-dir", str(tmp_path / "cache")]
    clean, killed = tmp_path / "clean.sqlite", tmp_path / "killed.sqlite"
    subprocess.run(cmd + ["--results", str(clean), "--cache-dir", ""], check=True, capture_output=True, timeout=600)
    p = subprocess.Popen(cmd + ["--results", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_rows(killed, 5, p, timeout=300, kind="audit"), "the run never wrote its first rows"
    p.send_signal(signal.SIGKILL); p.wait()
    assert 0 < len(ResultsStore(killed).read("audit")) < 240
    subprocess.run(cmd + ["--results", str(killed)], check=True, capture_output=True, timeout=600)
    a = ResultsStore(clean).read("audit").sort_values("record").reset_index(drop=True)
    b = ResultsStore(killed).read("audit").sort_values("record").reset_index(drop=True)
    assert len(a) == len(b) == 240
    np.testing.assert_array_equal(a["auc"].to_numpy(), b["auc"].to_numpy())
    np.testing.assert_array_equal(a["auc_ci_low"].to_numpy(), b["auc_ci_low"].to_numpy())  # the same widening: the null refits resumed too
    assert len(ResultsStore(killed).read("calibration")) == len(ResultsStore(clean).read("calibration")) == 200


def test_bad_arguments_fail_before_work(adult):
    df, schema = adult
    with pytest.raises(ValueError, match="overflow"):
        audit(df, "baynet", records=3000, dataset_size=1000, n_datasets=400, verbose=False)
    with pytest.raises(TypeError, match="int seed"):
        audit(df, "baynet", records=10, rng=None, verbose=False)
    with pytest.raises(ValueError, match="only"):  # more random subsets than exist: refused, not stored as asked
        audit(df, "baynet", records=10, subsets=100_000_000, verbose=False)
    with pytest.raises(ValueError, match="cross-fitting"):  # a pool too small for the folds: refused before generation
        audit(df, "baynet", records=10, n_datasets=10, dataset_size=200, cache_dir=None, verbose=False)
    for args, what in [(["--records", "ten"], "--records"), (["--attacks", "query,nope"], "attacks"), (["--order", "x"], "--order")]:
        r = subprocess.run([ACHILLES, "audit", *args, "--results", ""], capture_output=True, text=True)
        assert r.returncode == 2 and what in r.stderr, r.stderr


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


def test_population_audit_through_a_dask_scheduler_and_two_worker_processes(adult, tmp_path):
    "`dask scheduler` and two `dask worker` processes, as on a real cluster: the population audit's rows equal the local run's."
    distributed = pytest.importorskip("distributed")
    from joblib import parallel_config
    df, schema = adult
    small = df.iloc[:600].reset_index(drop=True)
    kw = dict(records="all", n_in=10, dataset_size=200, order=1, selectors=(), rng=3, verbose=False)
    local = audit(small, "baynet", n_jobs=1, **kw)
    dask = str(Path(sys.executable).parent / "dask")
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = dict(__import__("os").environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)]
    try:
        procs += [subprocess.Popen([dask, "worker", addr, "--nthreads", "1", "--nworkers", "1", "--dashboard-address", ":0",
                                    "--local-directory", str(tmp_path / f"w{i}")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=env, cwd=tmp_path) for i in range(2)]
        with distributed.Client(addr, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            with distributed.get_task_stream(client) as ts, parallel_config(backend="dask"):
                remote = audit(small, "baynet", n_jobs=-1, **kw)
        assert len({t["worker"] for t in ts.data}) == 2  # the generation ran on both worker processes
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs: p.wait(timeout=30)
    assert len(local) == 600 and local.attrs["config"]["design"] == "population"
    cols = ["record", "auc", "auc_query", "auc_distance", "auc_density", "eps_lower", "n_in", "n_out"]
    np.testing.assert_array_equal(local[cols].to_numpy(), remote[cols].to_numpy())


def test_population_rows_do_not_depend_on_the_chunking(adult):
    "The next chunk's features are computed while the current chunk is scored: with many chunks, every record's row is the same."
    df, schema = adult
    small = df.iloc[:300].reset_index(drop=True)
    kw = dict(records="all", n_in=10, dataset_size=100, order=1, selectors=(), rng=5, verbose=False, n_jobs=1)
    with pytest.warns(Warning, match="n_in=10 gives each record 10 IN"):  # an AUC interval wider than 0.1
        one = audit(small, "baynet", **kw)
    many = audit(small, "baynet", chunk=40, **kw)  # 8 chunks: the prefetch of chunk k + 1 runs 7 times
    for r in (one, many):  # every dataset of the pool, generated or read from the cache
        assert r.attrs["seconds"]["generated"] + r.attrs["seconds"]["cached"] == 30
    cols = ["record", "auc", "auc_query", "auc_distance", "auc_density", "eps_lower", "n_in", "n_out"]
    assert len(one) == 300 and one.attrs["config"]["n_datasets"] == 10 * 3  # n_in blocks of ceil(300 / 100) datasets
    np.testing.assert_array_equal(one.sort_values("record")[cols].to_numpy(), many.sort_values("record")[cols].to_numpy())


def test_pool_size_check_counts_out_datasets_too():
    "A record IN all but one dataset has 1 OUT dataset: too few for 2 folds, so it is refused before any generation."
    from achilles.shadow.audit import _check_pool_sizes
    membership = np.tile(np.array([[1, 0, 1]], bool), (40, 1))
    membership[::2, 1] = True  # record 1: IN half of them
    membership[1:, 2] = True; membership[0, 2] = False  # record 2: IN 39 of 40, OUT 1
    with pytest.raises(ValueError, match="record 12 with"):
        _check_pool_sizes(membership[:, [1, 2]], 2, np.array([11, 12]))
    membership[:3, 2] = False  # now 3 OUT
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check_pool_sizes(membership[:, [1, 2]], 2, np.array([11, 12]))  # no error


def test_auto_design_switches_where_a_bernoulli_pool_would_overflow():
    "auto: population when n/2 + 4 sqrt(n/2) audited records would not fit in a dataset (and no n_datasets was asked for)."
    from achilles.shadow.audit import _design
    assert _design("auto", 1000, 1000, 589, None) == "population"  # 500 + 89.4 > 589
    assert _design("auto", 1000, 1000, 590, None) == "bernoulli"
    assert _design("auto", 1000, 1000, 589, 500) == "bernoulli"  # n_datasets asks for a Bernoulli pool
    assert _design("auto", "all", 10, 1000, None) == "population" and _design("bernoulli", "all", 10, 10, None) == "bernoulli"


def test_population_plan_edges(adult):
    "Two blocks are the fewest (one dataset with and one without each record, at least); the last dataset of a block is filled up."
    from achilles.shadow.audit import plan_population
    df, schema = adult
    pm = PoolModel(df.iloc[:250], schema, "independent", dataset_size=100)
    pool = plan_population(pm, n_in=2, rng=0)
    assert len(pool.specs) == 2 * 3  # ceil(250 / 100) datasets per block
    for b in range(2):
        rows = np.concatenate([pool.specs[3 * b + j].rows for j in range(3)])
        assert set(rows) == set(range(250)) and len(rows) == 300  # every record once, 50 drawn again to fill the third
    with pytest.raises(ValueError, match="n_in=1"): plan_population(pm, n_in=1, rng=0)


def test_code_dtype_holds_every_code():
    from achilles.core.data import Column
    from achilles.shadow.audit import _code_dtype
    wide = Schema((Column("a", "categorical", tuple(range(300))), Column("x", "continuous", lower=0.0, upper=1.0)))
    narrow = Schema((Column("a", "categorical", tuple(range(256))),))
    assert _code_dtype(Schema((Column("a", "categorical", tuple(range(257))),))) == np.uint16  # codes 0..256
    only_numbers = Schema((Column("x", "continuous", lower=0.0, upper=1.0),))
    assert _code_dtype(wide) == np.uint16 and _code_dtype(narrow) == np.uint8 and _code_dtype(only_numbers) == np.uint8


def test_population_stack_asks_for_its_memory_first(adult, monkeypatch):
    "The pool's size is checked against the free memory before anything is generated: M x |D| x (code bytes + 8 per number + 8)."
    import achilles.core.runtime as runtime
    from achilles.shadow.audit import plan_population, population_stack
    df, schema = adult
    pm = PoolModel(df.iloc[:250], schema, "independent", dataset_size=100)
    pool = plan_population(pm, n_in=2, rng=0)
    asked = []
    monkeypatch.setattr(runtime, "check_memory", lambda what, need, *a, **kw: asked.append(need))
    st = population_stack(pm, pool, verbose=False)
    C, Dc = len(schema.cat_idx), len(schema.cont_idx)
    assert asked[0] == 6 * 100 * (C * 1 + 8 * Dc + 8)  # the first check, before any generation (Adult's codes fit in uint8)
    assert st.counts["generated"] + st.counts["cached"] == 6 and st.cat.shape == (C, 600)


def test_bernoulli_pool_defaults_to_1000_datasets(adult, monkeypatch):
    "n_datasets=None asks for the documented default of 1,000 datasets (read where the pool is planned, before any generation)."
    import achilles.shadow.audit as A
    df, _ = adult

    class Planned(Exception): pass
    def plan(pm, targets, n_datasets, rng=None, p_in=0.5): raise Planned(n_datasets)
    monkeypatch.setattr(A, "plan_pool", plan)
    with pytest.raises(Planned) as e:
        A.audit(df.iloc[:2000], "independent", records=10, design="bernoulli", dataset_size=200, selectors=(), verbose=False)
    assert e.value.args == (1000,)


# Issue 35's mutation sample of shadow.audit: what its survivors showed the tests did not pin.

def test_score_record_reads_a_rarest_column_at_zero(adult):
    "The untrained `rarest` family reads the column it is given, column 0 included."
    from achilles.shadow.audit import audit_plan, score_record
    from sklearn.metrics import roc_auc_score
    df, schema = adult
    plan = audit_plan(schema)
    g = np.random.default_rng(0)
    X = g.poisson(2, size=(200, plan.n_features)).astype(np.float32); y = (g.random(200) < .5).astype(np.int64)
    X[:, 0] += 2 * y
    row = score_record(X, y, plan, attacks=("query", "rarest"), rarest=0, rng=0)
    assert row["auc_rarest"] == pytest.approx(roc_auc_score(y, X[:, 0]))


def test_audit_refuses_a_delta_of_one_or_more_and_too_few_datasets_for_the_folds(adult):
    df, _ = adult
    with pytest.raises(ValueError, match="delta"):
        audit(df, "baynet", records=3, delta=1.5, verbose=False)
    with pytest.raises(ValueError, match=r"n_datasets=9 is out of range: it must be an integer >= 10"):
        audit(df, "baynet", records=3, n_datasets=9, folds=5, verbose=False)  # 2 x folds datasets at least, checked first


def test_the_config_says_when_the_stack_was_off(adult):
    df, _ = adult
    kw = dict(records=[0, 5], n_datasets=40, dataset_size=200, rng=3, n_jobs=1, verbose=False, selectors=())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        off = audit(df.iloc[:600].reset_index(drop=True), "baynet", stack=False, **kw)
        cls = audit(df.iloc[:600].reset_index(drop=True), "baynet", attacks=("classifier",), **kw)
    assert off.attrs["config"]["stack"] is False
    # the real-vs-synthetic forest's seed is the audit's (stream 9 of its root): frozen scores, as issue 35's code gives them
    np.testing.assert_allclose(cls["auc_classifier"], [0.585678, 0.395833], atol=1e-6)


def test_a_record_in_more_datasets_than_are_left_out_gets_as_many_of_each(adult):
    """N = 2|D| + 1 leaves a third dataset per block filled up with records drawn again: one drawn in every block is IN 4 of 6. It is
    scored on a random 2 of its IN datasets and the 2 OUT (it used to stop the run, after the pool was generated)."""
    from achilles.shadow.audit import plan_population
    df, schema = adult
    pm = PoolModel(df.iloc[:201], schema, "independent", dataset_size=100)
    pool = plan_population(pm, n_in=2, rng=0)
    ins = {r: set(np.unique(pool.idx[pool.ptr[pool.group[r]]:pool.ptr[pool.group[r] + 1]]).tolist()) for r in range(201)}
    bad = [r for r, h in ins.items() if 2 * len(h) > pool.n_datasets]
    assert bad
    i, o = pool.record_datasets(bad[0], 0)
    assert len(i) == len(o) == pool.n_datasets - len(ins[bad[0]]) == pool.record_sizes([bad[0]])[0] >= 2
    assert set(i.tolist()) <= ins[bad[0]] and not set(o.tolist()) & ins[bad[0]] and len(set(i.tolist())) == len(set(o.tolist())) == len(i)
    assert [pool.record_datasets(bad[0], s)[0].tolist() for s in range(20)] != [i.tolist()] * 20  # a random choice of the IN ones
    ok = min(ins, key=lambda r: len(ins[r]))
    i, o = pool.record_datasets(ok, 0)
    assert len(i) == len(o) == len(ins[ok]) and set(i.tolist()) == ins[ok] and not set(i) & set(o)  # the others: every IN dataset, as before
    assert ok == 7 and (i.tolist(), o.tolist()) == ([1, 3], [2, 4])  # the OUT ones drawn as before this change (frozen: earlier rows stand)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # N = 2.5 |D| (N = 2|D| + 1 puts every record in half the training sets, which `audit` skips): records 6 and 16 are held by
        # more than 7 of the audit's 15 datasets (its plan: rng = seed_child(seed_root(0), 6)), records 0 and 1 by fewer
        rows = audit(df.iloc[:250].reset_index(drop=True), "independent", records=[0, 1, 6, 16], design="population", n_in=5,
                     dataset_size=100, order=1, selectors=(), n_jobs=1, rng=0, verbose=False)
    assert len(rows) == 4 and rows["n_in"].tolist() == rows["n_out"].tolist() and rows["n_in"].min() >= 5


def test_a_record_left_fewer_out_datasets_than_n_in_stops_the_run_before_generation(adult, monkeypatch):
    from achilles.shadow import audit as A
    df, schema = adult
    monkeypatch.setattr(A.PopulationPool, "record_sizes", lambda self, records: np.where(np.asarray(records) == 3, 4, 5))
    monkeypatch.setattr(A, "population_stack", lambda *a, **k: pytest.fail("the pool was generated before the check"))
    with pytest.raises(ValueError, match=r"1 record\(s\) \(e.g. 3\) .* fewer than n_in=5"):
        audit(df.iloc[:250].reset_index(drop=True), "independent", records=[3, 4], design="population", n_in=5, dataset_size=100,
              order=1, selectors=(), n_jobs=1, rng=0, verbose=False)


def test_the_scale_warning_fires_for_small_pools_only():
    from achilles.shadow.audit import _check_pool_sizes
    from achilles.shadow.game import ScaleWarning
    big = np.r_[np.ones((1000, 3)), np.zeros((1000, 3))].astype(bool)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScaleWarning)
        _check_pool_sizes(big, 5, np.arange(3))  # about ±0.05: no warning
    with pytest.warns(ScaleWarning, match="interval"):
        _check_pool_sizes(big[::10], 5, np.arange(3))


def test_the_run_id_is_the_digest_of_the_config_whatever_its_key_order(adult):
    "A stored run is found again by its config's content: the id hashes the config with sorted keys."
    import hashlib, json
    df, _ = adult
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = audit(df.iloc[:600].reset_index(drop=True), "baynet", records=[0], n_datasets=40, dataset_size=200, rng=3, n_jobs=1,
                  verbose=False, selectors=())
    cfg = r.attrs["config"]
    shuffled = dict(reversed(list(cfg.items())))
    want = hashlib.sha256(json.dumps(shuffled, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert r.attrs["run_id"] == want
    assert json.dumps(cfg, default=str) != json.dumps(cfg, sort_keys=True, default=str)  # the check above can tell the two apart



def test_the_config_says_when_the_stack_is_off(adult):
    "stack=False is another attacker: its config says so, so its rows are another run (the audit before issue 35 is found again by it)."
    df, _ = adult
    kw = dict(records=[0], n_datasets=40, dataset_size=200, rng=3, n_jobs=1, verbose=False, selectors=(), order=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        on, off = (audit(df.iloc[:600].reset_index(drop=True), "independent", stack=s, **kw) for s in (True, False))
    assert "stack" not in on.attrs["config"] and off.attrs["config"]["stack"] is False and on.attrs["run_id"] != off.attrs["run_id"]

def test_bernoulli_rows_do_not_depend_on_the_chunking(adult):
    "Issue 35's cost work: the bernoulli pool also computes chunk k + 1's features while chunk k is scored; with one record per chunk every row is the same."
    df, schema = adult
    kw = dict(records=6, n_datasets=40, dataset_size=200, order=1, selectors=(), rng=3, verbose=False, n_jobs=2)
    with pytest.warns(Warning, match="n_datasets=40"):
        one = audit(df, "baynet", **kw)
    with pytest.warns(Warning, match="n_datasets=40"):
        many = audit(df, "baynet", chunk=1, **kw)  # 6 chunks: the prefetch runs 5 times
    assert len(one) == len(many) == 6
    cols = [c for c in one.columns if c.startswith(("auc", "eps", "tpr", "mu_", "q_")) or c in ("record", "n_in", "n_out")]
    for c in cols:  # column by column: a bool column would turn one array into objects, where nan != nan
        np.testing.assert_array_equal(one.sort_values("record")[c].to_numpy(), many.sort_values("record")[c].to_numpy(), err_msg=c)
    assert many.attrs["seconds"]["waiting for features"] >= 0.0


def test_chosen_records_that_fill_the_training_sets_are_warned_about_before_any_generation(adult):
    "Issue 36 item 4: 120 chosen records in a Bernoulli pool of training sets of 200 fill 30 % of each: one PoolWarning, then the usual checks."
    from achilles.shadow.audit import PoolWarning
    df, schema = adult
    with pytest.warns(PoolWarning, match=r"120 chosen records.*30% of every training set of 200.*at most 20 chosen records.*design='population'"):
        with pytest.raises(ValueError, match="n_datasets=6"):  # refused right after: nothing was generated
            audit(df, "baynet", records=list(range(120)), n_datasets=6, dataset_size=200, verbose=False, selectors=())
    import warnings as _w
    with _w.catch_warnings():
        _w.simplefilter("error", PoolWarning)
        for kw in (dict(records=120, n_datasets=6), dict(records=list(range(20)), n_datasets=6),
                   dict(records=list(range(120)), design="population", n_in=1)):
            with pytest.raises(ValueError, match="n_datasets=6|n_in=1"):  # each stops at a size check, none warns: a random sample, a 5 % share, uniform training sets
                audit(df, "baynet", dataset_size=200, verbose=False, selectors=(), **kw)


def test_null_fits_zero_skips_the_calibration_and_says_so(adult, tmp_path):
    "interval='calibrated', null_fits=0: no permutation refit, no calibration row, intervals exactly Hanley-McNeil's (inflation 1); 1 is refused, and so are refits with the certificate."
    from achilles.core.results import auc_interval
    df, schema = adult
    kw = dict(records=6, n_datasets=40, dataset_size=200, order=1, selectors=(), rng=3, verbose=False, n_jobs=1)
    with pytest.warns(Warning, match="n_datasets=40"):
        r = audit(df, "baynet", interval="calibrated", null_fits=0, store=tmp_path / "s.sqlite", **kw)
    assert (r["auc_inflation"] == 1.0).all() and r.attrs["config"]["null_fits"] == 0
    assert r.attrs["seconds"].get("calibration", 0.0) == 0.0 and len(ResultsStore(tmp_path / "s.sqlite").read("calibration")) == 0
    lo, hi = auc_interval(float(r["auc"].iloc[0]), int(r["n_in"].iloc[0]), int(r["n_out"].iloc[0]))
    assert (r["auc_ci_low"].iloc[0], r["auc_ci_high"].iloc[0]) == (lo, hi)
    with pytest.raises(ValueError, match="null_fits=1"):
        audit(df, "baynet", interval="calibrated", null_fits=1, **kw)
    with pytest.raises(ValueError, match="null_fits=20 calibrates interval='calibrated'; the certificate needs no refits"):
        audit(df, "baynet", null_fits=20, **kw)
    with pytest.raises(ValueError, match="interval"):
        audit(df, "baynet", interval="bootstrap", **kw)


def test_auto_design_puts_chosen_records_in_uniform_training_sets():
    """Issue 36 item 4: design='auto' audits chosen records (row ids) that would fill more than 5 % of a Bernoulli pool's training
    sets with the population design, whose training sets are uniform samples whatever is scored; a random sample of any size, or
    a few chosen records, stay Bernoulli; an explicit n_datasets keeps Bernoulli (and warns, above)."""
    from achilles.shadow.audit import CHOSEN_SHARE, _design
    edge = int(2 * CHOSEN_SHARE * 1000)  # 100 chosen records fill exactly 5 % of training sets of 1,000
    assert _design("auto", list(range(edge)), edge, 1000, None) == "bernoulli"
    assert _design("auto", list(range(edge + 1)), edge + 1, 1000, None) == "population"
    assert _design("auto", np.arange(1126), 1126, 1000, None) == "population"  # fig_population's PrivBayes records
    assert _design("auto", 1126, 1126, 1000, None) == "bernoulli"  # a random sample: uniform training sets already
    assert _design("auto", np.arange(1126), 1126, 1000, 2000) == "bernoulli"  # asked for: PoolWarning
    assert _design("bernoulli", np.arange(1126), 1126, 1000, None) == "bernoulli"
    assert _design("auto", "all", 45_222, 1000, None) == "population"


def test_population_design_skips_records_whose_copies_fill_most_training_sets(adult):
    """A record with 60 exact copies among 400 is in almost every training set of 100: no OUT side. The population design says so
    once, before generating anything, leaves it (and its copies) out, lists them in attrs['skipped'], and audits the others."""
    from achilles.shadow.audit import PoolWarning
    df, schema = adult
    import pandas as pd
    pop = pd.concat([df.iloc[:340], pd.DataFrame([df.iloc[400]] * 60)], ignore_index=True)
    assert pop.duplicated(keep=False).sum() >= 60
    records = [0, 1, 2, 340, 399]
    with pytest.warns(PoolWarning, match=r"5 record\(s\)|2 record\(s\)") as w:
        r = audit(pop, "independent", schema=schema, records=records, design="population", n_in=5, dataset_size=100, order=1,
                  selectors=(), rng=1, verbose=False, n_jobs=1)
    msgs = [str(x.message) for x in w if issubclass(x.category, PoolWarning)]
    assert len(msgs) == 1 and "60 to 60 exact copies" in msgs[0] and "records 340, 399" in msgs[0]
    assert r.attrs["skipped"] == [340, 399] and sorted(r["record"]) == [0, 1, 2]


def test_too_common_is_the_exact_chance_that_a_uniform_training_set_holds_a_copy(adult):
    """_too_common compares 1 - C(N - c, D) / C(N, D), the chance that a uniform D-subset of N records holds one of c copies, with
    `most`: pinned to 1e-9 on both sides for c = 1..8, and at the edges (a record whose copies outnumber N - D is in every set)."""
    import math
    import pandas as pd
    from achilles.shadow.audit import PoolModel, _copies, _design, _too_common
    df, schema = adult
    base = df.drop_duplicates().iloc[:300]
    extra = [pd.DataFrame([base.iloc[k]] * (c - 1)) for k, c in enumerate(range(2, 9))] + [pd.DataFrame([base.iloc[10]] * 260)]
    pop = pd.concat([base, *extra], ignore_index=True)
    pm = PoolModel(pop, schema, "independent", None, 200)
    N, D = len(pop), 200
    t = np.array([0, 1, 2, 3, 4, 5, 6, 20, 10])  # 2..8 copies, one of 1, one of 261
    c = _copies(pm)[t]
    assert c.tolist() == [2, 3, 4, 5, 6, 7, 8, 1, 261]
    exact = np.array([1 - math.comb(N - k, D) / math.comb(N, D) if N - k >= D else 1.0 for k in c.tolist()])
    for j in range(len(t) - 1):
        assert _too_common(pm, t[j:j + 1], most=exact[j] - 1e-9)[0] and not _too_common(pm, t[j:j + 1], most=exact[j] + 1e-9)[0]
    assert _too_common(pm, t, most=0.45).tolist() == (exact > 0.45).tolist()
    assert not _too_common(pm, t[-1:], most=1.0)[0] and _too_common(pm, t[-1:], most=1.0 - 1e-12)[0]  # "more than most": never above 1
    assert _design("auto", 32, 32, 32, None) == "bernoulli" and _design("auto", 34, 34, 32, None) == "population"  # 16 + 4 x 4 = 32 fits exactly


def test_release_out_datasets_hold_neither_the_record_nor_a_copy(adult):
    "Issue 38: in the release design a record's OUT datasets never hold it or an exact copy; its IN ones always do; as many of each."
    import pandas as pd
    from achilles.shadow.audit import plan_release
    df, schema = adult
    t = pd.concat([df.iloc[:150], df.iloc[[3, 3, 40]]], ignore_index=True)  # 150, 151 copy row 3; 152 copies row 40
    pool = plan_release(PoolModel(t, schema, "independent", dataset_size=75), n_in=20, rng=4)
    copies = {3: {3, 150, 151}, 150: {3, 150, 151}, 40: {40, 152}}
    held = [set(s.rows.tolist()) for s in pool.specs]
    for r in range(len(t)):
        ins, outs = pool.record_datasets(r, r)
        group = copies.get(r, {r})
        assert len(ins) == len(outs) >= 20
        assert all(group <= held[j] for j in ins) and not any(group & held[j] for j in outs), r


def test_release_rows_depend_neither_on_threads_nor_on_the_other_records_audited(adult, tmp_path):
    "The same seed gives the same rows with one thread or two, and a record's row is the same whether it is audited alone or with every record (the pool does not depend on which are scored); a rerun reads the store."
    df, _ = adult
    small = df.iloc[:160].reset_index(drop=True)
    kw = dict(design="release", n_in=20, order=1, selectors=(), rng=2, verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a toy pool on purpose
        one = audit(small, "independent", n_jobs=1, **kw)
        two = audit(small, "independent", n_jobs=2, **kw)
        np.testing.assert_array_equal(one["auc"].to_numpy(), two["auc"].to_numpy())
        store = ResultsStore(tmp_path / "r.sqlite")
        part = audit(small, "independent", records=np.arange(0, 160, 3), store=store, cache_dir=tmp_path / "c", **kw)
        whole = audit(small, "independent", records="all", store=store, cache_dir=tmp_path / "c", **kw)
        again = audit(small, "independent", records="all", store=store, cache_dir=tmp_path / "c", **kw)  # read back, nothing refitted
    assert len(part) == 54 and len(whole) == 160
    np.testing.assert_array_equal(whole["auc"].to_numpy(), one["auc"].to_numpy())
    np.testing.assert_array_equal(part["auc"].to_numpy(), one["auc"].to_numpy()[::3])
    np.testing.assert_array_equal(again["auc"].to_numpy(), one["auc"].to_numpy())
    assert again.attrs["seconds"].get("generated", 0) == 0  # every row was in the store: no dataset generated


def test_release_stack_asks_for_exactly_the_memory_it_uses_and_counts_what_it_generated(adult, monkeypatch, tmp_path, capsys):
    """The release pool's stack (datasets as large as their training sets) checks its exact size against the free memory before it
    generates anything; it counts datasets generated and read from the cache; with verbose=False it prints nothing."""
    import achilles.core.runtime as rt
    from achilles.shadow.audit import _code_dtype, plan_release, population_stack
    df, schema = adult
    pm = PoolModel(df.iloc[:120].reset_index(drop=True), schema, "independent", dataset_size=60, own_size=True)
    pool = plan_release(pm, n_in=6, rng=1)
    sizes = np.array([len(s.rows) for s in pool.specs])
    need = int(sizes.sum()) * (len(schema.cat_idx) * np.dtype(_code_dtype(schema)).itemsize + 8 * len(schema.cont_idx) + 8)
    monkeypatch.setattr(rt, "available_memory", lambda: need - 1)
    with pytest.raises(MemoryError, match="needs about"):
        population_stack(pm, pool, cache_dir=tmp_path, verbose=False)
    monkeypatch.setattr(rt, "available_memory", lambda: need)
    st = population_stack(pm, pool, cache_dir=tmp_path, verbose=False)
    assert st.counts == dict(generated=pool.n_datasets, cached=0)
    np.testing.assert_array_equal(np.diff(st.offsets), sizes)  # each synthetic dataset as large as its training set
    assert population_stack(pm, pool, cache_dir=tmp_path, verbose=False).counts == dict(generated=0, cached=pool.n_datasets)
    assert capsys.readouterr().err == ""


def test_release_pool_size_bounds_and_seeded_stream(adult):
    """release_datasets is 2 n_in + ceil(8 sqrt(n_in)); plan_release takes n_in >= 2 and tables of 10 records or more; and its
    random stream is pinned: the same seed gives these very training sets (a change to how they are drawn must show here)."""
    import hashlib
    from achilles.shadow.audit import plan_release, release_datasets
    df, schema = adult
    assert (release_datasets(1000), release_datasets(30), release_datasets(2)) == (2253, 104, 16)
    small = lambda n: PoolModel(df.iloc[:n].reset_index(drop=True), schema, "independent", dataset_size=max(2, n // 2))
    assert plan_release(small(10), n_in=2, rng=0).n_datasets == 16
    with pytest.raises(ValueError, match="at least 10"): plan_release(small(9), n_in=2, rng=0)
    with pytest.raises(ValueError, match="n_in"): plan_release(small(10), n_in=1, rng=0)
    pool = plan_release(small(50), n_in=4, rng=7)
    assert [len(s.rows) for s in pool.specs[:6]] == [20, 19, 25, 25, 14, 28]
    assert hashlib.sha256(np.concatenate([s.rows for s in pool.specs]).tobytes()).hexdigest()[:16] == "ec9446f4be56807d"
    assert [sp.seed.spawn_key for sp in pool.specs[:2]] == [(2, 0), (2, 1)]  # each dataset's fit-and-sample seed: child j of child 2
    import pandas as pd  # two copy groups of 5: a training set would be empty a quarter of the time; it gets one group, seeded
    two = PoolModel(df.iloc[[0] * 5 + [1] * 5].reset_index(drop=True), schema, "independent", dataset_size=5)
    p2 = plan_release(two, n_in=3, rng=3)
    assert min(len(sp.rows) for sp in p2.specs) == 5
    assert hashlib.sha256(np.concatenate([sp.rows for sp in p2.specs]).tobytes()).hexdigest()[:16] == "b01d9fb3f9a69cc0"


def test_release_record_datasets_uses_the_smaller_side_whole_and_refuses_a_record_without_one():
    "A record IN 1 of 3 datasets gets that one and 1 of the 2 others, each once; a record IN all of them has no OUT side: an error naming it."
    from achilles.shadow.audit import ReleasePool
    # two copy groups; group 0 is in dataset 1 only, group 1 in every dataset
    pool = ReleasePool(specs=[None] * 3, group=np.array([0, 1]), ptr=np.array([0, 1, 4]), idx=np.array([1, 0, 1, 2], np.int32), n_in=1)
    for seed in range(5):
        i, o = pool.record_datasets(0, seed)
        assert i.tolist() == [1] and len(o) == 1 and o[0] in (0, 2)
    big = ReleasePool(specs=[None] * 6, group=np.array([0]), ptr=np.array([0, 3]), idx=np.array([0, 2, 4], np.int32), n_in=1)
    i, o = big.record_datasets(0, 0)
    assert i.tolist() == [0, 2, 4] and o.tolist() == [1, 3, 5]  # both sides whole, each dataset once
    with pytest.raises(ValueError, match="record 1 is IN 3 of the 3 datasets"):
        pool.record_datasets(1, 0)
