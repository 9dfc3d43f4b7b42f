"""The generic adapters of achilles.generators.external: the generator contract for `CallableGenerator` and
`ExternalGenerator` (with the stand-in runner, run by this interpreter as the "other environment"), determinism, the
read-back checks, every failure of the runner, and the privacy game on an external generator."""
import os
import sys
import tempfile
import warnings

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, encode
from achilles.core.testing import check_generator
from achilles.generators import GENERATORS, make_generator
from achilles.generators.external import (CallableGenerator, ExternalGenerator, ExternalGeneratorError, read_samples,
                                          schema_json, standin_script)

CONTRACT = {"not-fitted", "determinism", "schema-round-trip", "encoded-path", "bad-arguments", "pickling"}


@pytest.fixture(scope="module")
def small(adult):
    df, schema = adult
    return df.sample(200, random_state=0).reset_index(drop=True), schema


@pytest.fixture
def toy():
    "Integer categories, a categorical dtype with an unused category, floats with many digits, int32 values."
    r = np.random.default_rng(0)
    n = 60
    df = pd.DataFrame({"g": r.integers(1, 4, n),
                       "c": pd.Categorical(r.choice(["p", "q"], n), categories=["p", "q", "r"]),
                       "f": r.normal(size=n) / 3.0,
                       "i": r.integers(0, 50, n).astype(np.int32)})
    return df, Schema.from_dataframe(df, types={"g": "categorical"})


@pytest.fixture
def tmp_tempdir(tmp_path, monkeypatch):
    "Temporary directories of the adapter go to a folder the test can inspect."
    d = tmp_path / "tmp"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def script(tmp_path, body, name="runner.py"):
    p = tmp_path / name
    p.write_text("import json, sys, time\nimport pandas as pd\ncfg = json.load(open(sys.argv[2]))\n" + body)
    return str(p)


def ext(schema, **kw):
    kw.setdefault("script", standin_script())
    return ExternalGenerator(schema, **kw)


# --- contracts --------------------------------------------------------------------------------------------------

def test_external_contract_with_standin(small):
    df, schema = small
    assert CONTRACT <= set(check_generator(lambda s: ExternalGenerator(s, script=standin_script(), python=sys.executable),
                                           df, schema))


def test_external_contract_with_module_entry_point(small):
    df, schema = small
    ok = check_generator(lambda s: ExternalGenerator(s, module="achilles.generators.runners.standin"), df, schema, n=20)
    assert CONTRACT <= set(ok)


class Bootstrap:
    def fit(self, df): self.df = df; return self
    def sample(self, n, random_state=None): return self.df.sample(n, replace=True, random_state=random_state)


class KwModel:
    "Takes the seed through **kwargs only: needs seeded=True."
    def fit(self, df, **kw): self.df = df; return self
    def sample(self, n, **kw): return self.df.sample(n, replace=True, random_state=kw["seed"])


def fit_fn(df): return df
def sample_fn(df, n): return df.sample(n, replace=True)
def sample_seeded(df, n, seed): return df.sample(n, replace=True, random_state=seed)


def test_callable_contract(small):
    df, schema = small
    assert CONTRACT <= set(check_generator(lambda s: CallableGenerator(s, model=Bootstrap()), df, schema))
    assert CONTRACT <= set(check_generator(lambda s: CallableGenerator(s, fit=fit_fn, sample=sample_seeded), df, schema))
    assert CONTRACT <= set(check_generator(lambda s: CallableGenerator(s, model=KwModel(), seeded=True), df, schema))
    ok = check_generator(lambda s: CallableGenerator(s, fit=fit_fn, sample=sample_fn), df, schema, deterministic=False)
    assert "determinism" not in ok and "schema-round-trip" in ok


def test_callable_seeds_and_state(small):
    df, schema = small
    m = Bootstrap()
    g = CallableGenerator(schema, model=m).fit(df, rng=0)
    assert g.deterministic_ and not hasattr(m, "df")  # the user's object is not touched: a deep copy is fitted
    assert not CallableGenerator(schema, fit=fit_fn, sample=sample_fn).fit(df, rng=0).deterministic_
    assert g.get_params() == dict(fit=None, sample=None, model=m, seeded=False)
    a, b = g.sample(30, rng=1), g.sample(30, rng=2)
    assert not a.equals(b)
    with pytest.raises(KeyError):  # without seeded=True, a **kwargs model gets no seed
        CallableGenerator(schema, model=KwModel()).fit(df, rng=0).sample(3, rng=0)


def test_callable_argument_errors(small):
    df, schema = small
    with pytest.raises(TypeError, match="give model="):
        CallableGenerator(schema, fit=fit_fn).fit(df)
    with pytest.raises(ValueError, match="not both"):
        CallableGenerator(schema, model=Bootstrap(), sample=sample_fn).fit(df)
    with pytest.raises(TypeError, match="no method fit"):
        CallableGenerator(schema, model=object()).fit(df)
    with pytest.raises(TypeError, match="seeded"):
        CallableGenerator(schema, model=Bootstrap(), seeded="yes").fit(df)
    with pytest.raises(TypeError, match="does not accept the keyword seed="):
        CallableGenerator(schema, fit=fit_fn, sample=sample_fn, seeded=True).fit(df)


@pytest.mark.parametrize("change, match", [
    (lambda d: d.drop(columns="age"), r"lack column\(s\) \['age'\]"),
    (lambda d: d.assign(race="Martian"), "column 'race' has value 'Martian'"),
    (lambda d: d.assign(age="old"), "column 'age' is continuous"),
    (lambda d: d.assign(age=np.inf), "column 'age' is continuous"),
    (lambda d: d.assign(sex=None), "column 'sex' has .* missing"),
    (lambda d: d.iloc[:-1], "rows; .* were asked for"),
    (lambda d: d.to_numpy(), "must be a pandas DataFrame"),
])
def test_callable_bad_samples_are_named(small, change, match):
    df, schema = small
    def bad(state, n): return change(state.sample(n, replace=True))
    g = CallableGenerator(schema, fit=fit_fn, sample=bad).fit(df, rng=0)
    with pytest.raises((ValueError, TypeError), match=match):
        g.sample(10, rng=0)


def test_read_samples_matches_encode_on_text_and_clips(toy):
    df, schema = toy
    e = read_samples(df.astype(str), schema, n=len(df))
    ref = encode(df, schema)
    np.testing.assert_array_equal(e.cat, ref.cat)
    np.testing.assert_allclose(e.cont, ref.cont, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(read_samples(df.assign(i=1000), schema).cont[:, 1], 1.0)  # out of range: clipped
    np.testing.assert_array_equal(read_samples(df.assign(i=1000), schema).cat, ref.cat)  # extra handling leaves codes


# --- the external runner ------------------------------------------------------------------------------------------

def test_standin_round_trip_exact_values(toy):
    "The stand-in resamples training values: every sampled value, read back, is a training value of that column."
    df, schema = toy
    g = ext(schema, params={"epochs": 5}).fit(df, rng=0)
    out = g.sample(300, rng=1)
    assert list(out.columns) == schema.names and list(out.dtypes) == list(df.dtypes)
    for c in ["g", "c", "i"]:
        assert set(out[c].tolist()) <= set(df[c].tolist()), c
    gap = np.abs(out["f"].to_numpy()[:, None] - df["f"].to_numpy()[None, :]).min(axis=1)
    assert gap.max() < 1e-12  # floats come back through the encoding (x - lower) / width: equal up to rounding
    assert list(g.losses_.columns) == ["epoch", "train_loss", "val_loss"] and len(g.losses_) == 5
    assert g.losses_["train_loss"].is_monotonic_decreasing


def test_external_determinism(small):
    df, schema = small
    a = ext(schema).fit(df, rng=1).sample(50, rng=2)
    b = ext(schema).fit(df, rng=1).sample(50, rng=2)
    c = ext(schema).fit(df, rng=1).sample(50, rng=3)
    d = ext(schema).fit(df, rng=4).sample(50, rng=2)  # the fit seed matters too
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(c) and not a.equals(d)
    pd.testing.assert_frame_equal(ext(schema).fit_sample(df, 40, rng=7), ext(schema).fit_sample(df, 40, rng=7))


def test_env_var_and_losses_empty_before_sampling(small, monkeypatch):
    df, schema = small
    monkeypatch.setenv("ACHILLES_TEST_EXT_PYTHON", sys.executable)
    g = ext(schema, env_var="ACHILLES_TEST_EXT_PYTHON").fit(df, rng=0)
    assert g.losses_.empty and list(g.losses_.columns) == ["epoch", "train_loss", "val_loss"]
    assert len(g.sample(5, rng=0)) == 5 and len(g.losses_) == 3
    assert len(g.sample(0, rng=0)) == 0


def test_config_and_schema_json(small, tmp_path):
    "The runner sees the protocol's config: schema as a list of columns, n, seed, params, file names."
    df, schema = small
    body = ("json.dump(cfg, open('/dev/null', 'w'))\n"
            f"json.dump(cfg, open({str(tmp_path / 'seen.json')!r}, 'w'))\n"
            "pd.read_csv(cfg['train']).sample(cfg['n'], replace=True, random_state=cfg['seed']).to_csv(cfg['out'], index=False)\n")
    g = ExternalGenerator(schema, script=script(tmp_path, body), params={"epochs": 7, "lr": 0.1}).fit(df, rng=0)
    g.sample(11, rng=0)
    import json
    cfg = json.loads((tmp_path / "seen.json").read_text())
    assert {k: cfg[k] for k in ("train", "n", "params", "out", "losses")} == dict(
        train="train.csv", n=11, params={"epochs": 7, "lr": 0.1}, out="samples.csv", losses="losses.json")
    assert isinstance(cfg["seed"], int) and cfg["schema"] == schema_json(schema)
    assert [c["name"] for c in cfg["schema"]] == schema.names
    assert set(cfg["schema"][0]) == {"name", "kind", "categories", "lower", "upper", "integer", "missing"}
    assert g.losses_.empty  # no losses.json written


def test_missing_python_and_bad_env_var(small, monkeypatch):
    df, schema = small
    with pytest.raises(FileNotFoundError, match="python='/no/such/python' is not an executable"):
        ext(schema, python="/no/such/python").fit(df)
    monkeypatch.delenv("ACHILLES_TEST_EXT_UNSET", raising=False)
    with pytest.raises(ValueError, match="environment variable ACHILLES_TEST_EXT_UNSET is not set"):
        ext(schema, env_var="ACHILLES_TEST_EXT_UNSET").fit(df)
    monkeypatch.setenv("ACHILLES_TEST_EXT_BAD", "/no/such/venv/bin/python")
    with pytest.raises(FileNotFoundError, match="environment variable ACHILLES_TEST_EXT_BAD='/no/such/venv/bin/python'"):
        ext(schema, env_var="ACHILLES_TEST_EXT_BAD").fit(df)
    with pytest.raises(ValueError, match="not both"):
        ext(schema, python=sys.executable, env_var="X").fit(df)
    with pytest.raises(FileNotFoundError, match="is not a file"):
        ExternalGenerator(schema, script="/no/such/runner.py").fit(df)
    with pytest.raises(ValueError, match="exactly one of script="):
        ExternalGenerator(schema, script=standin_script(), module="x.y").fit(df)
    with pytest.raises(ValueError, match="not a dotted module name"):
        ExternalGenerator(schema, module="not a module").fit(df)
    with pytest.raises(ValueError, match="timeout"):
        ext(schema, timeout=-1).fit(df)
    with pytest.raises(TypeError, match="params"):
        ext(schema, params=[1, 2]).fit(df)
    with pytest.raises(TypeError, match="JSON"):
        ext(schema, params={"f": object()}).fit(df)


def test_runner_exit_1_shows_stderr_and_cleans_up(small, tmp_path, tmp_tempdir):
    df, schema = small
    s = script(tmp_path, "print('loading the model', file=sys.stderr)\nraise SystemExit('CUDA out of memory, say')\n")
    with pytest.raises(ExternalGeneratorError, match=r"(?s)exit code 1.*CUDA out of memory, say"):
        ExternalGenerator(schema, script=s, name="mygan").fit(df, rng=0).sample(5, rng=0)
    assert os.listdir(tmp_tempdir) == []


def test_runner_without_samples(small, tmp_path, tmp_tempdir):
    df, schema = small
    with pytest.raises(ExternalGeneratorError, match="wrote no samples.csv"):
        ExternalGenerator(schema, script=script(tmp_path, "pass\n")).fit(df, rng=0).sample(5, rng=0)
    assert os.listdir(tmp_tempdir) == []


@pytest.mark.parametrize("change, match", [
    ("s = s.drop(columns=['age'])", r"samples.csv of generator 'external' lack column\(s\) \['age'\]"),
    ("s = s.rename(columns={'age': 'Age'})", r"lack column\(s\) \['age'\]"),
    ("s['race'] = 'Martian'", "column 'race' has value 'Martian'"),
    ("s['age'] = 'forty'", "column 'age' is continuous in the schema but has the non-numeric"),
    ("s['hours-per-week'] = ''", "column 'hours-per-week' has .* missing"),
    ("s = s.iloc[:-1]", "rows; 9 were asked for"),
])
def test_runner_wrong_samples_are_named(small, tmp_path, tmp_tempdir, change, match):
    df, schema = small
    body = f"s = pd.read_csv(cfg['train'], dtype=str).sample(cfg['n'], replace=True)\n{change}\ns.to_csv(cfg['out'], index=False)\n"
    with pytest.raises(ValueError, match=match):
        ExternalGenerator(schema, script=script(tmp_path, body)).fit(df, rng=0).sample(9, rng=0)
    assert os.listdir(tmp_tempdir) == []


def test_runner_bad_losses(small, tmp_path):
    df, schema = small
    body = ("pd.read_csv(cfg['train']).sample(cfg['n'], replace=True).to_csv(cfg['out'], index=False)\n"
            "open(cfg['losses'], 'w').write('{not json')\n")
    with pytest.raises(ExternalGeneratorError, match="losses.json is not valid JSON"):
        ExternalGenerator(schema, script=script(tmp_path, body)).fit(df, rng=0).sample(3, rng=0)
    body = ("pd.read_csv(cfg['train']).sample(cfg['n'], replace=True).to_csv(cfg['out'], index=False)\n"
            "json.dump({'train_loss': [3, 2, 1]}, open(cfg['losses'], 'w'))\n")
    g = ExternalGenerator(schema, script=script(tmp_path, body, "ok.py")).fit(df, rng=0)
    g.sample(3, rng=0)
    assert g.losses_["train_loss"].tolist() == [3.0, 2.0, 1.0] and g.losses_["val_loss"].isna().all()


def test_timeout_kills_the_runner_and_its_children(small, tmp_path, tmp_tempdir):
    df, schema = small
    pidfile = tmp_path / "child.pid"
    body = ("import subprocess\n"
            "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            f"open({str(pidfile)!r}, 'w').write(str(c.pid))\n"
            "print('epoch 1 of 1000', file=sys.stderr, flush=True)\n"
            "time.sleep(60)\n")
    with pytest.raises(ExternalGeneratorError, match=r"(?s)within timeout=2 s.*epoch 1 of 1000"):
        ExternalGenerator(schema, script=script(tmp_path, body), timeout=2).fit(df, rng=0).sample(5, rng=0)
    assert os.listdir(tmp_tempdir) == []
    pid = int(pidfile.read_text())
    for _ in range(50):  # the grandchild got SIGKILL with the process group; give the kernel a moment to reap it
        try: os.kill(pid, 0)
        except ProcessLookupError: break
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] == "Z": break  # a zombie is dead
        except OSError: break
        import time; time.sleep(0.1)
    else:
        pytest.fail(f"the runner's child process {pid} survived the timeout")


# --- registry and game --------------------------------------------------------------------------------------------

def test_registered_and_parameters_checked(small):
    df, schema = small
    assert "external" in GENERATORS.names()
    g = make_generator("external", schema, script=standin_script(), python=sys.executable, params={"epochs": 2})
    assert isinstance(g, ExternalGenerator)
    assert g.get_params() == dict(script=standin_script(), module=None, python=sys.executable, env_var=None,
                                  params={"epochs": 2}, timeout=3600, name="external")
    with pytest.raises(TypeError, match="epochs"):
        make_generator("external", schema, script=standin_script(), epochs=2)


def test_privacy_game_runs_on_an_external_generator(adult, tmp_path):
    from achilles.shadow.game import ThreatModel, play_game, dataset_key
    df, schema = adult
    params = dict(script=standin_script(), python=sys.executable, params={"epochs": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tm = ThreatModel(df.iloc[:2000], schema, generator="external", generator_params=params, name="adult-2000",
                         dataset_size=60, n_aux=600, n_test_pool=300, n_shadow=4, n_test=2)
        g1 = play_game(tm, 0, rng=0, jobs=2, cache=tmp_path / "cache", verbose=False)
        g2 = play_game(tm, 0, rng=0, jobs=1, cache=tmp_path / "cache", verbose=False)
        tm2 = tm.replace(generator_params=dict(params, params={"epochs": 3}))
        tm3 = tm.replace(generator_params=dict(params, script=str(tmp_path / "other.py")))
    assert [d.n for d in g1.shadow + g1.test] == [60] * 6
    assert g1.stats["generated"] == 6 and g2.stats["generated"] == 0  # the second game reads the cache
    for a, b in zip(g1.shadow + g1.test, g2.shadow + g2.test):
        np.testing.assert_array_equal(a.cat, b.cat)
    s = g1.shadow_specs[0]
    assert dataset_key(tm2, s.rows, None, s.seed) != dataset_key(tm, s.rows, None, s.seed)  # runner params are in the key
    assert dataset_key(tm3, s.rows, None, s.seed) != dataset_key(tm, s.rows, None, s.seed)  # and so is the script


def test_validation_rows_travel_to_the_runner(small, tmp_path):
    "fit(..., validation=) writes validation.csv beside train.csv and names it in config.json; without it, neither."
    df, schema = small
    body = ("v = pd.read_csv(cfg['validation']) if cfg.get('validation') else None\n"
            "pd.read_csv(cfg['train']).sample(cfg['n'], replace=True, random_state=cfg['seed']).to_csv(cfg['out'], index=False)\n"
            "json.dump({'train_loss': [2.0, 1.0], 'val_loss': [len(v), float(v['age'].sum())] if v is not None else []}, open(cfg['losses'], 'w'))\n")
    g = ExternalGenerator(schema, script=script(tmp_path, body))
    held = df.iloc[:17]
    g.fit(df, rng=0, validation=held).sample(5, rng=0)
    assert g.losses_["val_loss"].tolist() == [17.0, float(held["age"].sum())]
    g.fit(df, rng=0).sample(5, rng=0)  # a refit without validation forgets it
    assert g.losses_["val_loss"].isna().all()
    with pytest.raises(TypeError, match="validation must be a pandas DataFrame"): g.fit(df, validation=[1, 2])
    with pytest.raises(ValueError, match="not in the schema|missing|column"): g.fit(df, validation=held.drop(columns=["age"]))


def test_complete_schema_names_never_collide_and_a_missing_number_sits_at_the_lower_bound():
    "`complete_schema`: the `(missing)` category and the indicator column take the next free name; `encode_missing` fills the lower bound."
    from achilles.core.data import MISSING_SCALED
    from achilles.generators.external import complete_schema, decode_missing, encode_missing
    df = pd.DataFrame({"c": ["(missing)", "(missing) 2", None, "a"], "d": ["(missing)", None, "b", "b"], "x": [1.0, None, 3.0, 5.0],
                       "x (missing)": ["p", "q", "p", "q"], "x (missing) 2": ["u", "v", "u", "v"]})
    s = Schema.from_dataframe(df)
    cs, flagged = complete_schema(s)
    assert flagged == ["x"] and list(cs["c"].categories)[-1] == "(missing) 3" and list(cs["d"].categories)[-1] == "(missing) 2"
    assert [c.name for c in cs.columns][-1] == "x (missing) 3"
    enc = encode(df, s)
    e2 = encode_missing(enc, s, flagged)
    k = s.continuous.index("x")
    assert e2.cont[1, k] == 0.0 and e2.cat[1, -1] == 1 and (e2.cat[[0, 2, 3], -1] == 0).all()  # the lower bound, scaled; the indicator
    assert enc.cont[1, k] == MISSING_SCALED
    back = decode_missing(e2, s, flagged)
    np.testing.assert_array_equal(back.cat, enc.cat); np.testing.assert_array_equal(back.cont, enc.cont)


def test_the_runner_seed_is_pinned_and_one_row_is_sampled(monkeypatch):
    "The seed each sample hands the runner (fit rng 0, sample rng 0..11) is pinned: a changed stream changes every external dataset. n = 1 is a sample, not an empty one."
    import achilles.generators.external as ext
    seen = []
    def fake(command, train, schema, n, seed, params=None, **kw):
        seen.append(seed)
        return train.take(np.zeros(n, dtype=np.int64)), ext.read_losses(os.devnull + "/none")
    monkeypatch.setattr(ext, "run_protocol", fake)
    df = pd.DataFrame({"a": ["x", "y", "x"], "b": [1.0, 2.0, 3.0]})
    g = ExternalGenerator(Schema.from_dataframe(df), script=__file__, python=sys.executable).fit(df, rng=0)
    for r in range(12): g.sample(2, rng=r)
    assert seen == [1712675746, 361477139, 772012130, 1845716010, 1595499588, 297817470, 1456867573, 199020251, 1383429892, 178539027,
                    1173880932, 135184760]
    assert len(g.sample(1, rng=0)) == 1 and len(seen) == 13


@pytest.mark.parametrize("omp, loky, seen", [("1", None, "1"), ("2", "5", "5"), (None, None, "unset"), ("0", None, "unset"), ("auto", None, "unset")])
def test_the_runner_keeps_joblib_to_the_threads_its_process_was_given(small, tmp_path, monkeypatch, omp, loky, seen):
    """A Dask worker runs with OMP_NUM_THREADS=1; a runner that starts processes through joblib (ctgan's transformer) would start one
    per core in every fit: the runner is given LOKY_MAX_CPU_COUNT = OMP_NUM_THREADS, unless the user set it. By hand, neither; nor
    for a value that is not a count of threads (0 is not one: OpenMP wants a positive number)."""
    df, schema = small
    for k, v in (("OMP_NUM_THREADS", omp), ("LOKY_MAX_CPU_COUNT", loky)):
        if v is None: monkeypatch.delenv(k, raising=False)
        else: monkeypatch.setenv(k, v)
    body = ("import os\n"
            f"open({str(tmp_path / 'env.txt')!r}, 'w').write(os.environ.get('LOKY_MAX_CPU_COUNT', 'unset'))\n"
            "pd.read_csv(cfg['train']).sample(cfg['n'], replace=True, random_state=cfg['seed']).to_csv(cfg['out'], index=False)\n")
    ExternalGenerator(schema, script=script(tmp_path, body)).fit(df, rng=0).sample(5, rng=0)
    assert (tmp_path / "env.txt").read_text() == seen
