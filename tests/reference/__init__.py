"""Committed reference outputs of other tools (oracles for our metrics), and what the tests need to read them.

`load_reference("anonymeter_leaky_adult")` returns the JSON written by `make_anonymeter_reference.py` (its layout is described
at the top of that script); `fingerprint(df)` is the table fingerprint stored there, so a test can check that the tables it
rebuilds are the ones the reference was computed on.
"""
import hashlib
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def fingerprint(df) -> str:
    "sha256 of a DataFrame's row hashes (values and dtypes, not the index): equal tables give equal fingerprints."
    import pandas as pd
    return hashlib.sha256(pd.util.hash_pandas_object(df, index=False).values.tobytes()).hexdigest()


def reference_path(name: str = "anonymeter_leaky_adult") -> Path:
    "Path of a committed reference JSON in this folder."
    return HERE / f"{name}.json"


def load_reference(name: str = "anonymeter_leaky_adult") -> dict:
    "The committed reference `name` (a JSON file of this folder) as a dict; a clear error when it is missing."
    p = reference_path(name)
    if not p.exists():
        raise FileNotFoundError(f"{p} is missing: run `python tests/reference/make_{name.split('_')[0]}_reference.py`")
    return json.loads(p.read_text())


def anonymeter_cases(evaluation: str):
    """Per leak fraction of the committed anonymeter reference: (our rebuilt leaky setting, the evaluation's parameters,
    anonymeter's risk, its CI). Skips when the reference is absent; fails when the rebuilt tables are not the ones
    anonymeter saw, or when the reference lacks the evaluation."""
    import pytest
    from achilles.core.data import load_adult
    from achilles.nobox import leaky_setting
    if not reference_path().exists(): pytest.skip(f"{reference_path()} is not there (anonymeter's results on the leaky Adult data)")
    ref = load_reference()
    adult, st = load_adult(), ref["setting"]
    for case in ref["settings"].values():
        e = case["anonymeter"]["evaluations"].get(evaluation)
        if e is None or "error" in e: pytest.fail(f"the reference has no result for {evaluation!r}: {e}")
        s = leaky_setting(adult, case["fraction"], n_train=st["n_train"], n_control=st["n_control"], rng=st["rng"])
        for k in ("train", "synthetic", "control"):  # the very tables anonymeter saw
            assert fingerprint(getattr(s, k)) == case["fingerprints"][k], f"f={case['fraction']}: {k} differs from the reference's"
        yield s, e["parameters"], e["risk"], e["risk_ci"]
