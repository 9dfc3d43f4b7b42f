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


@pytest.mark.parametrize("classifier, stack, n0", [("lda", True, 120), ("lda", False, 120), ("logistic", True, 120), ("rf", True, 120),
                                                   ("lda", True, 80), ("lda", False, 80)])
def test_an_extra_row_equal_to_a_held_out_dataset_gets_its_score(classifier, stack, n0):
    """The certificate's fit scores an extra row exactly as it scores a held-out dataset with the same features: standardised
    with the training folds' statistics, through every family's model and the stack (untrained scores included)."""
    from achilles.shadow.pool_attack import COPY, DCR, QUERY, crossfit_record
    g = np.random.default_rng(5)
    n, p = 120, 12  # n IN and n0 OUT datasets: unequal counts give the models a non-zero intercept, which the extra rows must share
    y = np.r_[np.ones(n, np.int64), np.zeros(n0, np.int64)]
    X = g.normal(size=(n + n0, p)); X[:n, :3] += 0.7; X[:n, 8] += 0.4
    u = g.normal(size=n + n0) + 0.5 * y
    fam = {QUERY: np.arange(6), COPY: np.arange(6, p)}
    res = crossfit_record(X, y, fam, rng=3, certify=True, classifier=classifier, stack=stack, untrained={DCR: u})
    cert = res["certificate"]
    pick = cert["index"][[0, 7, -1]]  # held-out datasets of the certificate, IN and OUT
    again = crossfit_record(X, y, fam, rng=3, certify=True, classifier=classifier, stack=stack, untrained={DCR: u},
                            extra=X[pick], extra_untrained={DCR: u[pick]})
    np.testing.assert_array_equal(again["certificate"]["scores"], cert["scores"])  # the extra rows change nothing else
    np.testing.assert_allclose(again["certificate"]["extra"], cert["scores"][[0, 7, -1]], rtol=1e-5, atol=1e-6)
    for k in res["scores"]: np.testing.assert_array_equal(again["scores"][k], res["scores"][k])


@pytest.mark.parametrize("stack", [True, False])
def test_an_extra_row_gets_the_prior_odds_when_nothing_varies(stack):
    "Constant features: every model falls back on the prior log-odds, for the held-out datasets and the extra row alike."
    from achilles.shadow.pool_attack import QUERY, crossfit_record
    y = np.r_[np.ones(40, np.int64), np.zeros(25, np.int64)]
    X = np.ones((65, 5))
    res = crossfit_record(X, y, {QUERY: np.arange(5)}, rng=0, certify=True, stack=stack, extra=X[:1])
    cert = res["certificate"]
    held = y[cert["index"]]
    np.testing.assert_allclose(cert["extra"], cert["scores"][:1])
    assert np.isfinite(cert["extra"]).all() and abs(cert["extra"][0]) < np.log(65)  # a log-odds, not a product of counts
    if not stack: assert (res["weights"].to_numpy().sum(1) == 1.0).all()  # the headline alone, weight 1
    assert (np.abs(res["scores"][QUERY]) < np.log(65)).all()  # the family's own scores: the prior log-odds too


@pytest.mark.parametrize("stack", [True, False])
def test_a_constant_family_does_not_stop_the_next_one(stack):
    "A family with nothing varying falls back on the prior; the family after it is still fitted, and the extra row scored by it."
    from achilles.shadow.pool_attack import COPY, QUERY, auc_score, crossfit_record
    g = np.random.default_rng(2)
    y = np.r_[np.ones(60, np.int64), np.zeros(60, np.int64)]
    X = np.c_[np.ones((120, 3)), g.normal(size=(120, 4))]; X[:60, 3:] += 1.0
    far_in = np.array([[1, 1, 1, 2.5, 2.5, 2.5, 2.5]])  # beyond the IN datasets' mean on every informative feature
    res = crossfit_record(X, y, {QUERY: np.arange(3), COPY: np.arange(3, 7)}, rng=0, certify=True, stack=stack, extra=far_in)
    assert auc_score(y, res["scores"][COPY]) > 0.8 and auc_score(y, res["scores"]["combined"]) > 0.8
    assert res["certificate"]["extra"][0] > np.max(res["certificate"]["scores"][y[res["certificate"]["index"]] == 0])  # above every OUT


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


def test_release_row_counts_exactly():
    "The conformal p-value, percentile, tail likelihood ratio and floor on hand-made scores; ties count against the release."
    from achilles.shadow.pool_attack import COMBINED, COPY, DCR, release_row
    c = dict(index=np.arange(6), scores=np.array([0., 1, 2, 3, 4, 5]), extra=np.array([3.0]))
    assert release_row(c, np.array([0, 0, 0, 1, 1, 1])) == dict(
        release_score=3.0, release_percentile=100.0, release_p=0.25, release_signal=COMBINED, release_lr=4.0, release_p_floor=0.25,
        release_n_out=3)
    assert release_row(dict(c, extra=np.array([1.0])), np.array([0, 0, 0, 1, 1, 1]))["release_p"] == 0.75  # OUT 1, 2 at or above 1
    y = np.array([1, 1, 1, 0, 0, 0])
    r = release_row(dict(c, extra=np.array([1.0])), y, {DCR: (np.array([9., 9, 9, 0, 0, 0]), 1.0)})
    assert r == dict(release_score=1.0, release_percentile=0.0, release_p=0.5, release_signal=DCR, release_lr=0.75, release_p_floor=0.5,
                     release_n_out=3)
    # a fixed signal over more OUT datasets than the certificate holds: the floor is set by them; a tie of the signal counts against it
    cert = dict(index=np.array([0, 1, 4, 5]), scores=np.array([5., 6, 1, 2]), extra=np.array([2.5]))
    y8 = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    r = release_row(cert, y8, {COPY: (np.array([3., 3, 3, 3, 0, 0, 0, 1]), 1.0)})
    assert r["release_n_out"] == 2 and r["release_p_floor"] == 2 / 5
    assert r["release_signal"] == COMBINED and r["release_p"] == 2 * (1 + 0) / 3  # the attack: no OUT at or above 2.5 of 2; copy: 2/5
    assert r["release_percentile"] == 100.0 and r["release_lr"] == ((2 + 1) / 3) / (1 / 3)
    # unequal IN and OUT counts: the floor counts the OUT datasets; without a fixed signal it is the certificate's own
    y9 = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0])
    assert release_row(cert, y9, {COPY: (np.zeros(9), 1.0)})["release_p_floor"] == 2 / 6
    assert release_row(cert, y8)["release_p_floor"] == 1 / 3
    # ties: the percentile counts OUT strictly below, the likelihood ratio counts IN at or above
    t = release_row(dict(index=np.arange(6), scores=np.array([0., 1, 2, 1, 4, 5]), extra=np.array([1.0])), np.array([0, 0, 0, 1, 1, 1]))
    assert t["release_percentile"] == pytest.approx(100 / 3) and t["release_p"] == 3 / 4 and t["release_lr"] == ((3 + 1) / 4) / ((2 + 1) / 4)
    # a p-value never exceeds 1 after Bonferroni, nor the floor with few OUT datasets and several signals
    hi = release_row(dict(index=np.array([0, 1]), scores=np.array([1., 0]), extra=np.array([-1.0])), np.array([1, 0]),
                     {DCR: (np.array([1., 5]), 0.0), COPY: (np.array([1., 5]), 0.0)})
    assert hi["release_p"] == 1.0 and hi["release_p_floor"] == 1.0 and hi["release_n_out"] == 1
    one_in = release_row(dict(index=np.array([0, 1, 2]), scores=np.array([3., 1, 2]), extra=np.array([2.5])), np.array([1, 0, 0]))
    assert one_in["release_p"] == 1 / 3 and one_in["release_lr"] == (2 / 2) / (1 / 3)  # one IN, two OUT: valid, no error
    with pytest.raises(ValueError, match=r"fixed\['copy'\] has \(3,\) values for 8 datasets"):
        release_row(cert, y8, {COPY: (np.zeros(3), 1.0)})
    with pytest.raises(ValueError, match="needs both"):
        release_row(dict(cert, index=np.array([0, 1]), scores=np.array([5., 6])), y8)  # two IN, no OUT
    with pytest.raises(ValueError, match="no release score"):
        release_row(dict(cert, extra=np.array([1.0, 2.0])), y8)


def test_release_p_is_valid_under_the_null():
    "A release drawn like an OUT dataset: P(p <= a) within the binomial's 99.9 % range of a (too small or always 1 both fail)."
    from scipy.stats import binom
    from achilles.shadow.pool_attack import DCR, QUERY, crossfit_record, release_row
    ps = []
    for seed in range(150):
        g = np.random.default_rng(seed)
        y = np.r_[np.ones(100, np.int64), np.zeros(100, np.int64)]
        X = g.normal(size=(200, 8)); X[:100, :3] += 0.5
        u = g.normal(size=200) + 0.3 * y
        res = crossfit_record(X, y, {QUERY: np.arange(8)}, rng=seed, certify=True, extra=g.normal(size=(1, 8)),
                              untrained={DCR: u}, extra_untrained={DCR: [g.normal()]})
        ps.append(release_row(res["certificate"], y, {DCR: (u, float(g.normal()))})["release_p"])
    ps = np.array(ps)
    for a in (0.1, 0.3, 0.5):
        assert np.mean(ps <= a) <= binom.ppf(0.9995, len(ps), a) / len(ps), (a, np.mean(ps <= a))
    assert np.mean(ps <= 0.5) >= binom.ppf(0.0005, len(ps), 0.25) / len(ps)  # not stuck at 1 (Bonferroni halves at most)


def test_release_flags_and_summary_at_their_boundaries():
    "A q-value equal to the FDR is flagged; the fewest flaggable records is ceil(floor x m / fdr), at least 1, and can equal m."
    from achilles.shadow.audit import _release_flags, release_summary
    one = _release_flags(pd.DataFrame({"release_p": [0.05]}), 0.05)
    assert one["release_q"].tolist() == [0.05] and one["release_flag"].tolist() == [True]
    rows = lambda floor, m: pd.DataFrame({"release_p_floor": [floor] * m, "release_flag": [False] * m, "release_percentile": [50.0] * m})
    s = release_summary(rows(0.25, 4), fdr=0.5)  # 0.25 x 4 / 0.5 = 2 exactly
    assert (s["fewest_flaggable"], s["can_flag"], s["records"], s["flagged"]) == (2, True, 4, 0)
    assert release_summary(rows(0.001, 10), fdr=0.05)["fewest_flaggable"] == 1  # 0.2 rounds up to 1
    s = release_summary(rows(0.5, 4), fdr=0.5)  # exactly every record
    assert (s["fewest_flaggable"], s["can_flag"]) == (4, True)
    s = release_summary(rows(0.5, 4), fdr=0.4)
    assert (s["fewest_flaggable"], s["can_flag"]) == (5, False)


def test_a_two_row_release_is_scored_and_the_run_names_it(setting):
    df, indep, *_ = setting
    r = _audit(df, indep.iloc[:2], [0, 1])
    assert len(r) == 2 and r.attrs["config"]["release_size"] == 2
    assert len(r.attrs["config"]["release"]) == 16 and int(r.attrs["config"]["release"], 16) >= 0  # 16 hex digits, as the other fingerprints


def test_the_copy_signal_reads_the_exact_copies(setting):
    "Without DCR the exact-copy count alone finds the copies the pool never showed (copies_0, not the columns after it)."
    df, _, leaky, copied, others = setting
    r = _audit(df, leaky, np.r_[copied, others], attacks=("query", "copy", "distance"))
    assert set(r.loc[r["release_flag"], "record"]) == set(copied.tolist())
    assert (r.set_index("record").loc[copied, "release_signal"] == "copy").all()


def test_score_record_reads_the_rarest_column_it_is_given_and_only_when_asked():
    "The untrained `rarest` score is column `rarest` of the raw features (column 0 included), present only when asked and given."
    from achilles.shadow.audit import audit_plan, score_record
    from achilles.shadow.pool_attack import auc_score
    df = load_adult().iloc[:50]
    schema = Schema.from_dataframe(df)
    plan = audit_plan(schema, ("query", "distance", "rarest"), order=1)
    g = np.random.default_rng(0)
    y = np.r_[np.ones(60, np.int64), np.zeros(60, np.int64)]
    X = np.abs(g.normal(size=(120, plan.n_features))).astype(np.float32); X[:60, 0] += 0.8  # column 0: a count, higher IN
    got = score_record(X, y, plan, ("query", "distance", "rarest"), rng=0, rarest=0)
    assert got["auc_rarest"] == pytest.approx(auc_score(y, X[:, 0].astype(np.float64)))
    assert "auc_rarest" not in score_record(X, y, plan, ("query", "distance", "rarest"), rng=0, rarest=-1)
    assert "auc_rarest" not in score_record(X, y, plan, ("query", "distance"), rng=0, rarest=0)
