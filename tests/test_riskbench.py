"""The risk-insertion benchmark end to end: each risk model's invariants at a small scale, the command, and resuming after kill -9."""
import json, signal, subprocess, sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, load_adult
from achilles.core.results import ResultsStore
from helpers import wait_rows
from achilles.experiments.riskbench import (Outliers, Overfit, OverfitWarning, run_riskbench, split_data, summary_table)

ACHILLES = str(Path(sys.executable).parent / "achilles")  # the console script of this environment
SMALL = dict(train=1000, control=1000, release=1000, validation=500, reference=500)


@pytest.fixture(scope="module")
def adult():
    df = load_adult()
    return df, Schema.from_dataframe(df)


def test_leaky_sweep_is_monotone_in_ims_and_dcr(adult):
    df, schema = adult
    rows = run_riskbench(df, "leaky", levels=(0.0, 0.2, 0.6, 1.0), metrics="ims,dcr", sizes=SMALL, utility=False, rng=3, verbose=False)
    t = summary_table(rows)
    for m in ("ims", "dcr"):
        assert np.all(np.diff(t.loc[m].to_numpy()) > 0), t
    # the paper's leaky model (Sec. 5.1.1) adds f_l |D_t| training rows to D_r: every copied training record is matched (IMS = f_l),
    # and f_l / (1 + f_l) of the release is copies, which DCR finds closer to train than to control
    assert t.loc["ims"].to_numpy() == pytest.approx([0.0, 0.2, 0.6, 1.0], abs=1e-9), t
    assert t.loc["dcr"].to_numpy() == pytest.approx([f / (1 + f) for f in (0.0, 0.2, 0.6, 1.0)], abs=0.02), t
    # the earlier form replaces D_r's rows instead: the whole release is training rows at f_l = 1
    r = summary_table(run_riskbench(df, "leaky", levels=(1.0,), metrics="ims,dcr", sizes=SMALL, utility=False, rng=3, verbose=False,
                                    model_params=dict(mode="replace")))
    assert r.loc["ims", 1.0] == pytest.approx(1.0) and r.loc["dcr", 1.0] == pytest.approx(1.0), r


def test_dp_sweep_has_a_row_per_level_and_metric_and_utility(adult, monkeypatch):
    """One row per level and metric; and the sweep's releases respond to ε: at ε = 0.05 PrivBayes' release is far from the
    training data (mean 2-way TVD), at ε = 100 close to it. (The risk metrics themselves stay at 0 for PrivBayes at every ε,
    here and at 10,000 records in figures/riskbench_table2: it does not memorise records; that is checked too.)"""
    from achilles.fidelity import pairwise_tvd
    import achilles.experiments.riskbench as rb
    df, schema = adult
    releases, evaluate = {}, rb.evaluate_setting
    def spy(setting, *a, **kw):
        releases[setting.level] = (setting.train, setting.synthetic)
        return evaluate(setting, *a, **kw)
    monkeypatch.setattr(rb, "evaluate_setting", spy)
    rows = run_riskbench(df, "dp", generator="privbayes", levels=(0.05, 100.0), metrics="ims,dcr", sizes=SMALL, rng=0, verbose=False)
    assert sorted(rows["metric"].unique()) == ["dcr", "ims", "utility_mle"]
    assert len(rows) == 2 * 3
    assert sorted(json.loads(i)["epsilon"] for i in rows["info"]) == [0.05] * 3 + [100.0] * 3
    u = rows[rows.metric == "utility_mle"]
    assert ((u.value >= 0.0) & (u.value <= 1.0)).all()
    tvd = {eps: float(pairwise_tvd(train, syn, schema).to_numpy().mean()) for eps, (train, syn) in releases.items()}
    assert sorted(tvd) == [0.05, 100.0]
    assert tvd[100.0] < 0.6 * tvd[0.05], tvd
    risk = rows[rows.metric.isin(["ims", "dcr"])]
    assert (risk.ci_low <= 0.01).all() and (risk.value.abs() < 0.1).all(), risk  # no memorised record at either ε


def test_overfit_reaches_its_target_or_says_so(adult):
    df, schema = adult
    sp = split_data(df, SMALL, rng=1)
    ov = Overfit()
    st = ov.prepare(sp, schema, "synthpop", {}, 0)
    reach = st["losses"][st["best"]:].max() / st["L_star"]
    for f in (1.0, 1.2):
        with pytest.warns(OverfitWarning) if f > reach else _nothing():
            s = ov.setting(sp, schema, f, "synthpop", {}, st, 0)
        # SynthPop's path is discrete (min_samples_leaf): the chosen point is the first at or past the target, or its neighbour
        losses = st["losses"]
        i = [p for p in st["path"]].index(s.info["point"])
        if f == 1.0: assert i == st["best"]
        elif f <= reach:
            j = st["best"] + 1 + int(np.argmax(losses[st["best"] + 1:] >= f * st["L_star"]))
            assert i in (j - 1, j)
        assert len(s.synthetic) == len(sp.release)


class _nothing:
    def __enter__(self): return self
    def __exit__(self, *a): return False


def test_outliers_remove_exactly_x_percent(adult):
    df, schema = adult
    sp = split_data(df, SMALL, rng=2)
    m = Outliers(overfit=1.0)
    st = m.prepare(sp, schema, "baynet", {}, 0)
    s = m.setting(sp, schema, 5.0, "baynet", {}, st, 0)
    assert s.info["removed"] == {p: int(round(0.05 * n)) for p, n in sp.sizes().items()}
    assert len(s.train) == 950
    top = np.argsort(-st["scores"]["train"], kind="stable")[:50]
    kept = set(map(tuple, s.train.astype(str).to_numpy()))
    assert not any(tuple(r) in kept for r in sp.train.iloc[top].astype(str).to_numpy()
                   if (sp.train.astype(str) == pd.Series(r, index=sp.train.columns)).all(axis=1).sum() == 1)


def test_canary_leaked_is_recovered_and_unleaked_is_near_chance(adult):
    df, schema = adult
    rows = run_riskbench(df, "canary", levels=(0.0, 1.0), metrics="inference_distance", sizes=SMALL, model_params=dict(n_canaries=20),
                         rng=0, verbose=False)
    agg = rows[rows.canary.isna()].set_index("level")
    assert agg.loc[1.0, "value"] == 1.0  # every canary's random secret is in the release: the nearest record gives it back
    assert agg.loc[0.0, "value"] < 1.0
    assert agg.loc[0.0, "baseline_rate"] == pytest.approx(0.5)  # income has two values
    assert (rows[rows.canary.notna()].groupby("level").size() == 20).all()


def test_resume_after_kill_equals_a_clean_run(tmp_path):
    cmd = [ACHILLES, "riskbench", "--n-train", "1500", "--metrics", "ims,dcr,knn_dcr,inference_distance",
           "--no-utility", "--quiet", "--levels", "0,0.2,0.4,0.6,0.8,1"]
    clean, killed = tmp_path / "clean.sqlite", tmp_path / "killed.sqlite"
    subprocess.run(cmd + ["--results", str(clean)], check=True, capture_output=True, timeout=600)
    p = subprocess.Popen(cmd + ["--results", str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_rows(killed, 4, p, timeout=300), "the run never wrote its first rows"
    p.send_signal(signal.SIGKILL); p.wait()
    partial = len(ResultsStore(killed).read())
    assert 0 < partial
    subprocess.run(cmd + ["--results", str(killed)], check=True, capture_output=True, text=True, timeout=600)
    a, b = ResultsStore(clean).read(), ResultsStore(killed).read()
    assert len(a) == len(b) == 24
    key = ["level", "metric"]
    a, b = a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a[key + ["value", "ci_low", "ci_high"]], b[key + ["value", "ci_low", "ci_high"]])
    again = subprocess.run(cmd + ["--results", str(killed)], check=True, capture_output=True, text=True, timeout=600)
    assert len(ResultsStore(killed).read()) == 24 and "24 rows" in again.stdout


def test_cli_checks_options_before_work(tmp_path):
    r = subprocess.run([ACHILLES, "riskbench", "--risk-model", "overfit", "--results", ""],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--generator" in r.stderr
    r = subprocess.run([ACHILLES, "riskbench", "--risk-model", "nosuch", "--results", ""],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "nosuch" in r.stderr


def _epoch_toy():
    "A stand-in for a generator trained in epochs (TVAE): a known held-out loss 10 / e + e / 10 (minimum 2 at epoch 10)."
    from achilles.core.base import Generator

    class EpochToy(Generator):
        "Trains in epochs with a known U-shaped held-out loss; samples training rows."
        validation_loss = True
        def __init__(self, schema, epochs: int = 5): self.schema, self.epochs = schema, epochs
        def fit(self, df, rng=None, validation=None):
            Generator.fit(self, df, rng)
            e = np.arange(1, self.epochs + 1, dtype=float)
            self.losses_ = pd.DataFrame({"epoch": e.astype(int), "train_loss": 1 / e,
                                         "val_loss": 10 / e + e / 10 if validation is not None else np.nan})
            return self
        def _fit(self, enc, rng): self.enc_ = enc
        def _sample(self, n, rng): return self.enc_.take(rng.integers(self.enc_.n, size=n))
    return EpochToy


@pytest.fixture
def epoch_toy():
    from achilles.generators import GENERATORS
    GENERATORS.register("epoch_toy", _epoch_toy(), summary="test stand-in for a generator trained in epochs")
    yield "epoch_toy"
    GENERATORS.unregister("epoch_toy")


def test_overfit_epoch_path_stops_where_the_heldout_loss_reaches_f_o(adult, epoch_toy):
    "The paper's rule on a known curve: best epoch 10 (L* = 2); f_o = 1.5 is crossed between epochs 26 (2.985) and 27 (3.070)."
    import warnings
    from achilles.experiments.riskbench import epoch_path
    df, schema = adult
    sp = split_data(df, SMALL, rng=0)
    assert epoch_path(epoch_toy) and epoch_path("tvae") and not epoch_path("ctgan") and not epoch_path("baynet")
    ov = Overfit(max_epochs=40, smooth_epochs=1)  # the raw curve: the toy has no noise to smooth
    st = ov.prepare(sp, schema, epoch_toy, {}, 0)
    assert st["best"] == 9 and st["L_star"] == pytest.approx(2.0)
    s1 = ov.setting(sp, schema, 1.0, epoch_toy, {}, st, 1)
    assert s1.info["point"] == {"epochs": 10} and len(s1.synthetic) == len(sp.release)
    s15 = ov.setting(sp, schema, 1.5, epoch_toy, {}, st, 1)
    assert s15.info["point"] == {"epochs": 26} and s15.info["reached_ratio"] == pytest.approx((10 / 26 + 2.6) / 2)
    with pytest.warns(OverfitWarning, match="at most 2.125"):
        s3 = ov.setting(sp, schema, 3.0, epoch_toy, {}, st, 1)
    assert s3.info["point"] == {"epochs": 40}
    with pytest.raises(ValueError, match=r"leave them out"): ov.prepare(sp, schema, epoch_toy, {"epochs": 3}, 0)
    with pytest.raises(ValueError, match="epoch path"): ov.prepare(sp, schema, "independent", {}, 0)
    with pytest.raises(ValueError, match="max_epochs"): Overfit(max_epochs=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = run_riskbench(df, "overfit", generator=epoch_toy, levels=(1.0, 1.5), metrics="ims", sizes=SMALL, utility=False,
                             model_params=dict(max_epochs=40, smooth_epochs=1), rng=0, verbose=False)
    assert sorted(rows["level"]) == [1.0, 1.5]
