"""Issue 39: in the population design a record with c exact copies is IN about c x n_in datasets and gets as many OUT, so its
features and fits cost c times a lone record's (on the census stand-in the mean record was IN 6,900 datasets, one 126,372, for
n_in = 500). `max_in` caps the datasets a record is scored on: a random `max_in` of those holding it or a copy, as many OUT from
all the others. These tests fail if the cap lets a copy into an OUT dataset, changes a record it does not cap, or is ignored."""
import dataclasses, warnings

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, load_adult
from achilles.shadow.audit import PoolModel, audit, plan_population, plan_release
from achilles.shadow.game import ScaleWarning


@pytest.fixture(scope="module")
def table():
    df = load_adult().iloc[:400]
    return pd.concat([df, pd.DataFrame([df.iloc[5]] * 2)], ignore_index=True)  # rows 5, 400 and 401: three copies


def _holding(pool, record):
    return {s.index for s in pool.specs if (pool.group[s.rows] == pool.group[record]).any()}


@pytest.mark.parametrize("plan", [plan_population, plan_release])
def test_a_capped_record_gets_max_in_of_its_datasets_and_as_many_without_any_copy(table, plan):
    pm = PoolModel(table, Schema.from_dataframe(table), "independent", dataset_size=40)
    full = plan(pm, n_in=20, rng=0)
    cap = dataclasses.replace(full, max_in=20)
    held = _holding(full, 5)
    assert len(held) > 20  # the copied record is in more datasets than n_in: the case the cap is for
    for rec, seed in ((5, 11), (401, 12)):
        i, o = cap.record_datasets(rec, seed)
        assert len(i) == len(o) == 20 and len(np.unique(i)) == 20 and len(np.unique(o)) == 20
        assert set(i.tolist()) <= held and not set(o.tolist()) & held  # IN: hold a copy; OUT: hold none
        assert list(i) == sorted(i) and list(o) == sorted(o)
    assert not np.array_equal(cap.record_datasets(5, 1)[0], cap.record_datasets(5, 2)[0])  # drawn with the record's seed
    np.testing.assert_array_equal(cap.record_sizes([5, 400, 0]), [20, 20, min(20, full.record_sizes([0])[0])])
    for rec in range(0, 400, 37):  # records the cap does not reach: exactly the uncapped datasets
        if rec == 5: continue
        a, b = full.record_datasets(rec, rec), cap.record_datasets(rec, rec)
        if len(a[0]) <= 20:
            np.testing.assert_array_equal(a[0], b[0]); np.testing.assert_array_equal(a[1], b[1])


def _audit(df, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)
        return audit(df, "independent", **dict(dict(records="all", design="population", n_in=10, dataset_size=40, order=1, selectors=(),
                                                     rng=3, verbose=False), **kw))


def test_the_audit_caps_only_what_it_is_told_to(table):
    plain, capped = _audit(table), _audit(table, max_in=10)
    copied = plain["record"].isin([5, 400, 401])
    assert (plain.loc[copied, "n_in"] > 10).all() and (capped.loc[copied, "n_in"] == 10).all() and (capped["n_in"] == capped["n_out"]).all()
    assert capped["n_in"].max() == 10 and (plain["n_in"] >= 10).all()
    lone = ~copied & (plain["n_in"] == 10).to_numpy()
    cols = ["record", "auc", "auc_ci_low", "auc_ci_high", "n_in", "n_out", "auc_query", "auc_distance"]
    np.testing.assert_array_equal(plain.loc[lone, cols].to_numpy(), capped.loc[lone, cols].to_numpy())  # untouched records: the same rows
    assert plain.attrs["run_id"] != capped.attrs["run_id"]  # a capped run is another run (a store never mixes them)
    assert _audit(table, max_in=None).attrs["run_id"] == plain.attrs["run_id"]  # no cap: the run id of before the option
    assert "max_in" not in plain.attrs["config"] and capped.attrs["config"]["max_in"] == 10


def test_bad_caps_are_refused_before_any_work(table):
    with pytest.raises(ValueError, match="max_in"): _audit(table, max_in=9)  # below n_in
    with pytest.raises(ValueError, match="max_in=20 caps the datasets per record of the population and release designs"):
        _audit(table, design="bernoulli", records=10, n_datasets=40, n_in=1000, max_in=20)


def test_a_cap_leaves_out_datasets_enough_where_all_of_them_would_not(table):
    pm = PoolModel(table, Schema.from_dataframe(table), "independent", dataset_size=100)
    full = plan_population(pm, n_in=20, rng=0)
    held = _holding(full, 5)
    assert len(held) > full.n_datasets / 2  # more than half the datasets hold a copy: too few OUT to match them all
    left = full.n_datasets - len(held)
    i, o = full.record_datasets(5, 0)  # uncapped: as many IN as there are OUT, every OUT one used
    assert len(i) == len(o) == left == full.record_sizes([5])[0] and set(i.tolist()) <= held and set(o.tolist()) == set(range(full.n_datasets)) - held
    i, o = dataclasses.replace(full, max_in=20).record_datasets(5, 0)
    assert len(i) == len(o) == 20 and set(i.tolist()) <= held and not set(o.tolist()) & held


def test_the_command_line_passes_the_cap(table, tmp_path, capsys):
    from achilles import cli
    data, out = tmp_path / "data.csv", tmp_path / "a.csv"
    table.to_csv(data, index=False)
    argv = ["audit", "--csv", str(data), "--generator", "independent", "--design", "population", "--n-in", "10", "--max-in", "10",
            "--dataset-size", "40", "--order", "1", "--records", "5,400,0", "--cache-dir", "", "--results", "", "--out", str(out), "--quiet"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(argv) == 0
    rows = pd.read_csv(out)
    assert sorted(rows["record"]) == [0, 5, 400] and (rows["n_in"] == 10).all() and (rows["n_out"] == 10).all()
    capsys.readouterr()
    bad = [str(tmp_path / "b.csv") if a == str(out) else ("9" if i and argv[i - 1] == "--max-in" else a) for i, a in enumerate(argv)]
    assert cli.main(bad) == 2 and not (tmp_path / "b.csv").exists()
    assert "max_in=9" in capsys.readouterr().err


def test_a_cap_of_exactly_the_out_datasets_there_are_is_enough(table):
    pm = PoolModel(table, Schema.from_dataframe(table), "independent", dataset_size=100)
    full = plan_population(pm, n_in=20, rng=0)
    held = _holding(full, 5)
    left = full.n_datasets - len(held)  # datasets holding no copy: every one of them is needed
    i, o = dataclasses.replace(full, max_in=left).record_datasets(5, 0)
    assert len(i) == len(o) == left and set(o.tolist()) == set(range(full.n_datasets)) - held
    i2, o2 = dataclasses.replace(full, max_in=left + 1).record_datasets(5, 0)  # a cap above the OUT datasets there are: all of them
    assert len(i2) == len(o2) == left and set(o2.tolist()) == set(o.tolist())
    i1, o1 = dataclasses.replace(full, max_in=1).record_datasets(5, 0)  # one of each is a record's smallest audit
    assert len(i1) == len(o1) == 1 and set(i1.tolist()) <= held and not set(o1.tolist()) & held
    with pytest.raises(ValueError, match="it needs OUT datasets too"): dataclasses.replace(full, max_in=0).record_datasets(5, 0)
