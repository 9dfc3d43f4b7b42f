"""Faults in the data layer: one-line errors from the loaders, data sanity warnings, dataset labels and fingerprints,
and the conditional-table bound of BayNet / PrivBayes."""
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import (DATASETS, DataWarning, Schema, dataset_label, encode, load_adult, load_csv, load_dataset,
                                parse_types, read_csv_checked, sanity_check, table_fingerprint)
from achilles.core.validate import InvalidParameterError
from achilles.generators.baynet import MAX_TABLE_CELLS, BayNet, PrivBayes

CENSUS = Path(__file__).resolve().parents[2] / "shared/data/uk_census_2011/census2011_sample50k.csv"


@pytest.fixture(scope="module")
def adult():
    df = load_adult()
    return df, Schema.from_dataframe(df)


def one_line(excinfo):
    msg = str(excinfo.value)
    assert msg and "\n" not in msg and "Traceback" not in msg, msg
    return msg


def caught_data_warnings(fn):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in rec if issubclass(w.category, DataWarning)]


# --- 1. one-line errors from the loaders ------------------------------------------------------------------------------

def test_missing_path_folder_empty_file(tmp_path):
    for load in (load_csv, read_csv_checked, lambda p: load_dataset(str(p))):
        with pytest.raises(FileNotFoundError) as e:
            load(tmp_path / "none.csv")
        assert "does not exist" in one_line(e)
        with pytest.raises(IsADirectoryError) as e:
            load(tmp_path)
        assert "is a folder" in one_line(e) and str(tmp_path) in str(e.value)
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(ValueError) as e:
        load_csv(tmp_path / "empty.csv")
    assert "empty file (0 bytes)" in one_line(e)
    (tmp_path / "blank.csv").write_text("\n\n")
    with pytest.raises(ValueError) as e:
        load_csv(tmp_path / "blank.csv")
    assert "no header row" in one_line(e)


def test_header_only(tmp_path):
    p = tmp_path / "h.csv"
    p.write_text("age,sex\n")
    with pytest.raises(ValueError) as e:
        load_csv(p)
    assert "has a header" in one_line(e) and "no data rows" in str(e.value) and "h.csv" in str(e.value)


def test_column_entirely_missing(tmp_path):
    p = tmp_path / "m.csv"
    p.write_text("age,notes,sex\n30,,F\n40,,M\n")
    with pytest.raises(ValueError) as e:
        load_csv(p)
    assert "column 'notes' is entirely missing" in one_line(e)


@pytest.mark.parametrize("content,expected", [
    ('["age", "continuous"]', "holds a JSON list; expected an object mapping column"),
    ('[{"age": "continuous"}]', "holds a JSON list"),
    ('"age:continuous"', "holds a JSON string"),
    ("3", "holds a JSON number"),
    ('{"age": ', "is not valid JSON"),
    ('{"columns": [1, 2]}', "'columns' must be a list of"),
])
def test_types_json_not_a_mapping(tmp_path, content, expected):
    t = tmp_path / "types.json"
    t.write_text(content)
    with pytest.raises(ValueError) as e:
        parse_types(t)
    assert expected in one_line(e) and "types.json" in str(e.value)
    (tmp_path / "d.csv").write_text("age,sex\n30,F\n40,M\n")
    with pytest.raises(ValueError):
        load_csv(tmp_path / "d.csv", types=t)


def test_types_other_errors(tmp_path):
    with pytest.raises(InvalidParameterError) as e:
        parse_types(["age", "sex"])
    assert "not list" in one_line(e) and "expected an object mapping" in str(e.value)
    with pytest.raises(FileNotFoundError) as e:
        parse_types(tmp_path / "none.json")
    assert "no such JSON file" in one_line(e)
    with pytest.raises(ValueError) as e:
        parse_types({"age": "numeric"})
    assert "column 'age' has type 'numeric'" in one_line(e) and "categorical" in str(e.value)
    p = tmp_path / "d.csv"
    p.write_text("age,sex\n30,F\n40,M\n")
    with pytest.raises(ValueError) as e:
        load_csv(p, types={"gender": "categorical"})
    assert "['gender']" in one_line(e) and "d.csv" in str(e.value) and "'sex'" in str(e.value)
    t = tmp_path / "t.json"
    t.write_text(json.dumps({"sex": "ordinal"}))
    with pytest.raises(ValueError, match="'ordinal'"):
        load_csv(p, types=t)
    # a saved schema is a valid types file
    t.write_text(json.dumps(Schema.from_dataframe(pd.read_csv(p)).to_dict()))
    assert parse_types(t) == {"age": "continuous", "sex": "categorical"}


def test_unknown_dataset_lists_known_names(tmp_path):
    with pytest.raises(ValueError) as e:
        load_dataset("mnist")
    assert f"({', '.join(DATASETS)})" in one_line(e)
    with pytest.raises(TypeError):
        load_dataset(3)
    assert load_dataset("adult", types={"age": "categorical"})[1]["age"].is_categorical  # honoured, not ignored
    with pytest.raises(ValueError, match="CSV file only"):
        load_dataset("adult", sep=";")


def test_parser_error_names_file_and_separator(tmp_path):
    p = tmp_path / "semi.csv"
    p.write_text("a;b\n1;2\n1,5;2,5\n")
    with pytest.raises(ValueError) as e:
        load_csv(p)
    assert "semi.csv" in one_line(e) and "pass sep=';'" in str(e.value)
    (df, schema), got = caught_data_warnings(lambda: load_csv(p, sep=";"))
    assert schema.names == ["a", "b"] and len(df) == 2
    assert len(got) == 2 and "(e.g. '1,5')" in got[0]  # decimal commas: text to achilles, and it says so
    with pytest.raises(InvalidParameterError, match="sep=''"):
        load_csv(p, sep="")


# --- 2. data sanity warnings ------------------------------------------------------------------------------------------

def test_separator_sniffing(tmp_path):
    for sep in (";", "\t", "|"):
        p = tmp_path / "t.csv"
        p.write_text(f"a{sep}b{sep}c\n" + "".join(f"{i % 3}{sep}x{sep}{i % 5}\n" for i in range(30)))
        _, got = caught_data_warnings(lambda: load_csv(p))
        header = f"a{sep}b{sep}c"
        assert got == [f"the table was read as a single column {header!r}; the header looks {sep!r}-separated: "
                       f"pass sep={sep!r}"]
        (df, schema), got = caught_data_warnings(lambda: load_csv(p, sep=sep))
        assert schema.names == ["a", "b", "c"]
        assert not any("single column" in w for w in got)


def test_id_like_columns(tmp_path):
    n = 30
    df = pd.DataFrame({"user": [f"u{i:03d}" for i in range(n)], "row": np.arange(n) * 3 + 7,
                       "PersonID": np.arange(n) * 100_003, "weight": np.arange(n) * 100_003, "x": np.arange(n) % 4,
                       "f": np.linspace(0, 1, n)})
    got = sanity_check(df)
    assert [g.split("'")[1] for g in got] == ["user", "row", "PersonID"], got
    assert all("identifier" in g and "drop it" in g for g in got)
    assert sanity_check(df.iloc[:19]) == []  # fewer than 20 rows: no identifier
    # declared categorical integer codes, all distinct: an identifier too
    s = Schema.from_dataframe(df[["weight", "x"]], types={"weight": "categorical"})
    assert "'weight'" in sanity_check(df[["weight", "x"]], s)[0]
    p = tmp_path / "ids.csv"
    df.to_csv(p, index=False)
    (read, schema), got = caught_data_warnings(lambda: load_csv(p))
    assert list(read.columns) == ["weight", "x", "f"]  # issue 37: the identifiers are left out of every computation, in one line
    assert "left out as identifiers" in got[0] and all(f"'{c}'" in got[0] for c in ("user", "row", "PersonID"))
    assert "'x'" in got[1] and "codes" in got[1] and len(got) == 2  # x: 4 whole numbers, typed categorical, and said
    assert list(load_csv(p, keep=["row"])[0].columns) == ["row", "weight", "x", "f"]  # --keep keeps one


def test_constant_date_mixed_single_continuous():
    n = 40
    df = pd.DataFrame({"country": ["UK"] * n, "k": [5] * n, "x": np.arange(n) % 3,
                       "joined": pd.date_range("2019-12-20", periods=n).strftime("%d/%m/%Y"),
                       "income": [str(i * 10) if i % 3 else "unknown" for i in range(n)]})
    got = sanity_check(df)
    by_col = {g.split("'")[1]: g for g in got}
    assert set(by_col) == {"country", "k", "joined", "income"}, got
    assert "constant" in by_col["country"] and "drop it" in by_col["country"] and "constant" in by_col["k"]
    assert "dates" in by_col["joined"] and "convert it to a number" in by_col["joined"]
    assert "mixes numbers" in by_col["income"] and "'unknown'" in by_col["income"] and "declare its type" in by_col["income"]
    only = sanity_check(pd.DataFrame({"v": [0.5, 2.0, 1.25]}))
    assert len(only) == 1 and "single continuous column 'v'" in only[0] and "gaps between" in only[0]
    assert sanity_check(pd.DataFrame({"v": [0.5, 2.0], "c": ["a", "b"]})) == []


def test_mixed_share_threshold_and_declared(tmp_path):
    few = pd.DataFrame({"code": ["A", "B", "C", "D", "E", "F", "G", "H", "I", "J"] * 5 + ["7"] * 4, "x": range(54)})
    assert sanity_check(few.assign(x=few.x % 5)) == []  # 4 of 54 numbers (7%): a text column with odd codes
    many = pd.DataFrame({"size": ["12", "15", "unknown", "18"] * 10, "x": np.arange(40) % 5})
    assert "holds numbers and the text 'unknown' (25% of its values)" in sanity_check(many)[0]  # a code: read it as missing?
    assert "pass na_values='unknown' / --na-values 'unknown'" in sanity_check(many)[0]
    varied = pd.DataFrame({"size": ["12", "15", "unknown", "18", "n.k.", "?", "-", "15"] * 5})  # four texts: not one code
    assert "mixes numbers (50% of a sample)" in sanity_check(varied)[0] and "na_values / --na-values" in sanity_check(varied)[0]
    assert sanity_check(many, declared=["size"]) == []
    p = tmp_path / "m.csv"
    many.to_csv(p, index=False)
    _, got = caught_data_warnings(lambda: load_csv(p))
    got = [g for g in got if "typed categorical" not in g]  # x: whole numbers 0-4, typed categorical (said in its own line)
    assert len(got) == 1 and "'size'" in got[0]
    _, got = caught_data_warnings(lambda: load_csv(p, types={"size": "categorical", "x": "continuous"}))
    assert got == []


def test_dates_need_most_values():
    n = 40
    half = [str(d.date()) if i % 2 else "none" for i, d in enumerate(pd.date_range("2020-01-01", periods=n))]
    assert sanity_check(pd.DataFrame({"d": half, "x": np.arange(n) % 3})) == []
    ordinal = pd.DataFrame({"edu": ["10th", "9th", "Bachelors", "HS-grad", "Masters"] * 8, "x": np.arange(40) % 3})
    assert sanity_check(ordinal) == []


def test_warnings_are_data_warnings(tmp_path):
    assert issubclass(DataWarning, UserWarning)
    p = tmp_path / "c.csv"
    pd.DataFrame({"a": [1] * 25, "b": np.arange(25) % 4}).to_csv(p, index=False)
    with pytest.warns(DataWarning, match="column 'a' is constant"):
        load_csv(p)


def test_adult_gives_no_warning(adult, tmp_path):
    df, schema = adult
    assert sanity_check(df, schema) == [] and sanity_check(df) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        load_dataset("adult")
        p = tmp_path / "adult.csv"
        df.to_csv(p, index=False)
        types = {"education-num": "continuous"}  # the paper's type; undeclared, its 16 codes are read as categories (and said)
        load_csv(p, types=types)
        df.iloc[:400].to_csv(p, index=False)  # a sample: fnlwgt is then all distinct, but no identifier
        load_csv(p, types=types)


@pytest.mark.skipif(not CENSUS.exists(), reason="census sample not available")
def test_census_gives_no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataWarning)
        df, schema = load_dataset("census", path=CENSUS)
    # the sample holds private households only: its `Residence Type` is constant, which sanity_check reports truthfully
    got = sanity_check(df, schema)
    assert len(got) == 1 and got[0].startswith("column 'Residence Type' is constant"), got
    assert sanity_check(df.drop(columns="Residence Type"), None) == []


def test_sanity_check_arguments(adult):
    df, schema = adult
    with pytest.raises(TypeError):
        sanity_check(df.to_numpy())
    with pytest.raises(ValueError, match="lacks the column"):
        sanity_check(df.drop(columns="age"), schema)


# --- 3. labels and fingerprints ---------------------------------------------------------------------------------------

def test_dataset_label(tmp_path):
    assert dataset_label("adult") == "adult" and dataset_label("census") == "census"
    user = tmp_path / "adult.csv"
    user.write_text("a,b\n1,2\n")
    assert dataset_label(str(user)) == "file:adult.csv"
    assert dataset_label(user) == "file:adult.csv"
    assert dataset_label("adult.csv") == "file:adult.csv"
    with pytest.raises(ValueError) as e:
        dataset_label("mnist")
    assert "adult, adult_full, adult_missing, census" in one_line(e)


def test_table_fingerprint(adult):
    df, schema = adult
    fp = table_fingerprint(df, schema)
    assert len(fp) == 16 and int(fp, 16) >= 0
    assert table_fingerprint(df.copy(), schema) == fp
    assert table_fingerprint(encode(df, schema), schema) == fp
    changed = df.copy()
    changed.loc[0, "age"] += 1
    assert table_fingerprint(changed, schema) != fp
    assert table_fingerprint(df.iloc[::-1].reset_index(drop=True), schema) != fp  # row order counts
    other = Schema.from_dataframe(df, types={"age": "categorical"})
    assert table_fingerprint(df, other) != fp
    with pytest.raises(TypeError):
        table_fingerprint(df, None)


# --- 4. BayNet / PrivBayes table bound --------------------------------------------------------------------------------

@pytest.mark.parametrize("cls", [BayNet, PrivBayes])
def test_huge_degree_fails_fast(adult, cls):
    df, schema = adult
    t0 = time.perf_counter()
    with pytest.raises(ValueError) as e:
        cls(schema, degree=10).fit(df, rng=0)
    assert time.perf_counter() - t0 < 1.0
    msg = one_line(e)
    assert msg.startswith("degree=10: ") and "450,016,000,000 cells" in msg and "TiB" in msg
    assert f"MAX_TABLE_CELLS = {MAX_TABLE_CELLS:,} cells" in msg and "use degree <= 6" in msg


def test_small_degrees_still_work(adult):
    df, schema = adult
    train = df.sample(300, random_state=0).reset_index(drop=True)
    for degree in (1, 2):
        for g in (BayNet(schema, degree=degree), PrivBayes(schema, epsilon=1.0, degree=degree)):
            assert len(g.fit(train, rng=0).sample(20, rng=1)) == 20
    with pytest.raises(ValueError, match="histogram_bins"):
        BayNet(schema, degree=1, histogram_bins=20_000).fit(train, rng=0)


# ---------------------------------------------------------------- prepare_table's rules at their edges (the mutants of 2026-12-07)
def test_keep_keeps_a_column_and_its_type_rules_still_apply():
    from achilles.core.data import prepare_table
    dates = pd.Series(pd.date_range("2021-01-01", periods=40).astype(str))
    df = pd.DataFrame({"when": dates, "a": ["x", "y"] * 20, "id": [f"P{i:03d}" for i in range(40)]})
    out, set_types, _ = prepare_table(df, keep=["when"])  # 40 distinct dates: an identifier, unless kept; kept, still a date
    assert set_types.get("when") == "continuous" and out["when"].iloc[0] == 18628.0 and "id" not in out
    out, set_types, _ = prepare_table(df, types={"a": "categorical"}, keep=["a"])  # declared and kept: the next columns still prepared
    assert list(out.columns) == ["a"] and "when" not in set_types  # 'when' and 'id' left out as identifiers, after 'a'


def test_decimal_commas_and_dates_at_ninety_percent():
    from achilles.core.data import prepare_table
    commas = pd.DataFrame({"w": [f"{i % 7},5" for i in range(36)] + ["a", "b", "c", "d"]})  # 36 of 40: 90 %, four texts (no code)
    assert any("decimal comma" in n for n in prepare_table(commas)[2])
    commas.loc[35, "w"] = "e"  # 35 of 40
    assert not any("decimal comma" in n for n in prepare_table(commas)[2])
    days = [str(d.date()) for d in pd.date_range("2021-01-01", periods=9)]
    df = pd.DataFrame({"d": days * 4 + ["soon", "later", "never", "maybe"]})  # 36 of 40 parse as dates: 90 %
    out, set_types, _ = prepare_table(df)
    assert set_types == {"d": "continuous"} and int(out["d"].isna().sum()) == 4
    df.loc[0, "d"] = "someday"  # 35 of 40
    assert prepare_table(df)[1] == {}


def test_integer_codes_at_their_bounds():
    from achilles.core.data import prepare_table
    n = 40
    codes = lambda k, top=None: pd.Series([i % k for i in range(n)] if top is None else [top if i == 0 else i % k for i in range(n)])
    assert prepare_table(pd.DataFrame({"c": codes(2)}))[1] == {"c": "categorical"}  # two values: the fewest
    assert prepare_table(pd.DataFrame({"c": codes(20)}))[1] == {"c": "categorical"}  # MAX_CODES values: the most
    assert prepare_table(pd.DataFrame({"c": codes(21)}))[1] == {}
    assert prepare_table(pd.DataFrame({"c": codes(5, top=999)}))[1] == {"c": "categorical"}  # under 1,000
    assert prepare_table(pd.DataFrame({"c": codes(5, top=1000)}))[1] == {}  # an amount, not a code
    whole_floats = pd.DataFrame({"c": [float(i % 3 + 1) for i in range(n)]})  # read as 1.0, 2.0: no missing value, left as read
    assert prepare_table(whole_floats)[0]["c"].dtype == np.float64
    holes = whole_floats.copy(); holes.loc[0, "c"] = np.nan  # pandas reads whole numbers with a gap as floats: codes 1, 2, 3 again
    out = prepare_table(holes)[0]["c"]
    assert str(out.dtype) == "Int64" and out.isna().sum() == 1 and out.iloc[1] == 2
