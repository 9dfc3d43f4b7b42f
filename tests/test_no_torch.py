"""The base install has no torch: every module but the target-attention attack imports without it, `achilles list`
works, and asking for target attention names the pip command. Checked in a subprocess where `import torch` fails."""
import json
import subprocess
import sys
import textwrap

BLOCK = """
import sys
class _NoTorch:  # `import torch` (and any torch submodule) fails as if torch were not installed
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."): raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoTorch())
for m in [m for m in sys.modules if m == "torch" or m.startswith("torch.")]: del sys.modules[m]
"""


def run(code):
    out = subprocess.run([sys.executable, "-c", BLOCK + textwrap.dedent(code)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_every_module_but_target_attention_imports_without_torch():
    out = run("""
        import importlib, json, pkgutil
        import achilles
        ok, failed = [], {}
        for m in pkgutil.walk_packages(achilles.__path__, "achilles."):
            if m.name.startswith("achilles.generators.runners"): continue  # scripts for other environments
            try: importlib.import_module(m.name); ok.append(m.name)
            except ImportError as e: failed[m.name] = str(e)
        print(json.dumps(dict(ok=ok, failed=failed, torch=[k for k in sys.modules if k.startswith("torch")])))
    """)
    res = json.loads(out.strip().splitlines()[-1])
    assert list(res["failed"]) == ["achilles.shadow.target_attention"], res["failed"]
    assert "pip install 'achilles[nn]'" in res["failed"]["achilles.shadow.target_attention"]
    assert len(res["ok"]) > 20 and "achilles.cli" in res["ok"] and "achilles.perf.attacks" in res["ok"]
    assert res["torch"] == []


def test_registry_and_cli_without_torch():
    out = run("""
        import pandas as pd
        from achilles.core.data import load_adult, Schema
        from achilles.core.registry import MissingExtra
        from achilles.shadow import ATTACKS, make_attack
        df = load_adult().iloc[:50]
        try: make_attack("target-attention", df.iloc[[0]], Schema.from_dataframe(df))
        except MissingExtra as e: print("MISSING:", e)
        d = ATTACKS.describe().set_index("name")
        print("AVAILABLE:", {k: bool(v) for k, v in d["available"].items()}, dict(d["extra"]))
        from achilles.cli import main
        try: main(["list", "attacks"])
        except SystemExit as e: assert not e.code, e.code
    """)
    assert "MISSING: attack 'target-attention' needs an optional dependency (torch); install it with: pip install 'achilles[nn]'" in out
    assert "AVAILABLE: {'query': True, 'target-attention': False} {'query': '', 'target-attention': 'nn'}" in out
    assert "target-attention" in out.split("AVAILABLE:")[1]  # `achilles list attacks` lists it (as unavailable)
