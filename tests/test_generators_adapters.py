"""The ecosystem adapters of achilles.generators.adapters (CTGAN, TVAE, GaussianCopula, CopulaGAN from ctgan / SDV; AIM, MST,
DP-CTGAN, PATE-CTGAN, DPGAN from smartnoise-synth): registration and listing, the clear error without their environment, parameter rejection, the
runners' stdlib-only top level and their pure helpers, and, only where ACHILLES_SDV_PYTHON / ACHILLES_SMARTNOISE_PYTHON point
at the venvs (recipes: `achilles.generators.adapters.VENV_RECIPES`), tiny real fits through the generator contract."""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from achilles import cli
from achilles.core.data import Schema, encode
from achilles.core.testing import check_generator
from achilles.generators import GENERATORS, make_generator
from achilles.generators import adapters as A
from achilles.generators.external import schema_json
from achilles.generators.runners import sdv_runner, smartnoise_runner

SDV = ["ctgan", "tvae", "gaussiancopula", "copulagan"]
DP = ["aim", "mst"]
DP_GANS = ["dpctgan", "patectgan", "dpgan"]
CONTRACT = {"not-fitted", "determinism", "schema-round-trip", "encoded-path", "bad-arguments", "pickling"}
needs_sdv = pytest.mark.skipif(not os.environ.get(A.SDV_ENV), reason=f"{A.SDV_ENV} is not set ({A.VENV_RECIPES[A.SDV_ENV]})")
needs_dp = pytest.mark.skipif(not os.environ.get(A.SMARTNOISE_ENV),
                              reason=f"{A.SMARTNOISE_ENV} is not set ({A.VENV_RECIPES[A.SMARTNOISE_ENV]})")


@pytest.fixture(scope="module")
def small(adult):
    df, schema = adult
    return df.sample(300, random_state=0).reset_index(drop=True), schema


def test_registered_and_listed_without_their_venvs(adult, monkeypatch):
    monkeypatch.delenv(A.SDV_ENV, raising=False); monkeypatch.delenv(A.SMARTNOISE_ENV, raising=False)
    d = GENERATORS.describe().set_index("name")
    for name in SDV + DP + DP_GANS:
        assert name in GENERATORS
        assert d.loc[name, "extra"] == ("sdv" if name in SDV else "dp")
        assert d.loc[name, "available"]  # listing imports only the adapter module, never the library
        env = A.SDV_ENV if name in SDV else A.SMARTNOISE_ENV
        assert env in d.loc[name, "summary"]
    assert [type(make_generator(n, adult[1])).__name__ for n in SDV + DP + DP_GANS] == \
        ["CTGAN", "TVAE", "GaussianCopula", "CopulaGAN", "AIM", "MST", "DPCTGAN", "PATECTGAN", "DPGAN"]
    assert all(make_generator(n, adult[1]).package == "smartnoise-synth" for n in DP + DP_GANS)


def test_listed_by_the_cli_without_their_venvs(monkeypatch, capsys):
    monkeypatch.delenv(A.SMARTNOISE_ENV, raising=False)
    assert cli.main(["list", "generators"]) == 0
    out = capsys.readouterr().out
    for name in DP + DP_GANS: assert name in out


@pytest.mark.parametrize("name", SDV + DP + DP_GANS)
def test_clear_error_without_the_environment(name, small, monkeypatch):
    df, schema = small
    env = A.SDV_ENV if name in SDV else A.SMARTNOISE_ENV
    monkeypatch.delenv(env, raising=False)
    g = make_generator(name, schema)
    with pytest.raises(A.MissingEnvironment, match=f"environment variable {env} is not set") as e:
        g.fit(df, rng=0)
    assert "python3 -m venv" in str(e.value) and "pip install" in str(e.value)
    monkeypatch.setenv(env, "/nonexistent/bin/python")
    with pytest.raises(A.MissingEnvironment, match="'/nonexistent/bin/python' is not an executable Python interpreter"):
        make_generator(name, schema).fit(df, rng=0)


def test_unknown_and_bad_hyperparameters(small):
    df, schema = small
    with pytest.raises(TypeError, match=r"\['epoch'\]"): make_generator("ctgan", schema, epoch=5)
    with pytest.raises(TypeError, match=r"\['epochs'\]"): make_generator("aim", schema, epochs=5)
    with pytest.raises(TypeError, match=r"\['epochs'\]"): make_generator("patectgan", schema, epochs=5)  # it trains until ε is spent
    with pytest.raises(TypeError, match=r"\['verbose'\]"): make_generator("dpgan", schema, verbose=False)
    py = sys.executable  # a python that exists, so only the hyperparameters can fail
    for name, params, msg in [("ctgan", dict(batch_size=55), "batch_size=55 must be even and a multiple of pac=10"),
                              ("ctgan", dict(epochs=0), "epochs"), ("tvae", dict(compress_dims=()), "compress_dims"),
                              ("copulagan", dict(batch_size=30, pac=4), "multiple of pac=4"),
                              ("gaussiancopula", dict(default_distribution="cauchy"), "cauchy"),
                              ("aim", dict(epsilon=0.0), "epsilon"), ("aim", dict(delta=1.0), "delta"),
                              ("aim", dict(degree=99), "degree"), ("mst", dict(bins=1), "bins"),
                              ("dpctgan", dict(epsilon=0.0), "epsilon"), ("dpctgan", dict(batch_size=99), "batch_size=99 must be even"),
                              ("dpctgan", dict(epochs=0), "epochs"), ("dpctgan", dict(sigma=-1.0), "sigma"),
                              ("dpctgan", dict(generator_dim=()), "generator_dim"), ("dpctgan", dict(delta=0.0), "delta"),
                              ("patectgan", dict(epsilon=-1.0), "epsilon"), ("patectgan", dict(batch_size=1), "batch_size"),
                              ("patectgan", dict(noise_multiplier=0.0), "noise_multiplier"),
                              ("patectgan", dict(teacher_iters=0), "teacher_iters"), ("patectgan", dict(delta=1.0), "delta"),
                              ("dpgan", dict(epsilon=float("nan")), "epsilon"), ("dpgan", dict(epochs=1.5), "epochs"),
                              ("dpgan", dict(latent_dim=0), "latent_dim"), ("dpgan", dict(batch_size=1), "batch_size")]:
        with pytest.raises((ValueError, TypeError), match=msg):
            make_generator(name, schema, python=py, **params).fit(df, rng=0)


def test_cli_rejects_unknown_params(capsys):
    assert cli.main(["attack", "--generator", "ctgan", "--params", "epoch=50"]) == 2
    assert "generator 'ctgan' has no hyperparameter(s) ['epoch']" in capsys.readouterr().err


def test_params_travel_as_json_and_stay_out_of_the_runner(small):
    schema = small[1]
    g = make_generator("tvae", schema, epochs=7, compress_dims=(64, 32), python="x", timeout=9)
    p = g._runner_params()
    assert p["model"] == "tvae" and p["epochs"] == 7 and p["compress_dims"] == [64, 32]
    assert "python" not in p and "timeout" not in p
    json.dumps(p)
    assert g.get_params()["timeout"] == 9 and repr(g).startswith("TVAE(epochs=7")
    assert A.AIM.deterministic is False and A.MST.deterministic is False and A.CTGAN.deterministic is True
    assert A.DPCTGAN.deterministic and A.PATECTGAN.deterministic and A.DPGAN.deterministic  # torch / numpy noise, seeded
    p = make_generator("dpctgan", schema, epsilon=3.0, batch_size=100, python="x")._runner_params()
    assert p["model"] == "dpctgan" and p["epsilon"] == 3.0 and p["batch_size"] == 100 and p["delta"] is None
    assert "bins" not in p and "preprocessor_eps" not in p  # the GANs see the schema's bounds; nothing to spend on them


@pytest.mark.parametrize("module", [sdv_runner, smartnoise_runner])
def test_runners_import_only_the_standard_library_at_top_level(module):
    tree = ast.parse(Path(module.__file__).read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Import): names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module: names.add(node.module.split(".")[0])
    assert names - {"__future__"} <= set(sys.stdlib_module_names), names
    out = subprocess.run([sys.executable, module.__file__, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--config" in out.stdout


def test_smartnoise_codes_round_trip_on_adult(small):
    df, schema = small
    sj = schema_json(schema)
    text = df.copy()
    for c in schema.categorical: text[c] = text[c].astype(str)
    for bins in (5, 10, 16):
        codes = smartnoise_runner.to_codes(text, sj, bins)
        cards = [smartnoise_runner.n_codes(c, bins) for c in sj]
        assert ((codes.to_numpy() >= 0) & (codes.to_numpy() < np.array(cards))).all()
        back = smartnoise_runner.from_codes(codes, sj, bins, np.random.default_rng(0))
        assert (smartnoise_runner.to_codes(back, sj, bins).to_numpy() == codes.to_numpy()).all()  # same bins
        for c in schema.categorical: assert (back[c] == text[c]).all()
        enc = encode(back.astype({c: df[c].dtype for c in schema.categorical}), schema)  # inside the schema's domains
        assert enc.n == len(df)
    exact = [c for c in sj if c["kind"] == "continuous" and smartnoise_runner._exact(c, 16)]
    assert [c["name"] for c in exact] == ["education-num"]
    back = smartnoise_runner.from_codes(smartnoise_runner.to_codes(text, sj, 16), sj, 16, np.random.default_rng(0))
    assert (back["education-num"] == df["education-num"]).all()


def test_smartnoise_gan_table_and_back_on_adult(small):
    "The GANs' table: categorical columns as codes over the schema's categories, continuous values as they are; back again."
    df, schema = small
    sj = schema_json(schema)
    text = df.copy()
    for c in schema.categorical: text[c] = text[c].astype(str)
    tab = smartnoise_runner.gan_table(text, sj)
    for c in sj:
        if c["kind"] == "categorical": assert tab[c["name"]].between(0, len(c["categories"]) - 1).all()
        else: assert (tab[c["name"]] == df[c["name"]]).all()
    back = smartnoise_runner.from_gan(tab, sj)
    for c in schema.names: assert (back[c].astype(str) == text[c].astype(str)).all()
    out = tab.copy(); out["age"] = out["age"] + 0.4; out.loc[0, "age"] = 500.0  # off-grid and out-of-bounds GAN output
    back = smartnoise_runner.from_gan(out, sj)
    assert back["age"].dtype == np.int64 and back.loc[0, "age"] == schema["age"].upper
    assert (back["age"].iloc[1:] == df["age"].iloc[1:]).all()
    with pytest.raises(ValueError, match="is not a category of the schema"):
        smartnoise_runner.gan_table(text.assign(sex="unknown"), sj)


def test_smartnoise_gan_batch_size_is_capped():
    assert smartnoise_runner.gan_batch_size("dpctgan", 500, 300) == 300
    assert smartnoise_runner.gan_batch_size("patectgan", 500, 151) == 150  # even
    assert smartnoise_runner.gan_batch_size("dpgan", 500, 151) == 151
    assert smartnoise_runner.gan_batch_size("dpgan", 64, 300) == 64
    with pytest.raises(ValueError, match="at least 2 training rows"): smartnoise_runner.gan_batch_size("dpctgan", 500, 1)


def test_sdv_runner_finish_clips_and_rounds():
    sj = [dict(name="a", kind="categorical", categories=["1", "2"]), dict(name="b", kind="continuous", lower=0, upper=5, integer=True)]
    out = sdv_runner.finish(pd.DataFrame({"b": [-1.0, 2.6, 9.0], "a": ["1", "2", "1"]}), sj)
    assert list(out.columns) == ["a", "b"] and list(out["b"]) == [0, 3, 5]
    with pytest.raises(ValueError, match="outside the schema's categories"):
        sdv_runner.finish(pd.DataFrame({"a": ["3"], "b": [1.0]}), sj)


# --- real fits, only where the venvs are set up --------------------------------------------------------------------
@needs_sdv
@pytest.mark.parametrize("name, params", [("ctgan", dict(epochs=2)), ("gaussiancopula", {})])
def test_sdv_contract(name, params, small):
    df, schema = small
    assert CONTRACT <= set(check_generator(lambda s: make_generator(name, s, **params), df, schema))


@needs_sdv
@pytest.mark.parametrize("name", ["ctgan", "tvae"])
def test_losses_per_epoch(name, small):
    df, schema = small
    g = make_generator(name, schema, epochs=3).fit(df, rng=0)
    syn = g.sample(50, rng=1)
    assert len(syn) == 50 and list(syn.columns) == schema.names
    assert list(g.losses_["epoch"]) == [1, 2, 3] and np.isfinite(g.losses_["train_loss"]).all()
    assert g.losses_["val_loss"].isna().all()  # none of these models holds out validation data


@needs_dp
@pytest.mark.parametrize("name", DP)
def test_dp_contract(name, small):
    "Five Adult columns keep AIM's and MST's graphical models small; not deterministic (OpenDP's noise cannot be seeded)."
    df, schema = small
    cols = ["age", "workclass", "education-num", "sex", "income"]
    sub = Schema([schema[c] for c in cols])
    ok = check_generator(lambda s: make_generator(name, s, epsilon=1.0), df[cols], sub, deterministic=False)
    assert {"not-fitted", "schema-round-trip", "bad-arguments", "pickling"} <= set(ok)


@needs_dp
@pytest.mark.parametrize("name", ["dpctgan", "dpgan"])
def test_dp_gan_contract(name, small):
    "The GANs' noise is torch's and numpy's, seeded by the runner: the full contract, determinism included."
    df, schema = small
    cols = ["age", "workclass", "education-num", "sex", "income"]
    sub = Schema([schema[c] for c in cols])
    params = dict(epsilon=3.0, epochs=1, batch_size=100)
    if name == "dpctgan": params.update(generator_dim=(32,), discriminator_dim=(32,))
    assert CONTRACT <= set(check_generator(lambda s: make_generator(name, s, **params), df[cols], sub))


@needs_dp
def test_dpctgan_losses_and_the_default_batch_size(small):
    "smartnoise's default batch_size=500 fails on 300 rows inside opacus; the runner caps it. DP-CTGAN's losses come back."
    df, schema = small
    g = make_generator("dpctgan", schema, epsilon=3.0, epochs=2, generator_dim=(32,), discriminator_dim=(32,)).fit(df, rng=0)
    syn = g.sample(40, rng=1)
    assert len(syn) == 40 and list(syn.columns) == schema.names
    assert list(g.losses_["epoch"]) == [1, 2] and np.isfinite(g.losses_["train_loss"]).all()


@needs_dp
def test_patectgan_smoke(small):
    "PATE-CTGAN trains until its budget is spent; with less vote noise (noise_multiplier=0.1) and 1+1 iterations that is seconds."
    df, schema = small
    cols = ["age", "workclass", "sex", "income"]
    sub = Schema([schema[c] for c in cols])
    mk = lambda: make_generator("patectgan", sub, epsilon=1.0, batch_size=50, noise_multiplier=0.1, teacher_iters=1,
                                student_iters=1, sample_per_teacher=20, generator_dim=(32,), discriminator_dim=(32,))
    a = mk().fit(df[cols].head(100), rng=0).sample(30, rng=1)
    assert len(a) == 30 and list(a.columns) == cols
    assert set(a["sex"]) <= set(map(str, sub["sex"].categories)) | set(sub["sex"].categories)
    assert a["age"].between(sub["age"].lower, sub["age"].upper).all()


def test_library_version_and_the_cache_key(small, monkeypatch):
    "An adapter's library version (as installed in its environment) enters the dataset cache key; native keys do not change."
    import hashlib, warnings
    from achilles import __version__
    from achilles.core.rng import seed_id
    from achilles.shadow.game import ThreatModel, dataset_key
    assert A.library_version(sys.executable, "numpy") == f"numpy=={np.__version__}"
    with pytest.raises(A.MissingEnvironment, match="'no-such-package-achilles'"):
        A.library_version(sys.executable, "no-such-package-achilles")
    monkeypatch.setenv(A.SDV_ENV, sys.executable)
    monkeypatch.setattr(A.CTGAN, "package", "numpy")  # this interpreter has no ctgan: any installed distribution will do
    df, schema = small
    assert make_generator("ctgan", schema).version_token() == f"numpy=={np.__version__}"
    assert make_generator("baynet", schema).version_token() == ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = ThreatModel(df, schema, n_aux=100, n_test_pool=100, dataset_size=50, n_shadow=4, n_test=4)
        lib = ThreatModel(df, schema, generator="ctgan", n_aux=100, n_test_pool=100, dataset_size=50, n_shadow=4, n_test=4)
    rows, seed = np.arange(50), np.random.SeedSequence(7)
    # a native generator's key is exactly the one computed before versions entered the key: existing caches stay valid
    meta = dict(achilles=__version__, population=tm.fingerprint, generator="baynet", params=tm.generator_params,
                dataset_size=50, seed=seed_id(seed), target_added=False)
    h = hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode()); h.update(rows.astype(np.int64).tobytes())
    assert tm.generator_version == "" and dataset_key(tm, rows, None, seed) == h.hexdigest()
    # an adapter's key changes with its library's version
    k1 = dataset_key(lib, rows, None, seed)
    lib.__dict__["generator_version"] = "numpy==0.0.1"
    assert dataset_key(lib, rows, None, seed) != k1
    # the audit's pool keys its datasets the same way, so it reads the version too
    from achilles.shadow.audit import PoolModel
    assert PoolModel(df, schema, generator="ctgan", dataset_size=50).generator_version == f"numpy=={np.__version__}"
    assert PoolModel(df, schema, dataset_size=50).generator_version == ""


@needs_sdv
def test_tvae_heldout_loss_per_epoch_leaves_training_unchanged(small):
    "The runner's TVAE with validation rows trains exactly as ctgan's; e epochs are the first e of a longer run (the overfit path)."
    df, schema = small
    cols = ["age", "workclass", "education-num", "sex", "income"]
    sub = Schema([schema[c] for c in cols])
    tr, va = df[cols].iloc[:200].reset_index(drop=True), df[cols].iloc[200:300].reset_index(drop=True)
    mk = lambda e: make_generator("tvae", sub, epochs=e, batch_size=50, compress_dims=(16,), decompress_dims=(16,), embedding_dim=8)
    a = mk(4).fit(tr, rng=0, validation=va); sa = a.sample(30, rng=1)
    b = mk(4).fit(tr, rng=0); sb = b.sample(30, rng=1)
    c = mk(6).fit(tr, rng=0, validation=va); c.sample(30, rng=1)
    pd.testing.assert_frame_equal(sa, sb)  # the held-out evaluation draws nothing from the random streams
    np.testing.assert_array_equal(a.losses_["train_loss"], b.losses_["train_loss"])
    assert len(a.losses_) == 4 and np.isfinite(a.losses_["val_loss"]).all() and b.losses_["val_loss"].isna().all()
    np.testing.assert_array_equal(c.losses_["train_loss"].iloc[:4], a.losses_["train_loss"])
    np.testing.assert_array_equal(c.losses_["val_loss"].iloc[:4], a.losses_["val_loss"])


def test_validation_rows_only_where_the_model_has_a_heldout_loss(small):
    df, schema = small
    py = sys.executable
    with pytest.raises(ValueError, match="no held-out loss"): make_generator("ctgan", schema, python=py).fit(df, validation=df)
    with pytest.raises(ValueError, match="no held-out loss"): make_generator("aim", schema, python=py).fit(df, validation=df)
    with pytest.raises(TypeError, match="validation must be a pandas DataFrame"):
        make_generator("tvae", schema, python=py).fit(df, validation=df.to_numpy())
    with pytest.raises(ValueError, match="validation has no rows"): make_generator("tvae", schema, python=py).fit(df, validation=df.head(0))
    assert A.TVAE.validation_loss and not A.CTGAN.validation_loss


# --- empty cells: what reaches the library, and what comes back ----------------------------------------------------
@pytest.fixture(scope="module")
def clinic():
    "600 clinic-style rows with missing values in categorical and continuous columns (MCAR, MAR, MNAR, monotone: alcohol missing -> smoker missing)."
    from achilles.core.testing import custodian_table
    return custodian_table(600, rng=0, ids=False, dates=False, free_text=False)


def test_the_adapters_encode_missing_values_by_default():
    "Every registered adapter hands its library a complete table (`complete_schema`), never an empty cell."
    s = Schema.from_dataframe(pd.DataFrame({"a": ["x", "y", None], "b": [1.0, None, 3.0]}))
    for name in SDV + DP + DP_GANS:
        assert make_generator(name, s).missing_values == "encode", name


@pytest.mark.parametrize("name, params, monotone", [pytest.param("ctgan", dict(epochs=30), None, marks=needs_sdv),
                                                    pytest.param("gaussiancopula", {}, 0.15, marks=needs_sdv),
                                                    pytest.param("mst", dict(epsilon=100.0), 0.9, marks=needs_dp)])
def test_every_column_with_missing_values_gets_some_back(name, params, monotone, clinic):
    """Through the encoding the library puts missing cells in exactly the columns that have them (ctgan refuses an empty number and
    our runners refused an empty category: before the encoding, each of these fits failed). Where the library models the columns
    jointly, the monotone pattern (smoker missing wherever alcohol is) survives: SDV's own null handling, which draws a missing number
    independently of the other columns, would leave P(smoker missing | alcohol missing) near smoker's base share (0.085)."""
    s = Schema.from_dataframe(clinic)
    out = make_generator(name, s, **params).fit(clinic, rng=0).sample(3000, rng=1)
    p, q = clinic.isna().mean(), out.isna().mean()
    assert ((q > 0) == (p > 0)).all(), pd.DataFrame({"train": p, "samples": q})
    if monotone is not None:
        a = out["alcohol"].isna()
        assert a.sum() >= 30 and out.loc[a, "smoker"].isna().mean() > monotone, out.loc[a, "smoker"].isna().mean()
