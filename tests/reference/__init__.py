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
