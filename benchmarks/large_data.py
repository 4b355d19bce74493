"""Large-data benchmark: loader, conversion and DP epochs on memory-mapped data.

Generates synthetic criteo-like LIBSVM text of a given size (1M hashed
features, about 33 entries a row: half of 13 "numeric" columns and about 27
one-hot categorical columns, rows scaled to norm < 1, 6-digit values, column
indices written with 7 digits), then measures,
each in a fresh subprocess (so that one measurement's memory does not mix
with another's):

* ``fastdp.io.load_libsvm`` (float64 and float32, plain and gzip) against
  ``sklearn.datasets.load_svmlight_file``: wall time and peak resident
  memory, as a ratio to the CSR it returns;
* ``fastdp.io.convert_libsvm`` (float32, float64): time, speed relative to
  the loader, peak memory;
* one epoch of DP-SGD (``fastdp.solvers.sgd.dpsgd``) and of dual DP-SCD
  (``fastdp.solvers.scd.dual_dpscd``) on the memory-mapped binary dataset
  (first with its pages evicted from the page cache: "cold", then again:
  "warm") and on the same data in memory: seconds per epoch and peak memory.

Peak memory is the growth of the resident size (VmRSS, sampled every
millisecond) over the process's size after its imports and a warm-up on a
small file; memory-mapped pages that an epoch reads count as resident.

Usage::

    python benchmarks/large_data.py --gb 1.5 --dir /tmp/fastdp-large
    python benchmarks/large_data.py --gb 0.2 --skip-sklearn --keep

The generated files are deleted at the end unless ``--keep`` (never commit
them).  Results are printed as a table and written as JSON (``--json``).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

N_FEATURES = 1_000_000
N_NUMERIC = 13


# --------------------------------------------------------------------------- data


def _digits(values, width):
    """uint8 matrix (len(values), width) of the decimal digits of ``values``, right-aligned."""
    out = np.empty((values.size, width), dtype=np.uint8)
    rest = values.copy()
    for place in range(width - 1, -1, -1):
        out[:, place] = 48 + rest % 10
        rest //= 10
    return out


def _block(rng, n_rows):
    """``n_rows`` criteo-like LIBSVM lines (bytes), formatted with numpy (fast)."""
    counts = 1 + rng.poisson(26, size=n_rows)  # categorical entries per row
    numeric = rng.random((n_rows, N_NUMERIC)) < 0.5
    n_num = numeric.sum(axis=1)
    lengths = n_num + counts
    row_of = np.repeat(np.arange(n_rows), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    position = np.arange(lengths.sum()) - starts[row_of]
    is_numeric = position < n_num[row_of]
    numeric_cols = np.nonzero(numeric)[1] + 1  # row-major: sorted within each row
    cols = np.empty(lengths.sum(), dtype=np.int64)
    cols[is_numeric] = numeric_cols
    # categorical columns: distinct and sorted within a row (a sorted draw per row)
    raw_cat = rng.integers(N_NUMERIC + 1, N_FEATURES, size=int(counts.sum()))
    cat_row = np.repeat(np.arange(n_rows), counts)
    order = np.lexsort((raw_cat, cat_row))
    cat = raw_cat[order]
    duplicate = np.zeros(cat.size, dtype=bool)
    duplicate[1:] = (cat[1:] == cat[:-1]) & (cat_row[1:] == cat_row[:-1])
    cat[duplicate] = 0  # dropped below
    cols[~is_numeric] = cat
    raw = np.where(is_numeric, np.log1p(rng.exponential(20.0, cols.size)), 1.0)
    keep = cols > 0
    cols, raw, row_of = cols[keep], raw[keep], row_of[keep]
    norms = np.sqrt(np.bincount(row_of, weights=raw * raw, minlength=n_rows))
    micro = np.floor(raw / norms[row_of] * 0.9999e6).astype(np.int64)  # 6 digits, norm < 1
    keep = micro > 0
    cols, micro, row_of = cols[keep], micro[keep], row_of[keep]
    # each entry: " " + column (7 digits, zero-padded: still an integer) + ":0." + 6 digits
    entry = np.empty((cols.size, 17), dtype=np.uint8)
    entry[:, 0] = 32
    entry[:, 1:8] = _digits(cols, 7)
    entry[:, 8:11] = np.frombuffer(b":0.", dtype=np.uint8)
    entry[:, 11:17] = _digits(micro, 6)
    per_row = np.bincount(row_of, minlength=n_rows)
    labels = np.where(rng.random(n_rows) < 0.25, b"+1", b"-1")
    pieces = []
    bounds = np.concatenate([[0], np.cumsum(per_row)])
    flat = entry.reshape(-1)
    for i in range(n_rows):
        pieces.append(labels[i])
        pieces.append(flat[17 * bounds[i]:17 * bounds[i + 1]].tobytes())
        pieces.append(b"\n")
    return b"".join(pieces)


def generate(path, n_bytes, seed=0, n_blocks=8, rows_per_block=40_000):
    """Write about ``n_bytes`` of text, cycling through ``n_blocks`` distinct blocks."""
    rng = np.random.default_rng(seed)
    blocks = [_block(rng, rows_per_block) for _ in range(n_blocks)]
    written = 0
    with open(path, "wb") as handle:
        k = 0
        while written < n_bytes:
            handle.write(blocks[k % n_blocks])
            written += len(blocks[k % n_blocks])
            k += 1
    with open(str(path) + ".small", "wb") as handle:  # for warm-ups
        handle.write(blocks[0][:200_000].rsplit(b"\n", 1)[0] + b"\n")
    return written


def gzip_file(src, dst):
    import gzip

    with open(src, "rb") as raw, gzip.open(dst, "wb", compresslevel=1) as packed:
        while block := raw.read(1 << 24):
            packed.write(block)


# --------------------------------------------------------------------------- measurements

CHILD = r"""
import json, os, resource, sys, threading, time
import numpy as np

def rss():
    with open("/proc/self/status") as status:
        return int(next(l for l in status if l.startswith("VmRSS:")).split()[1]) * 1024

mode, args = sys.argv[1], json.loads(sys.argv[2])
from fastdp.io import convert_libsvm, load_libsvm, open_binary

def csr_bytes(X):
    return int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes)

def evict(directory):  # drop our files' pages from the page cache (only ours)
    for name in os.listdir(directory):
        fd = os.open(os.path.join(directory, name), os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)

small = args["small"]
if mode in ("load", "load_gz"):
    load_libsvm(small, dtype=args["dtype"])
    op = lambda: load_libsvm(args["path"], dtype=args["dtype"])
elif mode == "sklearn":
    from sklearn.datasets import load_svmlight_file
    load_svmlight_file(small, dtype=np.dtype(args["dtype"]))
    op = lambda: load_svmlight_file(args["path"], dtype=np.dtype(args["dtype"]))
elif mode == "convert":
    convert_libsvm(small, args["out"] + ".warm", dtype=args["dtype"], overwrite=True)
    op = lambda: convert_libsvm(args["path"], args["out"], dtype=args["dtype"], overwrite=True)
else:  # epoch
    from fastdp.solvers.scd import dual_dpscd
    from fastdp.solvers.sgd import dpsgd
    solver = {"dpsgd": dpsgd, "dpscd": dual_dpscd}[args["solver"]]
    def fit(X, y):
        return solver(X, y, loss="logistic", lam=1e-6, epochs=1, batch_size=args["batch"],
                      clip=1.0, noise_multiplier=1.0, random_state=0, num_threads=1)
    Xs, ys = load_libsvm(small, dtype=args["dtype"])
    solver(Xs, ys, loss="logistic", lam=1e-6, epochs=1, batch_size=10, clip=1.0,
           noise_multiplier=1.0, random_state=0, num_threads=1)
    if args["where"] == "mapped":
        evict(args["fdp"])
        def op():
            X, y = open_binary(args["fdp"])
            fit(X, y)
            return X
    else:
        X_mem, y_mem = load_libsvm(args["path"], dtype=args["dtype"])
        def op():
            fit(X_mem, y_mem)
            return X_mem

highest = [0]
running = [True]
def sample():
    while running[0]:
        highest[0] = max(highest[0], rss())
        time.sleep(0.001)

base = rss()
sampler = threading.Thread(target=sample)
sampler.start()
times = []
size = nnz = 0
for repeat in range(args.get("repeat", 1)):
    start = time.perf_counter()
    out = op()
    times.append(time.perf_counter() - start)
    X = out[0] if isinstance(out, tuple) else out
    if X is not None and hasattr(X, "indptr"):
        size, nnz = csr_bytes(X), int(X.nnz)
    del out, X  # a second map of the same file would count its pages twice
running[0] = False
sampler.join()
print(json.dumps({"seconds": times, "growth": highest[0] - base, "base": base,
                  "peak": highest[0], "csr_bytes": size, "nnz": nnz}))
"""


def run_child(mode, **args):
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    result = subprocess.run([sys.executable, "-c", CHILD, mode, json.dumps(args)],
                            capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise RuntimeError(f"{mode} {args} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _gib(n):
    return n / 2**30


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.5, help="text size in GB (1e9 bytes)")
    parser.add_argument("--dir", default="/tmp/fastdp-large-data")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--skip-sklearn", action="store_true")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()

    os.makedirs(args.dir, exist_ok=True)
    svm = os.path.join(args.dir, "data.svm")
    gz = svm + ".gz"
    small = svm + ".small"
    results = {"gb": args.gb}
    try:
        started = time.perf_counter()
        text_bytes = generate(svm, int(args.gb * 1e9))
        gzip_file(svm, gz)
        results["text_bytes"] = text_bytes
        results["gz_bytes"] = os.path.getsize(gz)
        print(f"generated {text_bytes / 1e9:.2f} GB of text ({results['gz_bytes'] / 1e9:.2f} GB "
              f"gzip) in {time.perf_counter() - started:.0f} s", flush=True)

        def measure(name, mode, **kw):
            r = run_child(mode, small=small, **kw)
            results[name] = r
            per = f", {r['growth'] / r['nnz']:.1f} B/nnz" if r.get("nnz") else ""
            ratio = f" = {r['growth'] / r['csr_bytes']:.2f}x CSR" if r["csr_bytes"] else ""
            print(f"{name:28s} {min(r['seconds']):8.2f} s   peak +{_gib(r['growth']):.2f} GiB"
                  f"{ratio}{per}", flush=True)
            return r

        load64 = measure("load_float64", "load", path=svm, dtype="float64")
        measure("load_float32", "load", path=svm, dtype="float32")
        measure("load_gzip_float32", "load_gz", path=gz, dtype="float32")
        if not args.skip_sklearn:
            measure("sklearn_float64", "sklearn", path=svm, dtype="float64")
            measure("sklearn_float32", "sklearn", path=svm, dtype="float32")
        fdp32 = os.path.join(args.dir, "data32.fdp")
        fdp64 = os.path.join(args.dir, "data64.fdp")
        measure("convert_float32", "convert", path=svm, out=fdp32, dtype="float32")
        measure("convert_float64", "convert", path=svm, out=fdp64, dtype="float64")
        for solver in ("dpsgd", "dpscd"):
            for dtype, fdp in (("float32", fdp32), ("float64", fdp64)):
                measure(f"{solver}_{dtype}_memory", "epoch", path=svm, fdp=fdp, dtype=dtype,
                        solver=solver, where="memory", batch=args.batch, repeat=2)
                measure(f"{solver}_{dtype}_mapped", "epoch", path=svm, fdp=fdp, dtype=dtype,
                        solver=solver, where="mapped", batch=args.batch, repeat=2)
        _summary(results, load64)
    finally:
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(results, handle, indent=1)
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)


def _summary(r, load64):
    print("\nratios")
    text_mb = r["text_bytes"] / 1e6
    print(f"  loader speed float64: {text_mb / min(load64['seconds']):.0f} MB/s")
    if "sklearn_float64" in r:
        for dtype in ("float64", "float32"):
            ours, theirs = r[f"load_{dtype}"], r[f"sklearn_{dtype}"]
            print(f"  load {dtype}: {min(theirs['seconds']) / min(ours['seconds']):.1f}x "
                  f"scikit-learn's speed; peak {ours['growth'] / ours['csr_bytes']:.2f}x CSR "
                  f"(scikit-learn {theirs['growth'] / theirs['csr_bytes']:.2f}x)")
    for dtype in ("float32", "float64"):
        conv, load = r[f"convert_{dtype}"], r[f"load_{dtype}"]
        print(f"  convert {dtype}: {min(load['seconds']) / min(conv['seconds']):.0%} of the "
              f"loader's speed, peak +{conv['growth'] / 2**20:.0f} MiB")
    for solver in ("dpsgd", "dpscd"):
        for dtype in ("float32", "float64"):
            mem, mapped = r[f"{solver}_{dtype}_memory"], r[f"{solver}_{dtype}_mapped"]
            cold, warm = mapped["seconds"]
            print(f"  {solver} {dtype}: epoch in memory {min(mem['seconds']):.2f} s, mapped "
                  f"cold {cold:.2f} s / warm {warm:.2f} s ({warm / min(mem['seconds']):.2f}x); "
                  f"peak mapped +{_gib(mapped['growth']):.2f} GiB vs in memory "
                  f"+{_gib(mem['growth']):.2f} GiB (X {_gib(mapped['csr_bytes']):.2f} GiB)")


if __name__ == "__main__":
    main()
