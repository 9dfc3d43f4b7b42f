"""The dataset cache and the game under faults: corrupt entries (truncated, foreign, another key, changed arrays, old format)
are set aside with a CacheWarning and regenerated exactly; cache_info and prune_cache touch only cache files; bad cache
folders fail early and clearly; small games warn; and generation workers die with their parent after kill -9."""
import os, shutil, signal, subprocess, sys, textwrap, time, warnings

import numpy as np
import psutil
import pytest

from achilles.core.validate import InvalidParameterError
from achilles.shadow.game import (CacheWarning, DatasetCache, ScaleWarning, ThreatModel, cache_info, play_game,
                                  prune_cache)

SIZES = dict(dataset_size=50, n_aux=800, n_test_pool=400, n_shadow=100, n_test=50)  # the recommended minimums: no warning
N = SIZES["n_shadow"] + SIZES["n_test"]


@pytest.fixture(scope="module")
def tm(adult):
    df, schema = adult
    return ThreatModel(df.iloc[:2000], schema, generator="independent", name="adult-2k", **SIZES)


@pytest.fixture(scope="module")
def clean(tm):
    "The game on record 0, seed 5, made without any cache."
    return play_game(tm, 0, rng=5, verbose=False)


@pytest.fixture
def cached(tm, tmp_path):
    "A cache folder filled by one run of the same game."
    play_game(tm, 0, rng=5, cache=tmp_path, verbose=False)
    return tmp_path


def assert_same(a, b):
    assert len(a.shadow) == len(b.shadow) and len(a.test) == len(b.test)
    for x, y in zip(a.shadow + a.test, b.shadow + b.test):
        np.testing.assert_array_equal(x.cat, y.cat); np.testing.assert_array_equal(x.cont, y.cont)


def entry_files(clean, d):
    specs = clean.shadow_specs + clean.test_specs
    return DatasetCache(d)._file(specs[3].key), DatasetCache(d)._file(specs[60].key)


# ---------------------------------------------------------------- corrupt entries
def truncate(f, other): f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
def foreign(f, other): f.write_text("name,age\nalice,30\n")
def other_key(f, other): shutil.copyfile(other, f)


def changed_array(f, other):
    with np.load(f) as z: arrays = dict(z)
    cont = arrays["cont"].copy()
    cont.reshape(-1).view(np.uint8)[:8] ^= 0xFF  # flip the bytes of one value; the stored checksum is the old one
    np.savez_compressed(f, **{**arrays, "cont": cont})


def old_format(f, other):
    with np.load(f) as z: arrays = {k: z[k] for k in ("cat", "cont", "meta")}
    np.savez_compressed(f, **arrays)  # as written before entries had a key and a checksum


@pytest.mark.parametrize("damage,reason", [(truncate, "unreadable"), (foreign, "not an npz archive"),
                                           (other_key, "holds the dataset of key"), (changed_array, "checksum mismatch"),
                                           (old_format, "unverifiable")])
def test_corrupt_entry_is_set_aside_and_regenerated(tm, clean, cached, damage, reason):
    f, other = entry_files(clean, cached)
    damage(f, other)
    with pytest.warns(CacheWarning) as rec:
        again = play_game(tm, 0, rng=5, cache=cached, verbose=False)
    msgs = [str(w.message) for w in rec if w.category is CacheWarning]
    assert len(msgs) == 1 and str(f) in msgs[0] and reason in msgs[0], msgs
    assert (again.stats["cached"], again.stats["generated"]) == (N - 1, 1)
    assert_same(again, clean)
    assert f.exists() and f.with_name(f.name + ".corrupt").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        third = play_game(tm, 0, rng=5, cache=cached, verbose=False)
    assert third.stats["generated"] == 0
    assert_same(third, clean)


def test_get_on_a_corrupt_entry_returns_none(tm, clean, cached):
    f, _ = entry_files(clean, cached)
    f.write_bytes(b"")
    with pytest.warns(CacheWarning, match="empty file"):
        assert DatasetCache(cached).get(f.stem) is None
    assert DatasetCache(cached).get(f.stem) is None  # now simply missing: no second warning needed


# ---------------------------------------------------------------- cache_info / prune_cache
def test_cache_info_counts_and_verifies(clean, cached):
    info = cache_info(cached)
    assert info["exists"] and info["entries"] == N and "corrupt" not in info
    assert info["bytes"] == sum(f.stat().st_size for f in cached.glob("*/*.npz"))
    assert info["oldest"] <= info["newest"]
    f, _ = entry_files(clean, cached)
    truncate(f, None)
    assert cache_info(cached, verify=True)["corrupt"] == 1
    assert f.exists()  # info moves nothing
    absent = cache_info(cached / "nope")
    assert not absent["exists"] and absent["entries"] == 0 and "does not exist" in absent["note"]
    with pytest.raises(ValueError, match="is a file"): cache_info(f)


def test_prune_removes_only_cache_files(clean, cached):
    f, g = entry_files(clean, cached)
    old = time.time() - 30 * 86400
    os.utime(g, (old, old))
    truncate(f, None)
    foreign_files = [cached / "notes.txt", cached / f.parent.name / "README", cached / "zz" / (f.stem + ".npz"),
                     cached / (f.stem + ".npz"), cached / "ff" / (f.stem + ".npz")]  # wrong folder for that key
    for p in foreign_files:
        p.parent.mkdir(exist_ok=True); p.write_text("not yours")
    stale = f.parent / f".{f.stem}.npz.k3x9q2ab.tmp"; stale.write_bytes(b"half")
    os.utime(stale, (old, old))
    fresh = f.parent / f".{f.stem}.npz.zz81kq0c.tmp"; fresh.write_bytes(b"a live writer's")
    r = prune_cache(cached, older_than_days=7)
    assert (r["entries"], r["temporary"], r["kept"]) == (1, 1, N - 1) and not g.exists() and fresh.exists()
    r = prune_cache(cached, verify=True)
    assert (r["corrupt"], r["kept"], r["removed"]) == (1, N - 2, 1) and not f.exists()
    r = prune_cache(cached, everything=True)
    assert r["entries"] == N - 2 and r["temporary"] == 1 and r["bytes"] > 0 and r["folders"] > 0
    assert sorted(p for p in cached.rglob("*") if p.is_file()) == sorted(foreign_files)
    left = sorted(p.name for p in cached.iterdir() if p.is_dir())
    assert left == sorted({f.parent.name, "zz", "ff"})  # emptied folders removed, folders with foreign files kept
    assert cache_info(cached)["entries"] == 0


def test_prune_and_info_arguments(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"): prune_cache(tmp_path / "file", everything=True)
    with pytest.raises(FileNotFoundError, match="does not exist"): prune_cache(tmp_path / "nope", everything=True)
    with pytest.raises(ValueError, match="not both"): prune_cache(tmp_path, older_than_days=3, everything=True)
    with pytest.raises(ValueError, match="older_than_days=-1"): prune_cache(tmp_path, older_than_days=-1)
    with pytest.raises(TypeError, match="everything='yes'"): prune_cache(tmp_path, everything="yes")
    with pytest.raises(TypeError, match="verify=1"): cache_info(tmp_path, verify=1)
    assert prune_cache(tmp_path)["removed"] == 0 and (tmp_path / "file").exists()


# ---------------------------------------------------------------- bad cache folders
def test_cache_dir_that_is_a_file(tm, tmp_path):
    f = tmp_path / "cache.txt"; f.write_text("x")
    with pytest.raises(ValueError) as e: DatasetCache(f)
    assert str(e.value) == f"cache_dir={str(f)!r} is a file; pass a folder"
    with pytest.raises(ValueError, match="is a file; pass a folder"): play_game(tm, 0, rng=5, cache=str(f), verbose=False)
    with pytest.raises(ValueError, match="cannot be created"):
        play_game(tm, 0, rng=5, cache=f / "sub", verbose=False)


def test_unwritable_cache_fails_before_any_work(tm, clean, cached, tmp_path, monkeypatch):
    calls = []
    import achilles.shadow.game as game
    real = game._fit_sample_batch
    monkeypatch.setattr(game, "_fit_sample_batch", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # as for a user without write permission
    target = tmp_path / "ro" / "cache"
    with pytest.raises(PermissionError, match="not writable") as e:
        play_game(tm, 0, rng=5, cache=target, verbose=False)
    assert str(target) in str(e.value) and not calls and not target.exists()
    assert_same(play_game(tm, 0, rng=5, cache=cached, verbose=False), clean)  # a full read-only cache still serves


def test_read_only_cache_folder(tm):
    "A cache folder the user cannot write into is refused (as root, CI's user, asked as an ordinary user)."
    import shutil
    from helpers import ordinary_user, read_only_folder
    ro = read_only_folder()
    try:
        with ordinary_user(), pytest.raises(PermissionError, match="not writable"): play_game(tm, 0, rng=5, cache=ro, verbose=False)
    finally: shutil.rmtree(ro.parent, ignore_errors=True)


# ---------------------------------------------------------------- sizes
def test_scale_warning(tm):
    with pytest.warns(ScaleWarning, match=r"n_shadow=20 is below the recommended minimum n_shadow=100") as rec:
        tm.replace(n_shadow=20)
    assert [w.category for w in rec] == [ScaleWarning]
    with pytest.warns(ScaleWarning, match=r"n_test=10 is below the recommended minimum n_test=50"):
        tm.replace(n_test=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ScaleWarning)
        tm.replace(n_shadow=np.int64(100), n_test=50)


def test_sizes_are_even_integers(tm):
    with pytest.raises(InvalidParameterError, match=r"n_shadow=4.5 must be an integer") as e: tm.replace(n_shadow=4.5)
    assert isinstance(e.value, ValueError) and isinstance(e.value, TypeError)
    with pytest.raises(TypeError, match="n_test=100.0 must be an integer"): tm.replace(n_test=100.0)
    with pytest.raises(ValueError, match="n_shadow=101 must be even"): tm.replace(n_shadow=101)
    with pytest.raises(ValueError, match="n_shadow=0 is out of range"): tm.replace(n_shadow=0)
    assert type(tm.replace(n_shadow=np.int64(200)).n_shadow) is int


# ---------------------------------------------------------------- processes
def alive(procs):
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE: out.append(p)
        except psutil.NoSuchProcess: pass
    return out


def stop(procs):
    for p in alive(procs):
        try: p.kill()
        except psutil.NoSuchProcess: pass


WATCHER = "import sys, time; from achilles.shadow.game import _watch_parent, _where\n" \
          "print('watching' if _watch_parent((int(sys.argv[1]), _where())) else 'not watching', flush=True)\n" \
          "time.sleep(120)"


def test_watchdog_decisions():
    "A child watching its parent dies with it; a pid that is alive but not the parent is not watched; a dead one ends it."
    middle = subprocess.Popen([sys.executable, "-c", "import os, subprocess, sys, time\n"
                               f"c = subprocess.Popen([sys.executable, '-c', {WATCHER!r}, str(os.getpid())])\n"
                               "print(c.pid, flush=True); time.sleep(120)"], stdout=subprocess.PIPE, text=True)
    try:
        child = psutil.Process(int(middle.stdout.readline()))
        assert middle.stdout.readline().strip() == "watching"
        middle.send_signal(signal.SIGKILL); middle.wait(10)
        t0 = time.time()
        while alive([child]) and time.time() - t0 < 5: time.sleep(0.1)
        assert not alive([child])  # ends within about 0.5 s
    finally:
        middle.kill(); middle.wait(10)
        stop([child])
    other = subprocess.Popen([sys.executable, "-c", WATCHER, str(os.getppid())], stdout=subprocess.PIPE, text=True)
    try: assert other.stdout.readline().strip() == "not watching"  # alive, but not its parent (a cluster's worker)
    finally: other.kill(); other.wait(10)
    dead = subprocess.Popen([sys.executable, "-c", "pass"]); dead.wait(10)
    gone = subprocess.run([sys.executable, "-c", WATCHER, str(dead.pid)], capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1 and gone.stdout == ""  # its "parent" died before its first task: it stops at once


GAME = """
import sys, warnings
from achilles.core.data import Schema, load_adult
import achilles.shadow.game as game
df = load_adult()
tm = game.ThreatModel(df.iloc[:{pop}], Schema.from_dataframe(df), generator="{gen}", dataset_size={size}, n_aux={aux},
                      n_test_pool={pool}, n_shadow={shadow}, n_test={test}, name="adult")
{patch}
game.play_game(tm, 0, rng=5, jobs={jobs}, cache=sys.argv[1], batch_size={bs}, verbose=False)
"""


def wait_for(cond, proc, timeout=120):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if cond(): return True
        if proc.poll() is not None: return False
        time.sleep(0.1)
    return False


def test_kill_9_takes_the_workers_with_it(tmp_path):
    "kill -9 of a game generating with jobs=2: every loky worker (and tracker) it started is gone within 15 s."
    script = GAME.format(pop=8000, gen="baynet", size=1000, aux=4000, pool=2000, shadow=6000, test=200, patch="",
                         jobs=2, bs=4)  # about 30 s of work on 2 cores; killed after the first few datasets
    p = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stderr=subprocess.DEVNULL)
    kids = []
    try:
        def workers():
            out = []
            for c in psutil.Process(p.pid).children(recursive=True):
                try:
                    if "popen_loky" in " ".join(c.cmdline()): out.append(c)
                except psutil.NoSuchProcess: pass
            return out
        assert wait_for(lambda: len(workers()) >= 2 and len(list(tmp_path.glob("*/*.npz"))) >= 4, p), \
            "the game never started its workers"
        kids = psutil.Process(p.pid).children(recursive=True)
        assert p.poll() is None, "the game ended before it could be killed"
        p.send_signal(signal.SIGKILL); p.wait(10)
        t0 = time.time()
        while alive(kids) and time.time() - t0 < 15: time.sleep(0.2)
        assert not alive(kids), [" ".join(k.cmdline())[:80] for k in alive(kids)]
    finally:
        if p.poll() is None: p.kill(); p.wait(10)
        stop(kids)


def test_real_kill_9_then_resume_equals_an_uninterrupted_run(tm, clean, tmp_path):
    "A run killed (SIGKILL) after some cache writes, resumed, gives the datasets of a run never interrupted."
    slow = ("real = game._fit_sample_batch\nimport time\n"
            "game._fit_sample_batch = lambda *a, **k: time.sleep(0.1) or real(*a, **k)")
    script = GAME.format(pop=2000, gen="independent", patch=slow, jobs=1, bs=2, **{
        k: SIZES[v] for k, v in dict(size="dataset_size", aux="n_aux", pool="n_test_pool", shadow="n_shadow",
                                     test="n_test").items()})
    p = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: len(list(tmp_path.glob("*/*.npz"))) >= 10, p), "the run never wrote 10 datasets"
        p.send_signal(signal.SIGKILL); p.wait(10)
    finally:
        if p.poll() is None: p.kill(); p.wait(10)
    done = len(list(tmp_path.glob("*/*.npz")))
    assert 10 <= done < N
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # every file a kill leaves is whole
        resumed = play_game(tm, 0, rng=5, cache=tmp_path, verbose=False)
    assert (resumed.stats["cached"], resumed.stats["generated"]) == (done, N - done)
    assert_same(resumed, clean)
    assert cache_info(tmp_path, verify=True)["corrupt"] == 0
