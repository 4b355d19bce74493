"""fastdp's main job (``make demo`` / ``python -m fastdp.demo``).

1. Trains ``DPLogisticRegression`` with its defaults (no tuning, raw rows)
   with (epsilon, delta)-DP on a real dataset, next to scikit-learn's
   non-private model, and prints accuracy, epsilon, delta, sigma and time.  The dataset is LIBSVM ``a9a``
   (or ``phishing``) when the real datasets are found (``FASTDP_DATA`` or
   ``../shared/data``), else scikit-learn's bundled breast-cancer data.
2. Trains on a 200k x 50k synthetic sparse problem (about 49 nonzeros per
   row) and prints the time of one DP-SCD and one DP-SGD epoch.

Privacy note: fastdp bounds each row per example (private) and uses labels as
given; the non-private reference model is printed only for comparison.
"""

import argparse
import time

from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from fastdp.datasets import load_dataset, make_sparse_classification
from fastdp.exceptions import DatasetNotFoundError
from fastdp.linear_model import DPLogisticRegression
from fastdp.preprocessing import normalize_rows

__all__ = ["main"]


def _real_dataset():
    """(name, X_train, y_train, X_test, y_test) of the best dataset available."""
    for name in ("a9a", "phishing"):
        try:
            if name == "a9a":
                X_tr, y_tr = load_dataset("a9a", subset="train")
                X_te, y_te = load_dataset("a9a", subset="test")
                return "a9a (LIBSVM)", X_tr, y_tr, X_te, y_te
            X, y = load_dataset(name)
            X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0)
            return "phishing (LIBSVM)", X_tr, y_tr, X_te, y_te
        except DatasetNotFoundError:
            continue
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    # No per-feature scaling fitted on the data (that would not be private):
    # rows are normalised per example by the caller, which is.
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.25, random_state=0)
    return "breast_cancer (scikit-learn, bundled)", X_tr, y_tr, X_te, y_te


def _real_data_run(epsilon, seed):
    name, X_tr, y_tr, X_te, y_te = _real_dataset()
    n = X_tr.shape[0]
    print(f"== DPLogisticRegression with its defaults on {name}: {n} training rows, "
          f"{X_tr.shape[1]} features, raw rows (each bounded per example inside fastdp)")
    start = time.perf_counter()
    ref = LogisticRegression(max_iter=5000).fit(normalize_rows(X_tr), y_tr)
    ref_time = time.perf_counter() - start
    print(f"   non-private scikit-learn (normalised rows)  test accuracy "
          f"{ref.score(normalize_rows(X_te), y_te):.4f}   time {ref_time:.2f}s")
    for eps in epsilon:
        model = DPLogisticRegression(epsilon=eps, random_state=seed).fit(X_tr, y_tr)
        print(f"   eps={model.epsilon_:.4f}  delta={model.delta_:.2e}  solver={model.solver_}  "
              f"sigma={model.noise_multiplier_:.4f}  sampler={model.sampler_}  "
              f"T={model.n_iter_}  test accuracy {model.score(X_te, y_te):.4f}  "
              f"time {model.fit_time_:.2f}s")


def _synthetic_run(n_samples, n_features, seed):
    print(f"== DP-SCD and DP-SGD on a synthetic sparse problem: {n_samples} x {n_features}")
    start = time.perf_counter()
    X, y = make_sparse_classification(n_samples, n_features, random_state=seed)
    print(f"   generated {X.nnz} nonzeros ({X.nnz / n_samples:.1f} per row) "
          f"in {time.perf_counter() - start:.2f}s")
    for solver in ("dpscd", "dpsgd"):
        model = DPLogisticRegression(solver=solver, epsilon=1.0, alpha=1e-6, batch_size=1000,
                                     epochs=1, random_state=seed)
        model.fit(X, y)  # the first fit also pays one-off costs (page faults, caches)
        model.fit(X, y)
        print(f"   one {solver} epoch (L=1000, eps=1): {model.fit_time_:.3f}s including "
              f"calibration, validation and the row map; training accuracy "
              f"{model.score(X, y):.4f}, eps={model.epsilon_:.4f}, "
              f"sigma={model.noise_multiplier_:.4f}")


def main(argv=None):
    """Run the demo; ``--quick`` shrinks the synthetic problem."""
    parser = argparse.ArgumentParser(prog="fastdp-demo", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller synthetic problem")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    _real_data_run(epsilon=(0.5, 1.0, 4.0), seed=args.seed)
    if args.quick:
        _synthetic_run(20_000, 5_000, args.seed)
    else:
        _synthetic_run(200_000, 50_000, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
