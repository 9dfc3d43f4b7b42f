"""Issue 39: a population audit scored as tasks (`audit(..., scoring="tasks")`): the pool written once to disk, chunks of records
scored in worker processes or on Dask workers; the rows equal the threads' rows, and a worker killed mid-run loses no row and writes
none twice."""
import os, signal, socket, subprocess, sys, threading, time, warnings
from pathlib import Path

import numpy as np
import pytest

from achilles.core.data import load_adult
from achilles.core.results import ResultsStore
from achilles.shadow.audit import audit
from achilles.shadow.game import ScaleWarning

COLS = ["record", "auc", "auc_ci_low", "auc_ci_high", "auc_query", "auc_distance", "auc_density", "auc_groundhog", "eps_lower",
        "tpr@0.01", "n_in", "n_out"]


@pytest.fixture(scope="module")
def small():
    return load_adult().iloc[:600].reset_index(drop=True)


def _audit(df, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)  # small pools on purpose
        return audit(df, "baynet", **dict(dict(records="all", n_in=10, dataset_size=200, order=1, selectors=(), rng=3, verbose=False,
                                               design="population"), **kw))


def test_tasks_give_the_threads_rows_in_this_process_and_in_two_worker_processes(small, tmp_path, monkeypatch):
    from achilles.shadow import audit as audit_mod
    ref = _audit(small)
    released, real = [], audit_mod.release_pages
    monkeypatch.setattr(audit_mod, "_RELEASE_PAIRS", 7)  # a task's pairs in blocks of 7, each block's pages released after it
    monkeypatch.setattr(audit_mod, "release_pages", lambda st: released.append(1) or real(st))
    monkeypatch.setattr(audit_mod, "_pause_bytes", lambda: 1.0)  # as a Dask worker far past its pause size: a release after every block
    one = _audit(small, scoring="tasks", chunk=50, cache_dir=tmp_path / "c")
    pairs = one["n_in"].to_numpy() + one["n_out"].to_numpy()
    assert len(released) == sum(-(-int(pairs[s:s + 50].sum()) // 7) for s in range(0, 600, 50))  # one release per block, in this process
    monkeypatch.undo()
    two = _audit(small, scoring="tasks", chunk=50, n_jobs=2, store=tmp_path / "s.sqlite")  # no cache: a temporary pool folder
    for r in (one, two): np.testing.assert_array_equal(ref[COLS].to_numpy(), r[COLS].to_numpy())
    assert (tmp_path / "c" / "pools" / one.attrs["run_id"] / "pool.json").exists()  # the pool beside the dataset cache
    from achilles.shadow.game import cache_info, prune_cache
    info = cache_info(tmp_path / "c")
    assert info["pools"] == 1 and info["pool_bytes"] > 0 and info["entries"] == 30  # `achilles cache info` counts it
    assert prune_cache(tmp_path / "c", everything=True)["pools"] == 1 and not (tmp_path / "c" / "pools" / one.attrs["run_id"]).exists()
    assert one.attrs["seconds"]["pool to disk"] >= 0 and len(ResultsStore(tmp_path / "s.sqlite").read("audit")) == 600
    with pytest.raises(ValueError, match="scoring='tasks' scores the population and release designs"):
        _audit(small, scoring="tasks", design="bernoulli", records=20, n_datasets=40)
    with pytest.raises(ValueError, match="scoring"):
        _audit(small, scoring="cluster")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]


@pytest.mark.parametrize("design", ["population", "release"])
def test_a_dask_worker_killed_mid_run_loses_no_row(small, tmp_path, design):
    "`dask scheduler`, two `dask worker` processes; one is killed (SIGKILL, with its nanny) once rows are coming back. In each design."
    distributed = pytest.importorskip("distributed")
    from joblib import parallel_config
    ref = _audit(small, design=design)
    dask = str(Path(sys.executable).parent / "dask")
    port = _free_port(); addr = f"tcp://127.0.0.1:{port}"
    env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)]
    store = tmp_path / "s.sqlite"
    killed = []
    def killer():  # as soon as the first rows are stored, kill the second worker and its nanny
        t0 = time.time()
        while time.time() - t0 < 600 and not killed:
            try: n = len(ResultsStore(store).read("audit")) if store.exists() else 0
            except Exception: n = 0  # the store is being created
            if n > 0:
                os.killpg(procs[2].pid, signal.SIGKILL); killed.append(n); return
            time.sleep(0.2)
    try:
        procs += [subprocess.Popen([dask, "worker", addr, "--nthreads", "1", "--nworkers", "1", "--dashboard-address", ":0",
                                    "--local-directory", str(tmp_path / f"w{i}")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                   env=env, cwd=tmp_path, start_new_session=True) for i in range(2)]
        with distributed.Client(addr, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
            th = threading.Thread(target=killer, daemon=True); th.start()
            with parallel_config(backend="dask"):
                remote = _audit(small, scoring="tasks", chunk=20, n_jobs=-1, store=store, cache_dir=tmp_path / "c", design=design)
            th.join(timeout=5)
    finally:
        for p in procs[::-1]:
            try: os.killpg(p.pid, signal.SIGTERM) if p is not procs[0] else p.terminate()
            except ProcessLookupError: pass
        for p in procs: p.wait(timeout=30)
    assert killed and 0 < killed[0] < 600, killed  # killed mid-run
    rows = ResultsStore(store).read("audit")
    assert len(rows) == 600 and rows["record"].astype(int).nunique() == 600  # none lost, none twice
    np.testing.assert_array_equal(ref[COLS].to_numpy(), remote[COLS].to_numpy())
    assert remote.attrs["config"]["design"] == design


def test_the_cli_passes_scoring(small, tmp_path):
    "`achilles audit --scoring tasks` scores as tasks (the pool folder appears beside the cache) and gives the API's rows."
    import pandas as pd
    from achilles import cli
    data, out = tmp_path / "data.csv", tmp_path / "rows.csv"
    small.iloc[:300].to_csv(data, index=False)
    argv = ["audit", "--csv", str(data), "--generator", "baynet", "--design", "population", "--n-in", "10", "--dataset-size", "100",
            "--order", "1", "--records", "all", "--seed", "3", "--scoring", "tasks", "--jobs", "1", "--cache-dir", str(tmp_path / "c"),
            "--results", str(tmp_path / "r.sqlite"), "--out", str(out), "--quiet"]  # its own store: a rerun would read the rows back
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(argv) == 0
        assert cli.main([("nosuch" if a == "tasks" else a) for a in argv]) == 2
    assert list((tmp_path / "c" / "pools").iterdir())  # the pool was written for the tasks
    got = pd.read_csv(out).sort_values("record")
    assert len(got) == 300 and got["auc"].between(0, 1).all()


def test_the_release_design_and_its_release_file_as_tasks(small, tmp_path):
    "The release design, with the custodian's release scored by every record's certificate: the same rows as tasks."
    from achilles.generators import make_generator
    from achilles.core.data import Schema
    tab = small.iloc[:300].reset_index(drop=True)
    g = make_generator("independent", Schema.from_dataframe(tab)).fit(tab, rng=0)
    rel = g.sample(150, rng=1)
    kw = dict(design="release", n_in=12, release=rel, records=np.arange(0, 300, 10), order=1, selectors=(), rng=2, verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = audit(tab, "independent", **kw)
        b = audit(tab, "independent", scoring="tasks", n_jobs=2, chunk=7, **kw)
    cols = ["record", "auc", "n_in", "n_out", "release_p", "release_flag"]
    assert a.attrs["config"]["design"] == "release" and len(a) == 30
    np.testing.assert_array_equal(a[cols].to_numpy(), b[cols].to_numpy())


def test_a_task_releases_the_pools_pages_only_where_dask_would_pause_the_worker(monkeypatch):
    """Issue 39: releasing the pool's pages after every block doubled a pair's cost on the census pool (the pages are faulted in
    again); a task releases them only on a Dask worker whose resident size has passed 0.3 of its pause size."""
    from achilles.shadow import audit as audit_mod
    assert audit_mod._pause_bytes() is None  # not a Dask worker: nothing pauses this process
    rss = audit_mod._resident_bytes()
    assert rss is None or rss > 10 << 20  # this interpreter, numpy loaded: tens of MB at least
    assert audit_mod._must_release(None) is False
    assert audit_mod._must_release(1e18) is False and audit_mod._must_release(1.0) is True
    if rss is not None:
        assert audit_mod._must_release(rss / audit_mod._RELEASE_AT * 0.9) is True and audit_mod._must_release(rss / audit_mod._RELEASE_AT * 1.5) is False
    monkeypatch.setattr(audit_mod, "_resident_bytes", lambda: None)
    assert audit_mod._must_release(1e18) is True  # a worker whose size cannot be read releases, as before


@pytest.mark.parametrize("limit, pause", [("1GB", 0.8), ("1GB", False), (0, 0.8)])
def test_the_pause_size_is_the_workers_limit_times_the_pause_fraction(limit, pause):
    import dask, distributed
    from achilles.shadow import audit as audit_mod
    with dask.config.set({"distributed.worker.memory.pause": pause}), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # distributed's port notices
        with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, memory_limit=limit, dashboard_address=None) as cl, \
                distributed.Client(cl) as client:
            got = client.submit(audit_mod._pause_bytes, pure=False).result()
    assert got == (pytest.approx(1e9 * pause) if limit and pause else None)


def test_the_release_rule_at_its_edges(monkeypatch):
    """The share is 0.3, a size exactly at it does not release, the resident size is the one `/proc/self/status` calls VmRSS,
    and a Dask configuration without a pause fraction falls back to distributed's own default (0.8)."""
    import types, dask, distributed
    from achilles.shadow import audit as audit_mod
    assert audit_mod._RELEASE_AT == 0.3
    rss = audit_mod._resident_bytes()
    if rss is not None:
        with open("/proc/self/status") as f: vm = 1024 * int(next(l for l in f if l.startswith("VmRSS:")).split()[1])
        assert abs(rss - vm) < 0.1 * vm  # resident, not shared or total
    monkeypatch.setattr(audit_mod, "_resident_bytes", lambda: 300)
    assert audit_mod._must_release(1000) is False and audit_mod._must_release(999) is True  # 300 > 0.3 x 1000 is false; > 299.7 true
    assert audit_mod._must_release(1100) is False and audit_mod._must_release(900) is True  # 0.3, not a share near it
    monkeypatch.setattr(distributed, "get_worker", lambda: types.SimpleNamespace(memory_manager=types.SimpleNamespace(memory_limit=1e9)))
    memory = dask.config.get("distributed.worker.memory")
    monkeypatch.setitem(dask.config.config["distributed"]["worker"], "memory", {k: v for k, v in memory.items() if k != "pause"})
    assert audit_mod._pause_bytes() == pytest.approx(0.8e9)


def test_auto_scoring_takes_tasks_with_more_than_one_worker_and_enough_records(monkeypatch):
    "`scoring='auto'` (the default): tasks for a population or release audit with workers to spare and records to amortise them."
    from achilles.shadow import audit as am
    assert am._auto_scoring("release", 2, am.AUTO_TASKS_MIN) == "tasks"
    assert am._auto_scoring("population", 4, am.AUTO_TASKS_MIN) == "tasks"
    assert am._auto_scoring("population", 2, am.AUTO_TASKS_MIN - 1) == "threads"  # too few records for the workers' start
    assert am._auto_scoring("release", 1, 10**6) == "threads" and am._auto_scoring("release", None, 10**6) == "threads"
    assert am._auto_scoring("bernoulli", 8, 10**6) == "threads"  # the bernoulli design scores on threads only
    monkeypatch.setattr(am.os, "cpu_count", lambda: 2)
    assert am._auto_scoring("release", -1, 10**6) == "tasks"  # -1: every core
    monkeypatch.setattr(am.os, "cpu_count", lambda: 1)
    assert am._auto_scoring("release", -1, 10**6) == "threads"
    monkeypatch.setattr(am.os, "cpu_count", lambda: None)  # the count unknown: one worker
    assert am._auto_scoring("release", -1, 10**6) == "threads"


def test_auto_scoring_scores_as_tasks_and_gives_the_threads_rows(small, monkeypatch):
    from achilles.shadow import audit as am
    from achilles.cli import build_parser
    assert build_parser().parse_args(["audit"]).scoring == "auto"  # the command's default too
    ref = _audit(small, records=30)  # one worker: threads
    assert "tasks" not in ref.attrs["seconds"]
    monkeypatch.setattr(am, "AUTO_TASKS_MIN", 30)
    two = _audit(small, records=30, n_jobs=2)
    assert two.attrs["seconds"]["tasks"] == 8  # scored as tasks: 4 a worker (`_task_chunk`), not the one task that the memory allows
    assert _audit(small, records=30, n_jobs=2, scoring="tasks", chunk=30).attrs["seconds"]["tasks"] == 1  # a chunk the caller gives is kept
    assert _audit(small, records=30, n_jobs=None, scoring="tasks").attrs["seconds"]["tasks"] == 4  # n_jobs=None: one worker, 4 tasks
    np.testing.assert_array_equal(ref[COLS].to_numpy(), two[COLS].to_numpy())
    monkeypatch.setattr(am, "AUTO_TASKS_MIN", 31)
    assert "tasks" not in _audit(small, records=30, n_jobs=2).attrs["seconds"]  # 30 records: below the threshold, threads


def test_task_chunks_are_even_and_several_per_worker():
    "`_task_chunk`: tasks within the memory's chunk, at least `TASKS_PER_WORKER` a worker where there are records enough, a multiple of the workers, as even as can be."
    from achilles.shadow.audit import TASKS_PER_WORKER, _task_chunk
    assert _task_chunk(220, 67, 2) == 28  # 8 tasks (7 of 28 and one of 24), not 67, 67, 67 and 19
    assert _task_chunk(5000, 67, 2) == 66  # the memory binds: 76 tasks, a multiple of 2, of at most 66
    assert _task_chunk(220, 67, 1) == 55 and _task_chunk(3, 67, 8) == 1 and _task_chunk(1, 1, 1) == 1
    assert _task_chunk(0, 67, 2) == 1  # nothing left to score (a rerun of a finished audit): a chunk of 1, not a division by 0
    for n in range(1, 300, 7):
        for most in (1, 3, 50, 1000):
            for w in (1, 2, 3, 8):
                c = _task_chunk(n, most, w)
                assert type(c) is int and 1 <= c <= most  # an int: the task loop's `range` step
                assert c <= -(-n // min(n, TASKS_PER_WORKER * w))  # at least 4 tasks a worker's worth of records apart
                tasks = -(-n // c)
                if c > 1: assert -(-n // (c - 1)) > tasks  # no smaller chunk gives as few tasks: the chunks are as even as can be


def test_a_worker_keeps_only_the_last_pool_mapped(tmp_path):
    # a worker serves one audit after another (loky reuses it): a finished audit's pool must not stay mapped, or its pages stay
    # resident (loky then takes the worker for a leaking one, restarts it and warns) and a deleted pool's disk space stays held
    import gc, weakref
    from achilles.core.data import Schema, encode
    from achilles.shadow import audit as audit_mod
    from achilles.shadow.pool_attack import stack_pool
    from achilles.shadow.pool_store import save_pool
    df = load_adult().iloc[:200]
    enc = encode(df, Schema.from_dataframe(df))
    save_pool(stack_pool([enc.take(np.arange(50))]), tmp_path / "a", "ka")
    save_pool(stack_pool([enc.take(np.arange(60))]), tmp_path / "b", "kb")
    audit_mod._POOLS.clear()
    first = weakref.ref(audit_mod._mapped_pool(str(tmp_path / "a"), "ka").cont)
    assert audit_mod._mapped_pool(str(tmp_path / "a"), "ka").cont is first()  # the same audit's tasks: mapped once
    second = audit_mod._mapped_pool(str(tmp_path / "b"), "kb")
    gc.collect()
    assert first() is None, "the first audit's pool is still mapped"
    assert list(audit_mod._POOLS) == [(str(tmp_path / "b"), "kb")] and second.cont.shape == (6, 60)
    audit_mod._POOLS.clear()


def test_the_client_keeps_no_copy_of_the_pool_it_wrote_for_the_tasks(small, tmp_path, monkeypatch):
    """Task scoring: once the pool is on disk the client reads it from there too (its null calibration and its in-process tasks), so
    its own copy is freed, and what the generation freed goes back to the OS. On Adult's release pool the client had kept 7.3 GB.
    A pool in a temporary folder (no cache) is removed when the audit ends, and when it fails."""
    from achilles.shadow import audit as audit_mod
    seen, trims, real = [], [], audit_mod._population_todo
    def spy(pm, plan, pool, stacked, *a, **k):
        seen.append((stacked.cat, k.get("folder"))); return real(pm, plan, pool, stacked, *a, **k)
    monkeypatch.setattr(audit_mod, "_population_todo", spy)
    monkeypatch.setattr(audit_mod, "return_freed_memory", lambda: trims.append(1) or True)
    rows = _audit(small, records=np.arange(40), scoring="tasks", chunk=20)  # no cache: a temporary folder
    (cat, folder), = seen
    assert isinstance(cat, np.memmap) and not cat.flags.writeable and trims == [1]
    assert folder is not None and not Path(folder).exists() and len(rows) == 40  # the temporary pool is gone
    assert 0 <= rows.attrs["seconds"]["pool to disk"] <= rows.attrs["seconds"]["total"]
    seen.clear()
    ref = _audit(small, records=np.arange(40))  # threads: the pool stays in memory, nothing is written or given back
    (cat, folder), = seen
    assert not isinstance(cat, np.memmap) and folder is None and trims == [1]
    np.testing.assert_array_equal(ref[COLS].to_numpy(), rows[COLS].to_numpy())
    def boom(*a, **k): raise RuntimeError("scoring failed")
    monkeypatch.setattr(audit_mod, "_population_todo", lambda *a, **k: seen.append((None, k.get("folder"))) or boom())
    with pytest.raises(RuntimeError, match="scoring failed"):
        _audit(small, records=np.arange(40), scoring="tasks", chunk=20)
    assert not Path(seen[-1][1]).exists()  # cleaned up on the way out
    written = []
    def full(stacked, folder, key, extras=None):
        written.append(folder); raise OSError(28, "No space left on device")
    monkeypatch.setattr(audit_mod, "save_pool", full)
    with pytest.raises(OSError, match="No space left"):
        _audit(small, records=np.arange(40), scoring="tasks", chunk=20)
    assert written and not Path(written[0]).exists()  # a pool that could not be written leaves no temporary folder either


def test_a_pool_that_cannot_be_written_removes_its_temporary_folder_at_once(monkeypatch):
    "Not later, by the folder's finalizer: the exception's traceback (kept here, as a debugger or a notebook keeps it) holds the folder's object."
    from achilles.shadow import audit as audit_mod
    written = []
    def full(stacked, folder, key, extras=None):
        written.append(folder); raise OSError(28, "No space left on device")
    monkeypatch.setattr(audit_mod, "save_pool", full)
    with pytest.raises(OSError, match="No space left") as info:
        audit_mod._pool_on_disk(None, None, None, "run", 3, {})
    assert info.value.__traceback__ is not None and written and not Path(written[0]).exists()


@pytest.mark.parametrize("workers", [1, 2])
def test_a_dask_cluster_runs_the_audit_in_tasks_of_the_automatic_size(small, tmp_path, workers):
    """On a local Dask cluster of one or two worker processes, the audit's generation and scoring run on the workers (seen in the
    scheduler's task stream), in the automatic number of scoring tasks (`_task_chunk`: four a worker for these 600 records), with
    the threads' rows. With one worker, joblib alone runs every task in the calling process (its sequential path); the audit goes
    through `run_tasks`, which sends them to the worker."""
    distributed = pytest.importorskip("distributed")
    from joblib import parallel_config
    from achilles.shadow.audit import TASKS_PER_WORKER
    ref = _audit(small)
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None,
                                  local_directory=str(tmp_path)) as cl, distributed.Client(cl) as client, \
            parallel_config(backend="dask"), distributed.get_task_stream(client) as stream:
        got = _audit(small, scoring="tasks", n_jobs=-1, cache_dir=tmp_path / "c")
        assert os.getpid() not in set(client.run(os.getpid).values())
    def ran(name): return [t for t in stream.data if name in t["key"]]  # joblib names its tasks `batch_of_<function>_<n>_calls-...`
    assert len(ran("_fit_sample_batch")) >= workers and len(ran("_score_chunk")) == TASKS_PER_WORKER * workers, {t["key"] for t in stream.data}
    assert len({t["worker"] for t in ran("_score_chunk")}) == workers  # every worker scored
    np.testing.assert_array_equal(ref[COLS].to_numpy(), got[COLS].to_numpy())


def test_n_jobs_none_scores_the_tasks_in_this_process(small, monkeypatch):
    "`n_jobs=None` with `scoring='tasks'`: every task scored here, one after the other (no worker process), with the threads' rows."
    from achilles.shadow import audit as audit_mod
    ref = _audit(small)
    here, real = [], audit_mod.keep_freed_memory  # the first call of every task (`_score_chunk`): seen only in this process
    monkeypatch.setattr(audit_mod, "keep_freed_memory", lambda: here.append(os.getpid()) or real())
    got = _audit(small, scoring="tasks", chunk=200, n_jobs=None)
    assert here == [os.getpid()] * 3
    np.testing.assert_array_equal(ref[COLS].to_numpy(), got[COLS].to_numpy())
