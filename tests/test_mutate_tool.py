""".ci/mutate, the mutation-testing script: its sampling (uniform, seeded, a larger sample extends a smaller one), the Wilson
interval it reports for a sampled score, and its mutant listing (read only: it takes no lock and changes no file)."""
import importlib.machinery, importlib.util, subprocess, sys
from pathlib import Path

import pytest

from achilles.core.results import wilson_interval

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / ".ci" / "mutate"


def _load():
    loader = importlib.machinery.SourceFileLoader("ci_mutate", str(SCRIPT))
    spec = importlib.util.spec_from_loader("ci_mutate", loader)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["ci_mutate"] = mod  # dataclasses look their module up
    loader.exec_module(mod)
    return mod


def _listed(*args) -> list:
    out = subprocess.run([sys.executable, str(SCRIPT), "nobox/statistical", "--list", *args], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    return [int(l.split()[0]) for l in out if l.strip() and l.split()[0].isdigit() and " mutants of " not in l]


def test_wilson_matches_the_package():
    w = _load().wilson
    for k, n in ((0, 10), (7, 10), (10, 10), (183, 200), (1, 1)):
        assert w(k, n) == pytest.approx(wilson_interval(k, n, 0.95), abs=1e-12)


def test_sample_is_seeded_and_nested():
    every = _listed()
    small, large = _listed("--sample", "10"), _listed("--sample", "25")
    assert len(small) == 10 and len(large) == 25 and set(small) <= set(large) <= set(every)
    assert small == sorted(small) and _listed("--sample", "10") == small
    assert _listed("--sample", "10", "--seed", "3") != small
    assert _listed("--sample", str(len(every) + 5)) == every  # more than there are: all of them


def test_mutation_md_keeps_the_hand_written_opening(tmp_path):
    "The Results section is rebuilt from .mutate/ (none here: an empty table); the text before it and its opening stay as written."
    import shutil
    (tmp_path / ".ci").mkdir(); (tmp_path / "tests").mkdir()
    for f in ("mutate", "mutation_md"): shutil.copy(ROOT / ".ci" / f, tmp_path / ".ci" / f)
    md = (ROOT / "tests" / "MUTATION.md").read_text()
    (tmp_path / "tests" / "MUTATION.md").write_text(md)
    subprocess.run([sys.executable, str(tmp_path / ".ci" / "mutation_md")], check=True, capture_output=True)
    out = (tmp_path / "tests" / "MUTATION.md").read_text()
    opening = md[:md.index("\n| module |")]
    assert out.startswith(opening) and "| module | mutants | run |" in out and "### achilles" not in out
