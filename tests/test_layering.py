"""The package's layers: core imports nothing else from achilles, no module imports from a layer above its own,
benchmarks live in achilles/perf only, and no module outside core defines a shared interface."""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "achilles"
# top-level package or module -> layer (lower layers never import higher ones)
LAYERS = {"core": 0, "distance": 1, "queries": 1, "selectors": 1, "neighbours": 1, "generators": 2, "fidelity": 2,
          "shadow": 3, "nobox": 3, "experiments": 4, "perf": 5, "cli": 5}
SHARED_INTERFACES = {"Generator", "MembershipAttack", "PrivacyMetric", "RiskResult", "Registry"}


def _modules():
    for f in sorted(ROOT.rglob("*.py")):
        rel = f.relative_to(ROOT)
        if rel.name == "_modidx.py" or rel.parts == ("__init__.py",): continue
        yield f, rel


def _top(rel: Path) -> str:
    return rel.parts[0].removesuffix(".py")


def _imports(f: Path, rel: Path):
    "Absolute names of the achilles modules `f` imports (relative imports resolved); function-level imports included."
    pkg = ["achilles", *rel.parts[:-1]]
    for n in ast.walk(ast.parse(f.read_text())):
        if isinstance(n, ast.Import):
            yield from (a.name for a in n.names)
        elif isinstance(n, ast.ImportFrom):
            base = pkg[: len(pkg) - (n.level - 1)] if n.level else []
            mod = ".".join(base + ([n.module] if n.module else []))
            yield mod
            if not n.module:  # "from . import x": x may be a module
                yield from (f"{mod}.{a.name}" for a in n.names)


def test_every_module_has_a_layer():
    tops = {_top(rel) for _, rel in _modules()}
    assert tops <= set(LAYERS), f"modules without a layer: {tops - set(LAYERS)}"


@pytest.mark.parametrize("f,rel", list(_modules()), ids=lambda x: str(x) if isinstance(x, Path) else None)
def test_no_import_from_a_higher_layer(f, rel):
    mine = LAYERS[_top(rel)]
    bad = []
    for mod in _imports(f, rel):
        parts = mod.split(".")
        if parts[0] != "achilles" or len(parts) < 2 or parts[1] not in LAYERS: continue
        if _top(rel) == "core" and parts[1] != "core": bad.append(mod)
        elif LAYERS[parts[1]] > mine: bad.append(mod)
    assert not bad, f"{rel} (layer {mine}) imports from higher layers: {bad}"


def test_benchmarks_live_in_perf():
    found = [f"{rel}: {n.name}" for f, rel in _modules() if rel.parts[0] != "perf"
             for n in ast.parse(f.read_text()).body if isinstance(n, ast.FunctionDef) and n.name.startswith("bench_")]
    assert not found, f"bench_ functions outside achilles/perf: {found}"


def test_shared_interfaces_are_defined_in_core():
    found = [f"{rel}: {n.name}" for f, rel in _modules() if rel.parts[0] != "core"
             for n in ast.parse(f.read_text()).body if isinstance(n, ast.ClassDef) and n.name in SHARED_INTERFACES]
    assert not found, f"shared interfaces defined outside achilles/core: {found}"


def test_the_checker_catches_a_violation(tmp_path):
    "The layering check itself works: a core module importing a feature module is flagged."
    bad = tmp_path / "core" / "x.py"; bad.parent.mkdir()
    bad.write_text("from achilles.generators import GENERATORS\nfrom ..shadow import game\n")
    got = list(_imports(bad, Path("core/x.py")))
    assert "achilles.generators" in got and "achilles.shadow" in got


def test_library_never_looks_for_a_checkout():
    "No module searches for settings.ini or a shared/ folder (data paths are passed explicitly)."
    offenders = [str(rel) for f, rel in _modules() if rel.parts[0] not in ("perf",)
                 and any(s in f.read_text() for s in ('"settings.ini"', "'settings.ini'", '"shared"', 'Path.cwd().parents', '.resolve().parents]'))]
    assert not offenders, offenders
