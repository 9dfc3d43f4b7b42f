"""`achilles.core.runtime.run_tasks`: joblib's ordered generator, except under the Dask backend with one worker thread, where joblib
would run every task in this process and `run_tasks` sends them to the cluster, one future each. Checked on an in-process cluster
(fast) through the scheduler's task stream; the audit on worker processes is in `test_audit_tasks.py`."""
import time

import pytest
from joblib import delayed, parallel_config

from achilles.core.runtime import run_tasks

distributed = pytest.importorskip("distributed")


_CALLS = []


def _call():
    "A task with a side effect (a generator's fit draws from its seed stream): each call must run, even with equal arguments."
    _CALLS.append(1)
    return len(_CALLS)


def _slow(x, wait=0.0):
    time.sleep(wait)
    return x


@pytest.fixture(scope="module")
def one_thread():
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            distributed.Client(cl) as client:
        yield client


def _scheduler_tasks(client):
    return client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks))


def _settle(client, want, timeout=5.0):
    "Wait until the scheduler holds `want` tasks (it forgets released futures asynchronously); the count it reached."
    end = time.time() + timeout
    while _scheduler_tasks(client) != want and time.time() < end: time.sleep(0.02)
    return _scheduler_tasks(client)


def test_without_a_cluster_it_is_joblibs_generator():
    out = run_tasks((delayed(divmod)(i, 3) for i in range(5)), n_jobs=2)
    assert not isinstance(out, list) and list(out) == [divmod(i, 3) for i in range(5)]
    assert list(run_tasks([delayed(dict)(a=1)], n_jobs=1)) == [{"a": 1}]


@pytest.mark.parametrize("n_jobs", [-1, None, 2])
def test_a_one_thread_cluster_runs_the_tasks_in_order_on_its_worker(one_thread, n_jobs):
    """Every task a future on the cluster (the task stream has them all), results in the tasks' order; keyword arguments named as
    `Client.submit`'s own (key, pure, workers) reach the function."""
    tasks = [delayed(_slow)(i, wait=0.02 * (5 - i)) for i in range(5)] + [delayed(dict)(key=1, pure=2, workers=3)]
    with parallel_config(backend="dask"), distributed.get_task_stream(one_thread) as ts:
        got = list(run_tasks(iter(tasks), n_jobs))
    assert got == [0, 1, 2, 3, 4, {"key": 1, "pure": 2, "workers": 3}]
    assert sorted(t["key"].split("-")[0] for t in ts.data) == ["_slow"] * 5 + ["dict"]
    assert _settle(one_thread, 0) == 0  # nothing left on the cluster


def test_n_jobs_1_still_runs_here(one_thread):
    with parallel_config(backend="dask"), distributed.get_task_stream(one_thread) as ts:
        assert list(run_tasks([delayed(abs)(-3), delayed(abs)(-4)], n_jobs=1)) == [3, 4]
    assert ts.data == []


def test_a_result_read_is_released_and_a_closed_generator_cancels_the_rest(one_thread):
    with parallel_config(backend="dask"):
        out = run_tasks([delayed(_slow)(i) for i in range(3)] + [delayed(_slow)(9, wait=0.3) for _ in range(4)], -1)
        assert next(out) == 0 and next(out) == 1  # suspended after the second result: the first is released
        assert _settle(one_thread, 2) == 2  # 4 submitted (two in flight), the two read forgotten
        cancelled, real = [], one_thread.cancel
        one_thread.cancel = lambda fs, *a, **k: cancelled.extend(fs) or real(fs, *a, **k)
        try: out.close()  # the caller stops early (an error, Ctrl-C): those in flight are cancelled, at once, not when collected
        finally: del one_thread.cancel
        assert len(cancelled) == 2 and all(isinstance(f, distributed.Future) for f in cancelled)  # tasks 2 and 3; 4-6 never sent
        assert _settle(one_thread, 0) == 0


def test_two_tasks_are_in_flight_at_a_time_and_the_tasks_are_read_lazily(one_thread):
    """The scheduler holds two payloads, not the whole audit's: after each result, the tasks submitted and not yet read are
    min(2, those left); a task is taken from the caller's iterator only when it is submitted."""
    submitted, taken, real = [], [], one_thread.submit
    one_thread.submit = lambda *a, **k: submitted.append(1) or real(*a, **k)
    def tasks():
        for i in range(10):
            taken.append(i)
            yield delayed(_slow)(i)
    try:
        with parallel_config(backend="dask"):
            out = run_tasks(tasks(), -1)
            assert submitted == [] and taken == []  # nothing before the first `next`
            in_flight = [len(submitted) - (i + 1) for i, _ in enumerate(out)]
    finally: del one_thread.submit
    assert in_flight == [min(2, 9 - i) for i in range(10)] and len(submitted) == 10 == len(taken)


def test_equal_tasks_each_run(one_thread):
    """Tasks are impure (pure=False): four equal calls run four times, none taken from another's result (Dask would merge tasks of
    equal function and arguments, two of them in flight at once)."""
    _CALLS.clear()
    with parallel_config(backend="dask"):
        got = list(run_tasks([delayed(_call)() for _ in range(4)], -1))
    assert got == [1, 2, 3, 4] and len(_CALLS) == 4
