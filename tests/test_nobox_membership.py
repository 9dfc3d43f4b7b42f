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


# --- ClassifierMIA's figures, against a reference written from SynthEval's description -------------------------------------

class _Stub:
    "A classifier that predicts from the first feature's sign (or a constant), and records the seeds and training sizes it saw."
    seen = []
    def __init__(self, seed, const=None): self.seed, self.const = seed, const
    def fit(self, X, y):
        _Stub.seen.append((self.seed, X.shape, float(y.sum()))); return self
    def predict_proba(self, X):
        p = np.full(len(X), float(self.const)) if self.const is not None else (X[:, 0] > 0).astype(float) * 0.8 + 0.1
        return np.c_[1 - p, p]
    def predict(self, X): return (self.predict_proba(X)[:, 1] > 0.5).astype(float)


def _reference(train, syn, ctl, schema, n_iter, share, seed, const=None):
    "ClassifierMIA's loop restated: the same draws in the same order, sklearn's scores, the standard error of the mean."
    import math
    from sklearn.metrics import f1_score, precision_score, recall_score
    cat = schema.categorical
    allx = pd.get_dummies(pd.concat([t[schema.names].astype({c: object for c in cat}) for t in (train, syn, ctl)], ignore_index=True),
                          columns=cat, drop_first=True).to_numpy(np.float64)
    R, S, H = allx[:len(train)], allx[len(train):len(train) + len(syn)], allx[len(train) + len(syn):]
    rng = np.random.default_rng(seed)
    out = {k: [] for k in ("p", "r", "f", "fpr", "seed")}
    for _ in range(n_iter):
        perm = rng.permutation(len(H)); nt = math.ceil(share * len(H))
        ht, hh = H[perm[:nt]], H[perm[nt:]]
        s = S[rng.choice(len(S), len(hh), replace=len(S) < len(hh))]
        sd = int(rng.integers(2**31)); out["seed"].append(sd)
        if len(R) < len(ht): r, h = R, ht[rng.choice(len(ht), len(R), replace=False)]
        else: r, h = R[rng.choice(len(R), len(ht), replace=False)], ht
        Xt = np.r_[r, h]; yt = np.r_[np.ones(len(r)), np.zeros(len(h))]
        pred = _Stub(sd, const).predict(Xt)
        out["p"].append(precision_score(yt, pred, zero_division=0)); out["r"].append(recall_score(yt, pred, zero_division=0))
        out["f"].append(f1_score(yt, pred, average="macro", zero_division=0)); out["fpr"].append(pred[yt == 0].mean())
    se = lambda v: np.std(v, ddof=1) / np.sqrt(len(v)) if len(v) > 1 else np.nan
    return out, se


@pytest.mark.parametrize("sizes", [(40, 30, 40), (12, 30, 40), (6, 30, 40), (30, 30, 40)],
                         ids=["train=holdout", "few train", "fewer train than tested holdout", "synthetic=holdout part"])
@pytest.mark.parametrize("n_iter", [1, 2, 3])
def test_classifier_mia_figures_match_the_reference(monkeypatch, sizes, n_iter):
    nt, ns, nc = sizes
    r = np.random.default_rng(7)
    mk = lambda m, shift: pd.DataFrame({"a": r.normal(shift, 1, size=m), "b": r.choice(["x", "y", "z"], m)})
    train, syn, ctl = mk(nt, 0.7), mk(ns, 0.5), mk(nc, -0.3)
    schema = Schema.from_dataframe(pd.concat([train, syn, ctl]))
    _Stub.seen = []
    monkeypatch.setattr(ClassifierMIA, "_model", lambda self, seed: _Stub(seed))
    res = ClassifierMIA(num_eval_iter=n_iter, holdout_share=0.25, schema=schema).evaluate(train, syn, ctl, rng=np.random.default_rng(11))
    ref, se = _reference(train, syn, ctl, schema, n_iter, 0.25, 11)
    assert [s for s, _, _ in _Stub.seen] == ref["seed"]  # the same draws, in the same order
    m = res.metrics
    for key, k in (("MIA precision", "p"), ("MIA recall", "r"), ("MIA macro F1", "f")):
        assert m[key] == pytest.approx(np.mean(ref[k]), abs=1e-12), key
        if n_iter > 1: assert m[key + " se"] == pytest.approx(se(ref[k]), abs=1e-12), key
        else: assert np.isnan(m[key + " se"]), key
    assert res.attack_rate == pytest.approx(np.mean(ref["r"])) and res.control_rate == pytest.approx(np.mean(ref["fpr"]))
    # the classifier is trained on as many synthetic records as holdout records, labelled 1 and 0
    for _, shape, pos in _Stub.seen: assert shape[0] == 2 * pos and shape[1] == 3  # a, and b's 3 levels with the first dropped


def test_classifier_mia_precision_is_zero_when_nothing_is_called_a_member(monkeypatch):
    "sklearn's zero_division: no record predicted a member gives precision 0 (SynthEval's reading), not 1."
    tr, syn, ct = _tables()
    monkeypatch.setattr(ClassifierMIA, "_model", lambda self, seed: _Stub(seed, const=0.0))
    m = ClassifierMIA(num_eval_iter=2).evaluate(tr, syn, ct, rng=0).metrics
    assert m["MIA precision"] == 0.0 and m["MIA recall"] == 0.0


def test_classifier_mia_needs_min_control_records_and_no_more(monkeypatch):
    from achilles.core.base import MIN_CONTROL
    tr, syn, ct = _tables()
    monkeypatch.setattr(ClassifierMIA, "_model", lambda self, seed: _Stub(seed))
    assert np.isfinite(ClassifierMIA(num_eval_iter=1).evaluate(tr, syn, ct.iloc[:MIN_CONTROL], rng=0).attack_rate)
    with pytest.raises(ValueError, match=f"classifier_mia: control has {MIN_CONTROL - 1} record.s.; it needs at least {MIN_CONTROL}"):
        ClassifierMIA(num_eval_iter=1).evaluate(tr, syn, ct.iloc[:MIN_CONTROL - 1], rng=0)


# --- DPI: the reference size and a control record whose own row is crowded out by its duplicates ---------------------------

def test_dpi_needs_k_plus_one_reference_and_synthetic_records_and_no_more():
    from achilles.nobox.membership import DPI
    tr, syn, ct = _tables(n=6)
    schema = Schema.from_dataframe(pd.concat([tr, syn, ct]))
    st, sc = DPI(k=11).scores(tr, syn, ct, schema)  # 12 reference and synthetic records: just enough
    assert len(st) == 6 and len(sc) == 6
    for k in (12, 13):
        with pytest.raises(ValueError, match=f"k={k} needs at least {k + 1}"):
            DPI(k=k).scores(tr, syn, ct, schema)


def test_dpi_drops_the_farthest_neighbour_when_duplicates_crowd_out_a_record_itself():
    "Five identical control rows and k = 2: some rows' own index is not among their 3 nearest; each still gets k neighbours."
    from achilles.nobox.membership import DPI
    ct = pd.DataFrame({"a": [0.0] * 5 + [5.0, 6.0], "b": ["x"] * 7})
    syn = pd.DataFrame({"a": [0.0, 10.0, 11.0], "b": ["x"] * 3})
    tr = pd.DataFrame({"a": [0.0, 10.5], "b": ["x", "x"]})
    schema = Schema.from_dataframe(pd.concat([tr, syn, ct]))
    st, sc = DPI(k=2).scores(tr, syn, ct, schema)
    assert len(sc) == 7 and np.isfinite(sc).all()
    sig = lambda n: 1 / (1 + np.exp(-(n / (2 - n + 1e-20))))
    # the duplicates' nearest are other duplicates (and the synthetic 0.0 at distance 0): at most one synthetic among 2
    assert set(np.round(sc[:5], 12)) <= {round(sig(0.0), 12), round(sig(1.0), 12)}
    assert st[1] == pytest.approx(sig(2.0))  # 10.5 sits between the synthetic 10 and 11


def test_dpi_says_when_it_reads_a_copying_release():
    "Issue 40: DPI scored a verbatim copy at 0.04 where DCR-diff gave 0.68, silently. Its definition stays the peer's; it now says so."
    import warnings
    from achilles.core.data import DataWarning, load_adult
    from achilles.nobox.membership import DPI
    a = load_adult().sample(900, random_state=2).reset_index(drop=True)
    tr, ct, other = a.iloc[:300], a.iloc[300:600], a.iloc[600:]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = DPI().evaluate(tr, tr.copy(), ct, rng=0)
    said = [str(x.message) for x in w if issubclass(x.category, DataWarning) and str(x.message).startswith("dpi:")]
    assert r.metrics["verbatim_copies"] == 1.0 and len(said) == 1 and "100% of the training records have a verbatim copy" in said[0]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = DPI().evaluate(tr, other, ct, rng=0)
    assert r.metrics["verbatim_copies"] < 0.05 and not [x for x in w if str(x.message).startswith("dpi:")]


def test_dpi_counts_the_first_synthetic_record_and_warns_at_exactly_five_percent():
    "Mutation round: the pool is control then synthetic, so index len(control) is the first synthetic record; 1 copy in 20 warns."
    import warnings
    from achilles.core.data import DataWarning
    from achilles.nobox.membership import DPI
    g = np.random.default_rng(0)
    tr = pd.DataFrame({"x": np.arange(20) * 10.0, "y": np.arange(20) * 7.0})
    ct = pd.DataFrame({"x": 1000 + np.arange(10) * 10.0, "y": 1000 + np.arange(10) * 7.0})
    syn = tr.iloc[[0]].reset_index(drop=True)  # one synthetic record: a copy of training record 0, pool index len(ct)
    sch = Schema.from_dataframe(pd.concat([tr, ct]))
    assert DPI(k=1).scores(tr, syn, ct, sch)[0][0] == 1.0  # its nearest is the synthetic record: sigmoid(1 / 0+) = 1
    ct.loc[9] = [0.0, 0.0]  # a control record equal to the synthetic one: its nearest besides itself is that record
    assert DPI(k=1).scores(tr, syn, ct, sch)[1][9] == 1.0
    syn2 = pd.concat([tr.iloc[[0]], pd.DataFrame({"x": g.uniform(3000, 4000, 30), "y": g.uniform(3000, 4000, 30)})], ignore_index=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = DPI(k=3).evaluate(tr, syn2, ct, rng=0)
    assert r.metrics["verbatim_copies"] == 0.05 and any(str(x.message).startswith("dpi: 5%") for x in w if issubclass(x.category, DataWarning))
