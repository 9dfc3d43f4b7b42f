"Edges of the membership scores (achilles.nobox.membership) that the peer oracles in test_peer_metrics.py do not reach."
import numpy as np, pandas as pd, pytest
from achilles.core.data import Schema
from achilles.nobox.membership import ClassifierMIA, DCRDiff, membership_result


def _tables(n=40, seed=0):
    r = np.random.default_rng(seed)
    mk = lambda m: pd.DataFrame({"a": r.normal(size=m), "b": r.choice(["x", "y", "z"], m)})
    return mk(n), mk(n), mk(n)


def test_dcr_diff_needs_two_control_records_and_no_more():
    tr, syn, ct = _tables()
    schema = Schema.from_dataframe(pd.concat([tr, syn, ct]))
    st, sc = DCRDiff().scores(tr, syn, ct.iloc[:2], schema)  # two: each control record has one reference besides itself
    assert len(st) == len(tr) and len(sc) == 2 and np.isfinite(sc).all()
    with pytest.raises(ValueError, match="at least 2 control"):
        DCRDiff().scores(tr, syn, ct.iloc[:1], schema)


def test_membership_scores_refuse_a_missing_control_set():
    tr, syn, _ = _tables()
    for m in (DCRDiff(), ClassifierMIA(num_eval_iter=1)):
        assert m.needs_control
        with pytest.raises((ValueError, TypeError)):
            m.evaluate(tr, syn, None, rng=0)


def test_classifier_mia_parameter_edges():
    assert ClassifierMIA(num_eval_iter=1).num_eval_iter == 1
    with pytest.raises(ValueError, match="num_eval_iter"):
        ClassifierMIA(num_eval_iter=0)
    for h in (0.0, 1.0):
        with pytest.raises(ValueError, match="holdout_share"):
            ClassifierMIA(holdout_share=h)
    assert ClassifierMIA(holdout_share=0.01).holdout_share == 0.01 and ClassifierMIA(holdout_share=0.99).holdout_share == 0.99


def test_classifier_mia_builds_the_classifier_it_names():
    from sklearn.ensemble import HistGradientBoostingClassifier
    assert isinstance(ClassifierMIA(classifier="hgb")._model(0), HistGradientBoostingClassifier)
    lgb = pytest.importorskip("lightgbm")
    m = ClassifierMIA(classifier="lightgbm")._model(3)
    assert isinstance(m, lgb.LGBMClassifier) and m.get_params()["n_jobs"] == 1 and m.get_params()["random_state"] == 3
    assert isinstance(ClassifierMIA(classifier="auto")._model(0), lgb.LGBMClassifier)  # LightGBM when it is installed, as SynthEval


def test_membership_result_states_the_guessing_baseline():
    r = membership_result("x", np.array([0.9, 0.8, 0.7]), np.array([0.1, 0.2, 0.3]), attack_rate=1.0, control_rate=0.0)
    assert r.baseline_rate == 0.5 and r.value == pytest.approx(1.0)  # AUC 1 normalised to 2 AUC - 1
