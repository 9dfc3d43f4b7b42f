"""Silently wrong (issue 40, round three, "Other"): a column typed twice, an edited export imported over the stored values, a
benchmark option it ignored (and then a claim about a store it does not have), and columns the encoding turned into nonsense
(±1e308 to NaN, a timestamp per category, complex numbers to their real part). Each is now an error that names it."""
import json

import numpy as np
import pandas as pd
import pytest

import achilles.cli as cli
from achilles.core.data import Column, Schema, encode, load_csv, parse_types
from achilles.core.results import ResultsStore
from faultkit import make_files, one_line_error, run


# ---------------------------------------------------------------- a column typed twice
def test_a_column_typed_twice_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"types names column 'age' twice \('categorical' and 'continuous'\)"):
        parse_types("age:categorical,age:continuous")
    with pytest.raises(ValueError, match="twice"): parse_types("age:continuous, age :continuous")
    p = tmp_path / "t.json"; p.write_text('{"age": "categorical", "sex": "categorical", "age": "continuous"}')
    with pytest.raises(ValueError, match=r"names 'age' twice \('categorical' and 'continuous'\)"): parse_types(p)
    p.write_text(json.dumps({"columns": [{"name": "age", "kind": "continuous"}, {"name": "sex", "kind": "categorical"}]}))
    assert parse_types(p) == {"age": "continuous", "sex": "categorical"}  # a saved schema: the same keys in different objects


def test_the_command_refuses_a_column_typed_twice(tmp_path, capsys):
    f = make_files(tmp_path)
    one_line_error(capsys, ["vulnerable", "--csv", f.data, "--types", "age:categorical,age:continuous"], "names column 'age' twice")


# ---------------------------------------------------------------- an edited export
@pytest.fixture
def store(tmp_path):
    s = ResultsStore(tmp_path / "s.sqlite")
    s.append("metric", "r1", "ims", dict(metric="ims", value=0.5, dataset="adult", ci=[0.1, 0.2], code="001"))
    s.append("metric", "r1", "dcr", dict(metric="dcr", value=0.25, dataset="adult", flag=True))
    s.export(tmp_path / "e.csv")
    return s


def test_an_unchanged_export_is_already_in_the_store(store, tmp_path):
    r = store.import_csv(tmp_path / "e.csv")
    assert int(r) == 0 and r.already == 2
    other = ResultsStore(tmp_path / "o.sqlite")
    assert int(other.import_csv(tmp_path / "e.csv")) == 2
    t = pd.read_csv(tmp_path / "e.csv"); t.loc[0, "run_id"] = "r2"; t.to_csv(tmp_path / "new.csv", index=False)
    assert int(store.import_csv(tmp_path / "new.csv")) == 1  # a new key beside a stored one: imported


@pytest.mark.parametrize("column,value", [("value", 0.9), ("dataset", "census"), ("flag", False)])
def test_an_edited_export_is_refused_and_nothing_is_imported(store, tmp_path, column, value):
    t = pd.read_csv(tmp_path / "e.csv")
    row = 1 if column == "flag" else 0
    t[column] = t[column].astype(object); t.loc[row, column] = value
    t.loc[len(t)] = t.loc[0]; t.loc[len(t) - 1, "run_id"] = "r9"  # a new row too: it must not be imported either
    t.to_csv(tmp_path / "edit.csv", index=False)
    before = store.read()
    with pytest.raises(ValueError, match=rf"line {row + 2} gives \(metric, r1, (ims|dcr)\) {column}={value!r}, where the store has"):
        store.import_csv(tmp_path / "edit.csv")
    pd.testing.assert_frame_equal(store.read(), before)


def test_the_command_says_the_edited_line(store, tmp_path, capsys):
    t = pd.read_csv(tmp_path / "e.csv"); t.loc[0, "value"] = 0.9; t.to_csv(tmp_path / "edit.csv", index=False)
    one_line_error(capsys, ["results", "import", tmp_path / "edit.csv", "--results", store.path], "line 2 gives (metric, r1, ims) value=0.9")


# ---------------------------------------------------------------- bench audit and its options; a command that stores nothing
def test_bench_audit_refuses_a_dataset_it_would_ignore(capsys):
    one_line_error(capsys, ["bench", "audit", "--dataset", "nosuch"], "dataset='nosuch' (--dataset / --path) applies to the population")


def test_an_interrupted_command_without_a_store_does_not_claim_one(capsys, monkeypatch):
    def stop(args): raise KeyboardInterrupt
    monkeypatch.setattr(cli, "cmd_bench", stop)
    code, _, err = run(capsys, ["bench", "distance"])
    assert code == 130 and "this command stores nothing" in err and "in the store" not in err, err


# ---------------------------------------------------------------- columns the encoding cannot hold
def test_a_range_float64_cannot_hold_is_refused():
    df = pd.DataFrame({"a": [1e308, -1e308, 0.0]})
    with pytest.raises(ValueError, match=r"column 'a' spans \[-1e\+308, 1e\+308\], a range whose width float64 cannot hold"):
        Schema.from_dataframe(df)
    with pytest.raises(ValueError, match="wider than float64 can hold"): Column("a", "continuous", lower=-1e308, upper=1e308)
    s = Schema.from_dataframe(pd.DataFrame({"a": [1e308, 0.0]}))  # wide, but its width is a float64
    assert np.isfinite(encode(pd.DataFrame({"a": [1e308, 5e307]}), s).cont).all()


def test_dates_and_complex_numbers_are_refused_naming_the_column():
    with pytest.raises(ValueError, match=r"column 'when' holds dates or times \(dtype datetime64"):
        Schema.from_dataframe(pd.DataFrame({"when": pd.to_datetime(["2020-01-01", "2021-05-06"]), "x": [1, 2]}))
    with pytest.raises(ValueError, match="column 'gap' holds dates or times"):
        Schema.from_dataframe(pd.DataFrame({"gap": pd.to_timedelta([1, 2], unit="D")}))
    with pytest.raises(ValueError, match=r"column 'z' holds complex numbers \(dtype complex128"):
        Schema.from_dataframe(pd.DataFrame({"z": [1 + 2j, 3j]}))
