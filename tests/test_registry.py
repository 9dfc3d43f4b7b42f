"""Every registry: one type, names that resolve, describe() tables, and the CLI's `list` and `--params`."""
import pandas as pd
import pytest

from achilles import cli
from achilles.core.registry import MissingExtra, Registry, UnknownName, parse_params

ALL = list(cli.REGISTRIES)


@pytest.mark.parametrize("what", ALL)
def test_every_registry_is_a_registry_and_describes_itself(what):
    reg = cli.registry(what)
    assert isinstance(reg, Registry)
    t = reg.describe()
    assert list(t.columns[:6]) == ["name", "kind", "summary", "parameters", "extra", "available"]
    assert t["name"].tolist() == reg.names()
    for name in reg.names():
        assert reg[name] is not None  # every entry resolves (no extras are needed for the built-in ones)
    assert (t["summary"].str.len() > 0).all(), "every entry has a one-line summary"


def test_expected_entries():
    assert set(cli.registry("generators").names()) >= {"identity", "independent", "baynet", "privbayes", "synthpop"}
    assert set(cli.registry("selectors").names()) == {"random", "rare", "rare_sampled", "loglik", "distance"}
    assert set(cli.registry("attacks").names()) == {"query", "target-attention"}
    assert set(cli.registry("datasets").names()) >= {"adult", "census"}
    assert set(cli.registry("benches").names()) >= {"distance", "queries", "generators", "attack", "target-attention"}


def test_unknown_name_lists_the_known_ones():
    reg = cli.registry("generators")
    with pytest.raises(UnknownName, match="generator 'gan' is not registered; choose one of .*baynet, .*identity, independent"):
        reg["gan"]
    with pytest.raises(KeyError): reg["gan"]  # also a KeyError and a ValueError
    with pytest.raises(ValueError): reg["gan"]


def test_missing_extra_names_the_pip_command():
    r = Registry("thing")
    r.register("x", "achilles_no_such_module:X", extra="fancy", summary="needs an extra")
    with pytest.raises(MissingExtra, match=r"pip install 'achilles\[fancy\]'"):
        r["x"]
    t = r.describe()
    assert t.loc[0, "available"] == False and t.loc[0, "extra"] == "fancy"  # noqa: E712


def test_make_rejects_unknown_parameters():
    from achilles.generators import GENERATORS
    from achilles.core.data import Schema
    s = Schema.from_dataframe(pd.DataFrame({"a": ["x", "y"]}))
    assert GENERATORS.make("privbayes", s, epsilon=5.0).epsilon == 5.0
    with pytest.raises(TypeError, match=r"has no parameter\(s\) \['epsilom'\]; it takes epsilon, degree"):
        GENERATORS.make("privbayes", s, epsilom=5.0)


def test_parse_params_types():
    assert parse_params("epsilon=10,degree=2,alpha=0.5,dp=false,engine=sklearn") == dict(
        epsilon=10, degree=2, alpha=0.5, dp=False, engine="sklearn")
    for bad in ("epsilon", "=3", "a=1,a=2", "1x=2"):
        with pytest.raises(ValueError): parse_params(bad)


@pytest.mark.parametrize("what", ALL)
def test_cli_list(what, capsys):
    assert cli.main(["list", what, "--parameters"]) == 0
    out = capsys.readouterr().out
    names = cli.registry(what).names()
    assert all(n in out for n in names) if names else "no metrics registered yet" in out


def test_cli_params_are_checked_before_any_work(capsys, tmp_path):
    rc = cli.main(["attack", "--generator", "privbayes", "--params", "epsilon=10,degre=2", "--results", str(tmp_path / "r.csv")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "has no hyperparameter(s) ['degre']; it takes epsilon, degree, histogram_bins" in err
    assert not (tmp_path / "r.csv").exists()
    assert cli.main(["attack", "--params", "epsilon"]) == 2
    assert "is not name=value" in capsys.readouterr().err


def test_cli_params_reach_the_generator(tmp_path, monkeypatch):
    seen = {}
    import achilles.experiments.runner as runner
    def fake(**kw):
        seen.update(kw); return pd.DataFrame([dict(auc=0.5)])
    monkeypatch.setattr(runner, "run_attack_experiment", fake)
    assert cli.main(["attack", "--generator", "privbayes", "--params", "epsilon=10,degree=2", "--quiet"]) == 0
    assert seen["generator_params"] == dict(epsilon=10, degree=2) and seen["generator"] == "privbayes"
