"""Silently wrong tables (issue 40, round three, "CSV shapes"): files as real exports come. Each of these used to exit 0 with a
wrong table: a header one name short (every column shifted), a comment or a title line (one column, the header ranked first), a
compressed file (the separator sniffed from compressed bytes), ZIP codes with leading zeros read as numbers, one category spelled
three ways, and a release whose values are space-padded (IMS 0.67 with no word). Now each is read right and said, or refused."""
import bz2, gzip, lzma, warnings, zipfile

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import DataWarning, load_adult, load_csv, read_csv_checked, release_problems, table_start
from faultkit import argv_for, block_all_work, make_files, one_line_error, run


def said(fn):
    "(the result of fn(), the DataWarning texts it emitted)"
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        out = fn()
    return out, [str(w.message) for w in rec if issubclass(w.category, DataWarning)]


@pytest.fixture(scope="module")
def adult():
    return load_adult().sample(300, random_state=0).reset_index(drop=True)


@pytest.fixture
def plain(tmp_path, adult):
    p = tmp_path / "plain.csv"
    adult.to_csv(p, index=False)
    return p


def _same(a: pd.DataFrame, b: pd.DataFrame):
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_categorical=False)


# ---------------------------------------------------------------- a header that does not fit its rows
def test_a_header_one_name_short_is_refused_with_both_counts(tmp_path, plain):
    lines = plain.read_text().splitlines(True)
    p = tmp_path / "short.csv"; p.write_text(lines[0].split(",", 1)[1] + "".join(lines[1:]))
    for sep in (",", None):
        with pytest.raises(ValueError, match=r"the header \(line 1\) names 14 column\(s\) but the rows below it have 15 fields \(line 2"):
            load_csv(p, sep=sep)
    assert "row index" in str(pytest.raises(ValueError, read_csv_checked, p).value)


def test_a_header_with_a_name_too_many_is_refused(tmp_path, plain):
    lines = plain.read_text().splitlines(True)
    p = tmp_path / "long.csv"; p.write_text(lines[0].rstrip("\n") + ",extra\n" + "".join(lines[1:]))
    with pytest.raises(ValueError, match="names 16 column.s. but the rows below it have 15 fields"): read_csv_checked(p)


@pytest.mark.parametrize("command", ["vulnerable", "nobox", "audit"])
def test_the_commands_refuse_a_short_header(tmp_path, command, capsys, monkeypatch):
    f = make_files(tmp_path)
    block_all_work(monkeypatch)
    for p in (f.data, f.train, f.synth):
        lines = p.read_text().splitlines(True); p.write_text(lines[0].split(",", 1)[1] + "".join(lines[1:]))
    one_line_error(capsys, argv_for(command, f, results=""), "names 14 column(s) but the rows below it have 15 fields")


# ---------------------------------------------------------------- titles and comments before the header
@pytest.mark.parametrize("head", ["# exported 2024\n", "Adult survey, wave 3, 2024\n", "# exported 2024\n\nTitle, with, commas\n"])
def test_titles_and_comments_are_skipped_and_said(tmp_path, plain, head):
    p = tmp_path / "titled.csv"; p.write_text(head + plain.read_text())
    for sep in (",", None):
        (df, schema), msgs = said(lambda: load_csv(p, sep=sep))
        _same(df, load_csv(plain)[0])
        n = len([l for l in head.splitlines() if l.strip()])
        assert any(f"{n} line(s) before the header read as a title or comment and skipped" in m for m in msgs), msgs
        assert repr(head.splitlines()[0][:60]) in " ".join(msgs)


def test_a_line_number_counts_the_skipped_title(tmp_path, plain):
    lines = plain.read_text().splitlines(True)
    lines[3] = lines[3].replace(lines[3].split(",")[0], "inf", 1)  # record 2 of the table, line 4 of the plain file
    p = tmp_path / "t.csv"; p.write_text("# exported\n" + "".join(lines))
    with pytest.raises(ValueError, match="record 2, line 5 of"): load_csv(p)


def test_the_title_rule_at_its_edges(tmp_path):
    p = tmp_path / "e.csv"
    p.write_text("a, b\nx,y,z\n1,2,3\n4,5,6\n")  # 2 fields over 3: one short of the rows, so a header missing a name
    with pytest.raises(ValueError, match="names 2 column"): table_start(p)
    p.write_text("a\nx,y,z\n1,2,3\n4,5,6\n")  # 1 field: a title
    assert table_start(p) == (1, ["a"])
    p.write_text("t, u\nw,x,y,z\n1,2,3,4\n5,6,7,8\n")  # 2 over 4: at most the rows' count minus 2, a title
    assert table_start(p) == (1, ["t, u"])
    p.write_text("#x,y,z\n1,2,3\n4,5,6\n")  # starts with '#' and fits its rows: the header
    assert table_start(p) == (0, [])
    p.write_text("".join(f"# note {i}\n" for i in range(11)) + "x,y,z\n1,2,3\n")  # more than MAX_TITLE_LINES: not guessed
    with pytest.raises(ValueError, match=r"header \(line 11\) names 1 column"): table_start(p)
    p.write_text("".join(f"# note {i}\n" for i in range(10)) + "x,y,z\n1,2,3\n")
    assert table_start(p)[0] == 10
    p.write_text('x,y,z\n"a\nb",2,3\n4,5,6\n')  # a quoted line break is one record
    assert table_start(p) == (0, [])
    p.write_text("x,y,z\n1,2,3\n")
    assert table_start(p, skiprows=0) == (0, [])


def test_a_comment_beyond_the_first_lines_is_not_a_title(tmp_path):
    p = tmp_path / "c.csv"; p.write_text("x,y,z\n1,2,3\n# not a title\n4,5,6\n")
    assert table_start(p) == (0, [])


# ---------------------------------------------------------------- compressed files, whatever their names say
def _zip(data: bytes, p):
    with zipfile.ZipFile(p, "w") as z: z.writestr("inner.csv", data)


@pytest.mark.parametrize("kind", ["gzip", "bz2", "xz", "zip"])
@pytest.mark.parametrize("name", ["data.csv", "data.csv.gz"])
def test_compressed_files_are_read_as_such(tmp_path, plain, kind, name):
    raw = plain.read_bytes()
    p = tmp_path / name
    if kind == "zip": _zip(raw, p)
    else: p.write_bytes({"gzip": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind](raw))
    for sep in (",", None):
        df, schema = load_csv(p, sep=sep)
        _same(df, load_csv(plain)[0])


def test_a_compressed_file_with_a_title_and_a_short_header(tmp_path, plain):
    p = tmp_path / "z.csv"; p.write_bytes(gzip.compress(b"# exported\n" + plain.read_bytes()))
    (df, _), msgs = said(lambda: load_csv(p))
    assert df.shape == (300, 15) and any("'# exported'" in m for m in msgs)
    lines = plain.read_text().splitlines(True)
    p.write_bytes(gzip.compress((lines[0].split(",", 1)[1] + "".join(lines[1:])).encode()))
    with pytest.raises(ValueError, match="names 14 column"): load_csv(p)


def test_an_infinite_value_in_a_compressed_file_names_its_line(tmp_path):
    p = tmp_path / "i.csv"; p.write_bytes(gzip.compress(b"a,b\n1,2\n3,inf\n"))
    with pytest.raises(ValueError, match="record 1, line 3 of"): load_csv(p)


def test_a_zip_of_two_files_is_refused(tmp_path):
    p = tmp_path / "two.zip"
    with zipfile.ZipFile(p, "w") as z: z.writestr("a.csv", "x,y\n1,2\n"); z.writestr("b.csv", "x,y\n1,2\n")
    with pytest.raises(ValueError, match="ZIP archive of 2 files"): load_csv(p)


def test_the_command_reads_a_gzip_named_csv(tmp_path, capsys, plain):
    p = tmp_path / "g.csv"; p.write_bytes(gzip.compress(plain.read_bytes()))
    out = tmp_path / "top.csv"; out_plain = tmp_path / "top_plain.csv"
    assert run(capsys, ["vulnerable", "--csv", p, "--top", 5, "--out", out])[0] == 0
    assert run(capsys, ["vulnerable", "--csv", plain, "--top", 5, "--out", out_plain])[0] == 0
    assert out.read_text() == out_plain.read_text()


# ---------------------------------------------------------------- leading zeros, and one value spelled several ways
def _zips(tmp_path, n=300):
    g = np.random.default_rng(0)
    t = pd.DataFrame({"zip": [f"{v:05d}" for v in g.choice([501, 544, 1001, 2108, 90210], n)],
                      "sex": g.choice(["Female", "Male"], n), "age": g.integers(18, 90, n)})
    p = tmp_path / "zip.csv"; t.to_csv(p, index=False)
    return p, t


def test_leading_zeros_are_kept_as_text_and_said(tmp_path):
    p, t = _zips(tmp_path)
    (df, schema), msgs = said(lambda: load_csv(p))
    assert df["zip"].astype(str).tolist() == t["zip"].tolist() and "00501" in set(df["zip"].astype(str))
    assert schema["zip"].is_categorical
    assert any("kept as text, as written: 'zip' (whole numbers with leading zeros, e.g. '0" in m for m in msgs), msgs
    assert not schema["age"].is_categorical and df["age"].tolist() == t["age"].tolist()  # no leading zero: a number
    df2, s2 = load_csv(p, types="zip:continuous")  # declared: the user's choice stands
    assert not s2["zip"].is_categorical and 501 in set(df2["zip"])
    df3, s3 = load_csv(p, types="zip:categorical")
    assert "00501" in set(df3["zip"].astype(str))


def test_a_lone_zero_and_decimals_are_numbers(tmp_path):
    p = tmp_path / "n.csv"
    p.write_text("a,b,c\n" + "".join(f"{i % 7},{i / 10:.1f},0.{i % 10}\n" for i in range(60)))
    (df, schema), msgs = said(lambda: load_csv(p))
    assert not any("leading zeros" in m for m in msgs), msgs
    assert pd.api.types.is_numeric_dtype(df["b"]) and pd.api.types.is_numeric_dtype(df["c"])


def test_spelling_variants_are_named(tmp_path):
    p, t = _zips(tmp_path)
    t.loc[:5, "sex"] = "Female "; t.loc[6:9, "sex"] = "FEMALE"; t.to_csv(p, index=False)
    _, msgs = said(lambda: load_csv(p))
    hit = [m for m in msgs if "column 'sex' spells 1 value(s) in more than one way" in m]
    assert len(hit) == 1 and "'Female '" in hit[0] and "'FEMALE'" in hit[0], msgs
    _, clean = said(lambda: load_csv(_zips(tmp_path)[0]))
    assert not any("spells" in m for m in clean), clean


def test_spelling_variants_inside_a_value_and_in_case_only(tmp_path):
    p = tmp_path / "v.csv"
    p.write_text("job\n" + "".join(v + "\n" for v in ["Adm clerical", "Adm  clerical", "Sales", "sales", "Other"] * 8))
    _, msgs = said(lambda: load_csv(p))
    hit = [m for m in msgs if "column 'job' spells 2 value(s)" in m]
    assert len(hit) == 1, msgs


def test_a_space_padded_release_is_said_to_every_metric(adult):
    train, control = adult.iloc[:200].reset_index(drop=True), adult.iloc[200:].reset_index(drop=True)
    syn = train.copy(); syn["sex"] = syn["sex"].astype(object)
    syn.loc[:66, "sex"] = " " + syn.loc[:66, "sex"].astype(str)
    msgs = release_problems(train, syn, control)
    assert len(msgs) == 1 and "synthetic column 'sex' spells 67 of its 200 rows (34%) differently from train's" in msgs[0], msgs
    assert release_problems(train, train.copy(), control) == []
    from achilles.nobox import METRICS
    r, got = said(lambda: METRICS["ims"]().evaluate(train, syn, control, rng=0))
    assert any("spells 67 of its 200 rows" in m for m in got), got


# ---------------------------------------------------------------- the head a file's shape is judged on, and the rule's edges (mutation round)
def test_the_head_is_cut_after_its_last_whole_line(tmp_path):
    from achilles.core.data import HEAD_BYTES, _head_text
    p = tmp_path / "big.csv"
    line = "1,2,3," + "x" * 93 + "\n"  # 100 bytes
    p.write_text("a,b,c,d\n" + line * (HEAD_BYTES // 100 + 50))
    text, more = _head_text(p, None)
    assert more and text.endswith("\n") and len(text) <= HEAD_BYTES and len(text) > HEAD_BYTES - 100
    assert all(l in ("a,b,c,d", line[:-1]) for l in text.splitlines())
    for size, goes_on in ((HEAD_BYTES, False), (HEAD_BYTES + 1, True), (HEAD_BYTES - 1, False)):
        p.write_bytes(b"a\n" + b"1" * (size - 3) + b"\n")
        assert _head_text(p, None)[1] is goes_on, size
    (tmp_path / "big.csv").write_text("Title\na,b,c,d\n" + line * 700)  # 70 KB: judged on its head, the cut row left out
    assert table_start(tmp_path / "big.csv") == (1, ["Title"])


def test_a_zstd_file_without_zstandard_says_what_to_install(tmp_path):
    pytest.importorskip("achilles")  # the package; zstandard itself is optional
    try:
        import zstandard  # noqa: F401
        pytest.skip("zstandard is installed here: the file is read (the other compressions are tested above)")
    except ImportError: pass
    p = tmp_path / "z.csv"; p.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 20)
    with pytest.raises(ImportError, match="is zstd-compressed: pip install zstandard"): load_csv(p)


def test_records_drop_only_a_cut_last_record():
    from achilles.core.data import _records
    text = "a,b\n1,2\n3,4\n"
    assert [r[1] for r in _records(text, ",", False)] == [1, 2, 3]
    assert [r[1] for r in _records(text, ",", True)] == [1, 2]  # the file goes on: its last record may be cut
    assert [r[1] for r in _records("a,b\n", ",", True)] == [1]  # but never the only one
    assert _records('a,b\n"x\ny",2\n5,6\n', ",", False) == [(2, 1, ["a", "b"]), (2, 2, ["x\ny", "2"]), (2, 4, ["5", "6"])]


def test_table_start_after_lines_the_caller_skips(tmp_path):
    p = tmp_path / "s.csv"; p.write_text("junk\nmore junk\nA title\nx,y,z\n1,2,3\n4,5,6\n")
    assert table_start(p, ",", 2) == (3, ["A title"])


def test_table_start_on_two_records_and_titles_without_rows(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("a,b\n1,2,3\n")  # a header and one row: still judged
    with pytest.raises(ValueError, match=r"names 2 column\(s\) but the rows below it have 3 fields"): table_start(p)
    p.write_text("T1\nT2\nx,y,z\n")  # titles above a header with no rows yet
    assert table_start(p) == (2, ["T1", "T2"])


def test_table_start_names_the_first_row_that_fits(tmp_path):
    p = tmp_path / "r.csv"; p.write_text("a,b\n1\n1,2,3\n4,5,6\n7,8,9\n")
    with pytest.raises(ValueError, match=r"have 3 fields \(line 3,"): table_start(p)


def test_a_ragged_file_is_left_to_the_parser_but_half_is_enough(tmp_path):
    p = tmp_path / "g.csv"
    p.write_text("a,b,c\n1,2,3\n1,2,3\n1,2,3,4\n1,2,3,4\n1,2,3,4,5\n1,2,3,4,5\n")  # no field count holds half the rows
    assert table_start(p) == (0, [])
    p.write_text("T\na,b,c,d\n1,2,3,4\n1,2,3\n1,2,3\n")  # 4 fields in exactly half of the lines below the first: a title above
    assert table_start(p) == (1, ["T"])


@pytest.mark.parametrize("text,want", [
    ("a;b;c\n1;2;3\n4,5;6;7\n", (0, [])),  # read with ',': a header in another separator's fields is left to the parser's hint
    ('"Survey, 2024"\na,b,c\n1,2,3\n4,5,6\n', (1, ['"Survey, 2024"'])),  # a quoted title holding the separator is a title
    ("Survey; wave 3, 2024\na,b,c,d,e\n1,2,3,4,5\n6,7,8,9,0\n", (1, ["Survey; wave 3, 2024"])),  # two fields, one with ';'
    ("Report;2024\na,b,c\n1,2,3\n4,5,6\n", (1, ["Report;2024"])),  # one field with ';' above a ',' table: a title
    ("a;b\n1;2\n1,5;2,5\n", (0, [])),  # the first two lines in ';' fields: a misread separator, left to the parser's hint
    ("Title\nq;r\na,b,c\n1,2,3\n4,5,6\n", (2, ["Title", "q;r"])),  # the first line holds no ';': two titles, not a misread
])
def test_the_other_separator_rule(tmp_path, text, want):
    p = tmp_path / "o.csv"; p.write_text(text)
    assert table_start(p) == want


def test_the_last_of_two_records_is_dropped_when_the_file_goes_on_and_a_comments_only_tail():
    from achilles.core.data import _records
    assert [r[1] for r in _records("a,b\n1,2\n", ",", True)] == [1]
    p_text = "a,b\n#x,y,z\n#q\n"  # nothing but comments below the header: their own counts decide
    import tempfile, pathlib
    p = pathlib.Path(tempfile.mkdtemp()) / "c.csv"; p.write_text(p_text)
    with pytest.raises(ValueError, match=r"names 2 column\(s\) but the rows below it have 3 fields"): table_start(p)


def test_a_header_with_fields_is_not_a_misread_separator(tmp_path):
    "The first line must itself be one field for the misread-separator rule: a 2-field header above 1-field rows is refused."
    p = tmp_path / "h.csv"; p.write_text("x;y,z\nq;r\nu;v\n1;2\n")
    with pytest.raises(ValueError, match=r"names 2 column\(s\) but the rows below it have 1 fields"): table_start(p)


def test_a_zstd_file_is_read_where_zstandard_is_installed(tmp_path, plain):
    zstandard = pytest.importorskip("zstandard")  # optional: without it, the test above checks the message
    p = tmp_path / "z.csv"; p.write_bytes(zstandard.ZstdCompressor().compress(plain.read_bytes()))
    _same(load_csv(p)[0], load_csv(plain)[0])


# ---------------------------------------------------------------- the leading-zero and spelling rules at their edges (mutation round)
def test_leading_zeros_edges(tmp_path):
    p = tmp_path / "z.csv"
    p.write_text("z,b,c\n007,05.5,1\n,12.25,2\n,3.5,\n,4.5,4\n")  # one value only; a float; an empty cell without zeros
    df, schema = load_csv(p, prepare=False)
    assert df["z"].tolist()[0] == "007"  # a lone value with a leading zero is kept as written
    assert pd.api.types.is_float_dtype(df["b"]) and df["b"].tolist() == [5.5, 12.25, 3.5, 4.5]  # not whole numbers: numbers
    assert pd.api.types.is_numeric_dtype(df["c"]) and df["c"].isna().sum() == 1  # a missing cell is not a leading zero


def test_spelling_variants_helpers():
    from achilles.core.data import _respelled, _spelling_variants
    assert _spelling_variants(pd.Series([1, 2, 2])) == []
    train = pd.Series(["Male", "Female"] * 50)
    other = pd.Series([" Male"] * 60 + ["FEMALE"] * 30 + ["Male"] * 10)
    assert _respelled(train, other) == (90, " Male", "Male")  # the example is the commonest respelling


def test_the_control_minimum_is_ten_and_tables_are_checked_first():
    from achilles.core.base import MIN_CONTROL
    from achilles.nobox import METRICS
    a = load_adult().sample(400, random_state=1).reset_index(drop=True)
    tr, syn, ct = a.iloc[:150], a.iloc[150:300], a.iloc[300:]
    assert MIN_CONTROL == 10  # the documented minimum (README, 06_base)
    METRICS["ims"]().evaluate(tr, syn, ct.iloc[:10], rng=0)
    with pytest.raises(ValueError, match=r"control has 9 record\(s\); it needs at least 10"): METRICS["ims"]().evaluate(tr, syn, ct.iloc[:9])
    with pytest.raises(ValueError, match="IMS needs a synthetic table"): METRICS["ims"]().evaluate(tr, None, None)
    with pytest.raises(ValueError, match="IMS needs a train table"): METRICS["ims"]().evaluate(None, syn, None)
    with pytest.raises(ValueError) as e: METRICS["ims"]().evaluate(tr, syn.drop(columns="age"), None)
    assert str(e.value).endswith("]") and "None" not in str(e.value)  # no type hint where the names do not differ in type
