"""DPRidge's default step cap (docs/defaults.md, "The squared loss's step cap").

Median test R^2 of seeds 0-2 of ``DPRidge(epsilon=eps)`` (DP-SGD, lot 256, epochs
clip(round(20 eps), 5, 80), C = 1, step min(0.3 eps L / E, eta_max)) with the step cap
eta_max in ``--caps`` (the default's own cap, 2 = 2/beta, is run as the plain default;
the others pass ``solver_options={"learning_rate": min(0.3 eps L / E, cap)}``), at
epsilon in {0.1, 0.5, 1, 2, 8}.

Tasks (fixed 80/20 split, seed 0): ``cpusmall`` (the utility benchmark's shared rows:
features min-max scaled with the training range treated as public, a constant 1 appended,
divided by sqrt(d + 1); target min-max scaled to [-1, 1]), ``cpusmall.raw`` (raw rows and a
constant column, the estimator's row map; raw target), and the held-out ``cal_housing`` and
``abalone`` (rings), prepared like cpusmall's shared rows.  Prints a markdown table.

Usage::

    python benchmarks/regression_step_cap.py --tasks cpusmall,cpusmall.raw,cal_housing,abalone --caps 1,2
"""

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from derive_highd_defaults import DATA_HOME, _split  # noqa: E402

EPSILONS = (0.1, 0.5, 1.0, 2.0, 8.0)


def _dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X, dtype=float)


def _shared(Xtr, ytr, Xte, yte):
    lo, hi = Xtr.min(0), Xtr.max(0)
    span = np.where(hi > lo, hi - lo, 1.0)
    d1 = Xtr.shape[1] + 1

    def fx(X):
        return np.hstack([np.clip((X - lo) / span, 0, 1), np.ones((X.shape[0], 1))]) / math.sqrt(d1)

    ylo, yhi = ytr.min(), ytr.max()

    def fy(y):
        return np.clip(2 * (y - ylo) / (yhi - ylo) - 1, -1, 1)

    return fx(Xtr), fy(ytr), fx(Xte), fy(yte)


def load(task):
    from fastdp.datasets import load_dataset

    name = task.split(".")[0]
    X, y = load_dataset(name, data_home=DATA_HOME)
    X, y = _dense(X), np.asarray(y, dtype=float)
    tr, te = _split(X.shape[0])
    if task.endswith(".raw"):
        one = np.ones((X.shape[0], 1))
        X = np.hstack([X, one])
        return X[tr], y[tr], X[te], y[te]
    return _shared(X[tr], y[tr], X[te], y[te])


def r2(y, p):
    return 1.0 - float(np.sum((y - p) ** 2)) / float(np.sum((y - np.mean(y)) ** 2))


def main(argv=None):
    from fastdp.defaults import MAX_LEARNING_RATE, dpsgd_defaults
    from fastdp.linear_model import DPRidge

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=lambda s: s.split(","),
                    default=["cpusmall", "cpusmall.raw", "cal_housing", "abalone"])
    ap.add_argument("--caps", type=lambda s: [float(x) for x in s.split(",")], default=[1.0, 2.0])
    ap.add_argument("--eps", type=lambda s: [float(x) for x in s.split(",")],
                    default=list(EPSILONS))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    print("| data | η_max | " + " | ".join(f"ε = {e:g}" for e in args.eps) + " |")
    print("|---|---|" + "---|" * len(args.eps))
    for task in args.tasks:
        X, y, Xt, yt = load(task)
        for cap in args.caps:
            cells = []
            for eps in args.eps:
                rule = dpsgd_defaults(X.shape[0], eps, "squared")
                step = rule["learning_rate"] * rule["clip"]
                kw = ({} if cap == MAX_LEARNING_RATE["squared"] else
                      {"solver_options": {"learning_rate": min(step, cap) / rule["clip"]}})
                vals = [r2(yt, DPRidge(epsilon=eps, random_state=s, **kw).fit(X, y).predict(Xt))
                        for s in range(3)]
                cells.append(f"{np.median(vals):.3f}")
            print(f"| {task} | {cap:g} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
