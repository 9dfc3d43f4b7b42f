"""Unclear outcomes (reliability issue, round two): every one becomes one line naming the argument, the file or the value, and
what is allowed. A semicolon file, an exception nobody expected, a list of choices, a closed pipe, Ctrl-C under parallel
workers, the import and store messages, `--results ''`, an optional dependency, and a missing value or column."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from achilles import cli
from achilles.core.results import ResultsStore
from faultkit import Files, argv_for, block_all_work, make_files, one_line_error, record_work, run, stub_work, work_tables
from helpers import wait_rows

ACHILLES = str(Path(sys.executable).parent / "achilles")
READERS = ["vulnerable", "attack", "nobox", "kde", "riskbench", "audit", "report"]  # every command that reads a CSV


@pytest.fixture
def f(tmp_path) -> Files:
    return make_files(tmp_path)


def _semicolons(f: Files):
    for p in (f.data, f.train, f.synth, f.control): pd.read_csv(p).to_csv(p, sep=";", index=False)


# ---------------------------------------------------------------- a semicolon file: detected and said, or --sep
@pytest.mark.parametrize("command", READERS)
def test_a_semicolon_file_is_read_with_its_separator(f, command, capsys, monkeypatch):
    _semicolons(f)
    seen = record_work(monkeypatch, command)
    code, _, err = run(capsys, argv_for(command, f, results=""))
    assert "recorded" in err and code == 1, err  # it reached the work: the file was read
    tables = work_tables(seen)
    if command in ("audit", "riskbench"):  # given the path, the library reads it: it must be a ','-file or a table
        assert tables or not str(seen["args"][0]).endswith(".csv")
    assert all(t.shape[1] == 15 for t in tables) and tables, [t.shape for t in tables]


@pytest.mark.parametrize("command", READERS)
def test_a_wrong_separator_is_one_line_naming_sep(f, command, capsys, monkeypatch):
    _semicolons(f)
    block_all_work(monkeypatch)
    one_line_error(capsys, argv_for(command, f, results="", extra=["--sep", ","]), "--sep ';'")


# ---------------------------------------------------------------- an exception nobody expected: one line, never a traceback
def _external_failure():
    from achilles.generators.external import ExternalGeneratorError
    return ExternalGeneratorError("generator 'ctgan' failed (exit code 3); command: python runner.py\n--- stderr (tail) ---\n"
                                  "Traceback (most recent call last):\n  File \"runner.py\", line 1\nValueError: epochs must be positive")


SURPRISES = {
    "a bug (RuntimeError)": (lambda: RuntimeError("something broke\nsecond line"), 1, "RuntimeError: something broke"),
    "a missing column (KeyError)": (lambda: KeyError("age"), 2, "error: age"),
    "out of memory": (lambda: MemoryError("Unable to allocate 15.1 GiB for an array with shape (45222, 45000)"), 2, "15.1 GiB"),
    "an external generator exiting 3": (_external_failure, 1, "exit code 3"),
}


@pytest.mark.parametrize("surprise", list(SURPRISES))
@pytest.mark.parametrize("command", READERS)
def test_an_unexpected_exception_is_one_line(f, command, surprise, capsys, monkeypatch):
    make, code, needle = SURPRISES[surprise]
    def fail(*a, **k): raise make()
    stub_work(monkeypatch, command, fail)
    line = one_line_error(capsys, argv_for(command, f, results=""), needle, code=code)
    if "external" in surprise: assert "epochs must be positive" in line  # the runner's last words are kept


def test_python_entry_points_fail_in_one_line(f):
    from achilles.core.data import load_csv
    from achilles.core.validate import InvalidParameterError
    from achilles.generators import make_generator
    from achilles.selectors import select_records
    from achilles.core.data import Schema
    for bad in (None, 123, ""):
        with pytest.raises(InvalidParameterError, match="must be the path of a CSV file"): load_csv(bad)
    df = pd.read_csv(f.data); schema = Schema.from_dataframe(df)
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['age'\]"): select_records(df.drop(columns="age"), schema)
    for g in ("baynet", "privbayes", "synthpop", "independent", "identity"):
        gen = make_generator(g, schema).fit(df.astype({c: "category" for c in schema.categorical}), rng=0)
        with pytest.raises(MemoryError, match=r"n=1,000,000,000,000 synthetic records needs about .* more than the"): gen.sample(10**12)


def test_vulnerable_refuses_a_k_that_cannot_fit_in_memory(capsys, monkeypatch):
    import achilles.core.runtime as rt
    monkeypatch.setattr(rt, "available_memory", lambda: 2 * 1024**3)
    t0 = time.time()
    one_line_error(capsys, ["vulnerable", "--k", "45000"], "k=45,000", "more than the 2.0 GB available")


# ---------------------------------------------------------------- a list of choices lists only what is accepted
def test_every_metric_the_error_lists_is_accepted(f, capsys):
    line = one_line_error(capsys, ["vulnerable", "--csv", f.data, "--metric", "gower"], "choose one of")
    for m in line.split("choose one of ")[1].split(", "):
        code, _, err = run(capsys, ["vulnerable", "--csv", f.data, "--metric", m.strip(), "--top", "1"])
        assert code == 0, (m, err)


@pytest.mark.parametrize("bench", ["distance", "queries", "nobox", "riskbench", "kde", "audit", "attack", "generators", "neighbours"])
def test_every_option_a_bench_error_lists_exists(bench, capsys):
    line = one_line_error(capsys, ["bench", bench, "--generator", "baynet", "--k", "3", "--profile", "quick"] if bench == "distance"
                          else ["bench", bench, "--profile", "quick"] if bench != "attack" else ["bench", bench, "--k", "3"],
                          f"bench {bench} does not take")
    listed = line.split("it takes ")[1]
    flags = [] if listed == "none of them" else [x.strip() for x in listed.split(",")]
    actions = {o for a in cli.build_parser()._subparsers._group_actions[0].choices["bench"]._actions for o in a.option_strings}
    assert flags and all(fl in actions for fl in flags), (flags, actions)


def test_levels_that_are_not_numbers(f, capsys, monkeypatch):
    block_all_work(monkeypatch)
    one_line_error(capsys, argv_for("riskbench", f, results="") + ["--levels", "a,b"], "--levels='a,b': 'a' is not a number")


# ---------------------------------------------------------------- a closed pipe, and Ctrl-C under parallel workers
def test_a_closed_pipe_ends_quietly():
    p = subprocess.run(f"{ACHILLES} list generators --parameters | head -3", shell=True, capture_output=True, text=True,
                       timeout=300, executable="/bin/bash")
    assert len(p.stdout.splitlines()) == 3 and p.stderr == "", p.stderr
    # a reader that is gone before the first write (with `| head -1` the whole output may fit in the pipe's buffer first)
    p = subprocess.Popen(f"{ACHILLES} list generators --parameters", shell=True, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, executable="/bin/bash")
    p.stdout.close()
    err = p.stderr.read(); p.wait(timeout=300)
    assert p.returncode == 141 and err == "", (p.returncode, err)  # 128 + SIGPIPE, as any Unix tool


@pytest.mark.parametrize("command", ["attack", "riskbench"])
def test_ctrl_c_under_parallel_workers_prints_one_line(tmp_path, command):
    store = tmp_path / "s.sqlite"
    argv = {"attack": [ACHILLES, "attack", "--records", "4", "--generator", "baynet", "--n-shadow", "400", "--n-test", "100",
                       "--cache-dir", str(tmp_path / "c")],
            "riskbench": [ACHILLES, "riskbench", "--n-train", "2000", "--metrics", "ims,dcr,singling_out", "--no-utility"]}[command]
    p = subprocess.Popen(argv + ["--results", str(store), "--jobs", "2", "--quiet"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal gives it, however the suite was started
    assert wait_rows(store, 1, p), "no row was stored"
    os.killpg(p.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group, workers included
    err = p.communicate(timeout=120)[1]
    assert p.returncode == 130, err
    assert err == f"achilles {command}: interrupted; every finished result is in the store, and the same command resumes\n", err


# ---------------------------------------------------------------- what the store commands say
def test_import_messages_say_what_happened(f, capsys):
    code, out, _ = run(capsys, ["results", "export", "--results", f.store, "--csv", f.dir / "e.csv"])
    assert code == 0 and "1 row written" in out
    new = f.dir / "copy.sqlite"
    _, out, _ = run(capsys, ["results", "import", f.dir / "e.csv", "--results", new])
    assert "1 row imported" in out  # our own export comes back in: not "damaged"
    _, out, _ = run(capsys, ["results", "import", f.dir / "e.csv", "--results", new])
    assert "the same content was imported on" in out
    (f.dir / "e2.csv").write_bytes((f.dir / "e.csv").read_bytes() + b"\n")
    _, out, _ = run(capsys, ["results", "import", f.dir / "e2.csv", "--results", new])
    assert "its 1 row was already in the store" in out and "imported before" not in out  # another file, the same rows
    (f.dir / "x.bin").write_bytes(bytes(range(256)))
    one_line_error(capsys, ["results", "import", f.dir / "x.bin", "--results", new], "is not a CSV text file", "binary data")
    one_line_error(capsys, ["results", "import", f.store, "--results", new], "an SQLite database")


def test_a_rerun_says_nothing_new_was_stored(f, capsys):
    argv = argv_for("nobox", f, results=f.dir / "n.sqlite")
    _, out, _ = run(capsys, argv)
    assert "stored 1 row " in out
    _, out, _ = run(capsys, argv)
    assert "nothing new stored: the 1 row of this run" in out and "stored 1 row " not in out


@pytest.mark.parametrize("command", ["attack", "nobox", "kde", "riskbench", "audit", "report"])
def test_an_empty_results_path_means_store_nothing(f, command, capsys, monkeypatch):
    seen = record_work(monkeypatch, command)
    before = f.snapshot()
    code, _, err = run(capsys, argv_for(command, f, results=""))
    assert "recorded" in err, err  # no error about the store: '' is accepted
    assert {k: v for k, v in f.snapshot().items() if k in before} == before and set(f.snapshot()) == set(before)
    for k in ("store", "results_path"):
        if k in seen["kw"]: assert seen["kw"][k] in (None, ""), seen["kw"][k]


def test_an_empty_results_path_is_refused_where_a_store_is_needed(capsys):
    one_line_error(capsys, ["results", "show", "--results", ""], "--results='' names no store")
    one_line_error(capsys, ["cache", "info", "--cache-dir", ""], "--cache-dir='' names no cache")


# ---------------------------------------------------------------- an optional dependency is asked for before the work
NO_TORCH = """
import sys
class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."): raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoTorch())
from achilles import cli
sys.exit(cli.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("argv", [["attack", "--attack", "target-attention", "--records", "1"], ["bench", "target-attention"]])
def test_a_missing_extra_is_said_before_the_work(tmp_path, argv):
    p = subprocess.run([sys.executable, "-c", NO_TORCH, *argv, *(["--results", str(tmp_path / "s.sqlite"), "--cache-dir",
                        str(tmp_path / "c")] if argv[0] == "attack" else [])], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 2 and "pip install 'achilles[nn]'" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stdout == ""  # not even the bench's machine line: nothing ran
    assert not (tmp_path / "c").exists()  # no dataset was generated


# ---------------------------------------------------------------- a missing value or column: the file, the line, the column
@pytest.mark.parametrize("command,option", [("vulnerable", "csv"), ("nobox", "train"), ("nobox", "synthetic"), ("nobox", "control"),
                                            ("kde", "holdout"), ("audit", "csv"), ("report", "data")])
def test_an_infinite_value_names_the_file_and_its_line(f, command, option, capsys, monkeypatch):
    "A missing value is data now (tests/test_missing_values.py); an infinite number is still refused, naming the file's line."
    block_all_work(monkeypatch)
    path = {"csv": f.data, "data": f.data, "train": f.train, "synthetic": f.synth, "control": f.control, "holdout": f.control}[option]
    lines = path.read_text().splitlines()
    cells = lines[5].split(","); cells[0] = "inf"; lines[5] = ",".join(cells)  # record 4 (0-based), line 6 of the file
    path.write_text("\n".join(lines) + "\n")
    one_line_error(capsys, argv_for(command, f, results=""), "column 'age' has 1 infinite value(s)", f"record 4, line 6 of '{path}'")


@pytest.mark.parametrize("command,option", [("nobox", "synthetic"), ("nobox", "control"), ("kde", "holdout"), ("kde", "synthetic")])
def test_a_missing_column_names_the_file_not_types(f, command, option, capsys, monkeypatch):
    block_all_work(monkeypatch)
    path = f.control if option in ("control", "holdout") else f.synth
    pd.read_csv(path).drop(columns="age").to_csv(path, index=False)
    line = one_line_error(capsys, argv_for(command, f, results=""), f"--{option}='{path}' lacks the column(s) ['age'] of --train")
    assert "types" not in line


def test_a_missing_value_in_a_table_is_data_not_an_error():
    "A metric given a synthetic table with a missing value runs (the value is a category of its own, see `04_data`)."
    from achilles.nobox import METRICS
    from achilles.core.data import load_adult
    df = load_adult().iloc[:400].reset_index(drop=True)
    syn = df.iloc[200:].reset_index(drop=True).astype({"age": float}); syn.loc[7, "age"] = np.nan
    r = METRICS.make("ims").evaluate(df.iloc[:200], syn, df.iloc[:200])
    assert np.isfinite(r.value)


def test_loky_manager_thread_errors_are_held_then_dropped_on_interruption_and_released_otherwise():
    "A Ctrl-C can trip joblib's loky manager thread (a KeyError on a cancelled work item): held while a command runs, dropped if it was interrupted, handed on if not; other threads' errors pass straight through."
    import threading
    from achilles.cli import _LokyThreadErrors
    seen, prev = [], threading.excepthook
    threading.excepthook = lambda a: seen.append((a.exc_type, a.thread.name))
    try:
        def raise_in(filename, name):
            code = compile("def f():\n    raise KeyError(35)\n", filename, "exec"); ns = {}; exec(code, ns)
            t = threading.Thread(target=ns["f"], name=name); t.start(); t.join()
        with _LokyThreadErrors() as held:
            raise_in("/venv/site-packages/joblib/externals/loky/process_executor.py", "ExecutorManagerThread")
            raise_in("/work/other/module.py", "OtherThread")
            assert [a.thread.name for a in held.held] == ["ExecutorManagerThread"] and seen == [(KeyError, "OtherThread")]
            held.drop()  # interrupted: a consequence, not news
            assert held.held == [] and len(seen) == 1
            raise_in("/venv/site-packages/joblib/externals/loky/process_executor.py", "ExecutorManagerThread")
            held.release()  # finished normally: nothing is swallowed
        assert seen == [(KeyError, "OtherThread"), (KeyError, "ExecutorManagerThread")]
    finally:
        threading.excepthook = prev


def test_the_workers_resource_tracker_is_told_to_keep_its_exit_warnings(monkeypatch):
    """A Ctrl-C can leave joblib's semaphores to its resource tracker, a process of its own, which then warns on stderr as it removes
    them: raw library noise after achilles' one line (seen on a loaded machine). `main` passes its children a filter for exactly that
    module's UserWarnings; a filter the user set is kept, and the filter is not added twice."""
    import subprocess, sys
    from achilles import cli
    monkeypatch.setenv("PYTHONWARNINGS", "default::DeprecationWarning")
    cli._quiet_resource_tracker(); cli._quiet_resource_tracker()
    env = os.environ["PYTHONWARNINGS"]
    assert env == "default::DeprecationWarning," + cli._TRACKER_FILTER
    code = ("g = {'__name__': 'joblib.externals.loky.backend.resource_tracker'}\n"
            "exec(compile('import warnings\\nwarnings.warn(\"leaked semlock objects\", UserWarning)', 'rt.py', 'exec'), g)\n"
            "import warnings; warnings.warn('any other warning', UserWarning)\n")
    err = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True, timeout=60).stderr
    assert "leaked semlock" not in err and "any other warning" in err
