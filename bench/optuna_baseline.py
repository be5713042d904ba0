#!/usr/bin/env python3
"""Optuna's side of bench/bench_search.cpp (run it in the same session as qnum-bench).

1. TPE overhead per trial at 1000 trials, 20 categorical parameters of 4 choices: the first
   1000 trials are TPE's random start-up (n_startup_trials=1000), the next 20 are timed.
2. TPE quality: mean best value of the default TPESampler(seed) over seeds 0..19, 100 trials
   each, on Branin (x0 in [-5, 10], x1 in [0, 15]) and Rastrigin-5D (x_i in [-5.12, 5.12]).

Usage: PYTHONPATH=<optuna> python3 bench/optuna_baseline.py [--timing-only]   (prints JSON)
Timing: TPESampler's defaults, then explicitly univariate and multivariate; wall and process CPU.
"""
import json
import math
import sys
import time

import optuna

optuna.logging.set_verbosity(optuna.logging.ERROR)


def categorical_objective(trial):
    v = 0.0
    for i in range(20):
        c = trial.suggest_categorical(f"p{i}", [0, 1, 2, 3])
        v += 0.0 if c == 1 else 1.0 + 0.1 * i
    return v


def branin(trial):
    x0 = trial.suggest_float("x0", -5.0, 10.0)
    x1 = trial.suggest_float("x1", 0.0, 15.0)
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    u = x1 - b * x0 * x0 + c * x0 - 6
    return u * u + 10 * (1 - t) * math.cos(x0) + 10


def rastrigin5(trial):
    xs = [trial.suggest_float(f"x{i}", -5.12, 5.12) for i in range(5)]
    return 10.0 * 5 + sum(v * v - 10 * math.cos(2 * math.pi * v) for v in xs)


def tpe_trial_at_1000(**options):
    """Wall and process-CPU milliseconds per TPE trial at 1000 trials (20 categoricals)."""
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=1000, **options))
    study.optimize(categorical_objective, n_trials=1000)
    t0, c0 = time.perf_counter(), time.process_time()
    study.optimize(categorical_objective, n_trials=20)
    return (time.perf_counter() - t0) / 20 * 1e3, (time.process_time() - c0) / 20 * 1e3


def main():
    out = {"optuna_version": optuna.__version__}
    # TPESampler() defaults: univariate up to Optuna 4.x, multivariate (single objective) from 5.0.
    out["tpe_trial_at_1000_20cat_ms"], out["tpe_trial_at_1000_20cat_cpu_ms"] = tpe_trial_at_1000()
    for name, multivariate in (("univariate", False), ("multivariate", True)):
        wall, cpu = tpe_trial_at_1000(multivariate=multivariate)
        out[f"tpe_{name}_trial_at_1000_20cat_ms"], out[f"tpe_{name}_trial_at_1000_20cat_cpu_ms"] = wall, cpu
    if "--timing-only" in sys.argv:
        print(json.dumps(out, indent=1))
        return
    for name, fn in (("branin", branin), ("rastrigin5", rastrigin5)):
        bests = []
        for seed in range(20):
            s = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
            s.optimize(fn, n_trials=100)
            bests.append(s.best_value)
        out[f"{name}_mean_best"] = sum(bests) / len(bests)
        out[f"{name}_bests"] = bests
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
