"""asv benchmarks of the data layer: fastdp.datasets.load_libsvm against
sklearn.datasets.load_svmlight_file on a generated uncompressed LIBSVM file of
about 56 MB (45 000 x 50 000, 2.2 M entries, written by scikit-learn's
``dump_svmlight_file``).

The file is generated once per asv run in ``setup_cache`` (asv's cache
directory, never committed). ``setup`` warms the numba cache so that the timed
calls measure parsing, not compilation.
"""

import os


N_ROWS = 45_000
N_FEATURES = 50_000


class LibsvmLoader:
    """Wall time of both loaders on the same file; ``track_speedup`` is their ratio."""

    timeout = 900
    repeat = 3
    number = 1
    warmup_time = 0.0
    processes = 1

    def setup_cache(self):
        from sklearn.datasets import dump_svmlight_file

        from fastdp.datasets import make_sparse_classification

        X, y = make_sparse_classification(N_ROWS, N_FEATURES, nnz_per_row=50, random_state=0)
        path = os.path.abspath("fastdp_loader_bench.svm")
        dump_svmlight_file(X, y, path)
        return path

    def setup(self, path):
        from fastdp.datasets import load_libsvm

        self.path = path
        load_libsvm(path)  # numba cache hit / compile, and page cache

    def time_fastdp_load_libsvm(self, path):
        from fastdp.datasets import load_libsvm

        load_libsvm(path)

    def time_sklearn_load_svmlight_file(self, path):
        from sklearn.datasets import load_svmlight_file

        load_svmlight_file(path)

    def peakmem_fastdp_load_libsvm(self, path):
        from fastdp.datasets import load_libsvm

        load_libsvm(path)

    def track_speedup(self, path):
        """scikit-learn time / fastdp time, best of 3 each."""
        import time

        from sklearn.datasets import load_svmlight_file

        from fastdp.datasets import load_libsvm

        def best(function):
            times = []
            for _ in range(3):
                start = time.perf_counter()
                function(path)
                times.append(time.perf_counter() - start)
            return min(times)

        return best(load_svmlight_file) / best(load_libsvm)

    track_speedup.unit = "x"


class SyntheticData:
    """Time to generate LIBSVM-like synthetic data."""

    timeout = 300
    repeat = 3
    number = 1

    def time_make_sparse_classification_50k(self):
        from fastdp.datasets import make_sparse_classification

        make_sparse_classification(50_000, 50_000, nnz_per_row=50, random_state=0)


