"""Issue 40, data loss: an --out that names a link, a FIFO or a device, and a terminal that cannot print a character. The result
is written through a link to its target, to a FIFO or device as a stream, never over anything else; it is written and stored
before anything is printed, and printing falls back to ASCII (eps, -) where the stream cannot encode."""
import os, stat, subprocess, sys, time
from pathlib import Path

import pandas as pd
import pytest

from achilles import cli
from achilles.core.data import load_adult

ACHILLES = str(Path(sys.executable).parent / "achilles")


@pytest.fixture
def small_csv(tmp_path):
    p = tmp_path / "t.csv"
    load_adult().iloc[:300].to_csv(p, index=False)
    return p


def _vulnerable(csv, out, *extra):
    return ["vulnerable", "--csv", str(csv), "--k", "3", "--top", "5", "--out", str(out), *extra]


def test_a_link_is_written_through_to_its_target_and_stays_a_link(small_csv, tmp_path, capsys):
    target = tmp_path / "real.csv"; target.write_text("old\n")
    link = tmp_path / "link.csv"; link.symlink_to(target)
    assert cli.main(_vulnerable(small_csv, link)) == 2  # the target exists: --force needed, as for a plain path
    assert "(a link to" in capsys.readouterr().err and target.read_text() == "old\n"
    assert cli.main(_vulnerable(small_csv, link, "--force")) == 0
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert pd.read_csv(target)["record"].size == 5


def test_a_link_to_the_input_is_refused(small_csv, tmp_path, capsys):
    link = tmp_path / "in.csv"; link.symlink_to(small_csv)
    assert cli.main(_vulnerable(small_csv, link, "--force")) == 2
    assert "is the input data" in capsys.readouterr().err
    assert pd.read_csv(small_csv).shape[0] == 300


def _fifos_connect(folder: Path) -> bool:
    "Whether a FIFO made in `folder` joins its two ends, found with non-blocking calls only (some sandboxes make the node but never connect it)."
    probe = folder / "probe"; os.mkfifo(probe)
    try:
        r = os.open(probe, os.O_RDONLY | os.O_NONBLOCK)
        try:
            w = os.open(probe, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO where the reader is not seen
            try: os.write(w, b"x"); return os.read(r, 1) == b"x"
            finally: os.close(w)
        finally: os.close(r)
    except OSError: return False
    finally: probe.unlink()


def test_a_fifo_gets_the_result_as_a_stream(small_csv, tmp_path):
    # The command runs in its own process under a deadline, and this side reads without blocking: a writer that never
    # connects fails the test in minutes instead of hanging the suite (CI once stopped here, at its 90-minute limit).
    if not _fifos_connect(tmp_path): pytest.skip(f"FIFOs in {tmp_path} do not connect their two ends on this machine")
    fifo = tmp_path / "pipe"; os.mkfifo(fifo)
    r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # held open: what the command writes waits in the pipe
    got = b""
    try:
        proc = subprocess.Popen([ACHILLES, *_vulnerable(small_csv, fifo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            try: got += os.read(r, 1 << 16)
            except BlockingIOError: pass
            time.sleep(0.05)
        if proc.poll() is None: proc.kill(); proc.communicate(); pytest.fail("the command did not finish writing to a FIFO in 300 s")
        out, err = proc.communicate()
        while chunk := os.read(r, 1 << 16): got += chunk
    finally: os.close(r)
    assert proc.returncode == 0, err.decode()  # no --force: nothing is replaced
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO
    text = got.decode()
    assert text.startswith("rank,record,V_3") and text.count("\n") == 6


def test_a_character_device_is_written_not_replaced(small_csv):
    before = os.stat(os.devnull)
    assert cli.main(_vulnerable(small_csv, os.devnull)) == 0
    after = os.stat(os.devnull)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_a_socket_is_refused(small_csv, tmp_path, capsys):
    import socket
    path = tmp_path / "s.sock"
    s = socket.socket(socket.AF_UNIX)
    try: s.bind(str(path))
    except OSError as e: s.close(); pytest.skip(f"no Unix socket can be made in {tmp_path} on this machine ({e})")
    try:
        assert cli.main(_vulnerable(small_csv, path, "--force")) == 2
        assert "is a socket: achilles writes regular files, FIFOs and character devices only" in capsys.readouterr().err
        assert stat.S_ISSOCK(os.stat(path).st_mode)
    finally: s.close()


def test_a_terminal_that_cannot_print_epsilon_loses_nothing(small_csv, tmp_path):
    "cp1252 has no ε, − or ·: the command still writes its file and prints, with ASCII in their place."
    out = tmp_path / "top.csv"
    env = dict(os.environ, PYTHONIOENCODING="cp1252")
    r = subprocess.run([ACHILLES, *_vulnerable(small_csv, out)], capture_output=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr.decode("cp1252", "replace")
    assert pd.read_csv(out)["record"].size == 5
    assert b"most vulnerable" in r.stdout


def test_ascii_fallback_words():
    from achilles.cli import ascii_fallback
    assert ascii_fallback("ε·−≤ café ✓", "cp1252") == "eps·-<= café ?"  # cp1252 has · and é, not ε, −, ≤ or ✓
    assert ascii_fallback("ε·−≤ café", "ascii") == "eps.-<= cafe"
    assert ascii_fallback("ε", "utf-8") == "ε"


def test_the_escaping_stream_writes_what_it_cannot_encode_as_ascii():
    import io
    from achilles.cli import _Escaping
    raw = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    _Escaping(raw).write("value 2·AUC−1, ε = 0.3\x1b[31m\n"); raw.flush()
    assert raw.buffer.getvalue() == b"value 2\xb7AUC-1, eps = 0.3\\x1b[31m\n"  # cp1252's own middle dot; controls escaped


def test_kde_stores_its_row_on_a_cp1252_terminal(tmp_path):
    "kde prints 2·AUC−1 (cp1252 has no −): the row is stored, the command exits 0, the line reads 2·AUC-1."
    df = load_adult()
    for name, part in (("train", df.iloc[:300]), ("synthetic", df.iloc[300:600]), ("holdout", df.iloc[600:900])):
        part.to_csv(tmp_path / f"{name}.csv", index=False)
    store = tmp_path / "r.sqlite"
    env = dict(os.environ, PYTHONIOENCODING="cp1252")
    r = subprocess.run([ACHILLES, "kde", *(x for n in ("train", "synthetic", "holdout") for x in (f"--{n}", str(tmp_path / f"{n}.csv"))),
                        "--results", str(store)], capture_output=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr.decode("cp1252", "replace")
    assert "2·AUC-1" in r.stdout.decode("cp1252")
    from achilles.core.results import ResultsStore
    assert len(ResultsStore(store).read("metric")) == 1


def test_the_file_is_written_before_anything_is_printed(small_csv, tmp_path, monkeypatch):
    "A reader that goes away at the first line (`| head -0`): the command stops quietly (141), and --out is already written."
    class Gone:
        encoding = "utf-8"
        def write(self, text): raise BrokenPipeError(32, "Broken pipe")
        def flush(self): pass
        def fileno(self): raise OSError("no descriptor")
    out = tmp_path / "top.csv"
    monkeypatch.setattr(sys, "stdout", Gone())
    assert cli.main(_vulnerable(small_csv, out)) == 141
    assert pd.read_csv(out)["record"].size == 5
