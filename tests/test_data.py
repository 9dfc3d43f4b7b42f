"""Data module: loaders against the raw files, the census loader on both file layouts, encoding edge cases."""
import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, encode, decode, load_adult, load_uk_census, load_csv, census_path, parse_types, load_dataset, CENSUS_ENV

DATA = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "data"  # passed explicitly: the library never searches
SHARED = census_path(DATA) or census_path()  # the 50k sample in ../shared/data, else $ACHILLES_CENSUS


def test_bundled_adult_equals_shared_raw_files(tmp_path):
    raw = __import__("pathlib").Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"
    if not (raw / "adult.data").exists():
        pytest.skip("../shared/data/adult not present")
    a, b = load_adult(), load_adult(raw)
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 45222
    assert a.isna().sum().sum() == 0
    assert set(a["income"].cat.categories) == {"<=50K", ">50K"}
    # train first: the first record of adult.data comes first
    assert a.loc[0, "age"] == 39 and a.loc[0, "fnlwgt"] == 77516


def test_adult_encoding_roundtrip():
    df = load_adult().iloc[:500]
    s = Schema.from_dataframe(load_adult())
    enc = encode(df, s)
    assert enc.cat.shape == (500, 9) and enc.cont.shape == (500, 6)
    assert enc.cont.min() >= 0 and enc.cont.max() <= 1
    back = decode(enc, s)
    for c in df.columns:
        assert back[c].astype(str).tolist() == df[c].astype(str).tolist(), c


@pytest.mark.skipif(SHARED is None, reason="census sample not in ../shared/data and $ACHILLES_CENSUS not set")
def test_census_with_and_without_title_line(tmp_path):
    df = load_uk_census(SHARED)
    assert df.shape == (50000, 17) and "Person ID" not in df.columns
    # the full ONS file has a title line above the header; write a small file in that layout (temporary, never committed)
    lines = open(SHARED, encoding="utf-8").read().splitlines()[:201]
    p = tmp_path / "ons.csv"
    p.write_text("Census Microdata Teaching File: 2011\n" + "\n".join(lines) + "\n")
    small = load_uk_census(p)
    assert small.shape == (200, 17)
    assert small.astype(str).equals(df.iloc[:200].astype(str).reset_index(drop=True))


def test_census_path_never_searches(tmp_path, monkeypatch):
    monkeypatch.delenv(CENSUS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "shared" / "data" / "uk_census_2011").mkdir(parents=True)
    (tmp_path / "shared" / "data" / "uk_census_2011" / "census2011_sample50k.csv").write_text("Person ID,Sex\n1,1\n")
    assert census_path() is None  # a shared/ folder in the working directory is not looked at
    assert census_path(tmp_path / "shared" / "data") is not None  # only when passed explicitly
    with pytest.raises(FileNotFoundError, match=CENSUS_ENV):
        load_dataset("census")


def test_census_env_and_missing(tmp_path, monkeypatch):
    monkeypatch.setenv(CENSUS_ENV, str(tmp_path / "nope.csv"))
    assert census_path() is None
    with pytest.raises(FileNotFoundError, match=CENSUS_ENV):
        load_uk_census()
    p = tmp_path / "c.csv"
    p.write_text("Person ID,Region,Sex\n1,E1,1\n2,E2,2\n")
    monkeypatch.setenv(CENSUS_ENV, str(p))
    df = load_uk_census()
    assert list(df.columns) == ["Region", "Sex"] and all(isinstance(df[c].dtype, pd.CategoricalDtype) for c in df)
    p.write_text("id,Region\n1,E1\n")
    with pytest.raises(ValueError, match="Person ID"):
        load_uk_census(p)


def test_bad_inputs(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("a,b\n1,x\n2,y\n")
    with pytest.raises(ValueError, match="'b' has type 'numeric'"):
        load_csv(p, types={"b": "numeric"})
    with pytest.raises(ValueError, match="declared continuous but has non-numeric"):
        load_csv(p, types="b:continuous")
    with pytest.raises(ValueError, match="must look like 'column:kind'"):
        parse_types("a=continuous")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_csv(tmp_path / "none.csv")
    with pytest.raises(ValueError, match="not a known dataset"):
        load_dataset("mnist")
    p.write_text("a,b\n1,x\n2,\n")
    df, schema = load_csv(p)  # a missing value is data: its own category
    assert schema["b"].missing and df["b"].isna().tolist() == [False, True]


def test_constant_and_unseen():
    df = pd.DataFrame({"c": ["a", "a"], "x": [3.0, 3.0]})
    s = Schema.from_dataframe(df)
    enc = encode(df, s)
    assert (enc.cont == 0).all() and (enc.cat == 0).all()
    other = pd.DataFrame({"c": ["a", "b"], "x": [3.0, 5.0]})
    with pytest.raises(ValueError, match="value 'b' is not in the schema"):
        encode(other, s)
    e2 = encode(other, s, unseen="code")
    assert e2.cat[:, 0].tolist() == [0, -1]
    assert e2.cont[:, 0].tolist() == [0.0, 0.0]  # constant column scales to 0 (clipped)
    with pytest.raises(ValueError, match="outside the schema's range"):
        encode(other, s, unseen="code", out_of_range="error")


def test_category_dtype_paths_agree():
    """A `category` column whose categories differ in order or content from the schema's gets the schema's codes."""
    s = Schema.from_dataframe(pd.DataFrame({"c": ["a", "b", "c"]}))
    plain = pd.DataFrame({"c": ["c", "a", "b", "c"]})
    same = plain.astype({"c": pd.CategoricalDtype(["a", "b", "c"])})
    reordered = plain.astype({"c": pd.CategoricalDtype(["c", "b", "a", "z"])})
    want = [2, 0, 1, 2]
    for df in (plain, same, reordered):
        assert encode(df, s).cat[:, 0].tolist() == want
    unseen = pd.DataFrame({"c": pd.Categorical(["z", "a"], categories=["z", "a"])})
    with pytest.raises(ValueError, match="value 'z'"):
        encode(unseen, s)
    assert encode(unseen, s, unseen="code").cat[:, 0].tolist() == [-1, 0]


def test_census_loader_refuses_folders_and_empty_files(tmp_path):
    with pytest.raises(IsADirectoryError, match="is a folder"):
        load_uk_census(tmp_path)
    p = tmp_path / "c.csv"
    p.write_text("")
    with pytest.raises(ValueError, match="empty file"):
        load_uk_census(p)
    p.write_text("Person ID,Region,Sex\n")
    with pytest.raises(ValueError, match="no data rows"):
        load_uk_census(p)
