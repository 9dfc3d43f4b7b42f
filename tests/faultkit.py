"""What the `test_faults_*` files share: small input files, every command's argv, stubs that stand in for a command's
expensive work (so that a test sees whether a check came before it), and the one-line-error assertion."""
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from achilles import cli
from achilles.core.data import load_adult
# modules that bind a work function by name at import: imported now, so that a stub never becomes their binding
import achilles.experiments.custodian, achilles.experiments.riskbench, achilles.experiments.runner  # noqa: E401,F401
import achilles.perf.attacks, achilles.perf.audit, achilles.perf.nobox, achilles.perf.riskbench  # noqa: E401,F401
from achilles.core.results import ResultsStore


class WorkStarted(AssertionError):
    "Raised by a stub when a command reaches its expensive work."


# the function that does each command's work, as the command imports it (module, attribute)
WORK = {
    "vulnerable": ("achilles.selectors", "select_records"),
    "attack": ("achilles.experiments.runner", "run_attack_experiment"),
    "nobox": ("achilles.nobox.report", "privacy_report"),
    "kde": ("achilles.nobox.kde", "KDEMembershipAttack.evaluate"),
    "riskbench": ("achilles.experiments.riskbench", "run_riskbench"),
    "audit": ("achilles.shadow.audit", "audit"),
    "report": ("achilles.experiments.custodian", "custodian_report"),
    "results": ("achilles.core.results", "ResultsStore.export"),
}


def stub_work(monkeypatch, command, fn=None):
    "Replace `command`'s work function by `fn` (default: one that raises `WorkStarted`)."
    import importlib
    mod, attr = WORK[command]
    obj = importlib.import_module(mod)
    *owner, name = attr.split(".")
    for o in owner: obj = getattr(obj, o)
    def started(*a, **k): raise WorkStarted(f"{command}: the work started")
    monkeypatch.setattr(obj, name, fn or started)


def record_work(monkeypatch, command) -> dict:
    "Stub `command`'s work with one that records its arguments (`args`, `kw` of the dict returned) and raises `WorkStarted`."
    seen = {}
    def record(*a, **k):
        seen.update(args=a, kw=k); raise WorkStarted("recorded")
    stub_work(monkeypatch, command, record)
    return seen


def work_tables(seen: dict) -> list:
    "The DataFrames a recorded work call received: positional, keyword, or the first of a keyword's tuple."
    tables = [x for x in list(seen["args"]) + list(seen["kw"].values()) if isinstance(x, pd.DataFrame)]
    return tables + [x[0] for x in seen["kw"].values() if isinstance(x, tuple) and x and isinstance(x[0], pd.DataFrame)]


def block_all_work(monkeypatch):
    for c in WORK: stub_work(monkeypatch, c)


def run(capsys, argv):
    "Run the CLI in-process: (exit status, stdout, stderr)."
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(capsys, argv, *needles, code=2):
    "The command must exit `code` with one line on stderr (no traceback) holding every needle; returns that line."
    got, _, err = run(capsys, argv)
    lines = [l for l in err.splitlines() if "Warning:" not in l]
    assert got == code, (got, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(f"achilles {argv[0]}: error:") or lines[0].startswith("achilles: error:"), err
    assert "work started" not in err, err
    for n in needles: assert n in lines[0], (n, lines[0])
    return lines[0]


@dataclass
class Files:
    dir: Path
    data: Path  # 300 Adult rows
    train: Path
    synth: Path
    control: Path
    store: Path  # an achilles store with one row
    cache: Path  # a cache folder (with one file in it)

    def snapshot(self) -> dict:
        "Every file under the folder with its bytes (to see that a refused command changed nothing)."
        return {str(p.relative_to(self.dir)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
                for p in sorted(self.dir.rglob("*"))}


_ADULT = []


def make_files(d: Path) -> Files:
    if not _ADULT: _ADULT.append(load_adult().iloc[:1200])
    df = _ADULT[0]
    f = Files(d, d / "data.csv", d / "train.csv", d / "synth.csv", d / "control.csv", d / "store.sqlite", d / "cache")
    df.iloc[:300].to_csv(f.data, index=False)
    df.iloc[300:600].to_csv(f.train, index=False)
    df.iloc[600:900].to_csv(f.synth, index=False)
    df.iloc[900:1200].to_csv(f.control, index=False)
    ResultsStore(f.store).append("metric", "r", "ims", dict(metric="ims", value=0.5, dataset="adult"))
    f.cache.mkdir(); (f.cache / "note.txt").write_text("a file of the cache folder\n")
    return f


def foreign_sqlite(path: Path, wal: bool = False, tables: bool = True) -> Path:
    "Someone else's SQLite database (a table t), in rollback-journal or WAL mode, or with no table at all."
    con = sqlite3.connect(path)
    if wal: con.execute("PRAGMA journal_mode=WAL")
    if tables: con.execute("CREATE TABLE t (x)"); con.execute("INSERT INTO t VALUES (1)")
    else: con.execute("PRAGMA user_version=1")  # a valid database file with no table
    con.commit(); con.close()
    return path


def argv_for(command: str, f: Files, results=None, out=None, extra=()) -> list:
    "A minimal argv of each command that reads `f`'s files, with --results and --out where the command has them."
    r = [] if results is None else ["--results", results]
    o = [] if out is None else ["--out", out]
    base = {
        "vulnerable": ["vulnerable", "--csv", f.data, "--top", "3", *o],
        "attack": ["attack", "--csv", f.data, "--generator", "independent", "--records", "1", "--dataset-size", "50",
                   "--n-shadow", "4", "--n-test", "4", "--cache-dir", "", "--quiet", *r],
        "nobox": ["nobox", "--train", f.train, "--synthetic", f.synth, "--control", f.control, "--metrics", "ims", "--quiet", *r, *o],
        "kde": ["kde", "--train", f.train, "--synthetic", f.synth, "--holdout", f.control, *r],
        "riskbench": ["riskbench", "--csv", f.data, "--metrics", "ims", "--no-utility", "--levels", "0,1", "--quiet", *r],
        "audit": ["audit", "--csv", f.data, "--records", "4", "--n-datasets", "40", "--dataset-size", "50", "--cache-dir", "",
                  "--quiet", *r, *o],
        "report": ["report", "--data", f.data, "--generator", "independent", "--design", "bernoulli", "--records", "10", "--n-datasets", "40",
                   "--dataset-size", "100", "--top", "2", "--remedy-top", "2", "--quiet", *r,
                   *(o or ["--out", f.dir / "report.html"])],
        "results show": ["results", "show", *r],
        "results export": ["results", "export", *r, "--csv", out or f.dir / "export.csv"],
        "results import": ["results", "import", f.data, *r],
    }[command]
    return [str(a) for a in base] + [str(a) for a in extra]
