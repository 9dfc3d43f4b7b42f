"""Files the commands write, as a careless or hostile user meets them (reliability issue, round two): no output is ever an
input, the results store or the cache; a refused file is left byte for byte; files get the umask's permissions and a replaced
file keeps its own; outputs are checked before the work and a finished result survives a failed write; CSV outputs escape
spreadsheet formulas; printed output shows control characters escaped."""
import errno
import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from achilles import cli
from achilles.core.results import ResultsStore
from achilles.core.runtime import WriteError, atomic_write, current_umask
from faultkit import (Files, argv_for, block_all_work, foreign_sqlite, make_files, one_line_error, run, stub_work)

OUT_COMMANDS = ["vulnerable", "nobox", "audit", "report", "results export"]  # every command with a file output
STORE_COMMANDS = ["attack", "nobox", "kde", "riskbench", "audit", "report", "results show", "results export", "results import"]


@pytest.fixture
def f(tmp_path) -> Files:
    return make_files(tmp_path)


# ---------------------------------------------------------------- data loss: an output is never an input, the store or the cache
def _targets(f: Files, command: str) -> dict:
    "Paths that name a file the command must never write over, each spelled a way a user might."
    d = f.dir
    (d / "sub").mkdir(exist_ok=True)
    os.symlink(f.store, d / "link.sqlite")
    t = {"the store": f.store, "the store via ./ and ..": d / "." / "sub" / ".." / "store.sqlite",
         "the store in other case": d / "STORE.SQLITE", "the store through a symlink": d / "link.sqlite",
         "the store's WAL file": Path(f"{f.store}-wal")}
    if command == "vulnerable" and not (d / "store.SQLITE").exists():  # no --results to compare names with, and a
        del t["the store in other case"]  # case-sensitive file system: STORE.SQLITE is another, new file
    if command in ("audit", "report"): t["inside the cache"] = f.cache / "out.csv"
    if command != "results export": t["the input"] = f.train if command == "nobox" else f.data
    return t


@pytest.mark.parametrize("command", OUT_COMMANDS)
def test_no_output_is_an_input_the_store_or_the_cache_even_with_force(f, command, capsys, monkeypatch):
    block_all_work(monkeypatch)
    for what, target in _targets(f, command).items():
        before = f.snapshot()
        argv = argv_for(command, f, results=f.store, out=target,
                        extra=["--force"] + (["--cache-dir", f.cache] if command in ("audit", "report") else []))
        if command == "results export": argv = ["results", "export", "--results", str(f.store), "--csv", str(target), "--force"]
        one_line_error(capsys, argv, "write the output to another file" if what != "the input" or command != "results export"
                       else "")
        assert f.snapshot() == before, (command, what)


def test_two_outputs_of_one_command_are_never_the_same_file(f, capsys):
    one_line_error(capsys, ["results", "export", "--results", f.store, "--csv", f.dir / "x.csv", "--parquet", f.dir / "X.CSV"],
                   "is also the output of")


@pytest.mark.parametrize("command", ["vulnerable", "nobox", "audit", "report"])
def test_results_store_is_never_an_input(f, command, capsys, monkeypatch):
    block_all_work(monkeypatch)
    data = f.train if command == "nobox" else f.data
    before = data.read_bytes()
    one_line_error(capsys, argv_for(command, f, results=data) if command != "vulnerable"
                   else ["attack", "--csv", data, "--results", data], "is the input data")
    assert data.read_bytes() == before


# ---------------------------------------------------------------- data loss: a refused store is left byte for byte
FOREIGN = {
    "someone's SQLite database": lambda p: foreign_sqlite(p),
    "someone's SQLite database in WAL mode": lambda p: foreign_sqlite(p, wal=True),
    "an SQLite database with no table": lambda p: foreign_sqlite(p, tables=False),
    "an empty file": lambda p: (p.touch(), p)[1],
    "a text file": lambda p: (p.write_text("my notes\n"), p)[1],
}


@pytest.mark.parametrize("kind", list(FOREIGN))
@pytest.mark.parametrize("command", STORE_COMMANDS)
def test_a_refused_store_is_left_byte_for_byte(f, command, kind, capsys, monkeypatch):
    block_all_work(monkeypatch)
    other = FOREIGN[kind](f.dir / "other.sqlite")
    before = f.snapshot()
    one_line_error(capsys, argv_for(command, f, results=other), "not an achilles results store" if "empty" not in kind else "empty file")
    assert f.snapshot() == before  # not switched to WAL (bytes 18-19), no table created, no -wal / -shm file left


def test_reading_a_store_never_creates_tables(f):
    other = foreign_sqlite(f.dir / "none.sqlite", tables=False)
    before = other.read_bytes()
    with pytest.raises(OSError, match="not an achilles results store"): ResultsStore(other, readonly=True)
    with pytest.raises(OSError, match="not an achilles results store"): ResultsStore(other)
    assert other.read_bytes() == before and sqlite3.connect(other).execute("SELECT name FROM sqlite_master").fetchall() == []


# ---------------------------------------------------------------- file modes: the umask decides, a replaced file keeps its own
class _FakeReport:
    "What `custodian_report` returns, enough for `achilles report` to print and save it."
    def __init__(self):
        self.top = pd.DataFrame(dict(rank=[1], record=[0], AUC=[0.9], why=["rare values"]))
        self.remove = pd.DataFrame(dict(record=[1], change=[0.0]))
        self.suppress = pd.DataFrame(dict(record=[0], change=[0.0]))
        self.config = dict(seconds=dict(total=1.0))
        self.audit = pd.DataFrame(dict(record=[0], auc=[0.9]))
    def summary(self): return "1 record audited"
    def verdict(self): return "Verdict: 1 record"
    def to_html(self): return "<!DOCTYPE html><html><body>report</body></html>\n"


def _audit_rows(*a, **k):
    rows = pd.DataFrame({"record": [0, 1], "auc": [0.9, 0.5], "auc_ci_low": [0.8, 0.4], "auc_ci_high": [1.0, 0.6],
                         "tpr@0.1": [0.5, 0.1], "tpr@0.01": [0.2, 0.0], "eps_lower": [1.0, 0.0], "auc_query": [0.9, 0.5],
                         "note": ["=cmd|' /C calc'!A0", "ok"]})
    rows.attrs.update(seconds=dict(plan=0.1, generation=0.5, features=0.2, classifiers=0.2, total=1.0), run_id="r",
                      config=dict(attacks=["query"]))
    return rows


def _fast(monkeypatch, command):
    "Let a command run to its end quickly: its heavy work replaced by a result of the right shape."
    if command == "audit": stub_work(monkeypatch, "audit", _audit_rows)
    if command == "report": stub_work(monkeypatch, "report", lambda *a, **k: _FakeReport())


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
@pytest.mark.parametrize("command", OUT_COMMANDS)
def test_new_files_follow_the_umask_and_replaced_files_keep_their_mode(f, command, mask, capsys, monkeypatch):
    _fast(monkeypatch, command)
    out = f.dir / ("out.html" if command == "report" else "out.csv")
    new_store = f.dir / "new.sqlite"
    results = f.store if command == "results export" else new_store
    old = os.umask(mask)
    try:
        code, _, err = run(capsys, argv_for(command, f, results=results, out=out))
        assert code == 0, err
        assert out.stat().st_mode & 0o777 == 0o666 & ~mask
        if new_store.exists(): assert new_store.stat().st_mode & 0o777 == 0o666 & ~mask
        out.chmod(0o640)
        code, _, err = run(capsys, argv_for(command, f, results=results, out=out, extra=["--force"]))
        assert code == 0, err
        assert out.stat().st_mode & 0o777 == 0o640  # --force replaced the contents, not the permissions
    finally:
        os.umask(old)


def test_atomic_write_respects_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        assert atomic_write(tmp_path / "a", b"x").stat().st_mode & 0o777 == 0o640
    finally:
        os.umask(old)


# ---------------------------------------------------------------- outputs are checked before the work
BAD_PLACES = {
    "a folder": lambda f: f.dir,
    "under a regular file": lambda f: f.data / "out.csv",
    "in /proc": lambda f: Path("/proc/achilles-no-such-place/out.csv"),
}


@pytest.mark.parametrize("place", list(BAD_PLACES))
@pytest.mark.parametrize("command", OUT_COMMANDS)
def test_a_bad_output_place_is_refused_before_the_work(f, command, place, capsys, monkeypatch):
    if place == "in /proc" and not Path("/proc/self").exists(): pytest.skip("no /proc here")
    block_all_work(monkeypatch)
    one_line_error(capsys, argv_for(command, f, results=f.store, out=BAD_PLACES[place](f)), "--csv" if command == "results export" else "--out")


@pytest.mark.parametrize("command", ["vulnerable", "nobox", "audit", "report"])
def test_a_finished_result_survives_a_failed_write(f, command, capsys, monkeypatch, tmp_path):
    _fast(monkeypatch, command)
    out = f.dir / ("out.html" if command == "report" else "out.csv")
    real = atomic_write
    def full_disk(path, data, mode=None):
        if Path(path) == out: raise WriteError(errno.ENOSPC, f"could not write {str(path)!r}: the disk is full (no space left on device)")
        return real(path, data, mode)
    monkeypatch.setattr(cli, "atomic_write", full_disk)
    rescue = tmp_path / "rescue"; rescue.mkdir()
    import tempfile
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(rescue))
    line = one_line_error(capsys, argv_for(command, f, results="", out=out), str(out), "the disk is full",
                          "the finished result was saved to")
    saved = list(rescue.iterdir())
    assert len(saved) == 1 and str(saved[0]) in line and saved[0].stat().st_size > 0
    assert not out.exists()


# ---------------------------------------------------------------- security: CSV injection, terminal escapes
FORMULA = "=cmd|' /C calc'!A0"


@pytest.mark.parametrize("command", ["vulnerable", "audit", "results export"])
def test_csv_outputs_escape_formulas_unless_raw(f, command, capsys, monkeypatch):
    _fast(monkeypatch, command)
    df = pd.read_csv(f.data); df["native-country"] = FORMULA; df.to_csv(f.data, index=False)
    ResultsStore(f.store).append("metric", "r2", "ims", dict(metric="ims", value=0.1, dataset=FORMULA))
    out = f.dir / "out.csv"
    for raw in (False, True):
        code, _, err = run(capsys, argv_for(command, f, results=f.store if command == "results export" else "", out=out,
                                            extra=["--force"] + (["--raw-csv"] if raw else [])))
        assert code == 0, err
        text = out.read_text()
        assert ("'" + FORMULA in text) != raw and FORMULA in text
        if not raw: assert all(not cell.startswith(("=", "+", "@")) for line in text.splitlines() for cell in line.split(","))


ESC = "\x1b]0;TITLE\x07"


@pytest.mark.parametrize("where", ["a printed table", "results show", "an error message", "a warning"])
def test_control_characters_never_reach_the_terminal(f, where, capsys):
    if where == "a printed table":
        df = pd.read_csv(f.data); df["native-country"] = ESC; df.to_csv(f.data, index=False)
        argv = ["vulnerable", "--csv", f.data, "--top", "3"]
    elif where == "results show":
        ResultsStore(f.store).append("metric", "r2", "ims", dict(metric="ims", value=0.1, dataset=ESC))
        argv = ["results", "show", "--results", f.store]
    elif where == "an error message":
        argv = ["vulnerable", "--csv", f.dir / f"{ESC}.csv"]
    else:  # warnings print through the console script's own format (pytest would record them in-process)
        df = pd.read_csv(f.data); df[ESC] = "constant"; df.to_csv(f.data, index=False)
        import subprocess, sys
        p = subprocess.run([str(Path(sys.executable).parent / "achilles"), "vulnerable", "--csv", str(f.data), "--top", "3"],
                           capture_output=True, text=True, timeout=300)
        assert "DataWarning" in p.stderr and "\x1b" not in p.stdout + p.stderr and "\\x1b]0;TITLE\\x07" in p.stderr, p.stderr
        return
    _, out, err = run(capsys, argv)
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "\\x1b]0;TITLE\\x07" in out + err
