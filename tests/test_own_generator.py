"""Issue 38 item 7: the custodian's own generator in an audit: an object with fit / sample, or FILE.py:NAME on the command line.
Its token keys the cache and the run (a rerun resumes, other settings start afresh, the token is the same in another process),
each dataset gets a fresh copy, and workers in other processes give the same rows."""
import subprocess, sys, textwrap, warnings

import numpy as np
import pandas as pd
import pytest

from achilles import cli
from achilles.core.data import Schema, load_adult
from achilles.core.results import ResultsStore
from achilles.generators.external import CallableGenerator, load_generator, own_generator
from achilles.shadow.audit import PoolModel, audit
from achilles.shadow.game import ScaleWarning

MODEL = textwrap.dedent('''
    import numpy as np
    class Jitter:
        "Resamples the training rows and jitters the numbers; counts its fits on the object it is given."
        fits = 0
        def __init__(self, scale=0.0): self.scale = scale
        def fit(self, df, seed=None):
            self.df_ = df.reset_index(drop=True); self.fits += 1; return self
        def sample(self, n, seed=None):
            if self.fits != 1: raise RuntimeError(f"a copy fitted {self.fits} times: fits leak from one dataset into the next")
            out = self.df_.sample(n, replace=True, random_state=seed).reset_index(drop=True)
            num = out.select_dtypes("number").columns
            out[num] = out[num] + np.random.default_rng(seed).normal(0, self.scale, (n, len(num))) * out[num].std().to_numpy()
            return out
''')
KW = dict(design="release", n_in=20, order=1, selectors=(), rng=0, verbose=False, records=np.arange(0, 120, 10))


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("own") / "my_generator.py"
    p.write_text(MODEL)
    return p


@pytest.fixture(scope="module")
def table():
    df = load_adult().iloc[:120].reset_index(drop=True)
    return df, Schema.from_dataframe(df)


def _audit(df, gen, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)
        return audit(df, gen, **dict(KW, **kw))


def test_an_object_audits_like_its_wrapper_and_resumes_by_its_token(model_file, table, tmp_path):
    df, schema = table
    Jitter = load_generator(f"{model_file}:Jitter", scale=0.1).__class__
    store, cache = ResultsStore(tmp_path / "r.sqlite"), tmp_path / "cache"
    a = _audit(df, Jitter(0.1), store=store, cache_dir=cache)
    assert a.attrs["config"]["generator"].startswith("own:Jitter:") and len(a) == 12
    b = _audit(df, Jitter(0.1), store=store, cache_dir=cache)  # a new object with the same settings: the same run, read back
    assert b.attrs["run_id"] == a.attrs["run_id"] and b.attrs["seconds"].get("generated", 0) == 0
    pd.testing.assert_frame_equal(a, b)
    c = _audit(df, Jitter(0.3), store=store, cache_dir=cache)  # other settings: another token, another run, new datasets
    assert c.attrs["run_id"] != a.attrs["run_id"] and c.attrs["seconds"]["generated"] > 0
    w = _audit(df, CallableGenerator(schema, model=Jitter(0.1)))  # an achilles Generator is taken as it is
    np.testing.assert_array_equal(w["auc"].to_numpy(), a["auc"].to_numpy())


def test_worker_processes_give_the_same_rows(model_file, table):
    df, _ = table
    g = load_generator(f"{model_file}:Jitter", scale=0.1)
    one = _audit(df, g, n_jobs=1)
    two = _audit(df, g, n_jobs=2)
    np.testing.assert_array_equal(one["auc"].to_numpy(), two["auc"].to_numpy())


def test_the_token_is_the_same_in_another_process(model_file, table):
    df, schema = table
    code = (f"from achilles.generators.external import load_generator, own_generator; from achilles.core.data import Schema, load_adult; "
            f"df = load_adult().iloc[:120].reset_index(drop=True); "
            f"print(own_generator(load_generator({str(model_file)!r} + ':Jitter', scale=0.1), Schema.from_dataframe(df))[0])")
    tokens = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() for _ in range(2)}
    here = own_generator(load_generator(f"{model_file}:Jitter", scale=0.1), schema)[0]
    assert tokens == {here}


def test_bad_generators_are_refused_before_any_work(model_file, table):
    df, schema = table
    Jitter = load_generator(f"{model_file}:Jitter").__class__
    with pytest.raises(TypeError, match="is a class"): _audit(df, Jitter)
    with pytest.raises(TypeError, match="has no method sample"):
        _audit(df, type("OnlyFit", (), {"fit": lambda self, d: self})())
    with pytest.raises(ValueError, match="carries its settings"): _audit(df, Jitter(), generator_params={"scale": 1})
    with pytest.raises(ValueError, match="has no 'Nope'"): load_generator(f"{model_file}:Nope")
    with pytest.raises(TypeError, match="cannot be passed"): load_generator("achilles.core.data:MISSING_SCALED", x=1)
    with pytest.raises(ValueError, match="is not a known generator"): PoolModel(df, schema, "no-such-generator")


def test_cli_takes_a_file_and_a_name(model_file, table, tmp_path, capsys):
    df, _ = table
    data, out = tmp_path / "data.csv", tmp_path / "a.csv"
    df.to_csv(data, index=False)
    argv = ["audit", "--csv", str(data), "--generator", f"{model_file}:Jitter", "--params", "scale=0.1", "--design", "release",
            "--n-in", "20", "--order", "1", "--records", "0,10,20", "--cache-dir", "", "--results", "", "--out", str(out), "--quiet"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(argv) == 0
    assert pd.read_csv(out)["generator"].str.startswith("own:Jitter:").all()
    assert cli.main([a if a != f"{model_file}:Jitter" else f"{model_file}:Missing" for a in argv[:-3]] + ["--quiet"]) == 2
    assert "has no 'Missing'" in capsys.readouterr().err
