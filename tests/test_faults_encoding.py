"""Files that are not UTF-8 (issue 37: every shape a custodian's table comes in). A Windows-1252 export, the usual 8-bit file of
Western European offices, stopped every command with pandas' `UnicodeDecodeError` at its first accented letter. Now each command
reads it, says once per file how, and hands its work the values as written; `--encoding` chooses another, and is checked before
any work."""
import re

import pandas as pd
import pytest

from faultkit import Files, argv_for, block_all_work, make_files, one_line_error, record_work, run, work_tables

READERS = ["vulnerable", "nobox", "kde", "riskbench", "audit", "report"]


def _cp1252(f: Files):
    "Every file of `f` in cp1252, with an accented category ('México') and a curly quote that UTF-8 cannot read."
    for p in (f.data, f.train, f.synth, f.control):
        df = pd.read_csv(p)
        df["native-country"] = df["native-country"].replace({"Mexico": "México", "United-States": "United “States”"})
        p.write_bytes(df.to_csv(index=False).encode("cp1252"))


@pytest.mark.parametrize("command", READERS)
def test_every_command_reads_a_cp1252_file_and_says_so(tmp_path, command, capsys, monkeypatch, recwarn):
    f = make_files(tmp_path); _cp1252(f)
    seen = record_work(monkeypatch, command)
    code, _, err = run(capsys, argv_for(command, f, results=""))
    assert "recorded" in err and code == 1, err  # it reached the work: every file was read
    said = [str(w.message) for w in recwarn if "is not UTF-8: read as cp1252" in str(w.message)]  # the CLI prints what it records
    files = 1 if command in ("vulnerable", "riskbench", "audit", "report") else 3
    assert len(said) == files and len(set(said)) == files, said  # once per file
    assert all("'México'" in l for l in said), said
    tables = work_tables(seen)
    assert tables and all("México" in set(t["native-country"].astype(str)) for t in tables), [t.shape for t in tables]
    assert all("United “States”" in set(t["native-country"].astype(str)) for t in tables)


@pytest.mark.parametrize("command", READERS)
def test_a_wrong_encoding_is_one_line_before_any_work(tmp_path, command, capsys, monkeypatch):
    f = make_files(tmp_path); _cp1252(f)
    block_all_work(monkeypatch)
    one_line_error(capsys, argv_for(command, f, results="", extra=["--encoding", "utf-8"]), "as utf-8 text", "pass the file's encoding")
    one_line_error(capsys, argv_for(command, f, results="", extra=["--encoding", "klingon"]), "encoding='klingon' is not a text encoding")


def test_encoding_applies_to_files_only(capsys, monkeypatch):
    block_all_work(monkeypatch)
    one_line_error(capsys, ["vulnerable", "--dataset", "adult", "--encoding", "cp1252"], "--encoding='cp1252' applies to a --csv file")


def test_a_given_encoding_is_used_and_not_said(tmp_path, capsys, monkeypatch, recwarn):
    f = make_files(tmp_path); _cp1252(f)
    seen = record_work(monkeypatch, "vulnerable")
    code, _, err = run(capsys, argv_for("vulnerable", f, extra=["--encoding", "mac_roman"]))
    assert code == 1 and "recorded" in err and not [w for w in recwarn if "not UTF-8" in str(w.message)], err
    (t,) = work_tables(seen)
    got = set(t["native-country"].astype(str))
    assert "United “States”" not in got and "United ìStatesî" in got, got  # mac_roman's letters for cp1252's bytes, as asked


# ---------------------------------------------------------------- numbers written as an export writes money and shares
def _formatted(f: Files):
    "'fnlwgt' as '$226,802' and 'hours-per-week' as '40%' in every file: text to pandas, numbers to a reader."
    for p in (f.data, f.train, f.synth, f.control):
        df = pd.read_csv(p)
        df["fnlwgt"] = df["fnlwgt"].map(lambda v: f"${v:,}"); df["hours-per-week"] = df["hours-per-week"].map(lambda v: f"{v}%")
        df.to_csv(p, index=False)


@pytest.mark.parametrize("command", ["vulnerable", "nobox", "audit"])
def test_formatted_numbers_reach_the_work_as_numbers(tmp_path, command, capsys, monkeypatch, recwarn):
    f = make_files(tmp_path)
    plain = pd.read_csv(f.data)
    _formatted(f)
    seen = record_work(monkeypatch, command)
    code, _, err = run(capsys, argv_for(command, f, results=""))
    assert "recorded" in err and code == 1, err
    said = [str(w.message) for w in recwarn if "read as numbers, their currency signs" in str(w.message)]
    assert said and all("'fnlwgt' ('$" in s and "'hours-per-week' ('" in s for s in said), said
    tables = work_tables(seen)
    if command == "audit" and not tables:  # given the path, the library reads the file itself: as the command would
        from achilles.core.data import load_dataset
        assert str(seen["args"][0]).endswith(".csv"); tables = [load_dataset(seen["args"][0])[0]]
    assert tables, seen
    for t in tables:
        assert pd.api.types.is_float_dtype(t["fnlwgt"]) and pd.api.types.is_float_dtype(t["hours-per-week"])
    if command == "vulnerable":  # the data file itself: the numbers as written, the signs gone
        assert tables[0]["fnlwgt"].tolist() == plain["fnlwgt"].astype(float).tolist()
        assert tables[0]["hours-per-week"].tolist() == plain["hours-per-week"].astype(float).tolist()


@pytest.mark.parametrize("command", ["audit", "riskbench"])
def test_the_file_is_read_once_and_the_rows_keep_its_name(tmp_path, command, capsys, monkeypatch):
    """The CLI reads the file and hands the table to the library with its name; before, given a plain CSV it passed the path and
    the library read (and checked the encoding of) the whole file a second time."""
    import achilles.core.data as data
    f = make_files(tmp_path)
    reads = []
    real = data.load_csv
    monkeypatch.setattr(data, "load_csv", lambda *a, **k: reads.append(a[0]) or real(*a, **k))
    seen = record_work(monkeypatch, command)
    code, _, err = run(capsys, argv_for(command, f, results=""))
    assert code == 1 and "recorded" in err, err
    assert reads == [str(f.data)], reads  # once, by the CLI
    (table,) = work_tables(seen)
    assert table.shape == (300, 15) and seen["kw"]["name"] == "file:data.csv" and seen["kw"]["schema"] is not None


def test_riskbench_run_id_is_the_one_the_library_gives_the_path(tmp_path, capsys):
    "A store written before (the library given the path) is resumed now: the CLI's table and name give the same run id."
    from achilles.experiments.riskbench import run_riskbench
    f = make_files(tmp_path)
    code, out, err = run(capsys, argv_for("riskbench", f, results=""))
    assert code == 0, err
    cli_run = re.search(r"\(kind metric, run ([0-9a-f]{16})\)", out).group(1)
    rows = run_riskbench(str(f.data), "leaky", metrics="ims", levels=[0, 1], utility=False, verbose=False)
    assert rows["run_id"].iloc[0] == cli_run and rows["dataset"].iloc[0] == "file:data.csv"
    renamed = run_riskbench(pd.read_csv(f.data), "leaky", metrics="ims", levels=[0, 1], utility=False, verbose=False, name="mine")
    assert renamed["dataset"].iloc[0] == "mine" and renamed["run_id"].iloc[0] != cli_run
    with pytest.raises(ValueError, match="name=''"):
        run_riskbench(pd.read_csv(f.data), "leaky", metrics="ims", levels=[0, 1], utility=False, verbose=False, name="")


@pytest.mark.parametrize("command", ["audit", "riskbench"])
def test_na_values_and_keep_reach_the_library(tmp_path, command, capsys, monkeypatch):
    """`--na-values` and `--keep` are how the CLI reads the file, and the library gets that table. Before, a comma-separated file
    without --types, --sep or --encoding went to the library by its path and was read again without them: `NA` became a category
    (the numeric column read as categories) and the kept identifier was left out."""
    import numpy as np
    rng = np.random.default_rng(0); n = 300
    d = pd.DataFrame({"pid": [f"P{i:05d}" for i in range(n)], "a": rng.choice(["x", "y"], n),
                      "b": rng.integers(0, 50, n).astype(float), "c": rng.choice(["p", "q"], n)})
    d.loc[:20, "b"] = np.nan
    path = tmp_path / "clinic.csv"; d.to_csv(path, index=False, na_rep="NA")
    seen = record_work(monkeypatch, command)
    argv = {"audit": ["audit", "--csv", path, "--records", "4", "--n-datasets", "40", "--dataset-size", "50", "--cache-dir", "",
                      "--quiet", "--results", ""],
            "riskbench": ["riskbench", "--csv", path, "--metrics", "ims", "--no-utility", "--levels", "0,1", "--quiet", "--results", ""]}
    code, _, err = run(capsys, argv[command] + ["--na-values", "NA", "--keep", "pid"])
    assert code == 1 and "recorded" in err, err
    (table,) = work_tables(seen)
    assert "pid" in table.columns, table.columns
    assert pd.api.types.is_float_dtype(table["b"]) and int(table["b"].isna().sum()) == 21, table["b"].dtype
    assert table["b"].dropna().tolist() == d["b"].dropna().tolist() and seen["kw"]["name"] == "file:clinic.csv"
