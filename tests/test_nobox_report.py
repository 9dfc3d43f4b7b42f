"""privacy_report's metric set: which metrics a request names ("all" in every spelling, a comma list, a dict of parameters), and
which of the shared arguments (schema, secret, aux_cols, n_jobs) reach each metric: only those its signature takes, never a None."""
import pytest

from achilles.core.data import load_adult
from achilles.nobox import METRICS, default_metrics
from achilles.nobox.report import _build_metrics

NONE = dict(schema=None, secret=None, aux_cols=None, n_jobs=None)


@pytest.mark.parametrize("request_", ["all", " all ", ["all"], ("all",)], ids=repr)
def test_all_in_every_spelling_is_every_registered_metric(request_):
    assert list(_build_metrics(request_, NONE)) == METRICS.names()


def test_none_is_the_default_set_and_a_comma_list_is_read():
    assert list(_build_metrics(None, NONE)) == default_metrics()
    assert list(_build_metrics("ims, dcr,", NONE)) == ["ims", "dcr"]
    assert list(_build_metrics(["ims"], NONE)) == ["ims"]  # a one-item list that is not "all"
    with pytest.raises(Exception, match="ims"):  # an unknown name lists the choices
        _build_metrics(["no_such_metric"], NONE)
    with pytest.raises(ValueError, match="empty"):
        _build_metrics([], NONE)


def test_shared_arguments_reach_the_metrics_that_take_them_and_only_those():
    from achilles.core.data import Schema
    schema = Schema.from_dataframe(load_adult())
    shared = dict(schema=schema, secret="age", aux_cols=None, n_jobs=2)
    m = _build_metrics(["ims", "dcr", "inference_ml", "k_anonymity"], shared)
    assert m["ims"].schema is schema  # ims takes schema only: secret and n_jobs are not passed (it would refuse them)
    assert m["dcr"].schema is schema and m["dcr"].n_jobs == 2
    assert m["inference_ml"].secret == "age" and m["inference_ml"].n_jobs == 2
    assert m["k_anonymity"].secret == "age"


def test_a_shared_none_leaves_each_metrics_own_default():
    own = METRICS.make("inference_ml")
    m = _build_metrics(["inference_ml"], NONE)["inference_ml"]
    assert m.secret == own.secret and m.n_jobs == own.n_jobs
    # a metric's own parameters (the dict form) win over nothing shared
    assert _build_metrics({"dcr": dict(n_jobs=1)}, NONE)["dcr"].n_jobs == 1


# --- privacy_report's checks, bookkeeping and plot --------------------------------------------------------------------------

import json, time
import numpy as np
import pandas as pd
from achilles.nobox import leaky_setting
from achilles.nobox.report import _stream, plot_report, privacy_report


@pytest.fixture(scope="module")
def setting():
    return leaky_setting(load_adult(), 0.5, n_train=400, rng=0)


def test_bad_control_secret_and_aux_cols_are_refused_and_good_ones_pass(setting):
    s = setting
    with pytest.raises(TypeError, match="control must be"):
        privacy_report(s.train, s.synthetic, s.control.to_numpy(), metrics=["ims"])
    with pytest.raises(ValueError, match="secret='nope'"):
        privacy_report(s.train, s.synthetic, s.control, metrics=["ims"], secret="nope")
    with pytest.raises(ValueError, match=r"aux_cols \['nope'\]"):
        privacy_report(s.train, s.synthetic, s.control, metrics=["ims"], aux_cols=["age", "nope"])
    r = privacy_report(s.train, s.synthetic, s.control, metrics=["ims", "inference_distance"], secret="income",
                       aux_cols=["age", "education", "sex"], rng=0)
    assert list(r["metric"]) == ["ims", "inference_distance"]
    assert json.loads(r.set_index("metric").loc["inference_distance", "parameters"])["secret"] == "income"


def test_seconds_parameters_progress_and_context(setting, capsys):
    s = setting
    t0 = time.perf_counter()
    r = privacy_report(s.train, s.synthetic, None, metrics=["ims", "dcr"], rng=0, progress=True)
    wall = time.perf_counter() - t0
    assert (r["seconds"] >= 0).all() and r["seconds"].sum() <= wall  # each metric's own time, inside the call's
    for p in r["parameters"]:
        assert p == json.dumps(json.loads(p), sort_keys=True)  # stable text: keys sorted, so stored reports compare equal
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].strip().startswith("ims:") and " s" in out[0]
    assert r.context["n_control"] == 0 and r.context["n_train"] == len(s.train) and r.context["seed"] == 0
    assert privacy_report(s.train, s.synthetic, s.control, metrics=["ims"]).context["n_control"] == len(s.control)
    capsys.readouterr()
    privacy_report(s.train, s.synthetic, None, metrics=["ims"], rng=0)
    assert capsys.readouterr().out == ""  # progress=False prints nothing


def test_metric_streams_are_pinned():
    "Each metric's random stream comes from its name alone; these numbers are part of every stored report's reproducibility."
    assert _stream("dcr") == int.from_bytes(b"dcr\0\0\0\0\0", "little") % 2**31 == 7496548
    assert _stream("singling_out") == int.from_bytes(b"singling", "little") % 2**31
    assert 0 <= _stream("kde_membership") < 2**31


def test_the_plot_draws_every_metric_with_its_interval(setting):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    s = setting
    r = privacy_report(s.train, s.synthetic, s.control, metrics=["ims", "dcr", "singling_out"], rng=0)
    ax = plot_report(r)
    seg = [c for c in ax.collections if hasattr(c, "get_segments")][0].get_segments()
    assert len(seg) == 3  # one bar per metric
    rr = r.iloc[::-1].reset_index(drop=True)
    for i, sgm in enumerate(seg):
        x0, x1 = sorted(p[0] for p in sgm)
        assert x0 == pytest.approx(min(rr.loc[i, "ci_low"], rr.loc[i, "value"])) and x1 == pytest.approx(max(rr.loc[i, "ci_high"], rr.loc[i, "value"]))
    assert [t.get_text().split(" (")[0] for t in ax.get_yticklabels()] == list(rr["metric"])
    plt.close(ax.figure)


def test_the_plot_labels_and_a_metric_without_an_interval(setting):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    r = privacy_report(setting.train, setting.synthetic, setting.control, metrics=["ims", "dcr"], rng=0)
    r.loc[r["metric"] == "dcr", ["ci_low", "ci_high"]] = np.nan  # a metric that reports no interval gets no bar, not a bar of 1
    ax = plot_report(r)
    assert [t.get_text() for t in ax.get_yticklabels()] == [f"{m} ({f})" for m, f in zip(r["metric"][::-1], r["family"][::-1])]
    seg = [c for c in ax.collections if hasattr(c, "get_segments")][0].get_segments()
    dcr = seg[0]  # reversed: dcr is drawn first
    assert dcr[0][0] == dcr[1][0] == pytest.approx(r.set_index("metric").loc["dcr", "value"])
    plt.close(ax.figure)


def test_the_report_renders_as_html_in_a_notebook(setting):
    r = privacy_report(setting.train, setting.synthetic, setting.control, metrics=["ims", "dcr"], rng=0)
    h = r._repr_html_()
    assert h.startswith("<div><b>Privacy report</b>") and "data:image/png;base64," in h and "dcr" in h and "ims" in h
    plain = privacy_report(setting.train, setting.synthetic, setting.control, metrics=["ims"], rng=0)
    plain.context = None  # a report rebuilt without its context still renders
    assert "Privacy report" in plain._repr_html_()


def test_the_plot_marks_no_risk_and_full_risk_and_keeps_every_interval_in_view(setting):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    r = privacy_report(setting.train, setting.synthetic, setting.control, metrics=["ims", "dcr", "linkability"], rng=0)
    r.loc[r["metric"] == "dcr", "ci_low"] = -0.4  # an interval reaching below 0 must stay in view
    ax = plot_report(r)
    vx = sorted(l.get_xdata()[0] for l in ax.lines if len(set(l.get_xdata())) == 1 and len(l.get_xdata()) == 2)
    assert vx[:2] == [0, 1] or set(vx) >= {0, 1}
    lo, hi = ax.get_xlim()
    assert lo <= -0.4 - 0.05 + 1e-12 and lo <= -0.1 and hi >= 1.0
    r2 = r.copy(); r2["ci_low"] = r2["value"]  # no interval below 0: the axis still starts a little left of 0
    lo2, _ = plot_report(r2).get_xlim()
    assert lo2 == pytest.approx(-0.1)
    plt.close("all")
