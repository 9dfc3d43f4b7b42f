"""Issue 39: the pool on disk (`achilles.shadow.pool_store`): a full disk mid-save leaves no pool and no temporary file, and names
the file; a save killed in another process (SIGKILL) leaves a folder that holds no pool, and the next save completes it."""
import errno, os, signal, subprocess, sys, textwrap

import numpy as np
import pytest

from achilles.core.runtime import WriteError
from achilles.shadow import pool_store
from achilles.shadow.pool_attack import StackedPool


def _pool(n=5000):
    g = np.random.default_rng(0)
    cat = g.integers(0, 7, (3, n)).astype(np.uint8); cont = g.random((2, n))
    return StackedPool(cat, cont, np.sqrt((cont * cont).sum(0)), np.arange(0, n + 1, 100, dtype=np.int64))


def test_a_full_disk_leaves_no_pool_and_names_the_file(tmp_path, monkeypatch):
    real = np.save
    def full(f, a, *k, **kw):
        if a.ndim == 2 and a.dtype == np.float64: raise OSError(errno.ENOSPC, "No space left on device")
        return real(f, a, *k, **kw)
    monkeypatch.setattr(pool_store.np, "save", full)
    with pytest.raises(WriteError, match=r"cont\.npy.*disk is full"):
        pool_store.save_pool(_pool(), tmp_path / "p", key="k")
    assert not (tmp_path / "p" / pool_store.MANIFEST).exists() and not list((tmp_path / "p").glob(".pool.*"))
    assert pool_store.open_pool(tmp_path / "p", key="k") is None
    monkeypatch.setattr(pool_store.np, "save", real)
    pool_store.save_pool(_pool(), tmp_path / "p", key="k")  # space again: the save completes in the same folder
    np.testing.assert_array_equal(pool_store.open_pool(tmp_path / "p", key="k").cont, _pool().cont)


def test_a_save_killed_mid_write_leaves_no_pool(tmp_path):
    "A child process saves a large pool and is killed with SIGKILL while writing; the folder then holds no pool."
    script = textwrap.dedent(f"""
        import numpy as np, os, sys
        from achilles.shadow import pool_store
        from achilles.shadow.pool_attack import StackedPool
        n = 1_000_000
        cont = np.ones((2, n)); cat = np.zeros((1, n), np.uint8)
        real = np.save
        def slow(f, a, *k, **kw):
            if a.ndim == 2 and a.dtype == np.float64:
                print("writing", flush=True); import time; f.write(b"partial"); f.flush(); time.sleep(60)
            return real(f, a, *k, **kw)
        pool_store.np.save = slow
        pool_store.save_pool(StackedPool(cat, cont, np.ones(n), np.array([0, n])), {str(tmp_path / 'p')!r}, key="k")
    """)
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "writing"
    os.kill(p.pid, signal.SIGKILL); p.wait()
    assert pool_store.open_pool(tmp_path / "p", key="k") is None  # no manifest: no pool
    assert list((tmp_path / "p").glob(".pool.*"))  # the half-written file is there ...
    pool_store.save_pool(_pool(), tmp_path / "p", key="k")
    assert not list((tmp_path / "p").glob(".pool.*"))  # ... and the next save clears it
    np.testing.assert_array_equal(pool_store.open_pool(tmp_path / "p", key="k").cat, _pool().cat)


def test_only_the_files_save_pool_writes_count_as_ours(tmp_path):
    "A foreign `.npy` or `x_*` file blocks a save, survives a removal, and is not counted in a pool's bytes."
    with pytest.raises(FileExistsError, match="did not write"):
        (tmp_path / "a").mkdir(); (tmp_path / "a" / "theirs.npy").write_bytes(b"x"); pool_store.save_pool(_pool(), tmp_path / "a", key="k")
    folder = tmp_path / "c" / "pools" / "run"
    pool_store.save_pool(_pool(), folder, key="k")
    ours = sum(p.stat().st_size for p in folder.iterdir())
    (folder / "x_notes.txt").write_bytes(b"mine" * 1000)
    [(f, size, _)] = pool_store.pool_folders(tmp_path / "c")
    assert size == ours  # the foreign file is not the pool's
    pool_store.remove_pool(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["x_notes.txt"]


def test_cache_info_and_prune_cache_count_and_remove_pools(tmp_path):
    """A pool written beside the dataset cache is counted by `cache_info`, kept by `prune_cache` when it is newer than the cut-off or
    when nothing is asked, and removed by `everything=True` / an older cut-off, with its bytes and its count reported."""
    from achilles.shadow.game import cache_info, prune_cache
    folder = tmp_path / "pools" / "run1"
    pool_store.save_pool(_pool(300), folder, key="k")
    size = sum(p.stat().st_size for p in folder.iterdir())
    info = cache_info(tmp_path)
    assert (info["pools"], info["pool_bytes"]) == (1, size)
    out = prune_cache(tmp_path, older_than_days=1.0)  # written just now: kept
    assert (out["pools"], out["removed"], out["bytes"]) == (0, 0, 0) and folder.is_dir()
    old = os.path.getmtime(folder / pool_store.MANIFEST) - 3 * 86400
    os.utime(folder / pool_store.MANIFEST, (old, old))
    out = prune_cache(tmp_path, older_than_days=1.0)
    assert (out["pools"], out["removed"], out["bytes"]) == (1, 1, size) and not folder.exists()
    pool_store.save_pool(_pool(300), folder, key="k")
    out = prune_cache(tmp_path, everything=True)
    assert (out["pools"], out["removed"], out["bytes"]) == (1, 1, size) and not folder.exists()
    pool_store.save_pool(_pool(300), folder, key="k")
    assert pool_store.remove_pool(folder) == size and not folder.exists()


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RssFile from /proc")
def test_release_pages_drops_a_read_pool_from_the_resident_set(tmp_path):
    "Issue 39: a worker that read its pool holds the pages in its resident size (Dask pauses it at 80 %); release_pages gives them back, and the data reads the same after."
    from achilles.shadow.pool_attack import StackedPool
    from achilles.shadow.pool_store import open_pool, release_pages, save_pool
    def rss_file_mb():
        for line in open("/proc/self/status"):
            if line.startswith("RssFile:"): return int(line.split()[1]) / 1024
    n = 40_000_000  # 320 MB of norms
    pool = StackedPool(np.zeros((1, n), np.uint8), np.zeros((0, n)), np.arange(n, dtype=np.float64), np.array([0, n], np.int64))
    save_pool(pool, tmp_path / "p", key="k")
    st = open_pool(tmp_path / "p", key="k", verify=False)
    before = rss_file_mb()
    total = float(np.asarray(st.norm).sum()) + float(np.asarray(st.cat).sum())  # every page read
    assert rss_file_mb() - before > 200
    assert release_pages(st) == 4  # cat, cont (no column, but its file is mapped), norm, offsets
    assert rss_file_mb() - before < 100
    assert float(np.asarray(st.norm).sum()) == total  # still mapped: read again from the page cache
    assert release_pages(StackedPool(np.zeros((1, 4), np.uint8), np.zeros((0, 4)), np.zeros(4), np.array([0, 4]))) == 0  # nothing mapped


def test_release_pages_where_the_platform_has_no_madv_dontneed(tmp_path, monkeypatch):
    "Nothing released, nothing raised (macOS builds of Python may lack the constant)."
    import mmap
    from achilles.shadow.pool_store import open_pool, release_pages, save_pool
    save_pool(StackedPool(np.zeros((1, 4096), np.uint8), np.zeros((0, 4096)), np.ones(4096), np.array([0, 4096], np.int64)), tmp_path / "p", key="k")
    st = open_pool(tmp_path / "p", key="k")
    monkeypatch.delattr(mmap, "MADV_DONTNEED")
    assert release_pages(st) == 0 and float(np.asarray(st.norm).sum()) == 4096.0
