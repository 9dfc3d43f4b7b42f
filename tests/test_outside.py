"""`achilles bench outside`: Synth-MIA's and TAPAS's own attacks on the audit's pool, from their checkouts (skipped without them)."""
import os

import numpy as np
import pytest

from achilles.perf.outside import OUTSIDE_ENV, OUTSIDE_HOWTO, bench_outside

PEERS = {p: os.environ.get(v) for p, v in OUTSIDE_ENV.items()}
NEED = pytest.mark.skipif(not all(PEERS.values()), reason="set " + " and ".join(OUTSIDE_ENV.values()) + " ("
                          + "; ".join(OUTSIDE_HOWTO.values()) + ")")


@NEED
def test_every_outside_attack_scores_the_audits_own_pool():
    res = bench_outside("synthpop", records=[6066, 16249, 40572], n_datasets=60, jobs=2, verbose=False)
    got = set(res["attack"])
    for a in ("DCR", "DCRDiff", "DPI", "MC", "Classifier"): assert f"synthmia: {a}" in got, got
    for a in ("random_queries", "groundhog"): assert f"tapas: {a}" in got, got
    assert res["auc"].between(0, 1).all() and (res.groupby("attack").size() == 3).all()
    assert res.loc[res.peer == "tapas", "trained"].all() and not res.loc[res.peer == "synthmia", "trained"].any()


@NEED
def test_a_missing_checkout_is_named():
    with pytest.raises(FileNotFoundError, match="not a folder"):
        bench_outside("baynet", records=[5], n_datasets=20, tapas="/no/such/checkout", verbose=False)


@NEED
def test_replicates_score_the_first_pools_pick_on_fresh_pools():
    "Replicate 0 is the single comparison's pool, to the digit; the fresh pools differ; the summary scores replicate 0's pick on them."
    one = bench_outside("baynet", records=[40572], n_datasets=40, jobs=2, verbose=False)
    rep = bench_outside("baynet", records=[40572], n_datasets=40, jobs=2, replicates=3, verbose=False)
    first = rep[rep.replicate == 0].drop(columns="replicate").reset_index(drop=True)
    assert np.allclose(first.sort_values("attack")["auc"].to_numpy(), one.sort_values("attack")["auc"].to_numpy())
    ours = rep[rep.attack == "achilles (default stack)"].set_index("replicate")["auc"]
    assert ours.nunique() == 3, ours  # three pools, three AUCs
    from achilles.perf.outside import replicate_summary
    s = replicate_summary(rep).iloc[0]
    w = rep.pivot_table(index="replicate", columns="attack", values="auc")
    assert s["picked"] == w.drop(columns="achilles (default stack)").loc[0].idxmax()
    assert np.isclose(s["gap"], (w.loc[[1, 2], "achilles (default stack)"] - w.loc[[1, 2], s["picked"]]).mean())


def test_the_replicate_interval_holds_its_coverage_on_simulated_pools():
    """`replicate_summary`'s 95 % t-interval of a record's mean gap, on 4 fresh pools: over 2,000 simulated records whose per-pool AUCs
    are the truth plus independent normal noise (sd 0.02, as at 1,000 datasets), it covers the true gap at its nominal rate (within the
    binomial 99.9 % range of 0.95 over 2,000 records)."""
    import pandas as pd
    from scipy.stats import binom
    from achilles.perf.outside import replicate_summary
    g = np.random.default_rng(0)
    n, R, truth = 2000, 5, 0.03  # achilles 0.60, the comparator 0.57
    rows = []
    for rec in range(n):
        for r in range(R):
            rows.append(dict(generator="sim", record=rec, replicate=r, attack="achilles (default stack)", auc=0.60 + g.normal(0, 0.02)))
            rows.append(dict(generator="sim", record=rec, replicate=r, attack="peer: a", auc=0.57 + g.normal(0, 0.02)))
    s = replicate_summary(pd.DataFrame(rows))
    covered = int(((s["gap_ci_low"] <= truth) & (truth <= s["gap_ci_high"])).sum())
    lo, hi = binom.ppf(0.0005, n, 0.95), binom.ppf(0.9995, n, 0.95)
    assert lo <= covered <= hi, (covered, lo, hi)
