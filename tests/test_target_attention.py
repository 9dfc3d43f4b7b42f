"""Target attention: the numba preprocessing against a slow pure-Python reference (duplicates, ties, padding, unseen codes),
the network's invariance to padding, learning on separable toy data, determinism under a seed, save/load."""
import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import NotFittedError
import torch

from achilles.core.data import Column, Encoded, Schema, encode
from achilles.distance import distances_to
from achilles.shadow.target_attention import TargetAttention, TargetAttentionAttack, TargetAttentionInput, feature_names, preprocess_datasets


# --- a slow reference of the Appendix A preprocessing -----------------------------------------------------------------
def reference_preprocess(datasets, target: Encoded, schema: Schema, n_closest: int):
    "Python loops: unique records in first-occurrence order with counts, stable sort by distance, one-hot by hand."
    card = list(schema.cardinalities)
    starts = np.concatenate([[0], np.cumsum(card)[:-1]]).astype(int) if card else np.zeros(0, int)
    width, n_cont = int(sum(card)), len(schema.continuous)
    F = width + n_cont + 2

    def row(cat, cont, mult, dist):
        v = np.zeros(F, dtype=np.float32)
        for j, c in enumerate(cat):
            if c >= 0: v[starts[j] + c] = 1.0
        v[width:width + n_cont] = cont
        v[-2], v[-1] = mult, dist
        return v

    m = len(datasets)
    records = np.zeros((m, n_closest, F), dtype=np.float32)
    mask = np.zeros((m, n_closest), dtype=bool)
    index = np.full((m, n_closest), -1, dtype=np.int64)
    n_unique = np.zeros(m, dtype=np.int64)
    for d, enc in enumerate(datasets):
        dist = distances_to(enc, target)  # the same function the kernel path uses, row by row
        first, count = {}, {}
        for i in range(enc.n):
            key = tuple(int(c) for c in enc.cat[i]) + tuple(float(x) for x in enc.cont[i])
            if key not in first: first[key], count[key] = i, 0
            count[key] += 1
        keys = list(first)  # insertion order = first occurrence
        n_unique[d] = len(keys)
        order = sorted(range(len(keys)), key=lambda u: (dist[first[keys[u]]], first[keys[u]]))
        for t, u in enumerate(order[:n_closest]):
            i = first[keys[u]]
            records[d, t] = row(enc.cat[i], enc.cont[i], count[keys[u]], dist[i])
            mask[d, t], index[d, t] = True, i
    trow = row(target.cat[0], target.cont[0], 1, 0)
    return records, mask, trow, index, n_unique


def small_schema(kind):
    cats = [Column("a", "categorical", ("x", "y", "z")), Column("b", "categorical", (0, 1))]
    conts = [Column("u", "continuous", lower=0.0, upper=2.0), Column("w", "continuous", lower=0.0, upper=1.0)]
    cols = {"mixed": [cats[0], conts[0], cats[1], conts[1]], "categorical": cats, "continuous": conts}[kind]
    return Schema(tuple(cols))


def random_encoded(schema, n, rng, levels=3):
    "Few distinct values per column: many duplicates and many ties in distance."
    cat = np.stack([rng.integers(0, c, n) for c in schema.cardinalities], axis=1).astype(np.int32) \
        if len(schema.categorical) else np.zeros((n, 0), np.int32)
    cont = (rng.integers(0, levels, (n, len(schema.continuous))) / (levels - 1)).astype(np.float64)
    return Encoded(np.ascontiguousarray(cat), np.ascontiguousarray(cont))


@pytest.mark.parametrize("kind", ["mixed", "categorical", "continuous"])
@pytest.mark.parametrize("n_closest", [1, 4, 25])
def test_preprocess_matches_reference(kind, n_closest):
    rng = np.random.default_rng(len(kind) * 100 + n_closest)
    schema = small_schema(kind)
    sizes = [1, 2, 7, 30, 60, 5]
    datasets = [random_encoded(schema, n, rng) for n in sizes]
    target = random_encoded(schema, 1, rng)
    got = preprocess_datasets(datasets, target, schema, n_closest=n_closest)
    want = reference_preprocess(datasets, target, schema, n_closest)
    np.testing.assert_array_equal(got.mask, want[1])
    np.testing.assert_array_equal(got.rows, want[3])
    np.testing.assert_array_equal(got.n_unique, want[4])
    np.testing.assert_array_equal(got.records, want[0])
    np.testing.assert_array_equal(got.target, want[2])
    assert got.records.dtype == np.float32 and got.records.flags.c_contiguous


def test_preprocess_ties_keep_first_occurrence_order():
    schema = small_schema("categorical")
    # every record differs from the target (a=x, b=0) in exactly one attribute: all at the same distance
    cat = np.array([[1, 0], [0, 1], [2, 0], [1, 0], [0, 1]], dtype=np.int32)
    enc = Encoded(cat, np.zeros((5, 0)))
    t = Encoded(np.array([[0, 0]], dtype=np.int32), np.zeros((1, 0)))
    got = preprocess_datasets([enc], t, schema, n_closest=5)
    np.testing.assert_array_equal(got.rows[0], [0, 1, 2, -1, -1])
    np.testing.assert_array_equal(got.records[0, :3, -2], [2, 2, 1])  # multiplicities
    np.testing.assert_array_equal(got.records[0, 3:], 0)


def test_preprocess_unseen_code_is_all_zero_one_hot():
    schema = small_schema("categorical")
    enc = Encoded(np.array([[-1, 1], [2, 0]], dtype=np.int32), np.zeros((2, 0)))
    t = Encoded(np.array([[2, 0]], dtype=np.int32), np.zeros((1, 0)))
    got = preprocess_datasets([enc], t, schema, n_closest=2)
    want = reference_preprocess([enc], t, schema, 2)
    np.testing.assert_array_equal(got.records, want[0])
    assert got.records[0, 1, :3].sum() == 0  # the unseen record comes second (farther), no 'a' bit set


def test_preprocess_dataframes_equal_encoded_and_target_row():
    schema = small_schema("mixed")
    rng = np.random.default_rng(1)
    encs = [random_encoded(schema, 20, rng) for _ in range(3)]
    from achilles.core.data import decode
    dfs = [decode(e, schema) for e in encs]
    t = decode(encs[0].take([3]), schema)
    a = preprocess_datasets(encs, encs[0].take([3]), schema, n_closest=8)
    b = preprocess_datasets(dfs, t, schema, n_closest=8)
    np.testing.assert_array_equal(a.records, b.records)
    # the target is in datasets[0]: its closest record is the target itself, at distance 0
    np.testing.assert_array_equal(a.records[0, 0, :-2], a.target[:-2])
    assert a.records[0, 0, -1] == 0 and a.target[-2:].tolist() == [1.0, 0.0]
    assert len(feature_names(schema)) == a.n_features == 3 + 1 + 2 + 1 + 2


def test_preprocess_validation():
    schema = small_schema("mixed")
    rng = np.random.default_rng(0)
    e = random_encoded(schema, 5, rng)
    with pytest.raises(ValueError, match="n_closest=0"): preprocess_datasets([e], e.take([0]), schema, n_closest=0)
    with pytest.raises(ValueError, match="empty"): preprocess_datasets([], e.take([0]), schema)
    with pytest.raises(ValueError, match="exactly one record"): preprocess_datasets([e], e, schema)
    with pytest.raises(ValueError, match=r"datasets\[1\] has no records"):
        preprocess_datasets([e, e.take(np.arange(0))], e.take([0]), schema)
    with pytest.raises(TypeError, match="list"): preprocess_datasets(e, e.take([0]), schema)
    bad = Encoded(e.cat[:, :1].copy(), e.cont)
    with pytest.raises(ValueError, match=r"datasets\[0\]"): preprocess_datasets([bad], e.take([0]), schema)


# --- network -------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("attention", ["standard", "paper"])
def test_padding_does_not_change_prediction(attention):
    torch.manual_seed(0)
    net = TargetAttention(9, attention=attention).eval()
    x = torch.randn(4, 6, 9); mask = torch.ones(4, 6, dtype=torch.bool); mask[2, 4:] = False; t = torch.randn(9)
    x[~mask] = 0
    lo, w = net(x, mask, t, return_weights=True)
    xp = torch.cat([x, torch.zeros(4, 10, 9)], 1); mp = torch.cat([mask, torch.zeros(4, 10, dtype=torch.bool)], 1)
    lp, wp = net(xp, mp, t, return_weights=True)
    assert lo.shape == (4,) and w.shape == (4, 6) and lp.shape == (4,)
    torch.testing.assert_close(lp, lo, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(wp[:, :6], w, rtol=1e-6, atol=1e-6)
    assert torch.all(wp[:, 6:] == 0) and torch.all(w[2, 4:] == 0)
    # garbage in masked rows does not matter either
    xg = xp.clone(); xg[~mp] = 1e3
    torch.testing.assert_close(net(xg, mp, t), lo, rtol=1e-6, atol=1e-6)


def test_attention_forms_differ():
    torch.manual_seed(0)
    a = TargetAttention(5, attention="standard").eval()
    b = TargetAttention(5, attention="paper").eval(); b.load_state_dict(a.state_dict())
    x = torch.randn(3, 4, 5); m = torch.ones(3, 4, dtype=torch.bool); t = torch.randn(5)
    assert not torch.allclose(a(x, m, t), b(x, m, t))


# --- training on separable toy data ----------------------------------------------------------------------------------
def toy_game(n_per_class, rng, size=40):
    "IN datasets hold a copy of the target; OUT ones do not (the target has a value that never occurs elsewhere)."
    schema = small_schema("mixed")
    tgt = Encoded(np.array([[2, 1]], dtype=np.int32), np.array([[1.0, 1.0]]))
    out, labels = [], []
    for lab in [1] * n_per_class + [0] * n_per_class:
        e = random_encoded(schema, size, rng, levels=5)
        e.cat[:, 0] = np.minimum(e.cat[:, 0], 1)  # no record has a = z except the target
        if lab: e.cat[0], e.cont[0] = tgt.cat[0], tgt.cont[0]
        out.append(e); labels.append(lab)
    return schema, tgt, out, np.array(labels)


@pytest.fixture(scope="module")
def toy():
    rng = np.random.default_rng(0)
    schema, tgt, shadow, y = toy_game(60, rng)
    _, _, test, yt = toy_game(30, rng)
    return schema, tgt, shadow, y, test, yt


def fit_toy(toy, rng=0, **kw):
    schema, tgt, shadow, y, test, yt = toy
    params = dict(n_closest=10, epochs=60, patience=15, min_epochs=1, lr=1e-2, rng=rng, verbose=False, device="cpu")
    params.update(kw)
    return TargetAttentionAttack(tgt, schema, **params).fit(shadow, y)


def test_separable_toy_data_reaches_auc_1(toy):
    a = fit_toy(toy)
    res = a.score(toy[4], toy[5])
    assert res.auc > 0.99
    h = a.history_
    assert list(h.columns[:5]) == ["epoch", "train_loss", "val_loss", "val_auc", "best"]
    assert h["val_loss"].min() == pytest.approx(h.loc[h["epoch"] == a.best_epoch_, "val_loss"].item())
    assert h["train_loss"].iloc[-1] < h["train_loss"].iloc[0]
    w = a.attention_weights(toy[4][:3])
    assert w.shape == (3, 10)
    np.testing.assert_allclose(w.sum(1), 1, rtol=1e-5)


def test_early_stopping_patience_and_min_epochs(toy):
    a = fit_toy(toy, epochs=40, patience=1, min_epochs=1, lr=1e-1)
    h = a.history_
    assert len(h) < 40  # stopped early
    assert not h["best"].iloc[-1] and h["best"].iloc[-2]  # one epoch without improvement, then stop
    b = fit_toy(toy, epochs=12, patience=1, min_epochs=10, lr=1e-1)
    assert len(b.history_) >= 10
    c = fit_toy(toy, epochs=12, patience=None)
    assert len(c.history_) == 12
    d = fit_toy(toy, epochs=5, val_fraction=0)  # no validation: the last epoch's weights
    assert d.history_["val_loss"].isna().all() and d.best_epoch_ == 5


def test_same_seed_same_result_other_seed_differs(toy):
    a, b, c = fit_toy(toy, epochs=8, rng=3), fit_toy(toy, epochs=8, rng=3), fit_toy(toy, epochs=8, rng=4)
    pa, pb, pc = (x.predict_proba(toy[4]) for x in (a, b, c))
    np.testing.assert_array_equal(pa, pb)
    assert a.score(toy[4], toy[5]).auc == b.score(toy[4], toy[5]).auc
    pd.testing.assert_frame_equal(a.history_.drop(columns="seconds"), b.history_.drop(columns="seconds"))
    assert not np.array_equal(pa, pc)


def test_fit_leaves_global_torch_rng_alone(toy):
    torch.manual_seed(123); before = torch.rand(3)
    torch.manual_seed(123); fit_toy(toy, epochs=2); after = torch.rand(3)
    torch.testing.assert_close(before, after)


def test_preprocessed_input_reused_gives_same_scores(toy):
    schema, tgt, shadow, y, test, yt = toy
    a = fit_toy(toy, epochs=3)
    inp = a.extract_features(test)
    assert isinstance(inp, TargetAttentionInput) and len(inp) == len(test)
    np.testing.assert_array_equal(a.predict_proba(inp), a.predict_proba(test))
    res = a.score(inp, yt)  # a TargetAttentionInput is a Sequence of datasets: score, slicing and indexing work
    assert res.auc == a.score(test, yt).auc
    np.testing.assert_array_equal(a.predict_proba(inp[3:7]), a.predict_proba(test[3:7]))
    np.testing.assert_array_equal(a.predict_proba(inp[-1]), a.predict_proba(test[-1:]))
    with pytest.raises(IndexError): inp[len(inp)]
    other = preprocess_datasets(test, test[0].take([1]), schema, n_closest=10)
    with pytest.raises(ValueError, match="another target"): a.predict_proba(other)


def test_save_load_round_trip(toy, tmp_path):
    a = fit_toy(toy, epochs=5)
    p = a.save(tmp_path / "ta.pt")
    b = TargetAttentionAttack.load(p)
    np.testing.assert_array_equal(a.predict_proba(toy[4]), b.predict_proba(toy[4]))
    np.testing.assert_array_equal(a.attention_weights(toy[4]), b.attention_weights(toy[4]))
    assert b.get_params() == dict(a.get_params(), device=None)
    assert b.best_epoch_ == a.best_epoch_ and len(b.history_) == len(a.history_)
    # a DataFrame target survives the round trip too
    from achilles.core.data import decode
    schema, tgt = toy[0], toy[1]
    c = TargetAttentionAttack(decode(tgt, schema), schema, n_closest=10, epochs=2, rng=0, verbose=False).fit(toy[2], toy[3])
    d = TargetAttentionAttack.load(c.save(tmp_path / "tb.pt"))
    np.testing.assert_array_equal(c.predict_proba(toy[4]), d.predict_proba(toy[4]))


def test_errors(toy, tmp_path):
    schema, tgt, shadow, y, test, yt = toy
    a = TargetAttentionAttack(tgt, schema, verbose=False)
    with pytest.raises(NotFittedError, match="not fitted"): a.predict_proba(test)
    with pytest.raises(NotFittedError, match="not fitted"): a.attention_weights(test)
    for kw, msg in [(dict(epochs=0), "epochs=0"), (dict(lr=-1.0), "lr=-1.0"), (dict(val_fraction=1.0), "val_fraction=1.0"),
                    (dict(attention="dot"), "attention='dot'"), (dict(batch_size=2.5), "batch_size=2.5"),
                    (dict(device="tpu"), "device='tpu'")]:
        with pytest.raises(ValueError, match=msg): TargetAttentionAttack(tgt, schema, **kw).fit(shadow, y)
    with pytest.raises(ValueError, match="labels"): a.fit(shadow, np.ones(len(shadow)))
    (tmp_path / "x.pt").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a file written"): TargetAttentionAttack.load(tmp_path / "x.pt")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu_closely(toy, tmp_path):
    """The same weights give the same probabilities on either device (inference: float32 rounding only); trained on either
    device from the same seed, the probabilities and the AUC agree closely (training differs by float reduction orders)."""
    from sklearn.metrics import roc_auc_score
    test, yt = toy[4], toy[5]
    cpu = fit_toy(toy, epochs=5, device="cpu")
    moved = TargetAttentionAttack.load(cpu.save(tmp_path / "cpu.pt"), device="cuda")
    assert moved.device_.type == "cuda"
    np.testing.assert_allclose(moved.predict_proba(test), cpu.predict_proba(test), rtol=0, atol=1e-5)
    gpu = fit_toy(toy, epochs=5, device="cuda")
    assert gpu.device_.type == "cuda"
    p, q = gpu.predict_proba(test), cpu.predict_proba(test)
    assert p.shape == q.shape == (len(test),)
    np.testing.assert_allclose(p, q, rtol=0, atol=0.02)
    assert abs(roc_auc_score(yt, p) - roc_auc_score(yt, q)) < 0.02
