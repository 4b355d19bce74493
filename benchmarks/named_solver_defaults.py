"""Every named solver under its defaults, and DPRidge on raw targets (docs/defaults.md, issue 32).

``classify``: test accuracy of ``DPLogisticRegression(solver=name, epsilon=eps)`` (defaults,
mean of seeds 0-1) on the binary sets of ``FASTDP_DATA`` against the test split's majority
rate.  ``regress``: median (worst) test R^2 of seeds 0-2 of ``DPRidge(epsilon=eps)`` on the
regression sets' raw targets.  25 % test split (``train_test_split``, seed 0).  Prints
markdown rows.

Usage::

    PYTHONPATH=. python benchmarks/named_solver_defaults.py classify --sets phishing,a9a --eps 1,8
    PYTHONPATH=. python benchmarks/named_solver_defaults.py regress --sets cal_housing,cpusmall --eps 0.1,1,8
"""

import argparse
import os
import warnings

import numpy as np
from sklearn.datasets import load_svmlight_file
from sklearn.model_selection import train_test_split

from fastdp.datasets import load_dataset
from fastdp.linear_model import DPLogisticRegression, DPRidge

#: LIBSVM files of the corpus (path under FASTDP_DATA, n_features)
LIBSVM = {"a9a": ("a9a/a9a.bz2", 123), "phishing": ("phishing/phishing.bz2", 68),
          "mushrooms": ("mushrooms/mushrooms.bz2", 112), "w8a": ("w8a/w8a.bz2", 300),
          "australian": ("australian/australian.bz2", 14), "heart": ("heart/heart_scale.bz2", 13),
          "german_numer": ("german_numer/german.numer.bz2", 24),
          "fourclass": ("fourclass/fourclass.bz2", 2), "sonar": ("sonar/sonar_scale.bz2", 60),
          "ionosphere": ("ionosphere/ionosphere_scale.bz2", 34),
          "splice": ("splice/splice_train_then_test.bz2", 60),
          "cpusmall": ("cpusmall/cpusmall.bz2", 12), "bodyfat": ("bodyfat/bodyfat_scale.bz2", 14),
          "pyrim": ("pyrim/pyrim.bz2", 27)}
SOLVERS = ["dpsgd", "dpscd", "seq_dpscd", "output", "objective", "dp_gd_laplace", "dp_heavy_ball",
           "dp_nesterov", "dp_masg", "dp_blsgd", "dp_blsgd_adaptive", "dp_blsgd_ac", "dp_blgd",
           "dpagd"]


def split(name):
    """The 75/25 split (seed 0) of a corpus set."""
    if name in LIBSVM:
        path, d = LIBSVM[name]
        X, y = load_svmlight_file(os.path.join(os.environ["FASTDP_DATA"], path), n_features=d)
    else:
        X, y = load_dataset(name)
    return train_test_split(X, y, test_size=0.25, random_state=0)


def classify(sets, eps_list):
    for name in sets:
        Xtr, Xte, ytr, yte = split(name)
        majority = max(np.mean(yte == c) for c in np.unique(ytr))
        for solver in SOLVERS:
            cells = []
            for eps in eps_list:
                acc = np.mean([DPLogisticRegression(solver=solver, epsilon=eps, random_state=s)
                               .fit(Xtr, ytr).score(Xte, yte) for s in range(2)])
                cells.append(f"{acc:.3f}" + ("" if acc > majority else " ✗"))
            print(f"| {name} | `{solver}` | " + " | ".join(cells) + f" | {majority:.3f} |",
                  flush=True)


def regress(sets, eps_list):
    for name in sets:
        Xtr, Xte, ytr, yte = split(name)
        for eps in eps_list:
            r2 = [DPRidge(epsilon=eps, random_state=s).fit(Xtr, ytr).score(Xte, yte)
                  for s in range(3)]
            print(f"| {name} | {eps:g} | {np.median(r2):.3f} ({np.min(r2):.3f}) |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("task", choices=["classify", "regress"])
    parser.add_argument("--sets", required=True)
    parser.add_argument("--eps", default="1,8")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    eps_list = [float(e) for e in args.eps.split(",")]
    (classify if args.task == "classify" else regress)(args.sets.split(","), eps_list)


if __name__ == "__main__":
    main()
