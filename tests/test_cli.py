"""The console script: exit codes, messages, help and lists built from the registries, and that `vulnerable` prints the
records V_k ranks highest."""
import re

import numpy as np
import pandas as pd
import pytest

from achilles import cli
from achilles.core.data import load_csv, load_adult, Schema
from achilles.distance import vulnerability_scores


@pytest.fixture
def small_csv(tmp_path):
    p = tmp_path / "t.csv"
    load_adult().iloc[:400].to_csv(p, index=False)
    return p


def test_vulnerable_matches_library(small_csv, capsys, tmp_path):
    out = tmp_path / "top.csv"
    assert cli.main(["vulnerable", "--csv", str(small_csv), "--k", "4", "--top", "7", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "7 most vulnerable of 400 records" in printed
    df, schema = load_csv(small_csv)  # the CLI's reading: `prepare_table`'s rules (education-num, 16 codes, is categorical)
    v = vulnerability_scores(df, schema, k=4)
    table = pd.read_csv(out)
    assert np.allclose(np.sort(v)[::-1][:7], table["V_4"].to_numpy())
    assert set(table["record"]) <= set(np.argsort(-v, kind="stable")[:10])


@pytest.mark.parametrize("argv, msg", [
    (["vulnerable", "--dataset", "mnist"], "not a known dataset"),
    (["vulnerable", "--k", "0"], "argument --k: 0 is out of range: it must be a whole number >= 1"),
    (["vulnerable", "--csv", "/nonexistent.csv"], "does not exist"),
])
def test_errors_exit_2_with_message(argv, msg, capsys):
    assert cli.main(argv) == 2
    assert msg in capsys.readouterr().err


def test_bench_rejects_unknown_options(monkeypatch, capsys):
    calls = {}
    def fake_bench(dataset="adult", n=None, verbose=True):
        calls.update(dataset=dataset, n=n, verbose=verbose)
        return {}
    from achilles.perf import BENCHES
    monkeypatch.setitem(BENCHES._entries["distance"], "factory", fake_bench)
    assert cli.main(["bench", "distance", "--n", "100", "--quiet"]) == 0
    assert calls == dict(dataset="adult", n=100, verbose=False)
    assert cli.main(["bench", "distance", "--n-shadow", "5"]) == 2
    assert "does not take option(s) ['--n-shadow']" in capsys.readouterr().err


def test_bench_outside_takes_records_and_replicates(monkeypatch, capsys):
    "`bench outside --records 40572 --replicates 5` reaches the benchmark as ids and a count; a bad id or a replicate count of 2 is refused."
    calls = {}
    def fake_outside(generator="synthpop,baynet", records=None, replicates=1, jobs=None, verbose=True):
        calls.update(generator=generator, records=records, replicates=replicates)
    from achilles.perf import BENCHES
    monkeypatch.setitem(BENCHES._entries["outside"], "factory", fake_outside)
    assert cli.main(["bench", "outside", "--generator", "baynet", "--records", "40572", "--replicates", "5", "--quiet"]) == 0
    assert calls == dict(generator="baynet", records=[40572], replicates=5)
    assert cli.main(["bench", "outside", "--records", "1,x"]) == 2
    assert "row ids are whole numbers" in capsys.readouterr().err
    monkeypatch.undo()
    assert cli.main(["bench", "outside", "--generator", "baynet", "--records", "5", "--replicates", "2", "--quiet"]) == 2
    assert "replicates=2 leaves one fresh pool" in capsys.readouterr().err


def test_bench_cluster_takes_generator_params(monkeypatch, capsys):
    "`bench cluster --generator ctgan --params epochs=30` reaches the benchmark; --params is refused by a bench that takes none."
    calls = {}
    def fake_cluster(dataset="adult", n=2000, generator="baynet", params=None, verbose=True):
        calls.update(generator=generator, params=params)
    from achilles.perf import BENCHES
    monkeypatch.setitem(BENCHES._entries["cluster"], "factory", fake_cluster)
    assert cli.main(["bench", "cluster", "--generator", "ctgan", "--params", "epochs=30", "--quiet"]) == 0
    assert calls == dict(generator="ctgan", params="epochs=30")
    assert cli.main(["bench", "neighbours", "--params", "epochs=30"]) == 2
    assert "does not take option(s) ['--params']" in capsys.readouterr().err


def test_bench_cluster_parses_params_and_counts_fits():
    "The real function: a bad hyperparameter string fails before any cluster starts."
    from achilles.perf.cluster import bench_cluster
    with pytest.raises(ValueError):
        bench_cluster(n=100, generator="baynet", params="degree", verbose=False)


def test_an_error_raised_while_stopping_on_ctrl_c_still_exits_130(monkeypatch, capsys):
    "Ctrl-C inside a file writer can surface as the writer's own error (zipfile: 'can't close the ZIP file …'): still 130."
    from achilles import cli

    def interrupted_while_writing(args):
        try: raise KeyboardInterrupt
        finally: raise ValueError("can't close the ZIP file while there is an open writing handle on it")
    monkeypatch.setattr(cli, "cmd_list", interrupted_while_writing)
    assert cli.main(["list", "datasets"]) == 130
    assert "interrupted" in capsys.readouterr().err
    monkeypatch.setattr(cli, "cmd_list", lambda args: (_ for _ in ()).throw(ValueError("plain error")))
    assert cli.main(["list", "datasets"]) == 2


def _help(capsys, monkeypatch, *argv, columns=100) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    assert cli.main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_bench_help_describes_every_bench_as_list_does(capsys, monkeypatch):
    "One line per benchmark in `bench --help`, from the registry `achilles list benches` prints: the two cannot drift."
    from achilles.perf import BENCHES
    out = _help(capsys, monkeypatch, "bench")
    flat = " ".join(out.split())
    for name in BENCHES.names():
        assert f" {name} {' '.join(BENCHES.summary(name).split())}" in flat, name
        assert any(line.startswith(f"  {name} ") for line in out.splitlines()), name
    assert max(map(len, out.splitlines())) <= 100


@pytest.mark.parametrize("columns", [None, 80, 60])
def test_list_wraps_to_the_terminal(capsys, monkeypatch, columns):
    "`achilles list generators --parameters` keeps within the terminal's width (100 columns when it is not a terminal)."
    if columns is None: monkeypatch.delenv("COLUMNS", raising=False)
    else: monkeypatch.setenv("COLUMNS", str(columns))
    from achilles.generators import GENERATORS
    assert cli.main(["list", "generators", "--parameters"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    width = columns or 100
    too_long = [l for l in lines if len(l) > width]
    assert (not too_long) if width >= 80 else all(len(l.split()) == 1 for l in too_long), too_long  # a word is never cut
    starts = [l.split()[0] for l in lines[1:] if l and not l.startswith(" ")]
    assert starts == GENERATORS.names()  # one entry per unindented line; its continuation lines are indented
    assert "calibration='zhang'" in out and "parameters: " in out


def test_results_show_gives_a_metric_its_value(tmp_path, capsys):
    from achilles.core.results import ResultsStore
    st = ResultsStore(tmp_path / "s.sqlite")
    st.append("attack", "r1", 1, dict(dataset="adult", generator="baynet", selector="distance", attack="query", auc=0.8))
    st.append("metric", "r2", "ims", dict(dataset="adult", metric="ims", value=0.25))
    st.append("metric", "r2", "dcr", dict(dataset="adult", metric="dcr", value=0.125))
    assert cli.main(["results", "show", "--results", str(tmp_path / "s.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and "nan" not in out
    rows = {l.split()[-4]: l.split()[-2:] for l in out.splitlines()[2:]}  # metric (or '-') -> [measure, mean]
    assert rows == {"-": ["auc", "0.800"], "dcr": ["value", "0.125"], "ims": ["value", "0.250"]}


@pytest.mark.parametrize("command, option, names", [
    ("nobox", "--metrics", "default_metrics"), ("vulnerable", "--selector", "selectors"), ("attack", "--selector", "selectors")])
def test_help_lists_what_the_registry_has(capsys, monkeypatch, command, option, names):
    "nobox's help names every default metric (KDE membership included), vulnerable's and attack's every selector."
    out = " ".join(_help(capsys, monkeypatch, command).split())
    listed = cli._names_of(names)
    assert ("kde_membership" if command == "nobox" else "rare_sampled") in listed
    text = out[out.rindex(f"{option} {option[2:].upper()} "):]  # the option's help, under options:
    for n in listed: assert re.search(rf"\b{re.escape(n)}\b", text), n


def test_a_library_warning_is_named_unexpected_with_where_it_came_from(monkeypatch, capsys):
    """Issue 37: no raw library warning reaches the user. One that achilles did not expect is printed as such, in one line, with its
    source; achilles' own warnings are said as they are; ACHILLES_DEBUG=1 stops at a library warning with its traceback."""
    import sys, warnings
    from achilles import cli
    from achilles.core.data import DataWarning
    def noisy(args):
        np.array([1.0]) / np.array([0.0])  # numpy: divide by zero
        warnings.warn("a column looks odd", DataWarning)
        return 0
    monkeypatch.setattr(cli, "cmd_list", noisy)
    monkeypatch.delenv("ACHILLES_DEBUG", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = lambda m, c, f, n, file=None, line=None: sys.stderr.write(warnings.formatwarning(m, c, f, n, line))
        with np.errstate(divide="warn"): code = cli.main(["list", "datasets"])
    err = capsys.readouterr().err.splitlines()
    assert code == 0 and len(err) == 2, err
    assert err[0].startswith("achilles list: unexpected RuntimeWarning from python (tests/test_cli.py:") and "divide by zero" in err[0], err
    assert "please report it" in err[0] and err[1] == "achilles list: DataWarning: a column looks odd", err
    monkeypatch.setenv("ACHILLES_DEBUG", "1")
    with warnings.catch_warnings(), pytest.raises(RuntimeWarning, match="divide by zero"):
        warnings.simplefilter("always")
        warnings.showwarning = lambda m, c, f, n, file=None, line=None: sys.stderr.write(warnings.formatwarning(m, c, f, n, line))
        with np.errstate(divide="warn"): cli.main(["list", "datasets"])


def test_format_warning_names_the_library_of_a_site_packages_file():
    from achilles.cli import _format_warning
    line = _format_warning("audit", "x is deprecated", FutureWarning, "/v/lib/python3.11/site-packages/sklearn/utils/m.py", 7)
    assert line.startswith("achilles audit: unexpected FutureWarning from sklearn (utils/m.py:7): x is deprecated.")
    line = _format_warning("audit", "overflow", RuntimeWarning, "/w/achilles/shadow/audit.py", 9)
    assert "unexpected RuntimeWarning from achilles (shadow/audit.py:9)" in line
