"""Faults a user meets: concurrent writers, kill -9 and resume, a full disk, Ctrl-C and SIGTERM, outputs that would
overwrite inputs, and every bad input of the reliability issue, each ending in one clear line (exit status 2)."""
import json, multiprocessing as mp, os, signal, sqlite3, subprocess, sys, time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from achilles import cli
from helpers import wait_rows
from achilles.core.results import ResultsStore, StoreError

ROOT = Path(__file__).resolve().parents[1]
ACHILLES = str(Path(sys.executable).parent / "achilles")  # the console script of this environment
FAST = ["--generator", "independent", "--n-shadow", "40", "--n-test", "20", "--quiet"]


def one_line_error(capsys, argv, *needles):
    "Run the CLI in-process; it must exit 2 with one line on stderr naming what is wrong, and no traceback."
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    err = "\n".join(l for l in err.splitlines() if "Warning:" not in l)  # a data warning printed before it (once per process) is not the error
    assert err.count("\n") == 0 and "Traceback" not in err, err
    assert err.startswith(f"achilles {argv[0]}: error:"), err
    for n in needles: assert n in err, (n, err)
    return err


# ---------------------------------------------------------------- the store
def _writer(path, who, n):
    st = ResultsStore(path)
    for i in range(n): st.append("attack", f"run-{who}", i, dict(record_id=i, auc=0.5, who=who))


def test_concurrent_writers_keep_every_row(tmp_path):
    path = tmp_path / "achilles.sqlite"
    ResultsStore(path)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 60)) for w in range(4)]
    for p in procs: p.start()
    for p in procs: p.join(120)
    assert all(p.exitcode == 0 for p in procs)
    t = ResultsStore(path).read()
    assert len(t) == 240 and t.groupby("who").size().tolist() == [60] * 4


def test_same_row_from_two_writers_is_kept_once(tmp_path):
    a, b = ResultsStore(tmp_path / "s.sqlite"), ResultsStore(tmp_path / "s.sqlite")
    assert a.append("attack", "r", 1, dict(auc=0.7)) and not b.append("attack", "r", 1, dict(auc=0.7))
    assert len(a) == 1


def test_full_disk_leaves_the_store_readable(tmp_path, monkeypatch):
    path = tmp_path / "s.sqlite"
    st = ResultsStore(path)
    st.append("attack", "r", 0, dict(auc=0.5))
    real = ResultsStore._connect
    def small_disk(self):
        con = real(self); con.execute("PRAGMA max_page_count=8"); return con  # SQLite's own "database or disk is full"
    monkeypatch.setattr(ResultsStore, "_connect", small_disk)
    with pytest.raises(StoreError, match="the disk is full. The rows written before are kept"):
        for i in range(1, 10_000): st.append("attack", "r", i, dict(auc=0.5, pad="x" * 2000))
    monkeypatch.setattr(ResultsStore, "_connect", real)
    t = ResultsStore(path).read()
    assert len(t) >= 1 and t["item"].astype(int).is_unique  # readable, nothing half-written
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_store_refuses_foreign_files(tmp_path):
    (tmp_path / "data.csv").write_text("a\n1\n")
    with pytest.raises(StoreError, match="is a CSV"): ResultsStore(tmp_path / "data.csv")
    (tmp_path / "notes.db").write_text("hello")
    with pytest.raises(StoreError, match="not an achilles results store"): ResultsStore(tmp_path / "notes.db")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(StoreError, match="not an achilles results store"): ResultsStore(other)
    with pytest.raises(StoreError, match="is a directory"): ResultsStore(tmp_path)


def test_damaged_csv_import_is_refused(tmp_path):
    st = ResultsStore(tmp_path / "s.sqlite")
    good = "run_id,record_id,auc\nr,1,0.8\nr,2,0.7\n"
    (tmp_path / "cut.csv").write_text(good + "r,3,0.")
    with pytest.raises(ValueError, match="cut off"): st.import_csv(tmp_path / "cut.csv")
    (tmp_path / "clash.csv").write_text(good + "r,2,0.9\n")
    with pytest.raises(ValueError, match="different values"): st.import_csv(tmp_path / "clash.csv")
    (tmp_path / "dup.csv").write_text(good + "r,2,0.7\n")
    with pytest.warns(UserWarning, match="1 duplicated row"): assert st.import_csv(tmp_path / "dup.csv") == 2
    assert len(st) == 2


# ---------------------------------------------------------------- whole runs in a subprocess
def _attack(store, cache, records=3, extra=()):
    return [ACHILLES, "attack", "--records", str(records), "--results", str(store),
            "--cache-dir", str(cache), "--jobs", "1", *FAST, *extra]


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("clean")
    subprocess.run(_attack(d / "s.sqlite", d / "c"), check=True, cwd=d, capture_output=True, timeout=600)
    return ResultsStore(d / "s.sqlite").read().sort_values("record_id").reset_index(drop=True)


def test_kill_9_then_resume_equals_an_uninterrupted_run(tmp_path, clean_run):
    store = tmp_path / "s.sqlite"
    p = subprocess.Popen(_attack(store, tmp_path / "c"), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert wait_rows(store, 1, p), "the run never wrote its first row"
    p.send_signal(signal.SIGKILL); p.wait(30)
    assert 1 <= len(ResultsStore(store)) < 3
    subprocess.run(_attack(store, tmp_path / "c"), check=True, cwd=tmp_path, capture_output=True, timeout=600)
    got = ResultsStore(store).read().sort_values("record_id").reset_index(drop=True)
    assert got["record_id"].tolist() == clean_run["record_id"].tolist()
    np.testing.assert_array_equal(got["auc"], clean_run["auc"])


def _default_sigint():
    "In the child: Ctrl-C's default disposition, as a terminal gives it (a suite started in the background inherits SIGINT ignored)."
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_ctrl_c_and_sigterm_stop_cleanly(tmp_path, sig, code, word):
    store = tmp_path / "s.sqlite"
    p = subprocess.Popen(_attack(store, tmp_path / "c", records=5), cwd=tmp_path, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    assert wait_rows(store, 1, p)
    p.send_signal(sig)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == code, (p.returncode, err)
    assert "Traceback" not in err and word in err and "resumes" in err
    assert ResultsStore(store).read()["item"].is_unique


def test_two_concurrent_runs_on_one_store_keep_every_row(tmp_path):
    store = tmp_path / "s.sqlite"
    runs = [subprocess.Popen(_attack(store, tmp_path / f"c{s}", records=2, extra=("--seed", str(s))), cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for s in (1, 2)]
    for r in runs: assert r.wait(600) == 0, r.stderr.read()
    t = ResultsStore(store).read()
    assert len(t) == 4 and t["run_id"].nunique() == 2


# ---------------------------------------------------------------- outputs never overwrite inputs
@pytest.fixture
def csv(tmp_path):
    from achilles.core.data import load_adult
    p = tmp_path / "mine.csv"; load_adult().iloc[:300].to_csv(p, index=False); return p


def test_out_never_overwrites_the_input(csv, capsys):
    before = csv.read_bytes()
    one_line_error(capsys, ["vulnerable", "--csv", str(csv), "--out", str(csv), "--force"], "is the input data")
    one_line_error(capsys, ["attack", "--csv", str(csv), "--results", str(csv), *FAST], "is the input data")
    assert csv.read_bytes() == before


def test_out_never_overwrites_an_existing_file_without_force(csv, tmp_path, capsys):
    out = tmp_path / "top.csv"; out.write_text("mine\n")
    one_line_error(capsys, ["vulnerable", "--csv", str(csv), "--out", str(out)], "exists", "--force")
    assert out.read_text() == "mine\n"
    assert cli.main(["vulnerable", "--csv", str(csv), "--out", str(out), "--force", "--top", "3"]) == 0
    assert len(pd.read_csv(out)) == 3


def test_results_export_never_overwrites(tmp_path, capsys):
    st = ResultsStore(tmp_path / "s.sqlite"); st.append("attack", "r", 1, dict(auc=0.5))
    (tmp_path / "x.csv").write_text("keep\n")
    one_line_error(capsys, ["results", "export", "--results", str(tmp_path / "s.sqlite"), "--csv", str(tmp_path / "x.csv")], "exists")
    assert (tmp_path / "x.csv").read_text() == "keep\n"
    assert cli.main(["results", "export", "--results", str(tmp_path / "s.sqlite"), "--csv", str(tmp_path / "y.csv")]) == 0
    assert len(pd.read_csv(tmp_path / "y.csv")) == 1


def test_full_disk_on_output_is_one_line(csv, tmp_path, capsys, monkeypatch):
    import errno
    def full(*a, **k): raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(cli, "atomic_write", full)
    one_line_error(capsys, ["vulnerable", "--csv", str(csv), "--out", str(tmp_path / "o.csv"), "--top", "3"], "No space left")
    assert not (tmp_path / "o.csv").exists()


# ---------------------------------------------------------------- bad inputs: one clear line each
def test_bad_places(tmp_path, capsys):
    one_line_error(capsys, ["attack", "--results", str(tmp_path), *FAST], "is a directory")
    (tmp_path / "f").write_text("x")
    one_line_error(capsys, ["attack", "--results", str(tmp_path / "f" / "s.sqlite"), *FAST], "is a file")
    one_line_error(capsys, ["attack", "--results", str(tmp_path / "s.sqlite"), "--cache-dir", str(tmp_path / "f"), *FAST],
                   "is a file")


def test_read_only_output_folder(capsys):
    "A folder the user cannot write into is refused before any work (as root, CI's user, asked as an ordinary user)."
    import shutil
    from helpers import ordinary_user, read_only_folder
    ro = read_only_folder()
    try:
        with ordinary_user(): one_line_error(capsys, ["attack", "--results", str(ro / "s.sqlite"), *FAST], "not writable", str(ro))
    finally: shutil.rmtree(ro.parent, ignore_errors=True)
    assert not (ro / "s.sqlite").exists()


def test_bad_arguments(tmp_path, capsys):
    s = str(tmp_path / "s.sqlite")
    one_line_error(capsys, ["attack", "--results", s, "--jobs", "0", *FAST], "--jobs=0 is not allowed")
    one_line_error(capsys, ["attack", "--results", s, "--generator", "gan"], "generator 'gan' is not registered", "baynet")
    one_line_error(capsys, ["attack", "--results", s, "--selector", "best", *FAST], "best", "distance")
    one_line_error(capsys, ["attack", "--results", s, "--dataset", "adults", *FAST], "adults", "adult")
    one_line_error(capsys, ["vulnerable", "--dataset", "adults"], "adults", "adult")
    t0 = time.time()
    one_line_error(capsys, ["attack", "--results", s, "--generator", "baynet", "--params", "degree=20"], "degree=20")
    assert time.time() - t0 < 30  # refused before any work, not a MemoryError after minutes


def test_bad_csv_files(tmp_path, capsys):
    (tmp_path / "empty.csv").write_text("")
    one_line_error(capsys, ["vulnerable", "--csv", str(tmp_path / "empty.csv")], "empty.csv")
    (tmp_path / "header.csv").write_text("a,b,c\n")
    one_line_error(capsys, ["vulnerable", "--csv", str(tmp_path / "header.csv")], "header.csv")
    (tmp_path / "nan.csv").write_text("a,b\n1,\n2,\n3,\n")
    one_line_error(capsys, ["vulnerable", "--csv", str(tmp_path / "nan.csv")], "'b'")
    (tmp_path / "ok.csv").write_text("a,b\n1,x\n2,y\n3,x\n")
    one_line_error(capsys, ["vulnerable", "--csv", str(tmp_path / "ok.csv"), "--types", '["a", "b"]'], "types")


def test_attack_honours_types_and_path(csv, tmp_path, monkeypatch):
    seen = {}
    import achilles.experiments.runner as runner
    def fake(**kw):
        seen.update(kw); return pd.DataFrame([dict(auc=0.5)])
    monkeypatch.setattr(runner, "run_attack_experiment", fake)
    assert cli.main(["attack", "--csv", str(csv), "--types", "age:categorical", "--results", str(tmp_path / "s.sqlite"), "--quiet"]) == 0
    df, schema = seen["population"]
    assert schema["age"].is_categorical and len(df) == 300


def test_a_users_adult_csv_is_not_labelled_as_the_bundled_adult(tmp_path):
    from achilles.core.data import load_adult
    from achilles.experiments.runner import run_attack_experiment
    p = tmp_path / "adult.csv"; load_adult().iloc[:3000].to_csv(p, index=False)
    rows = run_attack_experiment(str(p), generator="independent", records=1, n_shadow=40, n_test=20, dataset_size=100,
                                 results_path=tmp_path / "s.sqlite", cache_dir=None, verbose=False)
    assert rows["dataset"].tolist() == ["file:adult.csv"] and rows["scale"].tolist() == ["reduced"]
    assert len(ResultsStore(tmp_path / "s.sqlite").read()["dataset_hash"].iloc[0]) == 16
