"""Silently wrong results (reliability issue, round two): each of these ran on and reported a number. Now each gets a warning
that names the table and the column, or an error: a control set that is the training set, tables coded differently, an
option the command would ignore, a header that names a column twice, a size larger than the data, a schema from other data,
a count of 0, and data found on the terminal only."""
import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import DataWarning, Schema, load_adult, load_csv
from achilles.core.results import RiskResult
from faultkit import Files, argv_for, block_all_work, make_files, one_line_error, record_work, run


@pytest.fixture
def f(tmp_path) -> Files:
    return make_files(tmp_path)


def data_warnings(fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in rec if issubclass(w.category, DataWarning)]


# ---------------------------------------------------------------- tables that must be disjoint, and tables coded alike
@pytest.fixture(scope="module")
def parts():
    df = load_adult().sample(1500, random_state=3).reset_index(drop=True)
    return df.iloc[:500].reset_index(drop=True), df.iloc[500:1000].reset_index(drop=True), df.iloc[1000:].reset_index(drop=True)


def _spaced(t):
    out = t.copy()
    for c in out.columns:
        if not pd.api.types.is_numeric_dtype(out[c]): out[c] = (" " + out[c].astype(str)).astype("category")
    return out


RELEASES = {  # name -> (synthetic, control) built from (train, other, control), and what the warning must say
    "control is train": (lambda tr, sy, co: (sy, tr), "control shares 500 of its 500 rows (100%) with train"),
    "control mostly train": (lambda tr, sy, co: (sy, pd.concat([tr.iloc[:400], co.iloc[:100]], ignore_index=True)),
                             "control shares 400 of its 500 rows (80%) with train"),
    "leading spaces": (lambda tr, sy, co: (_spaced(tr), co), "synthetic column 'workclass' shares almost no values with train's"),
    "recoded to 0/1": (lambda tr, sy, co: (tr.assign(sex=(tr["sex"] == "Male").astype(int)), co),
                       "synthetic column 'sex' shares almost no values with train's"),
    "another scale": (lambda tr, sy, co: (tr.assign(age=tr["age"] * 1000), co), "synthetic column 'age' shares almost no values"),
}


def _entry_points():
    "Every Python entry point that compares train with a control (or holdout) set: each metric, the report, the KDE attack."
    from achilles.nobox import METRICS
    return [f"metric {m}" for m in METRICS.names()] + ["privacy_report"]


@pytest.mark.parametrize("release", list(RELEASES))
@pytest.mark.parametrize("entry", _entry_points())
def test_python_entry_points_warn(parts, entry, release, monkeypatch):
    from achilles.core.base import PrivacyMetric
    from achilles.nobox import METRICS
    from achilles.nobox.report import privacy_report
    tr, other, co = parts
    synthetic, control = RELEASES[release][0](tr, other, co)
    def quick(self, train, synthetic, control, schema, rng):  # the metric itself is not what is tested here
        return RiskResult(self.name, 0.0, baseline_rate=0.0, n=len(train))
    for name in METRICS.names(): monkeypatch.setattr(type(METRICS.make(name)), "_evaluate", quick)
    if entry == "privacy_report": fn = lambda: privacy_report(tr, synthetic, control, metrics=["ims", "dcr"])
    else:
        m = METRICS.make(entry.split()[1])
        fn = lambda: m.evaluate(tr, synthetic, control, rng=0)
    got = data_warnings(fn)
    expected = RELEASES[release][1]
    if entry == "metric kde_membership": expected = expected.replace("control shares", "holdout shares")
    assert sum(expected in w for w in got) == 1, got  # said, and once: not once per metric of a report


@pytest.mark.parametrize("release", ["control is train", "leading spaces", "recoded to 0/1"])
@pytest.mark.parametrize("command", ["nobox", "kde"])
def test_commands_warn(tmp_path, parts, command, release):
    import subprocess, sys
    tr, other, co = parts
    synthetic, control = RELEASES[release][0](tr, other, co)
    for name, t in (("train", tr), ("synth", synthetic), ("control", control)): t.to_csv(tmp_path / f"{name}.csv", index=False)
    f = Files(tmp_path, None, tmp_path / "train.csv", tmp_path / "synth.csv", tmp_path / "control.csv", None, None)
    argv = argv_for(command, f, results="")
    if command == "kde": argv += ["--distance", "gower"]
    p = subprocess.run([str(Path(sys.executable).parent / "achilles"), *argv], capture_output=True, text=True, timeout=600)
    expected = RELEASES[release][1].replace("control shares", "holdout shares" if command == "kde" else "control shares")
    assert p.returncode == 0, p.stderr
    hits = [l for l in p.stderr.splitlines() if expected in l]
    assert len(hits) == 1 and "DataWarning" in hits[0], p.stderr


def test_a_fair_release_gets_no_warning(parts):
    from achilles.core.data import release_problems
    tr, other, co = parts
    assert release_problems(tr, other, co) == []


# ---------------------------------------------------------------- an option is honoured, or refused: never ignored
@pytest.mark.parametrize("command", ["vulnerable", "attack", "audit", "riskbench"])
def test_types_are_honoured_for_a_bundled_dataset(command, capsys, monkeypatch, f):
    seen = record_work(monkeypatch, command)
    argv = [a for a in argv_for(command, f, results="") if a not in ("--csv", str(f.data))]
    run(capsys, argv + ["--dataset", "adult", "--types", "age:categorical"])
    schema = seen["args"][1] if command == "vulnerable" else (seen["kw"].get("population", (None, None))[1] if command == "attack"
                                                              else seen["kw"]["schema"])
    assert schema["age"].is_categorical


IGNORED = [  # (argv, what the one line must say)
    (["vulnerable", "--selector", "rare", "--k", "3"], "--k does not apply to --selector rare"),
    (["vulnerable", "--selector", "loglik", "--metric", "minkowski2"], "--metric does not apply"),
    (["vulnerable", "--selector", "distance", "--seed", "3"], "--seed does not apply"),
    (["vulnerable", "--dataset", "adult", "--sep", ";"], "--sep=';' applies to a --csv file"),
    (["nobox", "--train", "{train}", "--synthetic", "{synth}", "--n", "500"], "--n does not apply to files"),
    (["nobox", "--leaky", "0.5", "--train", "{train}"], "--train does not apply with --leaky"),
    (["kde", "--train", "{train}", "--synthetic", "{synth}", "--holdout", "{control}", "--threshold", "50"], "threshold"),
    (["results", "show", "--results", "{store}", "--csv", "x.csv"], "--csv does not apply to results show"),
    (["results", "export", "{train}", "--results", "{store}", "--csv", "x.csv"], "results export takes no file"),
    (["cache", "info", "--older-than", "3"], "--older-than does not apply to cache info"),
    (["bench", "distance", "--generator", "baynet"], "bench distance does not take option(s) ['--generator']"),
]


@pytest.mark.parametrize("argv,needle", IGNORED, ids=[" ".join(a[:2]) + " " + n[:20] for a, n in IGNORED])
def test_an_option_that_would_be_ignored_is_refused(argv, needle, capsys, monkeypatch, f):
    block_all_work(monkeypatch)
    argv = [a.format(train=f.train, synth=f.synth, control=f.control, store=f.store) for a in argv]
    one_line_error(capsys, argv, needle)


# ---------------------------------------------------------------- a header that names a column twice
@pytest.mark.parametrize("command", ["vulnerable", "attack", "nobox", "kde", "riskbench", "audit", "report"])
def test_a_duplicated_header_is_refused(f, command, capsys, monkeypatch):
    block_all_work(monkeypatch)
    for p in (f.data, f.train, f.synth):
        lines = p.read_text().splitlines(); lines[0] = lines[0].replace("fnlwgt", "age")
        p.write_text("\n".join(lines) + "\n")
    one_line_error(capsys, argv_for(command, f, results=""), "names column 'age' twice (columns 1 and 3)")


def test_python_entry_points_refuse_duplicated_columns(f):
    df = pd.read_csv(f.data)
    twice = pd.concat([df, df[["age"]]], axis=1)
    with pytest.raises(ValueError, match="duplicated column name"): Schema.from_dataframe(twice)
    with pytest.raises(ValueError, match="no rows"): Schema.from_dataframe(df.iloc[:0])
    lines = f.data.read_text().splitlines(); lines[0] = lines[0].replace("fnlwgt", "age"); f.data.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="twice"): load_csv(f.data)


# ---------------------------------------------------------------- a size is never cut to fit without a word
def test_riskbench_never_shrinks_n_train(f, capsys, monkeypatch):
    block_all_work(monkeypatch)
    one_line_error(capsys, argv_for("riskbench", f, results="", extra=["--n-train", "1000"]), "n_train=1,000 needs 4,500 rows",
                   "at most n_train=66")


def test_attack_says_how_many_records_a_dataset_size_needs(f, capsys):
    one_line_error(capsys, ["attack", "--csv", f.data, "--generator", "independent", "--records", "1", "--results", "",
                            "--cache-dir", "", "--quiet"], "the data has 300 records", "--dataset-size", "at least 3,335 records")


COUNTS = [("vulnerable", "--k", "0"), ("vulnerable", "--top", "-1"), ("attack", "--records", "0"), ("attack", "--n-shadow", "1"),
          ("attack", "--dataset-size", "0"), ("nobox", "--leaky", "1.5"), ("nobox", "--n", "0"), ("kde", "--threshold", "100"),
          ("riskbench", "--replicates", "0"), ("riskbench", "--n-train", "3"), ("audit", "--n-datasets", "0"),
          ("audit", "--subsets", "-1"), ("audit", "--folds", "0"), ("report", "--records", "1"), ("report", "--remedy-top", "0"), ("bench", "--repeats", "0"),
          ("bench", "--n", "0"), ("cache", "--older-than", "-1")]


@pytest.mark.parametrize("command,option,value", COUNTS)
def test_counts_out_of_range_are_refused_before_the_work(command, option, value, capsys, monkeypatch, f):
    block_all_work(monkeypatch)
    head = {"bench": ["bench", "queries"], "cache": ["cache", "prune"]}.get(command) or argv_for(command, f, results="")
    one_line_error(capsys, head + [option, value], f"argument {option}: {value}", "out of range")


def test_bench_functions_check_their_counts():
    from achilles.perf.kernels import bench_queries
    with pytest.raises(ValueError, match="repeats=0 is out of range"): bench_queries(repeats=0, verbose=False)


# ---------------------------------------------------------------- a schema from other data
@pytest.mark.parametrize("entry", ["distance", "rare", "loglik", "rare_sampled", "generator fit"])
def test_a_schema_from_other_data_is_said(entry):
    from achilles.generators import make_generator
    from achilles.selectors import select_records
    df = load_adult()
    young = df[df["age"] < 40].reset_index(drop=True).iloc[:500]
    schema = Schema.from_dataframe(young)  # ages 17..39
    old = df[df["age"] >= 40].reset_index(drop=True).iloc[:300]
    fn = (lambda: make_generator("baynet", schema).fit(old, rng=0)) if entry == "generator fit" else \
        (lambda: select_records(old, schema, method=entry, n=5, rng=0))
    got = data_warnings(fn)
    assert any("column 'age'" in w and "outside the schema's range [17, 39]" in w for w in got), got


# ---------------------------------------------------------------- results name the data; the page states its warnings
@pytest.mark.parametrize("command", ["audit", "riskbench"])
@pytest.mark.parametrize("source", ["--dataset adult", "--csv", "--csv --types"])
def test_results_name_the_data(f, command, source, capsys, monkeypatch):
    seen = record_work(monkeypatch, command)
    argv = [a for a in argv_for(command, f, results="") if a not in ("--csv", str(f.data))]
    extra = {"--dataset adult": ["--dataset", "adult"], "--csv": ["--csv", f.data],
             "--csv --types": ["--csv", f.data, "--types", "age:categorical"]}[source]
    run(capsys, argv + [str(a) for a in extra])
    data, name = seen["args"][0], seen["kw"]["name"]
    assert isinstance(data, pd.DataFrame) and len(data) == (45222 if source == "--dataset adult" else 300)  # read once, by the CLI
    if source == "--dataset adult": assert name == "adult"
    elif source == "--csv": assert name == "file:data.csv"
    else:  # a table typed by hand: riskbench names it by its fingerprint (a run id apart from the untyped file's), audit by its file
        assert name == ("file:data.csv" if command == "audit" else None) and seen["kw"]["schema"]["age"].is_categorical


def test_the_report_page_states_the_data_warnings(f):
    from achilles.experiments.custodian import custodian_report
    df = pd.read_csv(f.data).assign(person_id=np.arange(300) * 7 + 1000)
    rep = custodian_report(df, None, "independent", design="bernoulli", records=10, n_datasets=40, dataset_size=100, top=2, remedy_top=2, rng=0)
    page = rep.to_html()
    assert "Warnings about the data" in page and "person_id" in page and "left out as identifiers" in page  # issue 37: and not used
    assert any("person_id" in w for w in rep.config["data_warnings"])
