"""Standalone oracle runner for DataSynthesizer's PrivBayes (run by $ACHILLES_DATASYNTHESIZER_PYTHON, never imports achilles).

Usage: python datasynthesizer_runner.py CONFIG.json OUT.json
CONFIG: {"columns": {name: [int codes]}, "network": [[child, [parent]], ...], "epsilon": ε, "repeats": R, "seed": s}
Writes, for the fixed network: DataSynthesizer's Laplace scale (`laplace_noise_parameter` called as its
`construct_noisy_conditional_distributions` calls it, with ε/2), its true and R noisy (clipped) count tables from
`get_noisy_distribution_of_attributes`, and the exponential mechanism's sampling distribution over every candidate
(child, [parent]) of each greedy step of the fixed network (`exponential_mechanism` with ε/2, as `greedy_bayes` calls it)."""
import contextlib
import io
import json
import sys

import numpy as np
import pandas as pd
import DataSynthesizer
from DataSynthesizer.lib import PrivBayes as pb
from DataSynthesizer.lib.utils import mutual_information


def main(cfg_path, out_path):
    cfg = json.load(open(cfg_path))
    df = pd.DataFrame(cfg["columns"])
    network = [(c, list(ps)) for c, ps in cfg["network"]]
    eps_half = cfg["epsilon"] / 2  # DataDescriber.describe_dataset_in_correlated_attribute_mode passes epsilon / 2
    n, d = df.shape
    k = len(network[-1][1])
    tables = [[network[0][1][0]] + [c for c, _ in network[:k]]] + [ps + [c] for c, ps in network[k:]]
    np.random.seed(cfg["seed"])
    out = {"version": getattr(DataSynthesizer, "__version__", "0.1.13"), "n": n, "d": d, "k": k,
           "laplace_scale": pb.laplace_noise_parameter(k, d, n, eps_half), "tables": []}
    for attrs in tables:
        true = pb.get_noisy_distribution_of_attributes(attrs, df, epsilon=0)  # epsilon=0: no noise (its own convention)
        noisy = [pb.get_noisy_distribution_of_attributes(attrs, df, eps_half)["count"].tolist() for _ in range(cfg["repeats"])]
        out["tables"].append({"attributes": attrs, "cells": true[attrs].values.tolist(), "true": true["count"].tolist(),
                              "noisy": noisy})
    # structure step: the exponential mechanism's distribution over the candidates of each step of the fixed network
    s = df.astype(str)
    is_binary = {a: s[a].unique().size <= 2 for a in s}
    V, rest, steps = [network[0][1][0]], [c for c, _ in network], []
    for child, _ in network:
        pairs = [(c, [p]) for c in rest for p in V]
        mi = [mutual_information(s[c], s[ps]) for c, ps in pairs]
        with contextlib.redirect_stdout(io.StringIO()):
            p = pb.exponential_mechanism(eps_half, mi, pairs, is_binary, n, d)
        steps.append({"candidates": pairs, "mi": mi, "probabilities": np.asarray(p).tolist()})
        V.append(child); rest.remove(child)
    out["structure"] = steps
    json.dump(out, open(out_path, "w"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
