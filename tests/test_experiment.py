"""Experiment runner: oracle AUCs (Identity ~ 1 on an outlier, IndependentMarginals ~ 0.5 on a typical record), resume after
a kill, results rows, profiles, and a run on a Dask cluster equal to the local one."""
import json

import numpy as np
import pandas as pd
import pytest

import achilles.experiments.runner as experiment
from achilles.core.data import Schema, load_adult
from achilles.distance import vulnerability_scores
from achilles.shadow import ATTACKS
from achilles.experiments.runner import PROFILES, attack_record, resolve_profile, run_attack_experiment
from achilles.core.results import read_results
from achilles.shadow.game import ThreatModel, play_game


@pytest.fixture(scope="module")
def small():
    df = load_adult()
    schema = Schema.from_dataframe(df)  # the schema of the full table, as in a real run
    return df.iloc[:3000].reset_index(drop=True), schema


def kw(small, **over):
    d = dict(dataset="adult", population=small, selector="distance", records=2, n_shadow=60, n_test=40, dataset_size=150,
             verbose=False)
    d.update(over)
    return d


def test_identity_generator_gives_auc_one_on_outliers(small, tmp_path):
    res = run_attack_experiment(generator="identity", results_path=tmp_path / "r.sqlite", cache_dir=None, **kw(small))
    assert res["auc"].tolist() == [1.0, 1.0]
    assert res["accuracy"].min() >= 0.95
    assert (res["scale"] == "reduced").all() and (res["profile"] == "quick").all()


def test_independent_marginals_give_auc_near_half_for_typical_records(small):
    df, schema = small
    typical = np.argsort(vulnerability_scores(df, schema, k=5))[:3]  # the three least vulnerable records
    tm = ThreatModel(df, schema, generator="independent", dataset_size=150, n_aux=1500, n_test_pool=1000, n_shadow=200,
                     n_test=100, name="adult-3k")
    res = []
    for i, t in enumerate(typical):
        g = play_game(tm, int(t), rng=100 + i, verbose=False)
        res.append(attack_record(g, schema, "query", rng=i)[0])
    aucs = [r.auc for r in res]
    # no signal, to what 100 test datasets (50 IN, 50 OUT) can tell: an AUC's standard error at 0.5 is 0.058 (Hanley-McNeil),
    # so each AUC lies within 3 standard errors of 0.5, and the mean of the three within 2.5 of its own (0.058 / sqrt(3))
    se = (res[0].ci_high - res[0].ci_low) / (2 * 1.96)
    assert all(abs(a - 0.5) <= 3 * 0.058 for a in aucs) and 0.05 < se < 0.065, aucs
    assert abs(np.mean(aucs) - 0.5) <= 2.5 * 0.058 / np.sqrt(3), aucs


def test_results_rows_are_tidy_and_labelled(small, tmp_path):
    res = run_attack_experiment(generator="independent", results_path=tmp_path / "r.sqlite", cache_dir=tmp_path / "c",
                                rng=3, **kw(small, records=1))
    stored = read_results(tmp_path / "r.sqlite")
    assert len(stored) == 1
    row = stored.iloc[0]
    for col in ["dataset", "generator", "selector", "attack", "record_id", "auc", "accuracy", "tpr_at_low_fpr", "profile",
                "scale", "dataset_size", "n_aux", "n_test_pool", "n_shadow", "n_test", "seed", "config", "run_id"]:
        assert col in stored.columns, col
    assert (row["dataset"], row["generator"], row["selector"], row["attack"], row["seed"]) == \
        ("adult", "independent", "distance", "query", 3)
    cfg = json.loads(row["config"])
    assert cfg["n_shadow"] == 60 and cfg["scale"] == "reduced" and cfg["dataset_size"] == 150
    assert 0 <= row["auc"] <= 1 and int(row["record_id"]) == int(res["record_id"].iloc[0])


def test_resume_after_kill_loses_nothing_and_duplicates_nothing(small, tmp_path, monkeypatch):
    args = kw(small, records=3)
    clean = run_attack_experiment(generator="independent", results_path=tmp_path / "clean.sqlite", cache_dir=None, **args)
    real = experiment.attack_record
    calls = {"n": 0}

    def dies_on_second_record(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2: raise KeyboardInterrupt("simulated kill")
        return real(*a, **k)

    monkeypatch.setattr(experiment, "attack_record", dies_on_second_record)
    path = tmp_path / "r.sqlite"
    with pytest.raises(KeyboardInterrupt):
        run_attack_experiment(generator="independent", results_path=path, cache_dir=tmp_path / "c", **args)
    first = read_results(path)
    assert len(first) == 1
    monkeypatch.setattr(experiment, "attack_record", real)
    resumed = run_attack_experiment(generator="independent", results_path=path, cache_dir=tmp_path / "c", **args)
    stored = read_results(path)
    assert len(stored) == 3 and stored["record_id"].is_unique
    assert stored.iloc[0]["finished_at"] == first.iloc[0]["finished_at"]  # the finished record was not redone
    assert resumed["record_id"].tolist() == clean["record_id"].tolist()
    np.testing.assert_allclose(resumed["auc"], clean["auc"])
    # the interrupted record's datasets came from the cache
    assert int(stored.iloc[1]["n_cached"]) == 100
    # a rerun with everything done changes nothing
    again = run_attack_experiment(generator="independent", results_path=path, cache_dir=tmp_path / "c", **args)
    assert len(read_results(path)) == 3
    np.testing.assert_allclose(again["auc"], clean["auc"])


def test_other_configuration_is_not_mistaken_for_done(small, tmp_path):
    path = tmp_path / "r.sqlite"
    run_attack_experiment(generator="independent", results_path=path, cache_dir=None, **kw(small, records=1))
    run_attack_experiment(generator="independent", results_path=path, cache_dir=None, rng=1, **kw(small, records=1))
    run_attack_experiment(generator="identity", results_path=path, cache_dir=None, **kw(small, records=1))
    assert len(read_results(path)) == 3 and read_results(path)["run_id"].nunique() == 3


def test_share_out_protocol(small, tmp_path):
    res = run_attack_experiment(generator="identity", results_path=None, cache_dir=None, share_out=True, **kw(small))
    assert res["auc"].tolist() == [1.0, 1.0]
    assert res["n_generated"].tolist() == [100, 50]  # the second record reuses the 50 OUT datasets of the first


def test_profiles_and_registry():
    assert (PROFILES["paper"].dataset_size, PROFILES["paper"].n_shadow, PROFILES["paper"].n_test) == (1000, 4000, 200)
    assert resolve_profile("paper")[1] and not resolve_profile("quick")[1]
    assert not resolve_profile("paper", n_shadow=400)[1]
    assert set(ATTACKS) >= {"query", "target-attention"}
    with pytest.raises(ValueError, match="profile='fast'"):
        run_attack_experiment(profile="fast", results_path=None, cache_dir=None, verbose=False)
    with pytest.raises(ValueError, match="attack='gan'"):
        run_attack_experiment(attack="gan", results_path=None, cache_dir=None, verbose=False)
    with pytest.raises(ValueError, match="records=0"):
        run_attack_experiment(records=0, results_path=None, cache_dir=None, verbose=False)


def test_dask_run_equals_local_run(small):
    distributed = pytest.importorskip("distributed")
    from joblib import parallel_config
    args = kw(small, records=1, attack_params=dict(subsets=2048))
    local = run_attack_experiment(generator="baynet", results_path=None, cache_dir=None, jobs=1, **args)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        with parallel_config(backend="dask"):
            remote = run_attack_experiment(generator="baynet", results_path=None, cache_dir=None, jobs=2, **args)
    cols = ["record_id", "auc", "accuracy", "tpr_at_low_fpr", "n_generated"]
    pd.testing.assert_frame_equal(local[cols], remote[cols])
