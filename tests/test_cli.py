"""The console script: exit codes, messages, and that `vulnerable` prints the records V_k ranks highest."""
import numpy as np
import pandas as pd
import pytest

from achilles import cli
from achilles.core.data import load_adult, Schema
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
    df = pd.read_csv(small_csv)
    schema = Schema.from_dataframe(df)
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
