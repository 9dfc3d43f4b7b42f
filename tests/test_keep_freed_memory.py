"""Issue 39: Dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536, which freezes glibc's mmap threshold at 128 KiB, so the
per-record models' temporary arrays were faulted in page by page (the census slice's workers spent 40 % of their CPU in the kernel).
The tasks that run on workers set the thresholds back first (`keep_freed_memory`); these tests fail if a task stops doing so or the
call stops taking effect."""
import os, subprocess, sys, warnings

import pytest

from achilles.core import runtime
from achilles.core.data import load_adult
from achilles.shadow import audit as audit_mod, game
from achilles.shadow.game import ScaleWarning

LINUX = sys.platform.startswith("linux")
PROBE = ("import resource, sys, numpy as np\n"
         "def faults():\n"
         "    f = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
         "    for _ in range(200): a = np.ones(1 << 17); del a\n"  # 1 MB: above the frozen 128 KiB threshold, too small for a huge page
         "    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f) / 200\n"
         "before = faults()\n{work}\nprint(before, faults())")


def _faults(work: str) -> tuple:
    out = subprocess.run([sys.executable, "-c", PROBE.format(work=work)], env=dict(os.environ, MALLOC_TRIM_THRESHOLD_="65536"),
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[-2]), float(out[-1])


@pytest.mark.skipif(not LINUX, reason="glibc's mallopt")
def test_the_call_stops_the_refaults_in_a_process_started_as_dask_starts_workers():
    before, after = _faults("pass")
    assert before > 100 and after > 100  # Dask's setting: every 1 MB array faulted in afresh (256 pages)
    before, after = _faults("from achilles.core.runtime import keep_freed_memory; assert keep_freed_memory()")
    assert before > 100 and after < 10


@pytest.mark.skipif(not LINUX, reason="glibc's mallopt")
def test_a_generation_batch_run_in_a_fresh_worker_process_sets_it():
    work = ("import warnings; from achilles.core.data import load_adult; from achilles.shadow.game import ThreatModel, play_game, ScaleWarning\n"
            "warnings.simplefilter('ignore', ScaleWarning)\n"
            "df = load_adult().iloc[:1500].reset_index(drop=True)\n"
            "tm = ThreatModel(df, generator='independent', dataset_size=50, n_aux=800, n_test_pool=400, n_shadow=4, n_test=2)\n"
            "play_game(tm, 0, rng=1, verbose=False)")
    before, after = _faults(work)
    assert before > 100 and after < 10


def test_every_worker_task_calls_it(monkeypatch):
    calls = []
    for mod in (game, audit_mod): monkeypatch.setattr(mod, "keep_freed_memory", lambda m=mod.__name__: calls.append(m) or True)
    df = load_adult().iloc[:200].reset_index(drop=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)
        audit_mod.audit(df, "independent", records="all", design="population", n_in=5, dataset_size=50, order=1, selectors=(), rng=0,
                        verbose=False, scoring="tasks", chunk=100)  # in this process: generation batches, then two scoring tasks
    assert calls.count("achilles.shadow.game") >= 1 and calls.count("achilles.shadow.audit") == 2


def test_it_is_set_once_and_says_where_it_cannot_be(monkeypatch):
    monkeypatch.setattr(runtime, "_MALLOC_KEPT", False)
    monkeypatch.setattr(runtime.sys, "platform", "darwin")
    assert runtime.keep_freed_memory() is False  # nothing to set outside Linux
    monkeypatch.setattr(runtime.sys, "platform", "linux")
    if LINUX:
        assert runtime.keep_freed_memory() is True and runtime._MALLOC_KEPT is True
        monkeypatch.setattr(runtime.sys, "platform", "darwin")
        assert runtime.keep_freed_memory() is True  # once set, it stays set


def test_the_thresholds_are_glibcs_parameters_at_the_documented_values():
    assert (runtime.M_TRIM_THRESHOLD, runtime.M_MMAP_THRESHOLD) == (-1, -3)  # glibc's malloc.h
    assert (runtime.KEEP_TRIM, runtime.KEEP_MMAP) == (256 * 2**20, 32 * 2**20)


class _Lib:
    "A C library whose mallopt answers as told (1: set, 0: refused), recording what it was asked."
    def __init__(self, answers): self.answers, self.asked = answers, []
    def mallopt(self, param, value): self.asked.append((param, value)); return self.answers[param]


@pytest.mark.parametrize("answers, kept", [({-1: 1, -3: 1}, True), ({-1: 1, -3: 0}, False), ({-1: 0, -3: 1}, False)])
def test_both_thresholds_must_be_set(monkeypatch, answers, kept):
    import ctypes
    lib = _Lib(answers)
    monkeypatch.setattr(runtime, "_MALLOC_KEPT", False); monkeypatch.setattr(runtime.sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", lambda name: lib)
    assert runtime.keep_freed_memory() is kept
    assert lib.asked == [(-1, 256 << 20), (-3, 32 << 20)]  # both asked, whatever the first answered


def test_no_c_library_or_no_mallopt_means_nothing_set(monkeypatch):
    import ctypes
    monkeypatch.setattr(runtime, "_MALLOC_KEPT", False); monkeypatch.setattr(runtime.sys, "platform", "linux")
    def missing(name): raise OSError(f"{name}: cannot open shared object file")
    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert runtime.keep_freed_memory() is False
    monkeypatch.setattr(ctypes, "CDLL", lambda name: object())  # a libc without mallopt (musl)
    assert runtime.keep_freed_memory() is False and runtime._MALLOC_KEPT is False


@pytest.mark.parametrize("found, loaded", [("libc.so.7", "libc.so.7"), (None, "libc.so.6")])
def test_it_loads_the_c_library_the_system_names(monkeypatch, found, loaded):
    import ctypes, ctypes.util
    names = []
    monkeypatch.setattr(runtime, "_MALLOC_KEPT", False); monkeypatch.setattr(runtime.sys, "platform", "linux")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: found)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: names.append(name) or _Lib({-1: 1, -3: 1}))
    assert runtime.keep_freed_memory() is True and names == [loaded]
