"""Issue 38 item 4: the custodian's own release scored by the audit. Copies of training records rank first and are flagged; the
flags are Benjamini-Hochberg's at the FDR; a release independent of the records flags nothing; the release changes nothing of
the pool's figures; clear errors before any work; the CLI prints the verdict and writes the columns."""
import warnings

import numpy as np
import pandas as pd
import pytest

from achilles import cli
from achilles.core.data import Schema, load_adult
from achilles.core.results import ResultsStore, bh_q_values
from achilles.generators import make_generator
from achilles.shadow.audit import audit
from achilles.shadow.game import ScaleWarning

N, COPIED = 160, 10
KW = dict(design="release", n_in=150, order=1, selectors=(), rng=0, verbose=False)


@pytest.fixture(scope="module")
def setting():
    df = load_adult().iloc[:N].reset_index(drop=True)
    schema = Schema.from_dataframe(df)
    half = np.sort(np.random.default_rng(0).choice(N, N // 2, replace=False))
    indep = make_generator("independent", schema).fit(df.iloc[half], rng=1).sample(N, rng=2)  # holds none of the other half
    out_half = np.setdiff1d(np.arange(N), half)
    copied = np.sort(np.random.default_rng(3).choice(out_half, COPIED, replace=False))
    leaky = indep.copy(); leaky.iloc[:COPIED] = df.iloc[copied].to_numpy()
    others = np.setdiff1d(out_half, copied)[:10]
    return df, indep, leaky, copied, others


def _audit(df, release, records, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)  # a small pool on purpose
        return audit(df, "independent", release=release, records=records, **dict(KW, **kw))


def test_copies_rank_first_and_are_the_flags(setting):
    df, _, leaky, copied, others = setting
    r = _audit(df, leaky, np.r_[copied, others])
    r = r.sort_values(["release_p", "release_score"], ascending=[True, False])
    assert set(r["record"].head(COPIED)) == set(copied.tolist())
    assert r["release_p"].head(COPIED).max() < r["release_p"].iloc[COPIED:].min()
    assert set(r.loc[r["release_flag"], "record"]) == set(copied.tolist())
    np.testing.assert_array_equal(r["release_q"].to_numpy(), bh_q_values(r["release_p"].to_numpy()))
    assert (r["release_flag"] == (r["release_q"] <= 0.05)).all()
    s = r.attrs["release"]
    assert (s["flagged"], s["records"], s["fdr"]) == (COPIED, 2 * COPIED, 0.05)
    assert s["fewest_flaggable"] == int(np.ceil(r["release_p_floor"].min() * 2 * COPIED / 0.05 - 1e-12)) and s["can_flag"]
    assert r.attrs["config"]["release_size"] == N  # the pool's datasets are the release's size


def test_fdr_sets_the_flags(setting):
    "A stricter FDR flags a subset (here none: the copies' q-values sit above 0.001), from the same p-values."
    df, _, leaky, copied, others = setting
    r = _audit(df, leaky, np.r_[copied, others], fdr=0.001)
    assert r["release_flag"].sum() == int((bh_q_values(r["release_p"].to_numpy()) <= 0.001).sum())
    assert r.attrs["release"]["fdr"] == 0.001


def test_an_independent_release_flags_none_and_leaves_the_pool_figures_alone(setting):
    df, indep, leaky, copied, others = setting
    recs = np.r_[copied, others]
    r = _audit(df, indep, recs)
    assert r["release_flag"].sum() == 0 and r["release_p"].median() > 0.2
    plain = _audit(df, None, recs, release_size=N)
    fig = [c for c in plain.columns if c.startswith(("auc", "tpr", "eps", "q_value"))]
    pd.testing.assert_frame_equal(r[fig], plain[fig])
    assert "release_p" not in plain and "release" not in plain.attrs


def test_release_rows_are_stored_and_another_release_is_another_run(setting, tmp_path):
    df, indep, leaky, copied, others = setting
    store = ResultsStore(tmp_path / "r.sqlite")
    a = _audit(df, leaky, copied[:4], store=store)
    b = _audit(df, leaky, copied[:4], store=store)  # read back: the same rows, flags recomputed over them
    pd.testing.assert_frame_equal(a.drop(columns=["release_flag"]), b.drop(columns=["release_flag"]), check_dtype=False)
    assert (a["release_flag"].to_numpy() == b["release_flag"].to_numpy()).all()
    c = _audit(df, indep, copied[:4], store=store)
    assert c.attrs["run_id"] != a.attrs["run_id"] and (c["release_p"] > a["release_p"]).all()


@pytest.mark.parametrize("kw, msg", [
    (dict(design="population"), "needs design='release'"),
    (dict(release_size=50), "release_size=50, but the release has 160 rows"),
    (dict(interval="calibrated"), "pass interval='certificate'"),
    (dict(fdr=0.0), "fdr=0.0 is out of range"),
    (dict(fdr=1.5), "fdr=1.5 is out of range"),
])
def test_bad_release_arguments_fail_before_any_work(setting, kw, msg):
    df, indep, *_ = setting
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        _audit(df, indep, [0, 1], **kw)


def test_a_release_that_does_not_fit_the_data_is_refused(setting, tmp_path):
    df, indep, *_ = setting
    with pytest.raises(ValueError, match=r"lacks the data's column\(s\) \['age'\]"):
        _audit(df, indep.drop(columns="age"), [0])
    bad = indep.copy(); bad["sex"] = bad["sex"].astype(str); bad.loc[0, "sex"] = "Martian"
    with pytest.raises(ValueError, match="'Martian' is not in the schema's domain.*is the release made from this table"):
        _audit(df, bad, [0])
    with pytest.raises(ValueError, match="at least 2"):
        _audit(df, indep.iloc[:1], [0])
    with pytest.raises(TypeError, match="DataFrame or the path"):
        _audit(df, 42, [0])
    p = tmp_path / "rel.csv"; indep.to_csv(p, index=False)  # a path is read with the data's column kinds
    r = _audit(df, str(p), [0, 1])
    assert len(r) == 2 and r["release_p"].notna().all()


def test_cli_prints_the_verdict_and_writes_the_release_columns(setting, tmp_path, capsys):
    df, _, leaky, copied, others = setting
    data, rel, out = tmp_path / "data.csv", tmp_path / "rel.csv", tmp_path / "audit.csv"
    df.to_csv(data, index=False); leaky.to_csv(rel, index=False)
    ids = ",".join(map(str, np.r_[copied, others]))
    argv = ["audit", "--csv", str(data), "--generator", "independent", "--release", str(rel), "--n-in", "150", "--order", "1",
            "--records", ids, "--cache-dir", "", "--out", str(out), "--quiet",
            "--types", "education-num:continuous"]  # as the fixture's schema has it (a CSV alone reads its 16 codes as categories)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert f"{COPIED} of {2 * COPIED} records exposed in this release at a false discovery rate of 5%" in printed
    table = pd.read_csv(out)
    assert set(table.loc[table["release_flag"], "record"]) == set(copied.tolist())
    bad = [str(tmp_path / "none.csv") if a == str(rel) else str(tmp_path / "b.csv") if a == str(out) else a for a in argv]
    assert cli.main(bad) == 2
    assert "--release=" in capsys.readouterr().err


@pytest.mark.parametrize("classifier, stack", [("lda", True), ("lda", False), ("logistic", True), ("rf", True)])
def test_an_extra_row_equal_to_a_held_out_dataset_gets_its_score(classifier, stack):
    """The certificate's fit scores an extra row exactly as it scores a held-out dataset with the same features: standardised
    with the training folds' statistics, through every family's model and the stack (untrained scores included)."""
    from achilles.shadow.pool_attack import COPY, DCR, QUERY, crossfit_record
    g = np.random.default_rng(5)
    n, p = 120, 12
    y = np.r_[np.ones(n, np.int64), np.zeros(n, np.int64)]
    X = g.normal(size=(2 * n, p)); X[:n, :3] += 0.7; X[:n, 8] += 0.4
    u = g.normal(size=2 * n) + 0.5 * y
    fam = {QUERY: np.arange(6), COPY: np.arange(6, p)}
    res = crossfit_record(X, y, fam, rng=3, certify=True, classifier=classifier, stack=stack, untrained={DCR: u})
    cert = res["certificate"]
    pick = cert["index"][[0, 7, -1]]  # held-out datasets of the certificate, IN and OUT
    again = crossfit_record(X, y, fam, rng=3, certify=True, classifier=classifier, stack=stack, untrained={DCR: u},
                            extra=X[pick], extra_untrained={DCR: u[pick]})
    np.testing.assert_array_equal(again["certificate"]["scores"], cert["scores"])  # the extra rows change nothing else
    np.testing.assert_allclose(again["certificate"]["extra"], cert["scores"][[0, 7, -1]], rtol=1e-5, atol=1e-6)
    for k in res["scores"]: np.testing.assert_array_equal(again["scores"][k], res["scores"][k])


def test_extra_rows_are_checked():
    from achilles.shadow.pool_attack import DCR, QUERY, crossfit_record
    g = np.random.default_rng(0)
    y = np.r_[np.ones(30, np.int64), np.zeros(30, np.int64)]
    X = g.normal(size=(60, 4))
    with pytest.raises(ValueError, match="certify=True"): crossfit_record(X, y, {QUERY: np.arange(4)}, extra=X[:1])
    with pytest.raises(ValueError, match="extra has 3 features per row; X has 4"):
        crossfit_record(X, y, {QUERY: np.arange(4)}, certify=True, extra=X[:1, :3])
    with pytest.raises(ValueError, match="extra_untrained must hold one score per extra row"):
        crossfit_record(X, y, {QUERY: np.arange(4)}, certify=True, extra=X[:2], untrained={DCR: X[:, 0]}, extra_untrained={DCR: [0.0]})
