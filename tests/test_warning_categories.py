"""Every warning achilles raises is one of its own categories. The CLI prints those as they are and calls any other warning
"unexpected" (asking the user to report it): a plain `UserWarning` of ours would read as a bug of ours, and did (the custodian
report printed the inference metric's own caveat as "unexpected ... a number it prints may be affected")."""
import ast, importlib, pathlib

import achilles


def _warn_calls():
    root = pathlib.Path(achilles.__file__).parent
    for path in sorted(root.rglob("*.py")):
        mod = "achilles." + ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            f = node.func if isinstance(node, ast.Call) else None
            if isinstance(f, ast.Attribute) and f.attr == "warn" and isinstance(f.value, ast.Name) and f.value.id == "warnings":
                yield mod, node


def _category(mod: str, node: ast.Call):
    "The class a `warnings.warn` call raises (None: a plain UserWarning, or an expression this test cannot resolve)."
    cat = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "category"), None)
    if cat is None and node.args and isinstance(node.args[0], ast.Call):  # warnings.warn(SomeWarning("...")): the instance's class
        cat = node.args[0].func
    if not isinstance(cat, ast.Name): return None
    found = getattr(importlib.import_module(mod), cat.id, None)
    if found is None:  # imported inside the function: any achilles module's class of that name
        found = next((c for m in _modules() if isinstance(c := getattr(m, cat.id, None), type)), None)
    return found


def _modules():
    return [importlib.import_module(mod) for mod in sorted({m for m, _ in _warn_calls()})] + [importlib.import_module("achilles.core.data")]


def test_every_warning_achilles_raises_is_a_category_of_its_own():
    calls = list(_warn_calls())
    assert len(calls) > 15  # the scan found the package's calls
    bad = []
    for mod, node in calls:
        c = _category(mod, node)
        if not (isinstance(c, type) and issubclass(c, Warning) and c.__module__.split(".")[0] == "achilles"):
            bad.append(f"{mod}:{node.lineno}: {ast.unparse(node)[:90]}")
    assert not bad, "warnings without a category of achilles' own (the CLI would call them unexpected):\n" + "\n".join(bad)


def test_the_cli_says_our_categories_as_they_are_and_others_as_unexpected():
    from achilles.cli import _format_warning
    from achilles.core.results import MetricWarning
    ours = _format_warning("report", "inference (ML): the attack does no better than guessing", MetricWarning, "x.py", 1)
    assert ours == "achilles report: MetricWarning: inference (ML): the attack does no better than guessing\n"
    other = _format_warning("report", "boom", UserWarning, "/v/site-packages/joblib/x.py", 3)
    assert "unexpected UserWarning from joblib" in other


def test_the_inference_caveat_is_a_metric_warning_when_the_attack_does_not_beat_its_baseline():
    # "no better" includes a tie: an attack exactly at its baseline's rate has learnt nothing from the known columns
    import warnings
    from achilles.core.results import MetricWarning, RiskResult
    from achilles.nobox.inference import _warn_baseline
    for attack, warned in ((0.30, True), (0.40, True), (0.41, False)):
        res = RiskResult("inference", 0.0, attack_rate=attack, baseline_rate=0.40)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert _warn_baseline(res, "inference (ML)") is res
        assert [x.category for x in w] == ([MetricWarning] if warned else []), attack
