"""Exact copies play one membership game (`audit(copies="share")`, the default). Records with identical values have the same features
on every synthetic dataset and the same IN datasets in every design (a dataset holding a copy holds the record), so scoring each copy
on its own draws costs c games for one. On the census stand-in, a record has 14 copies on average (weighted by record), which made the
full audit 14 times the cost of its distinct records. These tests fail if a copy is scored again, if a copy's row differs from its
representative's, if a record without copies changes, if a resumed run gives a copy another row, or if the option is ignored."""
import warnings

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import load_adult
from achilles.core.results import ResultsStore
from achilles.shadow import audit as A
from achilles.shadow.game import ScaleWarning

COPY = [5, 400, 401]  # three records with the same values
FIGS = ["auc", "auc_ci_low", "auc_ci_high", "auc_p", "n_in", "n_out", "auc_query", "auc_distance"]
KW = {"population": dict(n_in=10, dataset_size=40), "release": dict(n_in=10), "bernoulli": dict(n_datasets=20, dataset_size=200)}


@pytest.fixture(scope="module")
def table():
    df = load_adult().iloc[:400]
    return pd.concat([df, pd.DataFrame([df.iloc[5]] * 2)], ignore_index=True)


def _audit(df, design="population", **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)
        return A.audit(df, "independent", **dict(dict(records="all", design=design, order=1, selectors=(), rng=3, verbose=False),
                                                 **KW[design], **kw))


@pytest.fixture(scope="module")
def runs(table):
    return {d: (_audit(table, d), _audit(table, d, copies="each")) for d in ("population", "release")}


@pytest.mark.parametrize("design", ["population", "release"])
def test_copies_take_their_representatives_row_and_name_it(runs, design):
    share, each = runs[design]
    s = share.set_index("record")
    assert len(share) == len(each) == 402 and share["record"].tolist() == list(range(402))
    for r in COPY[1:]:
        pd.testing.assert_series_equal(s.loc[r, FIGS], s.loc[5, FIGS], check_names=False)
    assert s.loc[COPY, "scored_as"].tolist() == [5, 5, 5]
    others = ~share["record"].isin(COPY[1:])
    assert (share.loc[others, "scored_as"] == share.loc[others, "record"]).all()


@pytest.mark.parametrize("design", ["population", "release"])
def test_records_that_score_themselves_keep_the_rows_of_each(runs, design):
    share, each = runs[design]
    keep = ~share["record"].isin(COPY[1:])  # record 5 is its group's representative: its own draws, as under "each"
    pd.testing.assert_frame_equal(share.loc[keep, ["record"] + FIGS].reset_index(drop=True),
                                  each.loc[keep, ["record"] + FIGS].reset_index(drop=True))
    e = each.set_index("record")
    assert e.loc[400, "auc"] != e.loc[5, "auc"] or e.loc[401, "auc"] != e.loc[5, "auc"]  # "each": the copies' own draws
    assert "scored_as" not in each and share.attrs["run_id"] != each.attrs["run_id"]
    assert share.attrs["config"]["copies"] == "share" and "copies" not in each.attrs["config"]


def test_a_table_without_copies_is_audited_as_before(table):
    plain = table.iloc[:400]
    a, b = _audit(plain), _audit(plain, copies="each")
    assert a.attrs["run_id"] == b.attrs["run_id"] and "scored_as" not in a and "copies" not in a.attrs["config"]
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.parametrize("copies,fits", [("share", 400), ("each", 402)])
def test_a_copy_group_is_scored_once(table, monkeypatch, copies, fits):
    calls = []
    real = A.score_record
    monkeypatch.setattr(A, "score_record", lambda X, *a, **k: calls.append(len(X)) or real(X, *a, **k))
    _audit(table, copies=copies, n_jobs=1)
    assert len(calls) == fits


def test_threads_and_tasks_give_the_copies_the_same_rows(runs, table):
    tasks = _audit(table, scoring="tasks", n_jobs=1)
    pd.testing.assert_frame_equal(tasks[["record", "scored_as"] + FIGS], runs["population"][0][["record", "scored_as"] + FIGS])


def test_the_bernoulli_design_shares_too(table):
    recs = list(range(0, 60, 3)) + [400, 401]  # record 5's copies are in the pool's population; 20 more records, 3 of them copies
    recs = sorted(set(recs) | {5})
    share, each = _audit(table, "bernoulli", records=recs), _audit(table, "bernoulli", records=recs, copies="each")
    s = share.set_index("record")
    for r in COPY[1:]:
        pd.testing.assert_series_equal(s.loc[r, FIGS], s.loc[5, FIGS], check_names=False)
    keep = ~share["record"].isin(COPY[1:])
    pd.testing.assert_frame_equal(share.loc[keep, ["record"] + FIGS].reset_index(drop=True),
                                  each.loc[keep, ["record"] + FIGS].reset_index(drop=True))


class _Killed(Exception):
    pass


def test_a_run_killed_between_a_representative_and_its_copies_resumes_to_the_same_rows(runs, table, tmp_path, monkeypatch):
    path = tmp_path / "store.sqlite"
    real = ResultsStore.append
    def dies_at_400(self, kind, run, item, row):
        if int(item) == 400: raise _Killed("killed after record 5's row, before its copies'")
        return real(self, kind, run, item, row)
    monkeypatch.setattr(ResultsStore, "append", dies_at_400)
    with pytest.raises(_Killed):
        _audit(table, store=str(path))
    monkeypatch.setattr(ResultsStore, "append", real)
    done = ResultsStore(str(path)).read("audit")
    assert 5 in done["record"].astype(int).tolist() and 400 not in done["record"].astype(int).tolist()
    resumed = _audit(table, store=str(path))
    full = runs["population"][0]
    pd.testing.assert_frame_equal(resumed[["record", "scored_as"] + FIGS].reset_index(drop=True),
                                  full[["record", "scored_as"] + FIGS].reset_index(drop=True), check_dtype=False)


def test_a_sample_with_copies_shares_only_among_the_audited(table):
    rows = _audit(table, records=[5, 7, 401])
    assert rows.set_index("record").loc[[5, 7, 401], "scored_as"].tolist() == [5, 7, 5]
    rows = _audit(table, records=[7, 401])  # 401's representative is itself when record 5 is not audited
    assert "scored_as" not in rows and rows["record"].tolist() == [7, 401]


def test_copies_is_checked_before_any_work(table, monkeypatch):
    monkeypatch.setattr(A, "population_stack", lambda *a, **k: pytest.fail("work began before the check"))
    with pytest.raises(ValueError, match="copies"):
        _audit(table, copies="once")


def test_the_command_line_passes_copies(table, tmp_path, capsys):
    from achilles import cli
    data = tmp_path / "data.csv"
    table.to_csv(data, index=False)
    argv = ["audit", "--csv", str(data), "--generator", "independent", "--design", "population", "--n-in", "10", "--dataset-size", "40",
            "--order", "1", "--records", "5,400,0", "--cache-dir", "", "--results", "", "--quiet"]
    got = {}
    for flag in ([], ["--copies", "each"]):
        out = tmp_path / f"a{len(flag)}.csv"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert cli.main(argv + flag + ["--out", str(out)]) == 0
        got[len(flag)] = pd.read_csv(out).set_index("record")
    assert got[0].loc[[0, 5, 400], "scored_as"].tolist() == [0, 5, 5] and got[0].loc[400, "auc"] == got[0].loc[5, "auc"]
    assert "scored_as" not in got[2] and got[2].loc[5, "auc"] == got[0].loc[5, "auc"]
    capsys.readouterr()
    assert cli.main(argv + ["--copies", "once", "--out", str(tmp_path / "b.csv")]) == 2  # argparse's refusal, as the command's exit status
    assert "--copies" in capsys.readouterr().err and not (tmp_path / "b.csv").exists()


@pytest.mark.parametrize("design,scoring", [("population", "threads"), ("population", "tasks"), ("bernoulli", "threads")])
def test_the_progress_bar_counts_every_row_once(table, monkeypatch, design, scoring):
    bars = []
    class Bar:
        def __init__(self, total=None, desc=None): self.total, self.desc, self.n = total, desc, 0; bars.append(self)
        def update(self, k=1): self.n += k
        def close(self): pass
    monkeypatch.setattr(A, "progress", lambda iterable=None, total=None, desc=None, **kw: Bar(total, desc))
    recs = [0, 5, 7, 400, 401]
    rows = _audit(table, design, records=recs, scoring=scoring)
    assert len(rows) == 5 and rows["scored_as"].tolist() == [0, 5, 7, 5, 5]
    assert [(b.total, b.n) for b in bars if b.desc == "records"] == [(5, 5)]  # the records' bar (the pool's generation has its own)


def test_records_skipped_for_their_copies_leave_the_others_their_representatives(table):
    """A group whose copies fill most training sets is skipped before anything is generated; the representatives of the records
    left must be theirs (the skipped records are taken out of both lists together)."""
    big = pd.concat([table.iloc[:340], pd.DataFrame([table.iloc[300]] * 60), table.iloc[[5, 5]]], ignore_index=True)  # 301 copies of 300
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = A.audit(big, "independent", records="all", design="population", n_in=5, dataset_size=40, order=1, selectors=(), rng=1,
                       verbose=False)
    assert 300 in rows.attrs["skipped"] and len(rows.attrs["skipped"]) == 61
    s = rows.set_index("record")
    assert len(rows) == 402 - 61 and s.loc[[5, 400, 401], "scored_as"].tolist() == [5, 5, 5]
    alone = s.index.difference([400, 401])
    assert (s.loc[alone, "scored_as"] == alone).all()
    plain = big.iloc[:300]  # no skipped group, no copy: nothing to share
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r2 = A.audit(pd.concat([plain, pd.DataFrame([plain.iloc[3]] * 200)], ignore_index=True), "independent", records=list(range(300)),
                     design="population", n_in=5, dataset_size=40, order=1, selectors=(), rng=1, verbose=False)
    assert 3 in r2.attrs["skipped"] and "scored_as" not in r2 and len(r2) == 299


@pytest.mark.parametrize("design", ["population", "release"])
def test_the_copy_groups_are_computed_once_an_audit(table, monkeypatch, design):
    # `_copies` (the skip rule), `_copy_reps` and the design's plan all read Ω's copy groups; one sort of its rows serves them all
    real, calls = A._value_groups, []
    monkeypatch.setattr(A, "_value_groups", lambda t: calls.append(t.n) or real(t))
    out = _audit(table, design)
    assert calls == [len(table)] and len(out) == 402
    pm = A.PoolModel(table, A.Schema.from_dataframe(table), "independent")
    with pytest.raises(ValueError):
        pm.value_groups[0] = 7  # shared by the plans: read-only
