"""Every kernel of the neighbour engine, run with numba's bounds checking on (NUMBA_BOUNDSCHECK=1, a fresh cache): on tables with
ties, duplicates, missing values, word-boundary profile counts and no categorical or no continuous column, no index goes out of
bounds. Without it an off-by-one write (e.g. one level too many in `_profile_levels`) corrupts memory silently."""
import os, subprocess, sys, textwrap

SCRIPT = textwrap.dedent("""
    import numpy as np, pandas as pd, sys
    sys.path.insert(0, {tests!r})
    from test_neighbours import random_frame, ENGINE_METRICS, MISSING_METRICS
    from achilles.neighbours import nearest, count_within
    rng = np.random.default_rng(0)
    for n, cards, n_cont, missing in [(70, (3, 2, 5), 2, 0.0), (65, (9, 9), 1, 0.0), (40, (4,), 0, 0.0), (33, (), 1, 0.0),
                                      (50, (3, 4), 2, 0.2), (2, (2,), 1, 0.0)]:
        df, schema = random_frame(rng, n, cards, n_cont, missing=missing)
        for m in (MISSING_METRICS if missing else ENGINE_METRICS):
            k = min(3, n - 1)
            nearest(df, df, k, m, schema=schema, exclude_self=True); nearest(df.iloc[: n // 2 + 1], df, k, m, schema=schema)
            count_within(df, df, 0.3, m, schema=schema)
    print("ok")
""")


def test_the_engine_never_indexes_out_of_bounds(tmp_path):
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"))  # compiled anew, with the checks
    r = subprocess.run([sys.executable, "-c", SCRIPT.format(tests=os.path.dirname(__file__))], env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
