"""The distance selector runs on the neighbour engine: its V_k must equal the original kernel's bit for bit on whole datasets
(Adult: continuous columns; the census sample: all categorical, many duplicates and ties) and on tie-heavy random data,
so the selected records and every committed figure stay the same."""
import numpy as np
import pandas as pd
import pytest

from achilles.core.data import Schema, census_path, load_uk_census
from achilles.distance import paper_metrics, vulnerability_scores
from achilles.selectors import _engine_applies, distance_scores, select_records

DATA = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "data"  # passed explicitly


def _same(df, schema, k, metric):
    assert _engine_applies(df, schema, metric)
    a, b = distance_scores(df, schema, k, metric), vulnerability_scores(df, schema, k=k, metric=metric)
    assert np.array_equal(a, b), f"{metric}, k={k}: max |diff| {np.abs(a - b).max()}"


def test_whole_adult_cosine_k5(adult):
    df, schema = adult
    _same(df, schema, 5, "cosine")
    top_engine = select_records(df, schema, "distance", n=10).indices
    top_kernel = np.argsort(-vulnerability_scores(df, schema, k=5), kind="stable")[:10]
    assert set(top_engine.tolist()) == set(top_kernel.tolist())


@pytest.mark.parametrize("metric", paper_metrics())
@pytest.mark.parametrize("k", [1, 3, 10])
def test_adult_subset_every_paper_metric(adult, metric, k):
    df, schema = adult
    _same(df.iloc[:3000].reset_index(drop=True), schema, k, metric)


def test_census_sample_all_categorical():
    path = census_path(DATA) or census_path()  # ../shared/data, else $ACHILLES_CENSUS
    if path is None: pytest.skip("the census sample is not in ../shared/data and $ACHILLES_CENSUS is not set")
    df = load_uk_census(path)
    schema = Schema.from_dataframe(df)
    _same(df.iloc[:20000].reset_index(drop=True), schema, 5, "cosine")


@pytest.mark.parametrize("seed", range(4))
def test_ties_duplicates_and_edge_sizes(seed):
    g = np.random.default_rng(seed)
    n = int(g.integers(2, 60))
    df = pd.DataFrame({"a": pd.Categorical(g.integers(0, 2, n).astype(str)), "b": g.integers(0, 3, n).astype(float),
                       "c": pd.Categorical(g.integers(0, 3, n).astype(str))})
    df = pd.concat([df, df.iloc[: n // 2]], ignore_index=True)  # exact duplicates
    schema = Schema.from_dataframe(df)
    for metric in ("cosine", "minkowski1", "minkowski3"):
        for k in sorted({1, min(5, len(df) - 1), len(df) - 1}):
            _same(df, schema, k, metric)


def test_out_of_range_values_keep_the_clipping_kernel(adult):
    df, schema = adult
    far = df.iloc[:200].assign(age=df["age"].iloc[:200] + 500)
    assert not _engine_applies(far, schema, "cosine")
    assert np.array_equal(distance_scores(far, schema), vulnerability_scores(far, schema, k=5))
