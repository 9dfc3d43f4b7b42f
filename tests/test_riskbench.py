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
        assert t.loc[m, 1.0] == pytest.approx(1.0)
    assert t.loc["ims", 0.0] < 0.01


def test_dp_sweep_has_a_row_per_level_and_metric_and_utility(adult):
    df, schema = adult
    rows = run_riskbench(df, "dp", generator="privbayes", levels=(1.0, 100.0), metrics="ims,dcr", sizes=SMALL, rng=0, verbose=False)
    assert sorted(rows["metric"].unique()) == ["dcr", "ims", "utility_mle"]
    assert len(rows) == 2 * 3
    u = rows[rows.metric == "utility_mle"]
    assert ((u.value >= 0.0) & (u.value <= 1.0)).all()
    assert (json.loads(rows["info"].iloc[0])["epsilon"]) in (1.0, 100.0)


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
