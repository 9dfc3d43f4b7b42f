"""`bench_audit`'s baseline row: the code before issue 35, run from a checkout in its own interpreter (`_baseline_audit`)."""
import os, textwrap
import pytest

from achilles.perf.audit import BASELINE_ENV, _baseline_audit, _check_baseline, baseline_label


def _fake_checkout(root, body):
    "A minimal achilles package whose audit() is `body`: the plumbing is tested without the old code."
    for d in ("achilles", "achilles/core", "achilles/shadow"):
        os.makedirs(root / d, exist_ok=True); (root / d / "__init__.py").write_text("")
    (root / "achilles/core/data.py").write_text("def load_dataset(name):\n    return None, None\n")
    (root / "achilles/shadow/audit.py").write_text(textwrap.dedent(body))
    return str(root)


def test_a_folder_without_achilles_is_refused_with_its_name(tmp_path):
    with pytest.raises(ValueError, match=f"baseline='{tmp_path}'.*{BASELINE_ENV}.*achilles/shadow/audit.py"):
        _check_baseline(str(tmp_path))


def test_the_baseline_rows_come_from_the_checkout(tmp_path):
    root = _fake_checkout(tmp_path / "old", """
        import pandas as pd
        def audit(df, gen, records, n_datasets, dataset_size, selectors, rng, n_jobs, verbose, cache_dir=None):
            r = pd.DataFrame(dict(auc=[0.5 + 0.01 * i for i in range(records)], n_features=[603] * records))
            r.attrs.update(config=dict(attacks=["query", "distance"]), seconds=dict(plan=1.0, generation=2.0, features=3.0, classifiers=4.0, total=10.0))
            return r
        """)
    assert _check_baseline(root) == root
    r = _baseline_audit(root, "baynet", 7, 50, 1)
    assert list(r["auc"].round(2)) == [0.5 + 0.01 * i for i in range(7)]
    assert r.attrs["seconds"]["total"] == 10.0 and r.attrs["config"] == dict(attacks=["query", "distance"], n_features=603)
    assert baseline_label(root).startswith(root)


def test_a_failing_baseline_says_why(tmp_path):
    root = _fake_checkout(tmp_path / "broken", "def audit(*a, **k):\n    raise RuntimeError('old code broke here')\n")
    with pytest.raises(RuntimeError, match="(?s)failed its audit.*old code broke here"):
        _baseline_audit(root, "baynet", 7, 50, 1)


def test_a_checkout_shadowed_by_another_install_is_refused(tmp_path, monkeypatch):
    "If the subprocess imported achilles from somewhere else, the row would time the wrong code: refused."
    root = _fake_checkout(tmp_path / "old", "")
    os.remove(os.path.join(root, "achilles", "__init__.py"))  # not a regular package: the installed achilles wins the import
    with pytest.raises(RuntimeError, match="(?s)exit 1.*imported achilles from .*not from the checkout"):
        _baseline_audit(root, "baynet", 7, 50, 1)
