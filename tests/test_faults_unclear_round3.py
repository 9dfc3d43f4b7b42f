"""Unclear messages (issue 40, round three): each names the user's own argument, file and value now. Before: `degree=1 is out of
range: [0, 0]` for a one-column table, "pass control=" on the command line, `metric 'knn_dcr(k=0)' is not registered`, "set
ACHILLES_CENSUS" when it was set, `['0', …]` against `[0, …]` with no word on why, "File name too long" for an array, `--jobs
1000` taken literally, an AttributeError for a closed stdout, a 200-column table refused for a family not asked for, a report
failing on its own default --top, and "files it did not create" for a file achilles wrote."""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import achilles.experiments.custodian as custodian
from achilles.core.data import load_adult
from achilles.nobox import METRICS
from achilles.shadow.audit import audit
from faultkit import make_files, one_line_error, run


@pytest.fixture
def f(tmp_path):
    return make_files(tmp_path)


def test_baynet_on_one_column_says_what_it_needs(tmp_path, capsys):
    p = tmp_path / "one.csv"; load_adult()[["age"]].iloc[:200].to_csv(p, index=False)
    one_line_error(capsys, ["audit", "--csv", p, "--records", "3", "--n-datasets", "20", "--dataset-size", "50", "--results", "",
                            "--generator", "baynet"], "BayNet with degree=1 needs at least 2 columns", "the table has 1 (['age'])")


def test_the_census_variable_set_to_nothing(monkeypatch, capsys):
    monkeypatch.setenv("ACHILLES_CENSUS", "/nonexistent/census.csv")
    one_line_error(capsys, ["vulnerable", "--dataset", "census", "--top", "3"],
                   "ACHILLES_CENSUS='/nonexistent/census.csv' is set, but no such file exists")


def test_an_array_is_not_a_file_name():
    with pytest.raises(TypeError, match=r"got a numpy ndarray of shape \(5, 3\): wrap an array as pd.DataFrame"):
        audit(np.zeros((5, 3)), "baynet")


def test_jobs_above_the_cores_are_capped_and_said(f, capsys):
    code, _, err = run(capsys, ["attack", "--csv", f.data, "--generator", "independent", "--records", "1", "--dataset-size", "50",
                                "--n-shadow", "4", "--n-test", "4", "--cache-dir", "", "--quiet", "--results", "", "--jobs", "1000"])
    assert code == 0 and "--jobs 1000 is more than the" in err and "usable core(s) here" in err, err


def test_nobox_speaks_of_its_own_options(f, capsys):
    one_line_error(capsys, ["nobox", "--train", f.train, "--synthetic", f.synth, "--metrics", "domias", "--results", ""],
                   "need real records the generator never saw: pass --control FILE")
    one_line_error(capsys, ["nobox", "--train", f.train, "--synthetic", f.synth, "--control", f.control, "--metrics", "knn_dcr(k=0)",
                            "--results", ""], "--metrics takes metric names, and 'knn_dcr(k=0)' has parameters", "--metrics knn_dcr")
    code, out, err = run(capsys, ["nobox", "--train", f.train, "--synthetic", f.synth, "--results", "", "--quiet"])
    assert code == 0 and "no --control, so domias, kde_membership" in err and "pass control=" not in err + out, err


def test_a_report_on_few_records_takes_defaults_that_fit(f, capsys, monkeypatch):
    seen = {}
    def stop(*a, **kw): seen.update(kw); raise KeyboardInterrupt
    monkeypatch.setattr(custodian, "custodian_report", stop)
    run(capsys, ["report", "--data", f.data, "--design", "bernoulli", "--records", "5", "--n-datasets", "20", "--dataset-size", "50", "--out", f.dir / "r.html"])
    assert (seen["top"], seen["remedy_top"]) == (5, 2), seen
    run(capsys, ["report", "--data", f.data, "--records", "200", "--out", f.dir / "r.html"])
    assert (seen["top"], seen["remedy_top"]) == (20, 10), seen


def test_column_names_that_differ_only_in_type_are_said():
    a = load_adult().iloc[:300]
    t, s = a.copy(), a.copy()
    t.columns = [str(i) for i in range(a.shape[1])]; s.columns = list(range(a.shape[1]))
    with pytest.raises(ValueError, match=r"the names differ only in type \('0', a str, against 0, a int\)"):
        METRICS["ims"]().evaluate(t, s, None)


def test_a_wide_table_is_audited_by_the_families_asked_for():
    g = np.random.default_rng(0)
    wide = pd.DataFrame(g.integers(0, 3, (200, 100)).astype(str), columns=[f"c{i}" for i in range(100)]).astype("category")
    r = audit(wide, "independent", records=2, n_datasets=40, dataset_size=50, selectors=(), attacks="distance,density", rng=0, verbose=False)
    assert len(r) == 2 and r["auc"].between(0, 1).all()  # before: "at most 63 columns" (the paper's query attack's int64 masks)


def test_a_closed_stdout_is_said_and_the_work_kept(tmp_path):
    data, out = tmp_path / "d.csv", tmp_path / "top.csv"
    load_adult().iloc[:300].to_csv(data, index=False)
    code = (f"import sys; from achilles.cli import main; sys.exit(main(['vulnerable', '--csv', {str(data)!r}, '--top', '2', "
            f"'--out', {str(out)!r}]))")
    p = subprocess.run(["bash", "-c", f"{sys.executable!r} -c \"{code}\" >&-"], capture_output=False, stderr=subprocess.PIPE, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    assert "standard output is closed: what this command prints is discarded" in p.stderr and "AttributeError" not in p.stderr
    assert len(pd.read_csv(out)) == 2


def test_an_existing_output_is_refused_in_plain_words(f, capsys):
    (f.dir / "top.csv").write_text("x\n")
    one_line_error(capsys, ["vulnerable", "--csv", f.data, "--top", "2", "--out", f.dir / "top.csv"],
                   "exists, and achilles never replaces an existing file without --force")
