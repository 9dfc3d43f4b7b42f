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
    return custodian_report(adult, Schema.from_dataframe(adult), "baynet", design="bernoulli", records=30, n_datasets=60, dataset_size=200, top=6,
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
    argv = ["report", "--data", str(csv), "--design", "bernoulli", "--records", "20", "--n-datasets", "40", "--dataset-size", "200", "--top", "5",
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


# ---- issue 38 item 5: the report audits every record in the release design by default, scores the release, says a verdict

@pytest.fixture(scope="module")
def release_report():
    "The default design on a 120-record table: every record audited, training sets are random halves."
    import warnings
    from achilles.shadow.game import ScaleWarning
    df = load_adult().iloc[:120].reset_index(drop=True)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        rep = custodian_report(df, Schema.from_dataframe(df), "independent", n_in=10, top=3, remedy_top=2, remedy_sample=5, rng=0)
    return rep, [x for x in w if issubclass(x.category, ScaleWarning)]


def test_the_default_report_audits_every_record_in_the_release_design(release_report):
    from achilles.shadow.audit import release_datasets
    rep, scale = release_report
    c = rep.config
    assert len(rep.audit) == 120 and sorted(rep.audit["record"]) == list(range(120))
    assert (c["design"], c["n_in"], c["n_datasets"], c["dataset_size"]) == ("release", 10, release_datasets(10), 60)
    assert (rep.audit["n_in"] >= 10).all() and (rep.audit["n_out"] >= 10).all()
    assert c["n_train_release"] == 60 and c["n_control"] == 60  # the no-box release: a random half, the other half its control
    assert c["remedy_records"] == 2 * 2 + 5
    top = rep.top  # every bound beside the most its counts could show
    assert (top["ε ceiling"] >= top["ε lower bound"]).all() and (top["ε ceiling"] > 0).all()
    assert "ε ceiling" in rep.to_html()
    assert len(scale) == 1, [str(x.message) for x in scale]  # the pool-size warning once, not once per re-audit
    page = rep.to_html()
    assert "release design" in page and "the papers' setting" not in page and all(s in page for s in SECTIONS)
    assert "not flagged is not shown to be safe" in page  # the flags bound false alarms, not misses (fig_riskmap_release's game)


def test_the_remedies_audit_the_riskiest_and_a_seeded_sample():
    from achilles.experiments.custodian import remedy_records
    ids = np.arange(100)[::-1].copy()  # riskiest first
    a = remedy_records(ids, 3, 10, rng=0)
    assert a[:6].tolist() == ids[:6].tolist() and len(a) == 16 and len(set(a)) == 16
    assert set(a[6:]) <= set(ids[6:]) and (np.diff(a[6:]) > 0).all()
    assert (remedy_records(ids, 3, 10, rng=0) == a).all() and not (remedy_records(ids, 3, 10, rng=1) == a).all()
    assert len(remedy_records(ids, 3, 1000, rng=0)) == 100 and len(remedy_records(ids, 3, 0, rng=0)) == 6


def test_the_verdict_counts_what_the_q_values_say():
    import pandas as _pd
    from achilles.experiments.custodian import CustodianReport
    a = _pd.DataFrame(dict(auc=[0.9, 0.7, 0.55, 0.5], auc_p=[1e-6, 0.004, 0.02, 0.5], q_value=[4e-6, 0.008, 0.027, 0.5]))
    v = CustodianReport(a, None, None, None, None, dict(design="release", generator="baynet")).verdict()
    assert "exposes 3 of the 4 records" in v and "2 of them hold at a 5% family-wise error" in v and "release design" in v
    v = CustodianReport(a.assign(auc_p=0.5, q_value=0.9), None, None, None, None, dict(design="bernoulli", dataset_size=1000)).verdict()
    assert "exposes 0 of the 4" in v and "no record is measurably at risk" in v and "not your release" in v
    rel = dict(flagged=2, fdr=0.05, can_flag=True)
    v = CustodianReport(a, None, None, None, None, dict(design="release", release=rel)).verdict()
    assert v.endswith("In your release, 2 records are flagged as exposed at a 5% false discovery rate.")
    v = CustodianReport(a, None, None, None, None, dict(design="release", release=dict(rel, flagged=0, can_flag=False))).verdict()
    assert "no record could be flagged, whatever the release holds" in v


def test_a_release_given_to_the_report_is_scored_and_its_copies_flagged():
    "Ten records copied verbatim into the release: the report flags exactly them, says so in the verdict and on the page."
    import warnings
    from achilles.experiments.custodian import RELEASE_SECTION
    from achilles.generators import make_generator
    from achilles.shadow.game import ScaleWarning
    N = 160
    df = load_adult().iloc[:N].reset_index(drop=True); schema = Schema.from_dataframe(df)
    half = np.sort(np.random.default_rng(0).choice(N, N // 2, replace=False))
    leaky = make_generator("independent", schema).fit(df.iloc[half], rng=1).sample(N, rng=2)
    out = np.setdiff1d(np.arange(N), half)
    copied = np.sort(np.random.default_rng(3).choice(out, 10, replace=False))
    leaky.iloc[:10] = df.iloc[copied].to_numpy()
    others = np.setdiff1d(out, copied)[:10]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)
        rep = custodian_report(df, schema, "independent", records=np.r_[copied, others], n_in=150, release=leaky, top=5, remedy_top=2,
                               remedy_sample=0, rng=0)
    assert set(rep.audit.loc[rep.audit["release_flag"], "record"]) == set(copied.tolist())
    assert rep.config["release"]["flagged"] == 10 and rep.audit.attrs["release"]["flagged"] == 10
    assert "In your release, 10 records are flagged" in rep.verdict()
    page = rep.to_html()
    assert RELEASE_SECTION in page and "10 of 20 records are flagged as exposed in this release" in page
    with pytest.raises(ValueError, match="needs design='release'"):
        custodian_report(df, schema, "independent", design="bernoulli", records=10, release=leaky)


def test_cli_report_release_design_and_release_file(tmp_path, capsys):
    "`achilles report` defaults to every record in the release design; --release scores a file; the papers' flags refused there."
    csv, rel = tmp_path / "mine.csv", tmp_path / "synthetic.csv"
    df = load_adult().iloc[:100]
    df.to_csv(csv, index=False); df.sample(100, replace=True, random_state=0).to_csv(rel, index=False)
    out = tmp_path / "r.html"
    argv = ["report", "--data", str(csv), "--generator", "independent", "--n-in", "8", "--remedy-top", "2",
            "--remedy-sample", "3", "--release", str(rel), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "100 records audited in the release design" in printed and "Verdict: independent, trained on random halves" in printed
    assert f"the release {rel}:" in printed  # the release's verdict and its most exposed records
    listed = [ln for ln in printed.split(f"the release {rel}:")[1].splitlines() if re.search(r"\s(True|False)\s", ln)]
    assert len(listed) == 20  # the release's rows (their flag column): --top's default, not every record
    text = out.read_text(encoding="utf-8")
    assert "Your release, scored" in text and "release design" in text
    assert main(["report", "--data", str(csv), "--n-datasets", "40", "--out", str(tmp_path / "x.html")]) == 2
    assert "n_datasets=40: the release design" in capsys.readouterr().err
    assert main(["report", "--data", str(csv), "--design", "bernoulli", "--records", "10", "--release", str(rel),
                 "--out", str(tmp_path / "y.html")]) == 2
    assert "needs design='release'" in capsys.readouterr().err


def test_the_page_says_when_the_attacker_read_the_generators_own_marginals():
    "`audit(focal=)` adds the marginals BayNet / PrivBayes measure; the report names them by column, and says nothing when there are none."
    from achilles.experiments.custodian import _how, _report_focal
    schema = Schema.from_dataframe(load_adult().iloc[:50])
    assert _report_focal({"attacks": ["query"]}, schema) == {}
    cfg = _report_focal({"focal": [[0, 2, 5], [1, 3, 4, 6]]}, schema)
    assert cfg == {"focal": [[schema.names[0], schema.names[2], schema.names[5]], [schema.names[1], schema.names[3], schema.names[4], schema.names[6]]]}
    base = dict(attacks=["query", "distance"], folds=5, generator="baynet", design="bernoulli", n_datasets=60, dataset_size=200, dataset="adult",
                n_population=50, records=10, data_warnings=[], n_control=25, n_train_release=25)
    plain, with_focal = _how(base), _how(dict(base, **cfg))
    assert "marginals" not in plain
    assert "the 2 marginals baynet itself measures" in with_focal and " x ".join(cfg["focal"][0]) in with_focal
