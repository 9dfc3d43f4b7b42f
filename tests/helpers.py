"""Helpers shared by the test files that run whole commands in a subprocess."""
import time

from achilles.core.results import ResultsStore, StoreError


def wait_rows(store, n, proc, timeout=240, kind=None):
    "Wait until the results store at `store` holds at least `n` rows (of `kind`, when given); False if `proc` ends first or the time runs out."
    t0 = time.time()
    while time.time() - t0 < timeout:
        if store.exists():
            try:
                if (len(ResultsStore(store)) if kind is None else len(ResultsStore(store).read(kind))) >= n: return True
            except StoreError: pass
        if proc.poll() is not None: return False
        time.sleep(0.2)
    return False



from contextlib import contextmanager


@contextmanager
def ordinary_user(uid: int = 65534):
    """Within the block, this process's *real* user is an ordinary one (nobody) when it runs as root (CI's user): the checks
    that a folder is writable use `os.access`, which asks about the real user, so they answer as for that user; the
    effective user stays root, so imports and everything else work as before. Outside root, nothing changes."""
    import os
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        yield; return
    os.setresuid(uid, 0, 0)
    try: yield
    finally: os.setresuid(0, 0, 0)

def read_only_folder():
    "A fresh folder that an ordinary user can enter but not write into (under a world-traversable temporary folder)."
    import os, tempfile
    from pathlib import Path
    base = Path(tempfile.mkdtemp(prefix="achilles-ro-")); base.chmod(0o755)
    ro = base / "ro"; ro.mkdir(); ro.chmod(0o555)
    return ro
