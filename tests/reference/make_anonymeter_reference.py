"""Run anonymeter on the leaky Adult setting and write `tests/reference/anonymeter_leaky_adult.json` (issue 11, part 4).

Runs in OUR venv; anonymeter runs in its own venv, named by $ACHILLES_ANONYMETER_PYTHON (see nbs/50_perf/55_anonymeter.ipynb):

    ACHILLES_ANONYMETER_PYTHON=/work/venvs/anonymeter/bin/python python tests/reference/make_anonymeter_reference.py

The setting: `achilles.nobox.leaky_setting(load_adult(), f, n_train=5000, rng=0)` for f in {0, 0.5, 1}: 5,000 training,
5,000 control and 5,000 synthetic records, where the synthetic set is a fresh real sample with round(f * 5000) of its rows
replaced by training rows. The evaluations: `achilles.perf.anonymeter_runner.adult_config` with the counts in COUNTS below
(singling out univariate and multivariate, 500 attacks, 3 columns; linkability on all 5,000 records with anonymeter's Adult
split of the auxiliary columns, 1 and 10 neighbours; inference of `income` and of `age` from all other columns, 2,000 attacks).
Seeds: before each evaluation the runner seeds random, numpy's global RNG and polars with 0 and passes seed=0 to
SinglingOutEvaluator. Two things anonymeter does not let us seed: linkability's random-guess baseline, and which queries
univariate singling out keeps (their order comes from polars' group_by), so those counts vary between runs within the CI;
everything else repeats exactly (see "seeding" in the JSON).

Layout of the JSON (all rates and risks are fractions in [0, 1]):

    description    str
    created        ISO date and time (UTC) of the run
    machine        achilles.perf.machine_line() of the machine that ran it
    script         this file, relative to the repository
    setting        {dataset, function, n_train, n_control, rng, fractions}
    config         the runner configuration (check_config's output: evaluations with every parameter, seed, n_jobs, ...)
    counts         the attack counts passed to adult_config (COUNTS below)
    reduced        {evaluation: why its count is below the issue's} ({} when nothing was reduced)
    seeding        what was seeded and what could not be
    versions       {python, anonymeter, numpy, pandas, polars, scikit-learn, scipy, numba, joblib} in anonymeter's venv
    installed      every package of anonymeter's venv, "name==version" (as pip freeze)
    total_seconds  wall time of the three runs (subprocess start and CSV transfer included)
    settings       {"0.0" | "0.5" | "1.0": {
                        fraction, n_leaked,
                        fingerprints: {train, synthetic, control}   # tests.reference.fingerprint of each table
                        anonymeter: the runner's output:
                            versions, seeding, seed, n_jobs, cpu_count, confidence_level, n_rows {train, synthetic, control},
                            dtypes (how the runner read each CSV column back),
                            warmup_seconds (numba compile of anonymeter's neighbour search, before any timing),
                            evaluations: {name: {
                                kind, parameters (the evaluation's spec),
                                risk, risk_ci [low, high],            # anonymeter's risk(): Eq. 8 against the control rate
                                attack_rate, attack_rate_error,       # Wilson estimate on training records, with error bound
                                baseline_rate, baseline_rate_error,   # random-guess attacker
                                control_rate, control_rate_error,     # the same attack on control records
                                n_attacks, n_attacks_baseline, n_attacks_control, n_success, n_baseline, n_control,
                                seconds,                              # construction + evaluate() + results()
                                warnings,                             # anonymeter's warnings and log messages
                                n_successful_queries (singling out), regression (inference)}}}}

Names of the evaluations: singling_out_univariate, singling_out_multivariate, linkability_k1, linkability_k10,
inference_income, inference_age. Load it with `tests.reference.load_reference()` (`from reference import load_reference`
inside tests/).
"""
import datetime
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # so that `reference` (this folder) imports when run as a script

from achilles.core.data import load_adult  # noqa: E402
from achilles.nobox import leaky_setting  # noqa: E402
from achilles.perf import machine_line  # noqa: E402
from achilles.perf.anonymeter_runner import SEEDING, adult_config, anonymeter_versions, run_anonymeter  # noqa: E402
from reference import fingerprint, reference_path  # noqa: E402

FRACTIONS = (0.0, 0.5, 1.0)
SETTING = dict(dataset="adult", function="achilles.nobox.leaky_setting", n_train=5000, n_control=5000, rng=0,
               fractions=list(FRACTIONS))
COUNTS = dict(n_singling_out=500, n_cols=3, n_linkability=5000, neighbors=[1, 10], n_inference=2000,
              secrets=["income", "age"])
REDUCED = {}  # evaluation -> why its count is below the (none needed on the 2-core machine)


def main(out: Path = reference_path("anonymeter_leaky_adult"), timeout: float = 3600) -> dict:
    adult = load_adult()
    config = adult_config(adult.columns, **COUNTS)
    versions = anonymeter_versions()
    print(machine_line())
    print("anonymeter venv:", {k: v for k, v in versions["versions"].items()})
    settings, t0 = {}, time.perf_counter()
    for f in FRACTIONS:
        s = leaky_setting(adult, f, n_train=SETTING["n_train"], rng=SETTING["rng"])
        if len(s.control) != SETTING["n_control"]:
            raise RuntimeError(f"leaky_setting gave {len(s.control)} control rows, expected {SETTING['n_control']}")
        t = time.perf_counter()
        res = run_anonymeter(None, s.train, s.synthetic, s.control, config, timeout=timeout)
        print(f"\nf = {f}: {time.perf_counter() - t:.1f} s (numba warm-up {res['warmup_seconds']:.1f} s)")
        for name, e in res["evaluations"].items():
            print(f"  {name:26s} risk {e['risk']:.4f} [{e['risk_ci'][0]:.4f}, {e['risk_ci'][1]:.4f}]  attack {e['attack_rate']:.4f}"
                  f"  control {e['control_rate']:.4f}  baseline {e['baseline_rate']:.4f}  n={e['n_attacks']}"
                  f"  success={e['n_success']}  {e['seconds']:.2f} s" + (f"  warnings: {e['warnings']}" if e["warnings"] else ""))
        settings[str(f)] = dict(fraction=f, n_leaked=len(s.leaked),
                                fingerprints={k: fingerprint(getattr(s, k)) for k in ("train", "synthetic", "control")},
                                anonymeter=res)
    ref = dict(description="anonymeter's singling-out, linkability and inference risks on the leaky Adult setting "
                           "(issue 11, part 4: the oracle our no-box metrics are compared with)",
               created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               machine=machine_line(), script="tests/reference/make_anonymeter_reference.py", setting=SETTING,
               config=config, counts=COUNTS, reduced=REDUCED, seeding=SEEDING, versions=versions["versions"],
               installed=versions["installed"], total_seconds=time.perf_counter() - t0, settings=settings)
    out.write_text(json.dumps(ref, indent=1) + "\n")
    print(f"\nwrote {out} ({out.stat().st_size:,} bytes) in {ref['total_seconds']:.0f} s")
    return ref


if __name__ == "__main__":
    main()
