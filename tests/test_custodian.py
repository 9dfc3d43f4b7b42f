"""The data custodian's report: the page is self-contained, has every section, and renders in a real headless browser."""
import base64, os, re, shutil, struct, subprocess
from pathlib import Path

import numpy as np
import pytest

from achilles.cli import main
from achilles.core.data import Schema, load_adult
from achilles.experiments.custodian import SECTIONS, custodian_report

PNG = b"\x89PNG\r\n\x1a\n"
CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome") if shutil.which(b)), None)


@pytest.fixture(scope="module")
def report():
    adult = load_adult()
    return custodian_report(adult, Schema.from_dataframe(adult), "baynet", records=30, n_datasets=60, dataset_size=200, top=6,
                            remedy_top=5, rng=0, name="adult")


@pytest.fixture(scope="module")
def page(report, tmp_path_factory):
    p = tmp_path_factory.mktemp("report") / "report.html"
    report.save(p)
    return p


def _imgs(text: str) -> list:
    return re.findall(r"<img\b[^>]*\bsrc\s*=\s*[\"']([^\"']*)[\"']", text, flags=re.I)


def _is_png(uri: str) -> bool:
    m = re.fullmatch(r"data:image/png;base64,([A-Za-z0-9+/=\s]+)", uri)
    return bool(m) and base64.b64decode(m.group(1), validate=False).startswith(PNG)


def test_tables(report):
    a = report.audit
    assert len(a) == 30 and a["rank"].tolist() == list(range(1, 31))
    assert (np.diff(a["auc"].to_numpy()) <= 0).all()  # riskiest first
    assert report.top["record"].tolist() == a["record"].head(6).tolist()
    assert all("V_5 rank" in w for w in report.top["why"])
    assert report.remove["record"].tolist() == a["record"].iloc[5:10].tolist()  # ranks remedy_top+1 .. 2 remedy_top
    assert report.suppress["record"].tolist() == a["record"].head(5).tolist()
    assert set(report.suppress["column"].dropna()) <= set(a.columns.tolist() + load_adult().columns.tolist())
    assert "kde_membership" in report.nobox["metric"].tolist()
    assert report.config["records"] == 30 and report.config["n_datasets"] == 60 and report.config["dataset_size"] == 200


def test_page_self_contained(page):
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    refs = re.findall(r"\b(?:src|href)\s*=\s*[\"']?\s*([^\"'\s>]+)", text, flags=re.I)
    assert refs and not [r for r in refs if not r.startswith("data:")], "every src/href is a data: URI"
    assert "http://" not in text and "https://" not in text
    for bad in ("<script", "<link", "<iframe", "@import", "url("):
        assert bad not in text.lower(), bad
    for s in SECTIONS: assert s in text, s
    imgs = _imgs(text)
    assert len(imgs) == 2 and all(_is_png(u) for u in imgs)  # the AUC histogram and the forest plot


def test_save_refuses_overwrite(report, page):
    before = page.read_bytes()
    with pytest.raises(FileExistsError, match="exists"): report.save(page)
    assert page.read_bytes() == before
    report.save(page, force=True)
    mask = os.umask(0); os.umask(mask)
    assert page.stat().st_mode & 0o777 == 0o666 & ~mask  # not the private mode of the atomic write's temporary file
    with pytest.raises(IsADirectoryError): report.save(page.parent)


def _png_size(path: Path) -> tuple:
    b = path.read_bytes()
    assert b.startswith(PNG)
    return struct.unpack(">II", b[16:24])


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (install Debian's `chromium` package to run the browser check)")
def test_renders_in_headless_chromium(page, tmp_path):
    flags = [CHROMIUM, "--headless", "--disable-gpu", "--no-sandbox", "--enable-logging=stderr", "--v=0"]
    shot = tmp_path / "shot.png"
    r = subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1200,2400", page.resolve().as_uri()], capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _png_size(shot) == (1200, 2400)
    d = subprocess.run(flags + ["--dump-dom", page.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert d.returncode == 0, d.stderr[-2000:]
    dom = d.stdout
    headings = [re.sub(r"<[^>]+>", "", h).strip() for h in re.findall(r"<h[12][^>]*>(.*?)</h[12]>", dom, flags=re.S)]
    assert headings[0].startswith("Privacy report")
    for s in SECTIONS: assert s in headings, (s, headings)
    imgs = _imgs(dom)
    assert len(imgs) == 2 and all(_is_png(u) for u in imgs)
    errs = [ln for ln in (r.stderr + d.stderr).splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert not errs, errs


def test_cli_report(tmp_path, capsys):
    csv = tmp_path / "mine.csv"
    load_adult().iloc[:3000].to_csv(csv, index=False)
    out = tmp_path / "r.html"
    argv = ["report", "--data", str(csv), "--records", "20", "--n-datasets", "40", "--dataset-size", "200", "--top", "5",
            "--remedy-top", "4", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    text = out.read_text(encoding="utf-8")
    assert "file:mine.csv" in text and all(s in text for s in SECTIONS)
    assert "written to" in capsys.readouterr().out
    assert main(argv) == 2  # exists: refused before any work
    assert "exists" in capsys.readouterr().err
    assert main(argv[:-3] + ["--out", str(csv), "--force"]) == 2  # never over the input
    assert main(argv[:-3] + ["--out", str(tmp_path / "x.html"), "--remedy-top", "15"]) == 2  # 2 x 15 > 20 records


def test_the_summary_prints_corrected_counts_when_the_audit_has_q_values():
    "Issue 36: 'at risk' is counted twice, at a 5 % false discovery rate and at a 5 % family-wise error, and the difference is said."
    import pandas as _pd
    from achilles.experiments.custodian import CustodianReport
    a = _pd.DataFrame(dict(auc=[0.9, 0.7, 0.55, 0.5], auc_p=[1e-6, 0.004, 0.02, 0.5], q_value=[4e-6, 0.008, 0.027, 0.5]))
    s = CustodianReport(audit=a, top=None, nobox=None, remove=None, suppress=None).summary()
    assert "3 records at a 5% false discovery rate" in s and "2 at a 5% family-wise error" in s and "release as a whole" in s
    assert "false discovery" not in CustodianReport(audit=a[["auc"]], top=None, nobox=None, remove=None, suppress=None).summary()
