"""Time fastdp.datasets.load_libsvm against sklearn.datasets.load_svmlight_file.

Generates (once, cached) an uncompressed LIBSVM file of about 56 MB from
``make_sparse_classification`` written by scikit-learn's ``dump_svmlight_file``
(values with 16 significant digits), checks
that both loaders give the same matrix, and prints the best of 3 wall times of
each (the numba cache is warmed first) and their ratio.

Usage::

    python benchmarks/compare_loader.py [--rows 45000] [--cache-dir DIR]

The generated file is never committed: it lives in ``--cache-dir`` (default:
the system temp directory).
"""

import argparse
import os
import tempfile
import time

import numpy as np


def benchmark_file(cache_dir, n_rows=45_000, n_features=50_000):
    """Path of the benchmark file, generated on first use."""
    from sklearn.datasets import dump_svmlight_file

    from fastdp.datasets import make_sparse_classification

    path = os.path.join(cache_dir, f"fastdp_loader_bench_{n_rows}x{n_features}.svm")
    if not os.path.exists(path):
        X, y = make_sparse_classification(n_rows, n_features, nnz_per_row=50, random_state=0)
        tmp = path + ".part"
        dump_svmlight_file(X, y, tmp)
        os.replace(tmp, path)
    return path


def best_of(function, repeat=3):
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main():
    from sklearn.datasets import load_svmlight_file

    from fastdp.datasets import load_libsvm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=45_000)
    parser.add_argument("--cache-dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    path = benchmark_file(args.cache_dir, args.rows)
    size_mb = os.path.getsize(path) / 1e6

    X, y = load_libsvm(path)  # warm the numba cache (and the page cache)
    X_ref, y_ref = load_svmlight_file(path)
    same = (
        X.shape == X_ref.shape
        and np.array_equal(X.indptr, X_ref.indptr)
        and np.array_equal(X.indices, X_ref.indices)
        and np.array_equal(X.data.view(np.uint64), X_ref.data.view(np.uint64))
        and np.array_equal(y, y_ref)
    )
    t_fast = best_of(lambda: load_libsvm(path))
    t_sklearn = best_of(lambda: load_svmlight_file(path))
    print(f"file: {path} ({size_mb:.1f} MB, {X.shape[0]} x {X.shape[1]}, nnz {X.nnz})")
    print(f"identical to scikit-learn: {same}")
    print(f"fastdp.load_libsvm      best of 3: {t_fast:.3f} s ({size_mb / t_fast:.0f} MB/s)")
    print(f"sklearn load_svmlight   best of 3: {t_sklearn:.3f} s ({size_mb / t_sklearn:.0f} MB/s)")
    print(f"speed-up: {t_sklearn / t_fast:.1f}x")


if __name__ == "__main__":
    main()
