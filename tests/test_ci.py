""".ci/run cleans up after itself: the virtual environment it makes (about 1.7 GB) is removed on exit, pass or fail,
and a venv given through VENV is left alone. Run on a copy of the script in a scratch repository, with `python3 -m venv`,
`nbdev_clean` and `nbdev_export` replaced by stubs, so nothing is installed."""
import os, shutil, stat, subprocess, sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[1] / ".ci" / "run"
STUB_PYTHON = """#!/usr/bin/env bash
# stands in for `python3 -m venv DIR`: an empty activate script is all .ci/run sources
[ "$1" = -m ] && [ "$2" = venv ] && mkdir -p "$3/bin" && : > "$3/bin/activate"
"""


def _scratch(tmp_path: Path, test_cmd: str) -> tuple[Path, dict]:
    repo, bin_, tmp = tmp_path / "repo", tmp_path / "bin", tmp_path / "tmp"
    for d in (repo / ".ci", bin_, tmp): d.mkdir(parents=True)
    shutil.copy(RUN, repo / ".ci" / "run")
    (repo / "README.md").write_text(f"# x\n\n```bash\ninstall\n{test_cmd}\n```\n")
    for name, text in [("python3", STUB_PYTHON), ("nbdev_clean", "#!/bin/sh\n"), ("nbdev_export", "#!/bin/sh\n")]:
        (bin_ / name).write_text(text)
        (bin_ / name).chmod((bin_ / name).stat().st_mode | stat.S_IXUSR)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "VENV"}
    env.update(PATH=f"{bin_}{os.pathsep}{env['PATH']}", TMPDIR=str(tmp))
    return repo, env


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None, reason="needs git and bash")
@pytest.mark.parametrize("test_cmd, rc", [("true", 0), ("false", 1)])
def test_ci_run_removes_its_own_venv(tmp_path, test_cmd, rc):
    repo, env = _scratch(tmp_path, test_cmd)
    p = subprocess.run(["bash", str(repo / ".ci" / "run")], env=env, capture_output=True, text=True)
    assert p.returncode == rc, p.stderr
    assert list((tmp_path / "tmp").iterdir()) == []  # the temporary venv's folder is gone


@pytest.mark.skipif(shutil.which("git") is None or shutil.which("bash") is None, reason="needs git and bash")
def test_ci_run_keeps_a_given_venv(tmp_path):
    repo, env = _scratch(tmp_path, "true")
    venv = tmp_path / "mine" / "venv"
    p = subprocess.run(["bash", str(repo / ".ci" / "run")], env={**env, "VENV": str(venv)}, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (venv / "bin" / "activate").exists()


def test_a_blocked_test_ends_the_run_with_its_stack_on_the_terminal(tmp_path):
    # conftest's deadline: CI once sat 75 minutes on a blocked test and printed nothing. Here a test that sleeps past a
    # 2-second deadline must end pytest with status 1 and its own frame in what reaches the terminal (not pytest's capture).
    (tmp_path / "test_blocked.py").write_text("import time\n\ndef test_blocked():\n    time.sleep(120)\n")
    env = {**os.environ, "ACHILLES_TEST_DEADLINE_S": "2", "PYTHONPATH": str(Path(__file__).parent)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "conftest", "-p", "no:cacheprovider", "test_blocked.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=100)
    said = r.stdout + r.stderr
    assert r.returncode == 1 and "Timeout (0:00:02)!" in said and "in test_blocked" in said, said[-2000:]
