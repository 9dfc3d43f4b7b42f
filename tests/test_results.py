"""The intervals and summaries every result carries (achilles.core.results), against independent formulas and simulation, on
the unbalanced and edge cases the notebook's examples do not reach (an audit's IN and OUT pools are unbalanced)."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from achilles.core.results import (RiskResult, _fmt, _z, auc_interval, bootstrap_interval, check_labels, tpr_at_fpr,
                                   wilson_interval)


def _hanley_mcneil_se(a, n_abnormal, n_normal):
    "Hanley & McNeil (1982), Eq. 1: Q1 goes with the abnormal (positive, IN) cases, Q2 with the normal (OUT) ones."
    q1, q2 = a / (2 - a), 2 * a ** 2 / (1 + a)
    return math.sqrt((a * (1 - a) + (n_abnormal - 1) * (q1 - a ** 2) + (n_normal - 1) * (q2 - a ** 2)) / (n_abnormal * n_normal))


@pytest.mark.parametrize("auc,n_pos,n_neg", [(0.8, 450, 50), (0.8, 50, 450), (0.65, 300, 20), (0.95, 40, 400), (0.5, 7, 3)])
def test_auc_interval_inverts_hanley_mcneil_on_unbalanced_classes(auc, n_pos, n_neg):
    "Each end A solves (A - auc)^2 = z^2 V(A), V Hanley & McNeil's variance with Q1 going with the IN cases (issue 40: a score interval)."
    lo, hi = auc_interval(auc, n_pos, n_neg)
    z = 1.959963984540054
    assert 0.0 < lo < auc < hi < 1.0
    for b in (lo, hi): assert (b - auc) ** 2 == pytest.approx(z * z * _hanley_mcneil_se(b, n_pos, n_neg) ** 2, rel=1e-6)
    swapped = auc_interval(auc, n_neg, n_pos)
    if n_pos != n_neg and auc != 0.5: assert swapped != pytest.approx((lo, hi), abs=1e-3)  # the counts are not interchangeable


def test_auc_interval_with_450_in_and_50_out():
    "The issue's example: [0.738, 0.844] (the Wald form gave [0.748, 0.852]); with the two counts swapped [0.717, 0.865]."
    lo, hi = auc_interval(0.8, 450, 50)
    assert (round(lo, 3), round(hi, 3)) == (0.738, 0.844)
    assert (round(auc_interval(0.8, 50, 450)[0], 3)) == 0.717


def test_auc_interval_width_matches_simulation():
    """Exponential scores (Hanley and McNeil's derivation): the spread of the empirical AUC over 3,000 draws with 450 IN and
    50 OUT records matches the interval's standard error within 10 %; swapping the two counts would be 46 % off."""
    g = np.random.default_rng(0)
    a, n_pos, n_neg, reps = 0.8, 450, 50, 3000
    pos = g.exponential(1 / (1 / a - 1), size=(reps, n_pos))  # P(pos > neg) = a when neg ~ Exp(1)
    neg = g.exponential(1.0, size=(reps, n_neg))
    ranks = stats.rankdata(np.concatenate([pos, neg], axis=1), axis=1)
    aucs = (ranks[:, :n_pos].sum(1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    assert aucs.mean() == pytest.approx(a, abs=0.005)
    lo, hi = auc_interval(a, n_pos, n_neg)
    assert (hi - lo) / (2 * 1.959963984540054) == pytest.approx(aucs.std(), rel=0.1)


def test_auc_interval_edges():
    assert all(math.isnan(x) for x in auc_interval(0.7, 0, 10)) and all(math.isnan(x) for x in auc_interval(0.7, 10, 0))
    z = 1.959963984540054
    assert auc_interval(1.0, 1, 1) == pytest.approx((1 / (1 + z * z), 1.0), abs=1e-12)  # (1 - A)^2 = z^2 A (1 - A): A = 1 / (1 + z^2)
    assert auc_interval(0.0, 1, 1) == pytest.approx((0.0, z * z / (1 + z * z)), abs=1e-12)
    assert auc_interval(0.0, 5, 5)[0] == 0.0 and auc_interval(1.0, 5, 5)[1] == 1.0  # clipped
    lo90, hi90 = auc_interval(0.7, 30, 30, confidence=0.9)
    lo95, hi95 = auc_interval(0.7, 30, 30)
    assert lo95 < lo90 < 0.7 < hi90 < hi95
    assert (hi90 - lo90) / (hi95 - lo95) == pytest.approx(1.6448536269514722 / 1.959963984540054, rel=0.02)  # exactly so for a Wald interval


def _wilson(k, n, z):
    "The Wilson score interval, solving |p_hat - p| = z sqrt(p (1 - p) / n) for p."
    p = k / n
    roots = np.roots([1 + z * z / n, -(2 * p + z * z / n), p * p])
    return tuple(sorted(float(np.real(r)) for r in roots))


@pytest.mark.parametrize("k,n", [(0, 10), (1, 10), (3, 7), (50, 100), (99, 100), (10, 10), (2, 300)])
def test_wilson_interval_solves_the_score_equation(k, n):
    lo, hi = wilson_interval(k, n)
    rlo, rhi = _wilson(k, n, 1.959963984540054)
    assert lo == pytest.approx(max(rlo, 0.0), abs=1e-9) and hi == pytest.approx(min(rhi, 1.0), abs=1e-9)
    assert lo <= k / n + 1e-12 and k / n <= hi + 1e-12


def test_wilson_interval_levels_and_edges():
    assert all(math.isnan(x) for x in wilson_interval(0, 0))
    for conf in (0.9, 0.95, 0.99, 0.8):
        lo, hi = wilson_interval(30, 100, conf)
        rlo, rhi = _wilson(30, 100, stats.norm.ppf(0.5 + conf / 2))
        assert (lo, hi) == pytest.approx((rlo, rhi), abs=1e-9)
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0


def test_z_quantiles():
    for conf in (0.9, 0.95, 0.99, 0.8, 0.5):
        assert _z(conf) == pytest.approx(stats.norm.ppf(0.5 + conf / 2), abs=1e-12)


def test_bootstrap_interval():
    x = np.r_[np.ones(30), np.zeros(70)]
    lo, hi = bootstrap_interval(x, n_boot=2000, rng=0)
    assert lo < 0.3 < hi and hi - lo == pytest.approx(2 * 1.96 * math.sqrt(0.21 / 100), rel=0.15)
    assert bootstrap_interval(x, n_boot=500, rng=3) == bootstrap_interval(x, n_boot=500, rng=3)
    mlo, mhi = bootstrap_interval(np.arange(101.0), statistic=np.median, n_boot=500, rng=0)
    assert mlo < 50 < mhi and mhi - mlo < 30
    lo90, hi90 = bootstrap_interval(x, n_boot=2000, confidence=0.9, rng=0)
    assert lo <= lo90 and hi90 <= hi and (lo90, hi90) != (lo, hi)
    assert all(math.isnan(v) for v in bootstrap_interval([], rng=0))


def test_tpr_at_fpr_interpolates_between_roc_points():
    fpr, tpr = np.array([0.0, 0.0, 0.2, 0.6, 1.0]), np.array([0.0, 0.3, 0.5, 0.9, 1.0])
    assert tpr_at_fpr(fpr, tpr, 0.1) == pytest.approx(0.4)
    assert tpr_at_fpr(fpr, tpr, 0.5) == pytest.approx(0.8)
    assert tpr_at_fpr(fpr, tpr, 0.2) == 0.5  # on a point
    assert tpr_at_fpr(fpr, tpr, 0.0) == 0.3  # the highest TPR at FPR 0
    assert tpr_at_fpr(fpr, tpr, 1.0) == 1.0
    assert tpr_at_fpr(np.array([0.1, 1.0]), np.array([0.5, 1.0]), 0.05) == 0.0  # below the first point


def test_check_labels():
    assert check_labels([True, False], 2).tolist() == [1, 0]
    assert check_labels(np.array([1.0, 0.0, 1.0]), 3).tolist() == [1, 0, 1]
    for bad, msg in (([[1, 0]], "1-D"), ([1, 0, 1], "3 entries"), ([1, 2], r"0 \(OUT\) or 1 \(IN\)"), (["a", "b"], r"0 \(OUT\) or 1 \(IN\)"),
                     ([0.5, 1.0], r"such as \[0.5\]$")):
        with pytest.raises(ValueError, match=msg):
            check_labels(bad, 2)
    with pytest.raises(ValueError, match="both IN"):
        check_labels([1, 1], 2, need_both=True)
    assert check_labels([1, 1], 2, need_both=False).tolist() == [1, 1]


def test_from_scores_on_unbalanced_labels():
    g = np.random.default_rng(1)
    y = np.r_[np.ones(450, int), np.zeros(50, int)]
    s = np.clip(0.5 + 0.25 * (y - 0.5) + g.normal(0, 0.2, len(y)), 0, 1)
    r = RiskResult.from_scores(s, y, fpr_level=0.1)
    from sklearn.metrics import roc_auc_score, roc_curve
    assert r.value == r.auc == pytest.approx(roc_auc_score(y, s))
    assert (r.ci_low, r.ci_high) == pytest.approx(auc_interval(r.auc, 450, 50))
    assert r.metrics["n_in"] == 450 and r.metrics["n_datasets"] == 500 and r.n == 500
    assert r.accuracy == pytest.approx(np.mean((s > 0.5) == (y == 1)))
    fpr, tpr, _ = roc_curve(y, s)
    assert r.tpr_at_low_fpr == pytest.approx(tpr_at_fpr(fpr, tpr, 0.1)) and r.fpr_level == 0.1
    assert r.metrics["tpr@0.1"] == pytest.approx(tpr_at_fpr(fpr, tpr, 0.1))
    assert (r.metrics["tpr@0.1_low"], r.metrics["tpr@0.1_high"]) == wilson_interval(round(r.metrics["tpr@0.1"] * 450), 450)
    assert math.isnan(r.metrics["tpr@0.01"]) and math.isnan(r.metrics["tpr@0.001"])  # below 1/50: no threshold resolves them


def test_from_scores_resolvable_levels_depend_on_the_out_count():
    y = np.r_[np.ones(10, int), np.zeros(100, int)]
    s = np.linspace(0, 1, 110)[::-1]
    r = RiskResult.from_scores(s, y)
    assert not math.isnan(r.metrics["tpr@0.01"]) and math.isnan(r.metrics["tpr@0.001"])  # 1/100 resolves 0.01, not 0.001
    assert r.value == 1.0 and r.metrics["tpr@0.01"] == 1.0
    r2 = RiskResult.from_scores(s[:60], np.r_[np.ones(10, int), np.zeros(50, int)])
    assert math.isnan(r2.metrics["tpr@0.01"]) and not math.isnan(r2.metrics["tpr@0.1"])


def test_accuracy_threshold_and_labels_keep_their_order():
    r = RiskResult.from_scores([0.5, 0.51, 0.49, 0.2], [1, 1, 0, 0])
    assert r.accuracy == 0.75  # 0.5 is not above 0.5: called OUT
    assert r.labels.tolist() == [1, 1, 0, 0] and r.scores.tolist() == [0.5, 0.51, 0.49, 0.2]
    with pytest.raises(ValueError, match="NaN"):
        RiskResult.from_scores([0.5, np.nan], [1, 0])
    with pytest.raises(ValueError, match="1-D"):
        RiskResult.from_scores([[0.5, 0.2]], [1, 0])


def test_rows_and_text():
    r = RiskResult("x", 0.25, 0.1, 0.4, "wilson", attack_rate=0.3, baseline_rate=0.5, n=4, metrics=dict(k=1),
                   parameters=dict(b=2, a=1))
    row = r.to_row()
    assert row["value"] == 0.25 and row["ci_low"] == 0.1 and row["ci_high"] == 0.4 and row["k"] == 1
    assert row["parameters"] == '{"a": 1, "b": 2}' and math.isnan(row["control_rate"])
    assert r.ci == (0.1, 0.4)
    assert repr(r) == "RiskResult(x: 0.250 [0.100, 0.400] (wilson), higher is riskier, baseline=0.500, n=4)"
    assert "parameters" not in RiskResult("y", 1.0).to_row()
    assert (_fmt(None), _fmt(math.nan), _fmt(0.12345), _fmt(3), _fmt("a")) == ("–", "–", "0.123", "3", "a")
    html = r._repr_html_()
    assert "<b>x</b>" in html and "0.250" in html and "[0.100, 0.400]" in html and ">k<" in html
    with pytest.raises(AttributeError, match="has no 'auc'"):
        r.auc
    with pytest.raises(ValueError, match="no per-item scores"):
        r.roc_curve()


# --- what the mutation run of issue 27 found untested: the interval edges, the summaries, the results store ------------------
from achilles.core.results import (FPR_LEVELS, ResultsStore, StoreError, _jsonable, _numeric_nulls, plot_roc, read_results)


def test_interval_edges_and_levels():
    assert all(math.isnan(v) for v in wilson_interval(0, 0)) and not math.isnan(wilson_interval(0, 1)[0])
    assert wilson_interval(3, 3)[1] == 1.0 and wilson_interval(0, 3)[0] == pytest.approx(0.0, abs=1e-12)  # clipped to [0, 1]
    assert all(math.isnan(v) for v in auc_interval(0.6, 0, 0)) and auc_interval(0.6, 1, 1)[0] >= 0.0
    assert not any(math.isnan(v) for v in auc_interval(0.6, 1, 1))  # one of each is enough
    lo, hi = auc_interval(0.999999999999, 2, 2)  # next to 1 on 2 and 2 datasets: wide, not a point (the Wald form: 0.999998)
    assert hi == 1.0 and 0.3 < lo < 0.5
    lo, hi = auc_interval(1e-15, 3, 3)
    assert 0.0 <= lo <= 1e-15 and 0.4 < hi < 0.6
    assert FPR_LEVELS == (0.1, 0.01, 0.001)
    for conf, z in ((0.9, 1.6448536269514722), (0.95, 1.959963984540054), (0.99, 2.5758293035489004)):
        assert _z(conf) == z and wilson_interval(10, 20, conf) == pytest.approx(_wilson(10, 20, z))


def test_bootstrap_interval_draws():
    x = np.array([5.0, 1.0, 2.0, 9.0])
    idx = np.random.default_rng(3).integers(0, 4, size=(50, 4))
    for stat in (np.mean, np.median):
        got = bootstrap_interval(x, statistic=stat, n_boot=50, confidence=0.8, rng=3)
        s = np.array([stat(x[i]) for i in idx])
        assert got == pytest.approx((np.quantile(s, 0.1), np.quantile(s, 0.9)))


def test_tpr_at_fpr_at_the_last_point_and_on_flat_segments():
    assert tpr_at_fpr(np.array([0.0, 0.5, 1.0]), np.array([0.2, 0.6, 1.0]), 1.0) == 1.0
    assert tpr_at_fpr(np.array([0.0, 0.5, 1.0]), np.array([0.2, 0.6, 1.0]), 0.75) == pytest.approx(0.8)
    assert tpr_at_fpr(np.array([0.0, 0.5, 0.5, 1.0]), np.array([0.2, 0.4, 0.6, 1.0]), 0.5) == 0.6  # the last point at 0.5


def test_from_scores_levels_and_results_round_trip():
    y = np.r_[np.ones(30, int), np.zeros(10, int)]  # 10 OUT: FPR 0.1 resolvable, 0.01 not
    s = np.r_[np.linspace(0.55, 0.95, 30), np.linspace(0.05, 0.6, 10)]
    r = RiskResult.from_scores(s, y, fpr_levels=(0.1, 0.05))
    from sklearn.metrics import roc_curve
    fpr, tpr, _ = roc_curve(y, s)
    assert r.metrics["tpr@0.1"] == pytest.approx(tpr_at_fpr(fpr, tpr, 0.1)) and math.isnan(r.metrics["tpr@0.05"])
    assert (r.metrics["tpr@0.1_low"], r.metrics["tpr@0.1_high"]) == wilson_interval(round(r.metrics["tpr@0.1"] * 30), 30)
    assert r.accuracy == pytest.approx(np.mean((s > 0.5) == (y == 1))) and r.fpr_level == 0.01
    assert r.confidence == 0.95 and RiskResult("x", 0.1).n == 0 and RiskResult("x", 0.1).confidence == 0.95
    f = r.to_frame()
    assert list(f.columns[:4]) == ["name", "value", "ci_low", "ci_high"] and len(f) == 1 and f["auc"].item() == r.auc
    np.testing.assert_array_equal(r.roc_curve()[0], fpr)
    with pytest.raises(ValueError, match="no per-item scores"):
        RiskResult("x", 0.5, scores=np.ones(2)).roc_curve()
    row = RiskResult("x", 0.5, parameters={"b": [1, 2], "a": np.float64(0.5)}).to_row()
    assert row["parameters"] == '{"a": 0.5, "b": [1, 2]}'  # keys sorted
    assert "baseline" not in repr(RiskResult("x", 0.5)) and "control=0.200" in repr(RiskResult("x", 0.5, control_rate=0.2))
    html = RiskResult("x", 0.5, metrics=dict(auc=0.7, auc_low=0.6, auc_high=0.8)).__class__._repr_html_(
        RiskResult("x", 0.5, metrics=dict(auc=0.7, auc_low=0.6, auc_high=0.8)))
    assert html.startswith("<table>") and ">auc<" in html and "auc_low" not in html


def test_plot_roc_returns_its_axes(tmp_path):
    import matplotlib; matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    r = RiskResult.from_scores([0.9, 0.2, 0.7, 0.4], [1, 0, 1, 0])
    ax = plot_roc(r)
    assert ax.get_xlabel() == "false positive rate" and ax.figure.get_size_inches().tolist() == [4.2, 4.0]
    diag = ax.lines[-1]
    assert diag.get_xdata().tolist() == [0, 1] and diag.get_ydata().tolist() == [0, 1]
    ax2 = plot_roc([r, r], log=True)
    assert ax2.get_xscale() == "log" and ax2.get_xlim() == pytest.approx((1e-3, 1)) and ax2.lines[-1].get_xdata().tolist() == [1e-3, 1]
    plt.close("all")


def test_jsonable_and_numeric_nulls():
    assert _jsonable(np.int64(3)) == 3 and type(_jsonable(np.int64(3))) is int
    assert _jsonable(np.float32(0.5)) == 0.5 and _jsonable(np.float64("nan")) is None and _jsonable(float("nan")) is None
    assert _jsonable(np.array([1, 2])) == [1, 2] and _jsonable("a") == "a" and _jsonable(None) is None
    obj = lambda v: pd.Series(v, dtype=object)  # what JSON rows with nulls read back as
    t = _numeric_nulls(pd.DataFrame({"a": obj([1, None, 2.5]), "b": obj(["x", None, "y"]), "c": obj([True, None, False]),
                                     "d": obj([None, None, None]), "e": obj([1, "x", 2])}))
    assert t["a"].dtype == float and math.isnan(t["a"][1]) and t["d"].dtype == float
    assert t["b"].dtype == object and t["c"].dtype == object and t["e"].dtype == object  # text, booleans, mixed: kept


def test_store_rows_filters_and_summary(tmp_path):
    st = ResultsStore(tmp_path / "deep" / "er" / "s.sqlite")  # missing folders are created
    assert repr(st) == f"ResultsStore({str(tmp_path / 'deep' / 'er' / 's.sqlite')!r}, 0 rows)"
    assert st.summary().columns.tolist() == ["kind", "rows"] and len(st.summary()) == 0
    assert st.append("attack", "r1", 1, dict(dataset="adult", generator="baynet", generator_params={"b": 1, "a": 2}, auc=0.8,
                                             n=np.int64(5), tpr=np.nan))
    st.append("attack", "r1", 2, dict(dataset="adult", generator="baynet", generator_params="k=1", auc=0.6))
    st.append("metric", "r2", "ims", dict(dataset="adult", value=0.25, generator=None))
    t = st.read()
    assert t["item"].tolist() == ["1", "2", "ims"] and t["kind"].tolist() == ["attack", "attack", "metric"]
    assert t["run_id"].tolist() == ["r1", "r1", "r2"] and t["created"].notna().all()
    assert t["generator_params"].tolist()[:2] == [{"b": 1, "a": 2}, "k=1"] and t["n"][0] == 5 and math.isnan(t["tpr"][0])
    col = st._query("SELECT generator_params FROM results ORDER BY id")
    assert [c[0] for c in col] == ['{"a": 2, "b": 1}', "k=1", None]  # a dict as sorted JSON, a string as it is, None as NULL
    assert len(st.read("attack")) == 2 and len(st.read(run_id="r2")) == 1 and len(st.read("metric", "r1")) == 0
    s = st.summary()
    assert s.set_index("kind")["rows"].to_dict() == {"attack": 2, "metric": 1}
    assert s.set_index("kind").loc["attack", "mean"] == pytest.approx(0.7) and s["generator"].tolist() == ["baynet", "-"]
    assert s["measure"].tolist() == ["auc", "value"] and s.set_index("kind").loc["metric", "mean"] == 0.25  # a metric's risk, not NaN
    assert st.items("attack", "r1") == {"1", "2"}
    assert len(read_results(tmp_path / "deep" / "er" / "s.sqlite", kind="metric")) == 1
    assert read_results(tmp_path / "absent.sqlite").empty
    (tmp_path / "empty.sqlite").write_bytes(b""); assert read_results(tmp_path / "empty.sqlite").empty
    (tmp_path / "old.csv").write_text("run_id,record_id,auc\nr,1,0.5\n")
    assert read_results(tmp_path / "old.csv")["auc"].tolist() == [0.5]
    st2 = ResultsStore(tmp_path / "v.sqlite"); st2.append("metric", "r", "x", dict(value=0.5))
    assert st2.summary().columns.tolist() == ["kind", "rows", "measure", "mean"]
    st2.append("metric", "r", "y", dict(metric="dcr", value=0.1)); st2.append("metric", "r", "z", dict(metric="ims", value=0.3))
    s2 = st2.summary()  # one row per metric, each with its mean risk
    assert s2[["metric", "rows", "measure", "mean"]].values.tolist() == [["-", 1, "value", 0.5], ["dcr", 1, "value", 0.1], ["ims", 1, "value", 0.3]]


def test_store_export_and_import(tmp_path):
    st = ResultsStore(tmp_path / "s.sqlite")
    for i in range(3): st.append("attack", "r", i, dict(record_id=i, auc=0.5 + i / 10))
    assert st.export(tmp_path / "out.csv") == 3
    assert pd.read_csv(tmp_path / "out.csv")["auc"].tolist() == [0.5, 0.6, 0.7]
    with pytest.raises(FileExistsError): st.export(tmp_path / "out.csv")
    assert st.export(tmp_path / "out.csv", force=True) == 3
    with pytest.raises(ValueError, match="onto itself"): st.export(tmp_path / "s.sqlite", force=True)
    (tmp_path / "dup.csv").write_text("run_id,record_id,auc\nq,1,0.5\nq,1,0.5\nq,2,0.6\n")
    with pytest.warns(UserWarning, match="1 duplicated row"):
        assert st.import_csv(tmp_path / "dup.csv") == 2
    assert st._query("SELECT rows FROM imports")[0][0] == 2
    assert st.import_csv(tmp_path / "dup.csv") == 0  # imported before
    (tmp_path / "bad.csv").write_text("run_id,record_id,auc\nq,1,0.5\nq,,0.6\nq,3,0.7\nq,1,0.9\n")
    with pytest.raises(ValueError, match=r"data line\(s\) \[3\] have no run_id or record_id"):
        st.import_csv(tmp_path / "bad.csv")
    (tmp_path / "clash.csv").write_text("run_id,record_id,auc\nz,1,0.5\nz,2,0.5\nz,1,0.9\nz,2,0.5\nz,7,0.1\nz,7,0.3\n")
    with pytest.raises(ValueError, match=r"line\(s\) \[4, 7\] repeat a \(run_id, record_id\) with different values"):
        st.import_csv(tmp_path / "clash.csv")
    assert len(st) == 5


# --- edges the mutation run found untested (tests/MUTATION.md) ---------------------------------------------------------------

def test_clopper_pearson_bounds_against_scipy_beta_at_every_count():
    from scipy.stats import beta
    from achilles.core.results import cp_lower, cp_upper
    for n in (1, 2, 5, 20):
        for k in range(n + 1):
            lo, hi = float(cp_lower(k, n, 0.025)), float(cp_upper(k, n, 0.025))
            assert lo == (0.0 if k == 0 else pytest.approx(beta.ppf(0.025, k, n - k + 1), rel=1e-9)), (k, n)
            assert hi == (1.0 if k == n else pytest.approx(beta.ppf(0.975, k + 1, n - k), rel=1e-9)), (k, n)
    assert np.isnan(float(cp_lower(0.5, 0)))  # no trials: no rate
    assert float(cp_upper(0, 0)) == 1.0  # k >= n: 1, the trivial bound
    assert np.isnan(float(cp_lower(1, 0)))  # a success without trials is no rate


def test_clopper_pearson_one_trial_is_a_rate():
    from achilles.core.results import clopper_pearson
    lo, hi = clopper_pearson(0, 1)
    assert lo == 0.0 and hi == pytest.approx(0.975)
    lo, hi = clopper_pearson(1, 1)
    assert lo == pytest.approx(0.025) and hi == 1.0
    assert all(np.isnan(clopper_pearson(0, 0)))


def test_auc_interval_at_the_edges_stays_finite_and_inside():
    from achilles.core.results import auc_interval
    for auc in (0.0, 1.0):
        lo, hi = auc_interval(auc, 50, 50)
        assert 0.0 <= lo <= hi <= 1.0 and np.isfinite(lo) and np.isfinite(hi)
        assert 0.02 < (hi - lo) < 0.1  # Hanley-McNeil's variance vanishes at a perfect ranking; the score interval's does not
    lo, hi = auc_interval(1.0, 50, 50)
    assert hi == 1.0 and 0.93 < lo < 0.98  # 50 and 50 datasets perfectly ranked: not proof of an AUC above 0.99


def test_wilson_at_all_successes_and_none():
    from achilles.core.results import wilson_interval
    lo, hi = wilson_interval(20, 20)
    assert hi == 1.0 and 0.8 < lo < 1.0
    lo, hi = wilson_interval(0, 20)
    assert lo == 0.0 and 0.0 < hi < 0.2


def test_epsilon_bounds_by_hand():
    from achilles.core.results import cp_lower, cp_upper, epsilon_bounds
    tl, fh = float(cp_lower(90, 100)), float(cp_upper(5, 100))
    assert float(epsilon_bounds(90, 100, 5, 100)) == pytest.approx(math.log(tl / fh))
    assert float(epsilon_bounds(90, 100, 5, 100, delta=0.1)) == pytest.approx(math.log((tl - 0.1) / fh))
    assert float(epsilon_bounds(10, 100, 60, 100)) == 0.0  # a test no better than chance shows nothing
    assert float(epsilon_bounds(0, 100, 0, 100)) == 0.0  # no success: TPR's lower bound 0
    assert float(epsilon_bounds(50, 100, 5, 100, delta=float(cp_lower(50, 100)))) == 0.0  # TPR_low - delta = 0 exactly


def test_tpr_at_fpr_edges():
    from achilles.core.results import tpr_at_fpr
    fpr, tpr = np.array([0.0, 0.0, 0.5, 1.0]), np.array([0.0, 0.4, 0.9, 1.0])
    assert tpr_at_fpr(fpr, tpr, 0.0) == 0.4  # the highest TPR at FPR 0
    assert tpr_at_fpr(fpr, tpr, 0.25) == pytest.approx(0.65)
    assert tpr_at_fpr(fpr, tpr, 1.0) == 1.0
    assert tpr_at_fpr(np.array([0.1, 1.0]), np.array([0.5, 1.0]), 0.05) == 0.0  # below the curve's first FPR
    assert tpr_at_fpr(np.array([0.0, 0.5]), np.array([0.3, 0.8]), 0.9) == 0.8  # past the last point


def test_tpr_at_fpr_interpolates_from_the_first_point():
    from achilles.core.results import tpr_at_fpr
    assert tpr_at_fpr(np.array([0.0, 0.5]), np.array([0.2, 0.6]), 0.25) == pytest.approx(0.4)  # between points 0 and 1


def test_label_errors_list_at_most_five_bad_values():
    from achilles.core.results import check_labels
    with pytest.raises(ValueError, match=r"such as \[2, 3, 4, 5, 6\]$"):
        check_labels([0, 1, 2, 3, 4, 5, 6, 7, 8], 9)
    with pytest.raises(ValueError, match=r"such as \['a', 'b', 'c', 'd', 'e'\]$"):
        check_labels(np.array(list("abcdefg"), dtype=object), 7)


def test_import_names_what_a_non_csv_file_is(tmp_path):
    from achilles.core.results import ResultsStore
    s = ResultsStore(tmp_path / "s.sqlite"); s.append("attack", "r", "a", dict(auc=0.5))
    other = ResultsStore(tmp_path / "other.sqlite"); other.append("attack", "r", "b", dict(auc=0.6))
    with pytest.raises(ValueError, match="an SQLite database"):
        s.import_csv(tmp_path / "other.sqlite")
    latin = tmp_path / "latin.csv"; latin.write_bytes("run_id,record_id,auc\nr,caf\xe9,0.5\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"not UTF-8 text \(byte 26\)"):
        s.import_csv(latin)


def test_import_messages_count_rows():
    from achilles.core.results import _import_result
    assert _import_result(3).message("f.csv") == "'f.csv': 3 rows imported"
    assert _import_result(1, already=2).message("f.csv") == "'f.csv': 1 row imported (2 rows already in the store)"
    assert _import_result(0, already=1).message("f.csv") == "'f.csv': its 1 row was already in the store; nothing new"


def test_reading_a_store_never_writes_it(tmp_path):
    from achilles.core.results import ResultsStore, read_results
    p = tmp_path / "s.sqlite"
    ResultsStore(p).append("attack", "r", "a", dict(auc=0.5))
    before = p.read_bytes(); mtime = p.stat().st_mtime_ns
    assert len(read_results(p)) == 1
    assert p.read_bytes() == before and p.stat().st_mtime_ns == mtime
    p.chmod(0o444)  # a read-only store (a colleague's, a CI artefact) reads too
    try: assert len(read_results(p, kind="attack")) == 1
    finally: p.chmod(0o644)


def test_summary_sorts_its_settings_and_rounds_to_four_places(tmp_path):
    from achilles.core.results import ResultsStore
    s = ResultsStore(tmp_path / "s.sqlite")
    s.append("attack", "r", "b1", dict(dataset="census", auc=0.123456))
    s.append("attack", "r", "a1", dict(dataset="adult", auc=0.654321))
    t = s.summary()
    assert list(t["dataset"]) == ["adult", "census"] and list(t["mean"]) == [0.6543, 0.1235]


# --- the second mutation run's survivors (tests/MUTATION.md, core/results) ------------------------------------------------------

def test_bootstrap_interval_of_one_outcome_and_its_exact_quantiles():
    assert bootstrap_interval([0.3], n_boot=20, rng=0) == (0.3, 0.3)  # one outcome: every resample is that outcome
    x = np.random.default_rng(1).normal(size=37)  # continuous: no two quantile levels read the same order statistic
    idx = np.random.default_rng(5).integers(0, 37, size=(400, 37))
    s = x[idx].mean(axis=1)
    assert bootstrap_interval(x, n_boot=400, confidence=0.9, rng=5) == (np.quantile(s, 0.05), np.quantile(s, 0.95))


def test_epsilon_bounds_without_in_or_out_datasets_is_zero_not_nan():
    from achilles.core.results import epsilon_bounds
    e = epsilon_bounds([0, 5, 3], [0, 10, 0], [5, 0, 0], [100, 0, 0])
    assert e.tolist() == [0.0, 0.0, 0.0]  # nothing measured shows nothing


def test_store_schema_version_is_written_and_a_newer_store_is_refused(tmp_path):
    import sqlite3
    from achilles.core.results import SCHEMA_VERSION
    p = tmp_path / "s.sqlite"; ResultsStore(p).append("attack", "r", "a", dict(auc=0.5))
    con = sqlite3.connect(p)
    assert SCHEMA_VERSION == 1 and con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
    con.execute("UPDATE meta SET value='2' WHERE key='schema_version'"); con.commit(); con.close()
    with pytest.raises(StoreError, match=r"schema version 2, newer than this achilles understands \(1\)"):
        ResultsStore(p)


def test_tables_reads_the_file_it_is_given_and_creates_nothing(tmp_path, monkeypatch):
    from achilles.core.results import _tables
    p = tmp_path / "store" / "s.sqlite"; ResultsStore(p)
    work = tmp_path / "cwd"; work.mkdir(); monkeypatch.chdir(work)
    assert {"meta", "results", "imports"} <= _tables(p)
    assert list(work.iterdir()) == [] and sorted(f.name for f in p.parent.iterdir()) == ["s.sqlite"]


def test_a_full_disk_is_named_in_the_error(tmp_path, monkeypatch):
    st = ResultsStore(tmp_path / "s.sqlite")
    real = ResultsStore._connect
    def small_disk(self):
        con = real(self); con.execute("PRAGMA max_page_count=8"); return con  # SQLite's own "database or disk is full"
    monkeypatch.setattr(ResultsStore, "_connect", small_disk)
    with pytest.raises(StoreError, match=r"s\.sqlite': the disk is full\."):
        for i in range(10_000): st.append("attack", "r", i, dict(pad="x" * 2000))


def test_read_gives_each_row_its_creation_time(tmp_path):
    import datetime as dt
    st = ResultsStore(tmp_path / "s.sqlite"); st.append("attack", "r", "a", dict(auc=0.5))
    created = st.read()["created"].iloc[0]
    assert isinstance(created, str) and abs(dt.datetime.fromisoformat(created).timestamp() - dt.datetime.now().timestamp()) < 600


def test_import_result_defaults():
    from achilles.core.results import ImportResult
    r = ImportResult(4)
    assert r == 4 and r.already == 0 and r.previous is None


def test_an_imported_row_is_stored_like_an_appended_one(tmp_path):
    import sqlite3
    row = dict(dataset="adult", generator="baynet", seed=3, record_id=7, auc=0.6)
    a = ResultsStore(tmp_path / "a.sqlite"); a.append("attack", "r", 7, row)
    a.export(tmp_path / "a.csv")
    b = ResultsStore(tmp_path / "b.sqlite"); assert b.import_csv(tmp_path / "a.csv") == 1
    cols = "kind, run_id, item, dataset, dataset_hash, generator, generator_params, selector, attack, profile, seed"
    got = [sqlite3.connect(p).execute(f"SELECT {cols} FROM results").fetchall() for p in (tmp_path / "a.sqlite", tmp_path / "b.sqlite")]
    assert got[0] == got[1] == [("attack", "r", "7", "adult", None, "baynet", None, None, None, None, "3")]


def test_round_trip_keeps_each_kinds_columns(tmp_path):
    a = ResultsStore(tmp_path / "a.sqlite")
    a.append("attack", "r", 1, dict(record_id=1, auc=0.6)); a.append("metric", "m", "dcr", dict(metric="dcr", risk=0.1))
    a.export(tmp_path / "a.csv")  # one table: each kind's rows have the other kind's columns empty
    b = ResultsStore(tmp_path / "b.sqlite"); assert b.import_csv(tmp_path / "a.csv") == 2
    for kind in ("attack", "metric"):
        pd.testing.assert_frame_equal(a.read(kind).drop(columns="created"), b.read(kind).drop(columns="created"))


def test_whole_numbers_with_gaps_come_back_as_integers():
    from achilles.core.results import _whole_numbers
    t = _whole_numbers(pd.DataFrame(dict(a=[7.0, np.nan, 3.0], b=[0.5, np.nan, 1.0], c=[7.0, 1.0, 3.0])))
    assert str(t["a"].dtype) == "Int64" and t["a"].tolist()[::2] == [7, 3]
    assert t["b"].dtype == np.float64 and t["c"].dtype == np.float64  # fractions, and float columns without gaps, stay


def test_binary_kind_looks_for_a_nul_in_the_first_64_kib():
    from achilles.core.results import _binary_kind
    text = bytearray(b"a" * 70_000)
    at_end = bytes(text[:65535] + b"\x00" + text[65536:]); after = bytes(text[:65536] + b"\x00" + text[65537:])
    assert _binary_kind(at_end) == "binary data" and _binary_kind(after) is None


def test_import_lists_at_most_five_clashing_lines(tmp_path):
    lines = "".join(f"z,{i},0.5\n" for i in range(7)) + "".join(f"z,{i},0.9\n" for i in range(7))
    (tmp_path / "clash.csv").write_text("run_id,record_id,auc\n" + lines)
    with pytest.raises(ValueError, match=r"line\(s\) \[9, 10, 11, 12, 13\] repeat"):
        ResultsStore(tmp_path / "s.sqlite").import_csv(tmp_path / "clash.csv")


def test_import_counts_the_rows_already_in_the_store(tmp_path):
    st = ResultsStore(tmp_path / "s.sqlite")
    (tmp_path / "one.csv").write_text("run_id,record_id,auc\nq,1,0.5\nq,2,0.6\n")
    (tmp_path / "two.csv").write_text("run_id,record_id,auc\nq,1,0.5\nq,2,0.6\nq,3,0.7\n")
    assert st.import_csv(tmp_path / "one.csv") == 2
    r = st.import_csv(tmp_path / "two.csv")
    assert r == 1 and r.already == 2


def test_reading_results_does_not_wait_for_a_writer(tmp_path):
    import sqlite3, threading
    p = tmp_path / "s.sqlite"; ResultsStore(p).append("attack", "r", "a", dict(auc=0.5))
    writer = sqlite3.connect(p, isolation_level=None); writer.execute("BEGIN IMMEDIATE")  # another process mid-write
    out = {}
    t = threading.Thread(target=lambda: out.update(t=read_results(p)), daemon=True); t.start(); t.join(10)
    writer.execute("ROLLBACK"); writer.close()
    assert "t" in out and len(out["t"]) == 1


def test_parquet_export_writes_the_columns_only(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")  # Parquet export is optional: pyarrow is not a dependency
    st = ResultsStore(tmp_path / "s.sqlite"); st.append("attack", "r", 1, dict(record_id=1, auc=0.6))
    st.export(tmp_path / "out.parquet")
    assert pq.read_table(tmp_path / "out.parquet").column_names == list(st.read().columns)  # no index column


# ---------------------------------------------------------------- issue 40: the screen's Wald bound, the interval's inflation, held_interval
def test_the_stack_screen_keeps_the_wald_lower_bound():
    "`_wald_low` is the Wald form the stack's screen always used (kept so the attack's scores do not move): auc - z se(auc), at least 0."
    from achilles.core.results import _wald_low, auc_se
    assert _wald_low(0.7, 100, 100) == pytest.approx(0.7 - 1.959963984540054 * auc_se(0.7, 100, 100), abs=1e-15)
    assert _wald_low(0.62, 37, 250) == pytest.approx(0.62 - 1.959963984540054 * auc_se(0.62, 37, 250), abs=1e-15)
    assert _wald_low(0.05, 5, 5) == 0.0  # clipped at 0
    assert 1.0 - 1e-5 < _wald_low(1.0, 10, 10) < 1.0  # clamped 1e-12 below 1: a (tiny) spread, as auc_se has


def test_inflation_widens_the_score_interval_on_both_sides():
    lo, hi = auc_interval(0.7, 100, 100)
    lo2, hi2 = auc_interval(0.7, 100, 100, inflation=2.0)
    assert lo2 < lo < 0.7 < hi < hi2
    z = 1.959963984540054
    for b in (lo2, hi2): assert (b - 0.7) ** 2 == pytest.approx((2 * z) ** 2 * _hanley_mcneil_se(b, 100, 100) ** 2, rel=1e-6)


def test_held_interval_holds_the_value_flags_a_widening_and_passes_what_it_cannot_judge():
    from achilles.core.results import held_interval
    assert held_interval(0.857, -1.0, 0.847, "x") == (-1.0, 0.857, dict(ci_widened_to_value=True))
    assert held_interval(-2.0, -1.0, 0.8, "x") == (-2.0, 0.8, dict(ci_widened_to_value=True))
    assert held_interval(0.5, 0.5, 0.6, "x") == (0.5, 0.6, {})  # on its lower end: inside, no flag
    assert held_interval(0.6, 0.5, 0.6, "x") == (0.5, 0.6, {})  # on its upper end: inside, no flag
    lo, hi, said = held_interval(0.5, math.nan, math.nan, "x")  # no bootstrap interval: passed on as it is
    assert math.isnan(lo) and math.isnan(hi) and said == {}
    lo, hi, said = held_interval(0.5, 0.2, math.nan, "x")
    assert lo == 0.2 and math.isnan(hi) and said == {}
    lo, hi, said = held_interval(math.nan, 0.1, 0.2, "why")
    assert math.isnan(lo) and math.isnan(hi) and said == {"undefined": "why"}


def _outside(A, auc, n1, n0, k2):
    "auc_interval's own criterion, written out with the same arithmetic: A is outside the interval of `auc`."
    q1, q2 = A / (2 - A), 2 * A * A / (1 + A)
    v = (A * (1 - A) + (n1 - 1) * (q1 - A * A) + (n0 - 1) * (q2 - A * A)) / (n1 * n0)
    return (A - auc) ** 2 > k2 * max(v, 0.0)


@pytest.mark.parametrize("n1,n0", [(1, 1), (2, 6), (6, 6), (50, 3), (4000, 2), (500, 500)])
def test_each_end_is_the_first_double_outside(n1, n0):
    "Each end of the score interval is the first double beyond the boundary (bisection to adjacent doubles): outside by the strict"
    " criterion, its neighbour towards the AUC inside. (A `>=` or a bracket past 1 moves the end by a double, or divides by zero.)"
    g = np.random.default_rng(n1 * 7 + n0)
    for auc in [0.0, 1e-15, 0.01, 0.5, 0.77, 0.999999, 1.0, *g.uniform(0, 1, 25)]:
        for conf, infl in ((0.95, 1.0), (0.9, 1.43), (0.99, 3.0)):
            k2 = (_z(conf) * infl) ** 2
            lo, hi = auc_interval(auc, n1, n0, conf, infl)
            assert lo <= auc <= hi
            if hi < 1.0: assert _outside(hi, auc, n1, n0, k2) and not _outside(np.nextafter(hi, -1.0), auc, n1, n0, k2), (auc, hi)
            else: assert not _outside(1.0, auc, n1, n0, k2)
            if lo > 0.0: assert _outside(lo, auc, n1, n0, k2) and not _outside(np.nextafter(lo, 2.0), auc, n1, n0, k2), (auc, lo)
            else: assert not _outside(0.0, auc, n1, n0, k2)
