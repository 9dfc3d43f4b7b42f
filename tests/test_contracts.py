"""The contracts of achilles.core.testing, run over every entry of every registry: a new generator, selector, attack or
metric is tested the day it is registered."""
import inspect

import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, encode
from achilles.core.registry import MissingExtra
from achilles.core.testing import check_attack, check_generator, check_metric, check_selector
from achilles.generators import GENERATORS, make_generator
from achilles.nobox import METRICS
from achilles.selectors import SELECTORS
from achilles.shadow import ATTACKS, make_attack

FAST = {"target-attention": dict(epochs=3, min_epochs=1, patience=2, n_closest=10, verbose=False)}


@pytest.fixture(scope="module")
def small(adult):
    df, schema = adult
    return df.sample(300, random_state=0).reset_index(drop=True), schema


def _example_params(name: str) -> dict:
    "Arguments an entry cannot do without (the generic external adapter needs a runner: the stand-in), small sizes for slow ones."
    if name == "external":
        from achilles.generators.external import standin_script
        return dict(script=standin_script())
    small_gans = {"dpctgan": dict(epochs=1, batch_size=100), "dpgan": dict(epochs=1, batch_size=100),
                  "patectgan": dict(noise_multiplier=0.1, teacher_iters=1, student_iters=1)}  # their defaults train for minutes
    if name in small_gans: return small_gans[name]
    return dict(epochs=2) if name in ("ctgan", "tvae", "copulagan") else {}


@pytest.mark.parametrize("name", GENERATORS.names())
def test_generator_contract(name, small):
    df, schema = small
    try: g = make_generator(name, schema, **_example_params(name))
    except MissingExtra as e:  # only a declared optional extra may be missing; any other ImportError is a broken generator
        pytest.skip(f"{name}: {e}")
    from achilles.generators.external import ExternalGenerator
    if isinstance(g, ExternalGenerator):
        try: g._interpreter()
        except (ValueError, FileNotFoundError) as e: pytest.skip(f"{name} runs in another environment, not set up here: {e}")
    ok = check_generator(lambda s: make_generator(name, s, **_example_params(name)), df, schema,
                         deterministic=getattr(g, "deterministic", True))  # smartnoise cannot be seeded (stated by the adapter)
    need = {"not-fitted", "determinism", "schema-round-trip", "encoded-path", "bad-arguments", "pickling"}
    need -= {"determinism", "encoded-path"} if not getattr(g, "deterministic", True) else set()  # both compare seeded runs
    assert need <= set(ok), f"missing checks: {need - set(ok)}"


@pytest.mark.parametrize("name", SELECTORS.names())
def test_selector_contract(name, small):
    df, schema = small
    params = dict(k=3) if name == "distance" else {}
    seeded = "rng" in inspect.signature(SELECTORS[name]).parameters  # random selectors take the seed
    assert check_selector(lambda d, s, rng: SELECTORS[name](d, s, rng=rng, **params) if seeded
                          else SELECTORS[name](d, s, **params), df, schema) == ["scores", "determinism", "no-mutation"]


@pytest.fixture(scope="module")
def game(adult):
    "IN datasets hold the target, OUT datasets do not: 30 shadow and 20 test datasets of 150 Adult records."
    df, schema = adult
    rng = np.random.default_rng(0)
    pool, target = df.iloc[1:3001].reset_index(drop=True), df.iloc[[0]]
    def make(m):
        sets, labels = [], []
        for i in range(m):
            rows = pool.iloc[rng.choice(len(pool), 150, replace=False)]
            if i % 2 == 0: rows = pd.concat([rows.iloc[:-1], target])
            sets.append(encode(rows, schema)); labels.append(1 - i % 2)
        return sets, labels
    return schema, target, make(30), make(20)


@pytest.mark.parametrize("name", ATTACKS.names())
def test_attack_contract(name, game):
    schema, target, (ds, y), (ts, yt) = game
    params = FAST.get(name, {})
    def factory(rng, n_jobs=None):
        kw = dict(params, rng=rng)
        if n_jobs is not None: kw["jobs"] = n_jobs
        return make_attack(name, target, schema, **kw)
    ok = check_attack(factory, ds, y, ts, yt)
    assert {"not-fitted", "determinism", "score", "bad-arguments", "pickling"} <= set(ok)


@pytest.mark.parametrize("name", METRICS.names() or [pytest.param("none", marks=pytest.mark.skip("no metric registered yet"))])
def test_metric_contract(name, adult):
    df, _ = adult
    train, synth, control = df.iloc[:300], df.iloc[300:600], df.iloc[600:900]
    assert check_metric(METRICS[name](), train, synth, control)


def test_the_contracts_can_fail(small):
    "A generator that ignores its seed, and a selector that mutates its input, are caught."
    from achilles.generators import IndependentMarginals
    df, schema = small
    class Unseeded(IndependentMarginals):
        def _sample(self, n, rng): return super()._sample(n, np.random.default_rng())
    with pytest.raises(AssertionError, match="determinism"):
        check_generator(lambda s: Unseeded(s), df, schema)
    def mutating(d, s, rng=None):
        d["age"] = 0; return np.zeros(len(d))
    with pytest.raises(AssertionError, match="no mutation"):
        check_selector(mutating, df.copy(), schema)


def test_a_broken_generator_fails_instead_of_skipping(monkeypatch):
    "A generator whose module cannot be imported (a native one, with no extra declared) raises ImportError, not MissingExtra."
    from achilles.core.registry import Registry
    reg = Registry("generator")
    reg.register("broken", "achilles.generators.no_such_module:Gen", summary="a typo in its import path")
    reg.register("optional", "no_such_package_xyz:Gen", summary="needs an extra", extra="nn")
    with pytest.raises(ImportError) as e:
        reg["broken"]
    assert not isinstance(e.value, MissingExtra)
    with pytest.raises(MissingExtra, match=r"pip install 'achilles\[nn\]'"):
        reg["optional"]
