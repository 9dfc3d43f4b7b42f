"""privacy_report's metric set: which metrics a request names ("all" in every spelling, a comma list, a dict of parameters), and
which of the shared arguments (schema, secret, aux_cols, n_jobs) reach each metric: only those its signature takes, never a None."""
import pytest

from achilles.core.data import load_adult
from achilles.nobox import METRICS, default_metrics
from achilles.nobox.report import _build_metrics

NONE = dict(schema=None, secret=None, aux_cols=None, n_jobs=None)


@pytest.mark.parametrize("request_", ["all", " all ", ["all"], ("all",)], ids=repr)
def test_all_in_every_spelling_is_every_registered_metric(request_):
    assert list(_build_metrics(request_, NONE)) == METRICS.names()


def test_none_is_the_default_set_and_a_comma_list_is_read():
    assert list(_build_metrics(None, NONE)) == default_metrics()
    assert list(_build_metrics("ims, dcr,", NONE)) == ["ims", "dcr"]
    assert list(_build_metrics(["ims"], NONE)) == ["ims"]  # a one-item list that is not "all"
    with pytest.raises(Exception, match="ims"):  # an unknown name lists the choices
        _build_metrics(["no_such_metric"], NONE)
    with pytest.raises(ValueError, match="empty"):
        _build_metrics([], NONE)


def test_shared_arguments_reach_the_metrics_that_take_them_and_only_those():
    from achilles.core.data import Schema
    schema = Schema.from_dataframe(load_adult())
    shared = dict(schema=schema, secret="age", aux_cols=None, n_jobs=2)
    m = _build_metrics(["ims", "dcr", "inference_ml", "k_anonymity"], shared)
    assert m["ims"].schema is schema  # ims takes schema only: secret and n_jobs are not passed (it would refuse them)
    assert m["dcr"].schema is schema and m["dcr"].n_jobs == 2
    assert m["inference_ml"].secret == "age" and m["inference_ml"].n_jobs == 2
    assert m["k_anonymity"].secret == "age"


def test_a_shared_none_leaves_each_metrics_own_default():
    own = METRICS.make("inference_ml")
    m = _build_metrics(["inference_ml"], NONE)["inference_ml"]
    assert m.secret == own.secret and m.n_jobs == own.n_jobs
    # a metric's own parameters (the dict form) win over nothing shared
    assert _build_metrics({"dcr": dict(n_jobs=1)}, NONE)["dcr"].n_jobs == 1
