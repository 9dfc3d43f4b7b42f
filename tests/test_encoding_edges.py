"""The edges of reading a custodian's file (issue 37): the helpers behind `detect_encoding`, `_head_text`, the codes for missing
(`_text_codes`) and the formatted numbers (`_formatted_numbers`), each at the boundary its rule states. Written for the mutants
`.ci/mutate core/data` left alive (tests/MUTATION.md)."""
import warnings

import numpy as np
import pandas as pd
import pytest

import achilles.core.data as D
from achilles.core.data import HEAD_BYTES, _formatted_numbers, _head_text, _text_codes, _utf16_without_mark, detect_encoding


# ---------------------------------------------------------------- UTF-16 without its mark: zero bytes on one side only
@pytest.mark.parametrize("head, expected", [
    (b"a\x00" * 7 + b"ab" * 3, "utf-16-le"),                 # 70 % zeros on the odd side: the bar itself
    (b"\x00a" * 7 + b"ab" * 3, "utf-16-be"),
    (b"a\x00" * 6 + b"ab" * 4, None),                        # 60 %: not enough
    (b"\x00\x00" + b"a\x00" * 19, "utf-16-le"),              # 5 % zeros on the other side: still one side
    (b"\x00\x00" + b"\x00a" * 19, "utf-16-be"),
    (b"\x00\x00" * 2 + b"a\x00" * 18, None),                 # 10 % on the other side: both sides, binary
    (b"\x00\x00" * 50 + b"a\x00" * 50, None),
    (b"\x00\x00" * 50 + b"\x00a" * 50, None),
    (b"a\x00b\x00c\x00d\x00", "utf-16-le"),                  # 8 bytes: enough
    (b"a\x00b\x00c\x00", None),                              # 6 bytes: too few to tell
    (b"a\x00" * 10 + b"a", "utf-16-le"),                     # an odd byte at the end: the pairs before it count
    (b"a\x00" * 9 + b"\x00", "utf-16-le"),                   # ... even a zero one, which would tip the other side over 5 %
    (bytes([0, 7, 7, 0]) + bytes(range(1, 256)) * 8, None),  # a few zeros on both sides: binary
])
def test_utf16_without_its_mark(head, expected):
    assert _utf16_without_mark(head) == expected


def test_utf16_looks_at_the_first_4_kib_only():
    assert _utf16_without_mark(b"a\x00" * 2048 + b"\x00\x00" * 5000) == "utf-16-le"
    assert _utf16_without_mark(b"\x00\x00" * 2048 + b"a\x00" * 5000) is None


def test_zero_bytes_are_judged_in_the_first_4_kib(tmp_path):
    p = tmp_path / "z.csv"
    p.write_bytes(b"a" * 4095 + b"\x00")
    with pytest.raises(ValueError, match="holds zero bytes"): detect_encoding(p)
    p.write_bytes(b"a" * 4096 + b"\x00")  # beyond: UTF-8 (pandas meets the zero byte, if it matters)
    assert detect_encoding(p) == "utf-8"


# ---------------------------------------------------------------- the head of a file, cut after its last whole line
def test_head_text_cuts_after_the_last_whole_line(tmp_path):
    p = tmp_path / "h.csv"
    p.write_bytes(b"a,b\n1,2\n")  # 8 bytes
    assert _head_text(p, None, 8) == ("a,b\n1,2\n", False)  # exactly n bytes: the whole file, nothing more
    assert _head_text(p, None, 9) == ("a,b\n1,2\n", False)
    assert _head_text(p, None, 7) == ("a,b\n", True)
    assert _head_text(p, None, 5) == ("a,b\n", True)
    p.write_bytes(b"abcdef")  # no line break in the head: the head as it is
    assert _head_text(p, None, 3) == ("abc", True)
    p.write_bytes("é,x\n".encode("cp1252"))
    assert _head_text(p, None, encoding="cp1252") == ("é,x\n", False)
    assert _head_text(p, None) == ("\ufffd,x\n", False)  # UTF-8 by default: the byte it cannot read is marked, not fatal


# ---------------------------------------------------------------- the whole file, in pieces, or its head only
@pytest.fixture
def small_pieces(monkeypatch):
    monkeypatch.setattr(D, "ENCODING_PIECE", 7)


def test_a_stray_byte_in_a_later_piece_is_found(tmp_path, small_pieces):
    p = tmp_path / "deep.csv"
    p.write_bytes(b"id,town\n" + b"1,Leeds\n" * 100 + "2,Zürich\n".encode("cp1252"))
    assert detect_encoding(p) == "cp1252"
    assert D._decodes(p, None, "utf-8") is False and D._decodes(p, None, "cp1252") is True


def test_the_head_check_reads_exactly_the_head(tmp_path, small_pieces):
    p = tmp_path / "edge.csv"
    body = b"x" * (HEAD_BYTES - 1)
    p.write_bytes(body + "ÿ".encode("cp1252"))  # the last byte of the head (0xff: never UTF-8, wherever it stands)
    assert detect_encoding(p, whole=False) == "cp1252"
    p.write_bytes(body + b"x" + b"ab" + "ÿ".encode("cp1252"))  # two bytes past the head
    assert detect_encoding(p, whole=False) == "utf-8" and detect_encoding(p) == "cp1252"
    p.write_bytes(body + "ü".encode("utf-8") + b"\n")  # a letter of two bytes across the head's end: not an error
    assert detect_encoding(p, whole=False) == "utf-8" and detect_encoding(p) == "utf-8"


def test_the_warning_shows_four_accented_values(tmp_path):
    p = tmp_path / "w.csv"
    p.write_bytes("town\nZürich\nGenève\nKöln\nMálaga\nÅrhus\n".encode("cp1252"))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always"); D._resolve_encoding(p, None)
    (msg,) = [str(w.message) for w in said]
    assert "e.g. 'Zürich', 'Genève', 'Köln', 'Málaga';" in msg and "Århus" not in msg


# ---------------------------------------------------------------- a code for missing beside numbers
def test_text_codes_at_their_bounds():
    assert _text_codes(pd.Series([1.0, 2.0, np.nan])) == ([], 0.0)  # numbers: nothing to say
    assert _text_codes(pd.Series([None, None], dtype=object)) == ([], 0.0)
    assert _text_codes(pd.Series([1, 2, 3, "NA"], dtype=object)) == ([], 0.0)  # not every value is text
    assert _text_codes(pd.Series(["F", "M"]), share=1.0) == ([], 0.0)  # no number at all: not a numeric column
    assert _text_codes(pd.Series(["1", "2", "3", "4", "5", "6", "7", "NA", "NA", "?"])) == (["NA", "?"], 0.3)  # 30 %: the bar
    assert _text_codes(pd.Series(["1", "2", "3", "4", "5", "6", "NA", "NA", "?", "-"])) == ([], 0.0)  # 40 %: too many
    assert _text_codes(pd.Series(["1"] * 9 + ["NA"])) == (["NA"], 0.1)  # one code
    codes, sh = _text_codes(pd.Series(["1"] * 17 + ["NA", "?", "-"]))  # three codes: the most
    assert sorted(codes) == ["-", "?", "NA"] and sh == pytest.approx(0.15)
    assert _text_codes(pd.Series(["1"] * 16 + ["NA", "?", "-", "x"])) == ([], 0.0)  # four: not a code


def test_text_codes_counts_decimal_commas_as_numbers():
    assert _text_codes(pd.Series(["1,5"] * 8 + ["NA"] * 2)) == (["NA"], 0.2)


# ---------------------------------------------------------------- formatted numbers
def test_formatted_numbers_at_their_bounds():
    num, ex, odd = _formatted_numbers(pd.Series(["$1,200", "15", None, "-$3"]))
    assert num.tolist()[:2] == [1200.0, 15.0] and np.isnan(num.iloc[2]) and num.iloc[3] == -3.0 and ex == "$1,200" and odd is None
    assert _formatted_numbers(pd.Series(["12", "15"])) == (None, None, None)  # no mark: plain numbers are pandas' to read
    assert _formatted_numbers(pd.Series(["25,700", "3,100"])) == (None, None, None)  # one group of three: a decimal comma?
    assert _formatted_numbers(pd.Series(["1,234,567", "3,100"]))[0].tolist() == [1234567.0, 3100.0]  # two groups: thousands
    assert _formatted_numbers(pd.Series(["3,668.18", "12"]))[0].tolist() == [3668.18, 12.0]
    assert _formatted_numbers(pd.Series(["12 €", "€ 3", "£4", "¥5", "6%"]))[0].tolist() == [12.0, 3.0, 4.0, 5.0, 6.0]
    assert _formatted_numbers(pd.Series(["5%"] * 7 + ["n/a"] * 3)) == (None, "5%", ["n/a"])  # 30 % of one text: named
    assert _formatted_numbers(pd.Series(["5%"] * 6 + ["n/a"] * 4)) == (None, None, None)  # 40 %: not a code, said elsewhere
    assert _formatted_numbers(pd.Series(["5%"] * 6 + ["a", "b", "c", "d"])) == (None, None, None)
    assert sorted(_formatted_numbers(pd.Series(["5%", "x", "y", "z"] + ["6%"] * 10))[2]) == ["x", "y", "z"]  # three texts: the most
    assert _formatted_numbers(pd.Series(["5%", "w", "x", "y", "z"] + ["6%"] * 10)) == (None, None, None)  # four (27 %): not a code
    assert _formatted_numbers(pd.Series([1.0, 2.0])) == (None, None, None)
    assert _formatted_numbers(pd.Series([None, None], dtype=object)) == (None, None, None)
    assert _formatted_numbers(pd.Series(["$1", 2], dtype=object)) == (None, None, None)  # not every value is text


def test_a_declared_type_is_not_read_for_decimal_commas_but_for_missing_texts():
    from achilles.core.data import prepare_table
    df = pd.DataFrame({"w": [f"{i % 5},5" for i in range(30)], "g": ["a", "NA"] * 15})
    out, set_types, notes = prepare_table(df, types={"w": "categorical", "g": "categorical"})
    assert out["w"].iloc[1] == "1,5" and set_types == {} and not any("decimal comma" in n for n in notes)
    assert [n for n in notes if "the text 'NA' is read as a value" in n], notes  # a type says nothing of what means missing
    assert any("decimal comma" in n for n in prepare_table(df)[2])


def test_the_formatted_numbers_line_shows_its_example_and_its_number():
    from achilles.core.data import prepare_table
    out, set_types, notes = prepare_table(pd.DataFrame({"m": ["$5", "7", "8"] * 1 + ["9"] * 5}))  # the example occurs once
    assert set_types == {"m": "continuous"} and out["m"].tolist() == [5.0, 7.0, 8.0] + [9.0] * 5
    assert [n for n in notes if "'m' ('$5' -> 5)" in n], notes


def test_the_sample_rejects_a_column_only_below_half_numbers():
    "Over 2,000 rows the rules look at an evenly spaced sample first: a sample with half numbers goes on to the whole column."
    from achilles.core.data import _row_sample
    n = 4000
    vals = ["NA" if i % 4 == 0 else str(i) for i in range(n)]  # 25 % 'NA' in all
    s = pd.Series(vals)
    smp = _row_sample(s)
    assert (smp == "NA").mean() == 0.5  # the sample (every other row) holds half of them
    assert _text_codes(s) == (["NA"], 0.25)
    s2 = pd.Series(["NA" if i % 4 in (0, 2) and i % 8 != 2 else str(i) for i in range(n)])  # the sample under half numbers
    assert (_row_sample(s2).str.match(r"^\d+$")).mean() < 0.5 and _text_codes(s2) == ([], 0.0)


def test_formatted_numbers_past_the_sample():
    "Over 2,000 rows: half the sample formatted goes on to the whole column; a mark the sample misses is still found."
    n = 4000
    s = pd.Series(["n/a" if i % 4 == 0 else f"${i:,}" for i in range(n)])  # the sample (every other row) half 'n/a'; 25 % in all
    num, ex, odd = _formatted_numbers(s)
    assert num is None and ex == "$1" and odd == ["n/a"]
    plain = pd.Series(["$7" if i == 1 else str(i % 50) for i in range(n)])  # one marked value, on a row the sample skips
    num, ex, odd = _formatted_numbers(plain)
    assert ex == "$7" and odd is None and num.iloc[1] == 7.0 and num.iloc[2] == 2.0
