"""Fixtures shared by the test files."""
import pytest

from achilles.core.data import Schema, load_adult


@pytest.fixture(scope="session")
def adult():
    "The bundled Adult data and its schema (loaded once per test session)."
    df = load_adult()
    return df, Schema.from_dataframe(df)
