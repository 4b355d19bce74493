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


def _write_generated_file(name, gzip_copy=False):
    """Write the benchmark's LIBSVM file (and a gzip copy) in asv's cache directory."""
    from sklearn.datasets import dump_svmlight_file

    from fastdp.datasets import make_sparse_classification

    X, y = make_sparse_classification(N_ROWS, N_FEATURES, nnz_per_row=50, random_state=0)
    path = os.path.abspath(name)
    dump_svmlight_file(X, y, path)
    if gzip_copy:
        import gzip
        import shutil

        with open(path, "rb") as raw, gzip.open(path + ".gz", "wb", compresslevel=1) as packed:
            shutil.copyfileobj(raw, packed, 1 << 24)
    return path


def _best_of_three(function):
    """Smallest wall time of three calls of ``function()``."""
    import time

    times = []
    for _ in range(3):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


class LibsvmLoader:
    """Wall time of both loaders on the same file; ``track_speedup`` is their ratio."""

    timeout = 900
    repeat = 3
    number = 1
    warmup_time = 0.0
    processes = 1

    def setup_cache(self):
        return _write_generated_file("fastdp_loader_bench.svm")

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
        from sklearn.datasets import load_svmlight_file

        from fastdp.datasets import load_libsvm

        return (_best_of_three(lambda: load_svmlight_file(path))
                / _best_of_three(lambda: load_libsvm(path)))

    track_speedup.unit = "x"


class LargeDataIO:
    """fastdp.io on the same generated file: float32 loading, a gzip copy streamed
    through the decompressor, conversion to the binary CSR and opening it
    memory-mapped (docs/large-data.md; benchmarks/large_data.py measures the
    same at gigabyte scale).  ``peakmem_*`` is asv's peak resident size of the
    whole benchmark process."""

    timeout = 900
    repeat = 3
    number = 1
    warmup_time = 0.0
    processes = 1

    def setup_cache(self):
        return _write_generated_file("fastdp_large_io_bench.svm", gzip_copy=True)

    def setup(self, path):
        import tempfile

        from fastdp.io import convert_libsvm, load_libsvm

        self.out = tempfile.mkdtemp(prefix="fastdp-asv-")
        for dtype in ("float32", "float64"):  # compiled code and page cache
            load_libsvm(path, dtype=dtype)
        self.fdp = os.path.join(self.out, "data.fdp")
        convert_libsvm(path, self.fdp, dtype="float32")

    def teardown(self, path):
        import shutil

        shutil.rmtree(self.out, ignore_errors=True)

    def time_load_float32(self, path):
        from fastdp.io import load_libsvm

        load_libsvm(path, dtype="float32")

    def peakmem_load_float32(self, path):
        from fastdp.io import load_libsvm

        load_libsvm(path, dtype="float32")

    def time_load_gzip_float64(self, path):
        from fastdp.io import load_libsvm

        load_libsvm(path + ".gz")

    def peakmem_load_gzip_float64(self, path):
        from fastdp.io import load_libsvm

        load_libsvm(path + ".gz")

    def time_convert_float32(self, path):
        from fastdp.io import convert_libsvm

        convert_libsvm(path, os.path.join(self.out, "timed.fdp"), dtype="float32",
                       overwrite=True)

    def peakmem_convert_float32(self, path):
        from fastdp.io import convert_libsvm

        convert_libsvm(path, os.path.join(self.out, "peak.fdp"), dtype="float32",
                       overwrite=True)

    def time_open_binary(self, path):
        from fastdp.io import open_binary

        open_binary(self.fdp)

    def track_convert_speed_vs_load(self, path):
        """Conversion speed as a fraction of the loader's (float32, best of 3)."""
        from fastdp.io import convert_libsvm, load_libsvm

        load = _best_of_three(lambda: load_libsvm(path, dtype="float32"))
        convert = _best_of_three(lambda: convert_libsvm(path, os.path.join(self.out, "track.fdp"),
                                              dtype="float32", overwrite=True))
        return load / convert

    track_convert_speed_vs_load.unit = "fraction"


class SyntheticData:
    """Time to generate LIBSVM-like synthetic data."""

    timeout = 300
    repeat = 3
    number = 1

    def time_make_sparse_classification_50k(self):
        from fastdp.datasets import make_sparse_classification

        make_sparse_classification(50_000, 50_000, nnz_per_row=50, random_state=0)


