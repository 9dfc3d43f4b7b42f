"""Every notebook that starts joblib's worker processes stops them in its last cell.

joblib's loky workers idle for 300 s after their last task; `nbdev_test` runs the notebooks in a pool of processes, and a
process whose notebook left workers behind cannot exit until they time out (the suite used to idle for 4.5 minutes after its
last notebook). `achilles.core.runtime.stop_workers` shuts them down; this test keeps every such notebook calling it.
"""
import json, re, subprocess, sys, textwrap, time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STARTS_WORKERS = re.compile(r"n_jobs\s*=\s*(-1|[2-9])|jobs\s*=\s*(-1|[2-9])|Parallel\(|--jobs\s+[2-9]")


def _fast_code_cells(path):
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) for c in cells
            if c["cell_type"] == "code" and not "".join(c["source"]).lstrip().startswith("#| slow")]


NOTEBOOKS = sorted(ROOT.glob("nbs/**/*.ipynb"))


def test_the_pattern_sees_the_notebooks_that_start_workers():
    "The scan below is not vacuous: the game and the audit notebooks start workers in fast cells."
    starters = {p.name for p in NOTEBOOKS if any(STARTS_WORKERS.search(s) for s in _fast_code_cells(p))}
    assert {"30_game.ipynb", "34_audit.ipynb", "42_riskbench.ipynb"} <= starters, starters


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebook_that_starts_workers_stops_them_last(path):
    cells = _fast_code_cells(path)
    if not any(STARTS_WORKERS.search(s) for s in cells):
        pytest.skip("starts no workers")
    assert "stop_workers()" in cells[-1], f"{path.relative_to(ROOT)}: its last code cell must call stop_workers()"


def test_a_pool_process_that_stopped_its_workers_exits_at_once(tmp_path):
    "The mechanism itself, as nbdev_test meets it: a process pool whose task used joblib, with and without stop_workers."
    script = tmp_path / "pool.py"
    script.write_text(textwrap.dedent("""
        import sys
        from fastcore.parallel import parallel  # the pool nbdev_test runs the notebooks in
        def job(stop):
            from joblib import Parallel, delayed
            Parallel(n_jobs=2)(delayed(abs)(-j) for j in range(4))
            if stop:
                from achilles.core.runtime import stop_workers
                return stop_workers()
            return None
        if __name__ == "__main__":
            print(all(parallel(job, [sys.argv[1] == "stop"] * 2, n_workers=2)))
    """))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(script), "stop"], capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - t0
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"  # workers were running, and were stopped
    # Without stop_workers the same process waits 300 s; with it, the exit is immediate. 120 s is the bound that can fail
    # only when the workers were left behind (this is a hang check, not a timing measurement).
    assert took < 120
