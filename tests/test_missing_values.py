"""Missing values are information (issue 37): every layer keeps them, by the rule of `04_data` (a missing category is a code of
its own; a missing number is `MISSING_SCALED`, equal only to another missing number). Each test would fail if a layer dropped,
imputed or ignored them: the selectors, the counting queries, the neighbour engine, every generator, every no-box metric, the
audit, and every command of the CLI on a custodian's table."""
import re
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import MISSING_SCALED, Column, Schema, decode, encode, load_adult_missing, load_dataset
from achilles.core.testing import custodian_table


@pytest.fixture(scope="module")
def clinic():
    "A clinic-style table without the columns that are not yet handled (IDs, dates, free text): 600 rows, 7 columns with missing values."
    return custodian_table(600, rng=0, ids=False, dates=False, free_text=False)


def _impute_record(df, row):
    "The table with one record's missing values filled with each column's mode (categorical) or median (numbers)."
    out = df.copy()
    for c in df.columns:
        if pd.isna(df.at[row, c]):
            s = df[c].dropna()
            out.at[row, c] = s.mode().iloc[0] if not pd.api.types.is_numeric_dtype(s) else float(s.median())
    return out


# ------------------------------------------------------------------------------------------------ the encoding
def test_encode_decode_keeps_every_missing_cell(clinic):
    s = Schema.from_dataframe(clinic)
    assert [c.name for c in s if c.missing] == ["sex", "age", "region", "bmi", "income", "smoker", "alcohol"]
    back = decode(encode(clinic, s), s)
    assert (back.isna().to_numpy() == clinic.isna().to_numpy()).all()


def test_adult_with_its_missing_values():
    df, s = load_dataset("adult_missing")
    assert df.shape == (48842, 15) and int(df.isna().sum().sum()) == 6465
    assert [c.name for c in s if c.missing] == ["workclass", "occupation", "native-country"]
    assert len(load_adult_missing().dropna()) == 45222  # the Achilles paper's Adult is exactly its complete rows


# ------------------------------------------------------------------------------------------------ V_k and the selectors
@pytest.mark.parametrize("metric", ["cosine", "minkowski1", "minkowski2"])
def test_vk_finds_a_record_unique_only_by_where_its_values_are_missing(clinic, metric):
    from achilles.distance import vulnerability_scores
    s = Schema.from_dataframe(clinic)
    v = vulnerability_scores(clinic, s, k=5, metric=metric)
    rank = int((v > v[0]).sum()) + 1
    assert rank <= 30, rank  # top 5 % of 600
    imp = _impute_record(clinic, 0)
    vi = vulnerability_scores(imp, Schema.from_dataframe(imp), k=5, metric=metric)
    assert int((vi > vi[0]).sum()) + 1 > 300  # the same record, imputed, is typical: the pattern was what made it unique


def test_the_selectors_see_a_rare_missing_value():
    from achilles.selectors import SELECTORS
    df = pd.DataFrame({"x": np.r_[np.nan, np.linspace(0, 1, 99)], "c": ["a", "b"] * 50})
    s = Schema.from_dataframe(df)
    rare = SELECTORS["rare"](df, s)
    assert rare[0] == pytest.approx(-np.log(0.01)) and rare[0] == rare.max()  # 1 % missing: the rarest value
    ll = SELECTORS["loglik"](df, s)
    assert ll[0] > ll[1:].max()  # a bin of its own, held by one record (in the lowest decile it would tie with ten)


# ------------------------------------------------------------------------------------------------ counting queries
def test_a_missing_number_matches_only_a_missing_number():
    from achilles.queries import match_masks
    syn = pd.DataFrame({"x": [0.0, np.nan, 5.0, np.nan, 10.0], "c": ["a", None, "a", "b", None]})
    s = Schema.from_dataframe(syn)
    present = match_masks(syn, syn.iloc[[2]], s)  # x = 5: `x <= 5` matches rows 0 and 2, never a missing x
    missing = match_masks(syn, syn.iloc[[1]], s)  # x missing: only the missing x; c missing: only the missing c
    xbit, cbit = 1, 2  # bit j is schema position j (x, c)
    assert [(m & xbit) > 0 for m in present] == [True, False, True, False, False]
    assert [(m & xbit) > 0 for m in missing] == [False, True, False, True, False]
    assert [(m & cbit) > 0 for m in missing] == [False, True, False, False, True]


# ------------------------------------------------------------------------------------------------ the neighbour engine
@pytest.mark.parametrize("metric", ["euclidean", "sphere", "gower", "hamming", "cosine", "minkowski2"])
def test_a_copy_of_an_incomplete_record_is_at_distance_zero(clinic, metric):
    from achilles.neighbours import nearest
    s = Schema.from_dataframe(clinic)
    d, j = nearest(clinic.iloc[[0]], clinic, k=1, metric=metric, schema=s)
    assert d[0, 0] == 0.0 and j[0, 0] == 0
    d2, _ = nearest(_impute_record(clinic, 0).iloc[[0]], clinic, k=1, metric=metric, schema=s)
    assert d2[0, 0] > 0.0  # the imputed record is not a copy: missing is not "anything"


# ------------------------------------------------------------------------------------------------ generators
@pytest.mark.parametrize("name,params", [("identity", {}), ("independent", {}), ("baynet", {}), ("privbayes", {"epsilon": 1000.0}),
                                         ("synthpop", {})])
def test_every_generator_learns_and_reproduces_missingness(clinic, name, params):
    from achilles.generators import make_generator
    s = Schema.from_dataframe(clinic)
    g = make_generator(name, s, **params).fit(clinic, rng=0)
    out = g.sample(6000, rng=1)
    p, q = clinic.isna().mean(), out.isna().mean()
    for c in clinic.columns:
        sd = np.sqrt(p[c] * (1 - p[c]) / len(clinic) + p[c] * (1 - p[c]) / len(out))
        tol = 5 * sd + (0.03 if name == "privbayes" else 0.0)
        assert abs(q[c] - p[c]) <= tol, (c, p[c], q[c])
    assert (decode(g.sample_encoded(50, rng=2), s).isna().to_numpy() == g.sample(50, rng=2).isna().to_numpy()).all()
    if name in ("identity", "baynet", "synthpop"):  # the monotone pattern (alcohol missing -> smoker missing) is a dependency
        a = out["alcohol"].isna()
        assert out.loc[a, "smoker"].isna().mean() > 0.8


def test_synthpop_never_smooths_a_missing_number_away(clinic):
    from achilles.generators import make_generator
    s = Schema.from_dataframe(clinic)
    enc = make_generator("synthpop", s, smoothing="density").fit(clinic, rng=0).sample_encoded(3000, rng=1)
    x = enc.cont
    assert ((x == MISSING_SCALED) | ((x >= 0) & (x <= 1))).all()  # exactly -1 or a value in range: nothing smeared in between


# ------------------------------------------------------------------------------------------------ the no-box metrics
_NOT_HERE = set()  # singling out: also tests/test_nobox_singling_out.py (its predicates on missing values)
_PARAMS = {"l_diversity": dict(secret="smoker")}  # its default secret (diagnosis) has no missing value to count


def _metric_names():
    from achilles.nobox import METRICS
    return [m for m in METRICS if m not in _NOT_HERE]


@pytest.mark.parametrize("name", _metric_names())
def test_every_no_box_metric_reads_missingness(clinic, name):
    """Each metric runs on tables with missing values in every kind of column, and a release that copies the training records
    exactly (missing values included) scores differently from one that copies them with their missing values imputed."""
    from achilles.nobox import METRICS
    T, C = clinic.iloc[:300].reset_index(drop=True), clinic.iloc[300:].reset_index(drop=True)
    imp = T.copy()
    for c in T.columns: imp[c] = T[c].fillna(T[c].mode().iloc[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = METRICS.make(name, **_PARAMS.get(name, {})).evaluate(T, T.copy(), C, rng=0)
        b = METRICS.make(name, **_PARAMS.get(name, {})).evaluate(T, imp, C, rng=0)
    assert np.isfinite(a.attack_rate) and np.isfinite(b.attack_rate)
    fig = lambda r: (r.value, r.attack_rate, r.control_rate)  # a value at its ceiling (dcr_baseline: 1.0) still moves its rates
    assert fig(a) != fig(b), (name, fig(a), fig(b))


# ------------------------------------------------------------------------------------------------ the audit
def test_the_identity_generator_exposes_a_record_that_differs_from_another_only_where_it_is_missing(clinic):
    """Record 0 is record 5 with `age` and `smoker` missing. An attacker that ignored missingness would take record 5 (IN about one
    dataset in six) for it and score well below 0.99; the audit, which reads missing as a value, separates them perfectly."""
    from achilles.shadow.audit import audit
    df = clinic.copy()
    df.loc[0] = df.loc[5]
    df.loc[0, ["age", "smoker"]] = [np.nan, None]
    assert df.loc[5, ["age", "smoker"]].notna().all()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = audit(df, "identity", records=[0], design="bernoulli", n_datasets=200, dataset_size=100, rng=0, cache_dir=None,
                  verbose=False)
    assert float(r["auc"].iloc[0]) >= 0.99


# ------------------------------------------------------------------------------------------------ every command of the CLI
_COMMANDS = {
    "vulnerable": ["vulnerable", "--csv", "{data}", "--top", "3"],
    "audit": ["audit", "--csv", "{data}", "--records", "4", "--n-datasets", "60", "--dataset-size", "60", "--cache-dir", "",
              "--quiet", "--results", "{store}"],
    "audit-all": ["audit", "--csv", "{data}", "--records", "all", "--n-in", "20", "--dataset-size", "60", "--cache-dir", "",
                  "--quiet", "--results", "{store}"],
    "audit-release": ["audit", "--csv", "{data}", "--records", "all", "--design", "release", "--n-in", "10", "--order", "1",
                      "--cache-dir", "", "--quiet", "--results", "{store}"],
    "nobox": ["nobox", "--train", "{train}", "--synthetic", "{synth}", "--control", "{control}", "--quiet", "--results", "{store}"],
    "kde": ["kde", "--train", "{train}", "--synthetic", "{synth}", "--holdout", "{control}", "--results", "{store}"],
    "riskbench": ["riskbench", "--csv", "{data}", "--metrics", "ims,dcr", "--no-utility", "--levels", "0,1", "--quiet",
                  "--results", "{store}"],
    "report": ["report", "--data", "{data}", "--generator", "baynet", "--design", "bernoulli", "--records", "6", "--n-datasets", "40", "--dataset-size", "60",
               "--top", "2", "--remedy-top", "2", "--quiet", "--results", "{store}", "--out", "{dir}/report.html"],
}


@pytest.mark.parametrize("raw", [False, True], ids=["missing-values", "raw-with-id-dates-text"])
@pytest.mark.parametrize("command", list(_COMMANDS))
def test_every_command_runs_on_a_table_with_missing_values(tmp_path, capsys, command, raw):
    """Exit 0, the missing cells counted once per file, no raw library warning, no 'nan' where a number belongs; on the raw table
    (an ID, dates, free text as well) the ID and the text are left out, said once, and no ID value is printed."""
    from achilles import cli
    t = custodian_table(300, rng=0, ids=raw, dates=raw, free_text=raw)
    files = dict(data=tmp_path / "clinic.csv", train=tmp_path / "train.csv", synth=tmp_path / "synth.csv",
                 control=tmp_path / "control.csv", store=tmp_path / "s.sqlite", dir=tmp_path)
    t.to_csv(files["data"], index=False)
    t.iloc[:150].to_csv(files["train"], index=False); t.iloc[150:].to_csv(files["control"], index=False)
    t.iloc[:150].sample(150, replace=True, random_state=1).to_csv(files["synth"], index=False)
    argv = [a.format(**files) for a in _COMMANDS[command]]
    with warnings.catch_warnings():  # as a terminal sees them: printed (not pytest's record), every occurrence offered
        warnings.simplefilter("always")
        warnings.showwarning = lambda m, c, f, n, file=None, line=None: sys.stderr.write(warnings.formatwarning(m, c, f, n, line))
        code = cli.main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    said = [l for l in out.err.splitlines() if "missing cell(s)" in l]
    assert len(said) == len(set(said)) >= 1, out.err  # once per file read
    assert "ConstantInputWarning" not in out.err and "RuntimeWarning" not in out.err, out.err
    assert " +nan" not in out.out and " -nan" not in out.out, out.out
    lines = out.err.splitlines()
    assert len(lines) == len(set(lines)), out.err  # every warning once
    if raw:
        assert "left out as identifiers" in out.err and "left out as free text" in out.err
        page = (tmp_path / "report.html").read_text() if command == "report" else ""
        page = re.sub(r'src="data:[^"]*"', "", page)  # the figures' base64 may hold any letters
        assert not re.search(r"P\d{5}", out.out + page), "an ID value was printed"
        assert "patient_id =" not in page and "note =" not in page


# ------------------------------------------------------------------------------------------------ raw tables: types and identifiers
def _census():
    import os
    from pathlib import Path
    for p in (os.environ.get("ACHILLES_CENSUS"), Path(__file__).parents[2] / "shared/data/uk_census_2011/census2011_sample50k.csv"):
        if p and Path(p).is_file(): return Path(p)
    pytest.skip("the census sample is not here (it is never committed): set ACHILLES_CENSUS")


def test_the_census_read_without_types_is_the_typed_census():
    """Issue 37: without --types the census's integer codes are categories and `Person ID` is left out, so the table and schema
    are exactly the typed loader's, and every audit of it is the same audit (the same data, schema and seeds)."""
    from achilles.core.data import load_csv, load_uk_census
    path = _census()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df, s = load_csv(path)
    typed = load_uk_census(path)
    assert s == Schema.from_dataframe(typed)
    assert (encode(df, s).cat == encode(typed, s).cat).all()


def test_the_report_api_leaves_an_identifier_out_of_a_raw_dataframe():
    from achilles.experiments.custodian import custodian_report
    raw = custodian_table(300, rng=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = custodian_report(raw, generator="independent", design="bernoulli", records=6, n_datasets=40, dataset_size=60, top=2, remedy_top=2, store=None,
                             cache_dir=None, rng=0)
    html = r.to_html()
    assert "P00" not in html and "patient_id =" not in html
    assert "left out as identifiers" in html


# ------------------------------------------------------------------------------------------------ held-out records for the likelihoods
def test_held_out_encoded_records_keep_their_missing_values_and_only_out_of_range_values_move(clinic):
    "`_heldout_encoded` (the records a generator's likelihood scores): -1 in a column with missing values is a value, not out of range."
    from achilles.core.data import Encoded
    from achilles.generators import _heldout_encoded
    s = Schema.from_dataframe(clinic)
    enc = encode(clinic, s)
    assert (enc.cont == MISSING_SCALED).any() and (enc.cont == 0.0).any() and (enc.cont == 1.0).any()
    same = _heldout_encoded(enc, s, out_of_range="error")  # the range's ends and -1 are all allowed
    assert np.array_equal(same.cont, enc.cont) and np.array_equal(same.cat, enc.cat)
    far = enc.cont.copy(); far[1, 1] = 1.5; far[2, 1] = -0.25
    with pytest.raises(ValueError, match="outside the schema's range"):
        _heldout_encoded(Encoded(enc.cat, far), s, out_of_range="error")
    clipped = _heldout_encoded(Encoded(enc.cat, far), s, out_of_range="clip").cont
    assert clipped[1, 1] == 1.0 and clipped[2, 1] == 0.0
    keep = np.ones(far.shape, bool); keep[1, 1] = keep[2, 1] = False
    assert np.array_equal(clipped[keep], enc.cont[keep])  # -1 and every value in range untouched
    complete = Schema(tuple(Column(c.name, c.kind, c.categories, c.lower, c.upper, c.integer, missing=False) for c in s))
    with pytest.raises(ValueError, match="outside the schema's range"):  # -1 in a column that has no missing values is out of range
        _heldout_encoded(Encoded(np.zeros_like(enc.cat), enc.cont), complete, out_of_range="error")


def test_a_value_floored_at_minus_a_half_is_a_number_not_missing():
    "Kept values sit at -0.5 at the lowest; only -1 is missing, in the bins of the generators and in the counting queries."
    from achilles.core.data import Encoded
    from achilles.generators import to_discrete
    from achilles.queries import match_masks
    s = Schema.from_dataframe(pd.DataFrame({"x": [0.0, np.nan, 10.0]}))
    X = to_discrete(Encoded(np.zeros((3, 0), np.int32), np.array([[-0.5], [-1.0], [0.5]])), s, 10)
    assert X[:, 0].tolist() == [0, 10, 5]  # -0.5: the lowest bin; -1: the missing bin (10)
    syn = pd.DataFrame({"x": [np.nan, 0.0, -20.0]})
    m = match_masks(syn, pd.DataFrame({"x": [-20.0]}), s)  # the target, kept far below the range, is floored at -0.5
    assert m.tolist() == [0, 0, 1]  # a missing number never matches a present target, whatever its value


def test_histogram_bins_of_one_is_allowed(clinic):
    from achilles.generators import make_generator
    s = Schema.from_dataframe(clinic)
    out = make_generator("baynet", s, histogram_bins=1).fit(clinic, rng=0).sample(500, rng=1)
    assert out["bmi"].isna().any() and out["bmi"].notna().any()  # one bin of numbers, one of missing values


def test_rare_treats_a_missing_number_as_a_value_with_a_share():
    "Mutation-tested lines of `rare_value_scores`: the share at the threshold, an all-missing column, and the upper tail of the rest."
    from achilles.selectors import rare_value_scores
    n = 100
    x = np.r_[np.full(5, np.nan), np.linspace(0, 1, n - 5)]
    df = pd.DataFrame({"x": x, "y": np.roll(np.linspace(0, 1, n), n // 2)})  # y's rare values sit on records 44-49, apart from x's
    s = Schema.from_dataframe(df)
    r = rare_value_scores(df, s, threshold=0.05)  # 5 % missing: a share AT the threshold is not rare
    assert (r[:5] == 0).all()
    r = rare_value_scores(df, s, threshold=0.06)
    assert np.allclose(r[:5], -np.log(0.05))
    top = int(np.argmax(x[5:])) + 5  # x's largest value: its upper tail counts present values only (1 of 100 rows)
    assert r[top] == pytest.approx(-np.log(1 / n))
    big = pd.concat([df, pd.DataFrame({"x": [0.5], "y": [0.5]})], ignore_index=True)
    sb = Schema.from_dataframe(big)
    only_missing_x = df.assign(x=np.nan)  # an all-missing column (the schema from other data) is skipped, the next one is not
    r2 = rare_value_scores(only_missing_x, sb, threshold=0.05)
    assert r2[np.argmax(df["y"].to_numpy())] == pytest.approx(-np.log(1 / n))


def test_the_random_baseline_release_misses_where_the_training_data_misses(clinic):
    "`random_release` (SDMetrics' random baseline): the training data's share of missing cells per column, the whole range, the dtypes."
    from achilles.nobox.distance_metrics import random_release
    s = Schema.from_dataframe(clinic)
    out = random_release(clinic, s, 20_000, rng=0)
    p, q = clinic.isna().mean(), out.isna().mean()
    for c in clinic.columns:
        sd = np.sqrt(p[c] * (1 - p[c]) / len(out))
        assert abs(q[c] - p[c]) <= 5 * sd + 1e-12, (c, p[c], q[c])
    assert q["diagnosis"] == 0.0  # a complete column gets no missing value
    assert set(out["region"].dropna().unique()) == set(clinic["region"].dropna().unique())  # integers: every one, ends included
    assert set(out["smoker"].dropna().unique()) == set(clinic["smoker"].dropna().unique())  # categories: every one
    assert out["region"].dtype == clinic["region"].dtype  # the nullable Int64 stays
    cat = clinic.astype({"sex": "category"})
    assert isinstance(random_release(cat, Schema.from_dataframe(cat), 50, rng=0)["sex"].dtype, pd.CategoricalDtype)
    complete = clinic.dropna().reset_index(drop=True)
    assert not random_release(complete, Schema.from_dataframe(complete), 500, rng=1).isna().any().any()


@pytest.mark.filterwarnings("ignore:dpi:UserWarning")
def test_every_metric_reads_uci_question_marks_as_missing_or_as_a_category_alike():
    """Adult's missing values are all categorical, so `?` read as missing (`adult_missing`) and `?` kept as a category (`adult_full`)
    are the same partition of the records: the risk-insertion sweeps on either are the same sweeps. Every no-box metric gives the
    same value on both, but two with a stated reason: classifier_mia's gradient-boosted model splits on category codes, whose order
    differs (`?` sorts first, the missing code comes last), and dcr_baseline's random release draws a missing value at its training
    share and a category uniformly (`random_release`)."""
    from achilles.core.data import load_dataset
    from achilles.nobox import leaky_setting
    from achilles.nobox.report import privacy_report
    (a, _), (b, _) = load_dataset("adult_full"), load_dataset("adult_missing")
    assert int(b.isna().sum().sum()) == int((a == "?").sum().sum()) == 6465
    sa, sb = leaky_setting(a, 0.5, n_train=1000, rng=0), leaky_setting(b, 0.5, n_train=1000, rng=0)
    ra = privacy_report(sa.train, sa.synthetic, sa.control, rng=0, n_jobs=1, metrics="all").set_index("metric")["value"]
    rb = privacy_report(sb.train, sb.synthetic, sb.control, rng=0, n_jobs=1, metrics="all").set_index("metric")["value"]
    assert len(ra) >= 25 and list(ra.index) == list(rb.index)
    differ = sorted(ra.index[~np.isclose(ra.to_numpy(), rb.to_numpy(), rtol=0, atol=1e-12, equal_nan=True)])
    assert differ == ["classifier_mia", "dcr_baseline"], (differ, pd.DataFrame({"?": ra, "missing": rb}))
