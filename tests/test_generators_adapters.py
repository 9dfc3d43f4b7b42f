"""The ecosystem adapters of achilles.generators.adapters (CTGAN, TVAE, GaussianCopula, CopulaGAN from ctgan / SDV; AIM, MST
from smartnoise-synth): registration and listing, the clear error without their environment, parameter rejection, the
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
    for name in SDV + DP:
        assert name in GENERATORS
        assert d.loc[name, "extra"] == ("sdv" if name in SDV else "dp")
        assert d.loc[name, "available"]  # listing imports only the adapter module, never the library
        env = A.SDV_ENV if name in SDV else A.SMARTNOISE_ENV
        assert env in d.loc[name, "summary"]
    assert [type(make_generator(n, adult[1])).__name__ for n in SDV + DP] == \
        ["CTGAN", "TVAE", "GaussianCopula", "CopulaGAN", "AIM", "MST"]


@pytest.mark.parametrize("name", SDV + DP)
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
    py = sys.executable  # a python that exists, so only the hyperparameters can fail
    for name, params, msg in [("ctgan", dict(batch_size=55), "batch_size=55 must be even and a multiple of pac=10"),
                              ("ctgan", dict(epochs=0), "epochs"), ("tvae", dict(compress_dims=()), "compress_dims"),
                              ("copulagan", dict(batch_size=30, pac=4), "multiple of pac=4"),
                              ("gaussiancopula", dict(default_distribution="cauchy"), "cauchy"),
                              ("aim", dict(epsilon=0.0), "epsilon"), ("aim", dict(delta=1.0), "delta"),
                              ("aim", dict(degree=99), "degree"), ("mst", dict(bins=1), "bins")]:
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
