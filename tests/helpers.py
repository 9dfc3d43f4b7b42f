"""Helpers shared by the test files that run whole commands in a subprocess."""
import time

from achilles.core.results import ResultsStore, StoreError


def wait_rows(store, n, proc, timeout=240):
    "Wait until the results store at `store` holds at least `n` rows; False if `proc` ends first or the time runs out."
    t0 = time.time()
    while time.time() - t0 < timeout:
        if store.exists():
            try:
                if len(ResultsStore(store)) >= n: return True
            except StoreError: pass
        if proc.poll() is not None: return False
        time.sleep(0.2)
    return False
