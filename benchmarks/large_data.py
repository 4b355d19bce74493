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

A second mode builds a binary dataset of ``--nnz`` entries directly (no
text: :func:`fastdp.io.binary.save_binary` of generated CSR blocks, with the
same row statistics) and trains on it memory-mapped: a fraction ``--epochs``
of an epoch of DP-SGD and of dual DP-SCD, cold (the dataset's pages evicted
first), warm (read into the page cache first) and, with ``--in-memory``, on
a copy of X in memory; it reports seconds per epoch (extrapolated from the
fraction), peak resident memory (anonymous and file-backed apart), and the
bytes read from the disk.

Usage::

    python benchmarks/large_data.py --gb 1.5 --dir /tmp/fastdp-large
    python benchmarks/large_data.py --gb 0.2 --skip-sklearn --keep
    python benchmarks/large_data.py --svm big.svm --only load,convert --repeat 2
    python benchmarks/large_data.py --binary-only --nnz 1.5e9 --epochs 0.1 --in-memory

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


def _csr_block(rng, n_rows, w_true):
    """``n_rows`` criteo-like rows as a canonical float32 CSR block and +-1 labels.

    About 33 entries a row (1 + Poisson(32)); entry ``j`` of a row with ``k``
    entries lies in the ``j``-th of ``k`` equal column strata (so a row's
    columns are distinct and increasing without a sort); values positive,
    rows scaled to norm 0.999; labels the sign of a planted linear model.
    """
    import scipy.sparse as sp

    counts = 1 + rng.poisson(32, size=n_rows)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    nnz = int(indptr[-1])
    row_of = np.repeat(np.arange(n_rows), counts)
    width = N_FEATURES // counts[row_of]
    cols = (np.arange(nnz) - indptr[row_of]) * width
    cols += (rng.random(nnz) * width).astype(np.int64)
    values = rng.random(nnz) + 0.1
    norms = np.sqrt(np.add.reduceat(values * values, indptr[:-1]))
    values *= 0.999 / norms[row_of]
    margin = np.add.reduceat(values * w_true[cols], indptr[:-1])
    y = np.where(margin + 0.05 * rng.standard_normal(n_rows) > 0, 1.0, -1.0)
    X = sp.csr_matrix((values.astype(np.float32), cols.astype(np.int32), indptr.astype(np.int32)),
                      shape=(n_rows, N_FEATURES))
    return X, y


def synthetic_blocks(nnz, seed=0, n_blocks=8, rows_per_block=250_000):
    """CSR blocks (X, y) totalling about ``nnz`` entries, cycling through ``n_blocks``
    distinct blocks (as :func:`generate` cycles its text blocks)."""
    rng = np.random.default_rng(seed)
    w_true = rng.standard_normal(N_FEATURES)
    blocks = []
    total = 0
    k = 0
    while total < nnz:
        if k < n_blocks:
            blocks.append(_csr_block(rng, rows_per_block, w_true))
        X, y = blocks[k % n_blocks]
        if total + X.nnz > nnz:  # a partial last block
            stop = int(np.searchsorted(X.indptr, nnz - total, side="right")) - 1
            X, y = X[:max(stop, 1)], y[:max(stop, 1)]
        yield X, y
        total += X.nnz
        k += 1


def build_binary(path, nnz, seed=0):
    """A float32 binary dataset of about ``nnz`` entries at ``path`` (int64 indices when
    they do not fit int32); returns its header."""
    from fastdp.io.binary import save_binary

    index_dtype = np.int64 if nnz > np.iinfo(np.int32).max - 1e6 else None
    return save_binary(path, synthetic_blocks(int(nnz), seed), n_features=N_FEATURES,
                       dtype=np.float32, index_dtype=index_dtype, overwrite=True)


def gzip_file(src, dst):
    import gzip

    with open(src, "rb") as raw, gzip.open(dst, "wb", compresslevel=1) as packed:
        while block := raw.read(1 << 24):
            packed.write(block)


# --------------------------------------------------------------------------- measurements

CHILD = r"""
import json, os, resource, sys, threading, time
import numpy as np

def status():
    with open("/proc/self/status") as lines:
        return {l.split(":")[0]: int(l.split()[1]) * 1024 for l in lines
                if l.startswith(("VmRSS:", "RssAnon:", "RssFile:"))}

def rss():
    return status()["VmRSS"]

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
    os.sync()  # an earlier conversion's writeback is not billed to this load
    op = lambda: load_libsvm(args["path"], dtype=args["dtype"])
elif mode == "sklearn":
    from sklearn.datasets import load_svmlight_file
    load_svmlight_file(small, dtype=np.dtype(args["dtype"]))
    os.sync()
    op = lambda: load_svmlight_file(args["path"], dtype=np.dtype(args["dtype"]))
elif mode == "convert":
    convert_libsvm(small, args["out"] + ".warm", dtype=args["dtype"], overwrite=True)
    import shutil
    shutil.rmtree(args["out"], ignore_errors=True)  # deleting an earlier output is not timed
    os.sync()
    op = lambda: convert_libsvm(args["path"], args["out"], dtype=args["dtype"])
elif mode == "train":  # a fraction of an epoch on a binary dataset (cold, warm, memory)
    from fastdp._validation import register_verified_csr
    from fastdp.io.libsvm import csr_from_arrays
    from fastdp.solvers.scd import dual_dpscd
    from fastdp.solvers.sgd import dpsgd
    solver = {"dpsgd": dpsgd, "dpscd": dual_dpscd}[args["solver"]]
    Xs, ys = load_libsvm(small, dtype=np.float32)
    solver(Xs, ys, loss="logistic", lam=1e-6, epochs=1, batch_size=10, clip=1.0,
           noise_multiplier=1.0, random_state=0, num_threads=1)
    X_train, y_train = open_binary(args["fdp"])
    import mmap
    def advise_random():  # no read-around on page faults (4 kB reads)
        for array in (X_train.data, X_train.indices, X_train.indptr):
            if isinstance(array, np.memmap):
                array._mmap.madvise(mmap.MADV_RANDOM)
    import contextlib
    import fastdp.solvers.scd as scd_module
    import fastdp.solvers.sgd as sgd_module
    import fastdp.solvers._kernel_epochs as epochs_module
    scans = []
    advice = args.get("advice", "library")
    if advice != "library":  # the solvers' own advice (fastdp/io/_advice.py) off
        from fastdp.io import _advice
        if advice == "random_prefetch_off":
            off = lambda X, p, i: _advice.step_advice(X, p, i, prefetch=False)
        else:
            off = lambda X, p, i: contextlib.nullcontext()
        epochs_module.step_advice = off
    step_seconds = []  # time inside the kernel calls (the steps), apart from the setup
    for module in (epochs_module,):  # the one epoch loop of DP-SGD and DP-SCD
        def timed_steps(X, p, i, _advise=module.step_advice):
            @contextlib.contextmanager
            def timed():
                with _advise(X, p, i):
                    start = time.perf_counter()
                    try:
                        yield
                    finally:
                        step_seconds.append(time.perf_counter() - start)
            return timed()
        module.step_advice = timed_steps
    if advice == "random":
        advise_random()
    elif advice in ("random_after_scan", "before"):
        # as fastdp did before it stored the kernels' row norms ("before"): the solvers
        # scan X once for the row norms before their first step; time that sequential
        # scan apart (kernel read-around on), then no read-around for the steps
        from fastdp._kernels._scd import row_squared_norms
        def timed_scan(X):
            start = time.perf_counter()
            out = (X.kernel_sq_norms() if hasattr(X, "kernel_sq_norms")
                   else row_squared_norms(X.data, X.indptr))
            scans.append(time.perf_counter() - start)
            advise_random()
            return out
        for module in (sgd_module, scd_module):
            if hasattr(module, "kernel_sq_norms"):
                module.kernel_sq_norms = timed_scan
    if args["where"] == "cold":
        evict(args["fdp"])
    elif args["where"] == "warm":  # read every file once: into the page cache
        for name in os.listdir(args["fdp"]):
            with open(os.path.join(args["fdp"], name), "rb") as handle:
                while handle.read(1 << 24):
                    pass
    else:  # a copy of X in memory, trusted as the mapped arrays are (no scan of X)
        sq_norms = np.load(os.path.join(args["fdp"], "row_sq_norms.npy"))
        X_train = csr_from_arrays(np.array(X_train.data), np.array(X_train.indices),
                                  np.array(X_train.indptr), X_train.shape)
        kernel_sq_norms = np.load(os.path.join(args["fdp"], "kernel_sq_norms.npy"))
        register_verified_csr(X_train, sq_norms=sq_norms, finite=True,
                              kernel_sq_norms=kernel_sq_norms)
        evict(args["fdp"])
    def op():
        if args.get("api") == "estimator":  # the estimator: validation, row map, accounting
            from fastdp.linear_model import DPLogisticRegression
            DPLogisticRegression(epsilon=1.0, solver=args["solver"], batch_size=args["batch"],
                                 epochs=args["epochs"], random_state=0,
                                 num_threads=1).fit(X_train, y_train)
            return
        solver(X_train, y_train, loss="logistic", lam=1e-6, epochs=args["epochs"],
               batch_size=args["batch"], clip=1.0, noise_multiplier=1.0, random_state=0,
               num_threads=1)
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
kinds = {"RssAnon": 0, "RssFile": 0}
running = [True]
def sample():
    while running[0]:
        now = status()
        highest[0] = max(highest[0], now["VmRSS"])
        for kind in kinds:
            kinds[kind] = max(kinds[kind], now.get(kind, 0))
        time.sleep(0.001 if args.get("fine", True) else 0.05)

def proc_io():
    with open("/proc/self/io") as io:
        return {k: int(v) for k, v in (l.split(": ") for l in io)}

def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime

base = rss()
base_kinds = status()
io_before, cpu_before = proc_io(), cpu()
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
io_after = proc_io()
print(json.dumps({"seconds": times, "growth": highest[0] - base, "base": base,
                  "peak": highest[0], "csr_bytes": size, "nnz": nnz, "cpu": cpu() - cpu_before,
                  "read_bytes": io_after["read_bytes"] - io_before["read_bytes"],
                  "loadavg": os.getloadavg()[0],
                  "scan_seconds": globals().get("scans", []),
                  "step_seconds": globals().get("step_seconds", []),
                  "anon_growth": kinds["RssAnon"] - base_kinds.get("RssAnon", 0),
                  "file_peak": kinds["RssFile"], "anon_peak": kinds["RssAnon"]}))
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


STEPS = ("load", "load_gz", "sklearn", "convert", "epochs")


def _settle(directory, keep):
    """Start every measurement from the same memory state.

    Flush the dirty pages an earlier step wrote (``sync``), then drop from the page cache
    the pages of every file under ``directory`` except the input text ``keep`` (an earlier
    conversion's output): otherwise the next step's allocations reclaim them and its
    system time grows with what ran before (the loader's CPU time doubled after two
    conversions on this 24 GiB machine).
    """
    os.sync()
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            if os.path.abspath(path) == os.path.abspath(keep):
                continue
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=1.5, help="text size in GB (1e9 bytes)")
    parser.add_argument("--dir", default="/tmp/fastdp-large-data")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--skip-sklearn", action="store_true")
    parser.add_argument("--svm", default=None,
                        help="measure on this LIBSVM file (not generated; never deleted)")
    parser.add_argument("--only", default=",".join(STEPS),
                        help=f"comma-separated steps among {','.join(STEPS)}")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each load and conversion, interleaved (the best is kept)")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--binary-only", action="store_true",
                        help="build a binary dataset of --nnz entries directly and train on it")
    parser.add_argument("--nnz", type=float, default=3e9)
    parser.add_argument("--epochs", type=float, default=0.05,
                        help="fraction of an epoch trained per measurement (--binary-only)")
    parser.add_argument("--where", default="cold,warm",
                        help="--binary-only: comma-separated among cold,warm,memory")
    parser.add_argument("--solvers", default="dpsgd,dpscd")
    parser.add_argument("--reuse", action="store_true",
                        help="--binary-only: train on an existing dataset in --dir")
    parser.add_argument("--train-repeat", type=int, default=2,
                        help="--binary-only: fractions of an epoch trained one after the "
                             "other in one process (the first maps the pages it touches)")
    parser.add_argument("--advice", default="library",
                        help="--binary-only: comma-separated among library (the solvers' "
                             "own: MADV_RANDOM during the steps and readahead of the batches' "
                             "rows, fastdp/io/_advice.py), random_prefetch_off (MADV_RANDOM "
                             "only), normal (no advice: the kernel's read-around), random "
                             "(MADV_RANDOM on the maps from the start, no readahead) and "
                             "before (as fastdp did before: scan X for the kernels' row "
                             "norms, then MADV_RANDOM, no readahead)")
    parser.add_argument("--build-only", action="store_true",
                        help="--binary-only: build the dataset (kept) and stop")
    parser.add_argument("--api", default="solver",
                        help="--binary-only: comma-separated among solver (the solver "
                             "functions) and estimator (DPLogisticRegression.fit)")
    parser.add_argument("--readahead-syscalls", default=None,
                        help="comma-separated row counts: print the readahead's system calls "
                             "per batch (of --batch rows) before and after they were batched, "
                             "computed on the generated data's row layout, and stop")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    if args.readahead_syscalls:
        for n_rows in args.readahead_syscalls.split(","):
            print(json.dumps(readahead_syscalls(int(float(n_rows)), batch=args.batch)))
        return None
    os.makedirs(args.dir, exist_ok=True)
    if args.binary_only:
        return binary_main(args)
    steps = set(args.only.split(","))
    svm = args.svm or os.path.join(args.dir, "data.svm")
    gz = os.path.join(args.dir, "data.svm.gz")
    small = os.path.join(args.dir, "data.svm.small")
    results = {"gb": args.gb}
    try:
        started = time.perf_counter()
        if args.svm is None:
            generate(svm, int(args.gb * 1e9))
        else:
            _small_copy(svm, small)
        results["text_bytes"] = os.path.getsize(svm)
        if "load_gz" in steps:
            gzip_file(svm, gz)
            results["gz_bytes"] = os.path.getsize(gz)
        print(f"text {results['text_bytes'] / 1e9:.2f} GB ready in "
              f"{time.perf_counter() - started:.0f} s", flush=True)

        def measure(name, mode, **kw):
            _settle(args.dir, keep=svm)
            r = run_child(mode, small=small, **kw)
            if name in results:  # another run: keep every time, the largest peak
                r["seconds"] = results[name]["seconds"] + r["seconds"]
                r["cpu_runs"] = results[name].get("cpu_runs", [results[name]["cpu"]])
                r["cpu_runs"].append(r["cpu"])
                r["growth"] = max(r["growth"], results[name]["growth"])
                r["peak"] = max(r["peak"], results[name]["peak"])
            results[name] = r
            per = f", {r['growth'] / r['nnz']:.1f} B/nnz" if r.get("nnz") else ""
            ratio = f" = {r['growth'] / r['csr_bytes']:.2f}x CSR" if r["csr_bytes"] else ""
            print(f"{name:28s} {r['seconds'][-1]:8.2f} s (cpu {r['cpu']:.1f} s)   peak "
                  f"+{_gib(r['growth']):.2f} GiB{ratio}{per}; load average {r['loadavg']:.1f}",
                  flush=True)
            return r

        fdp32 = os.path.join(args.dir, "data32.fdp")
        fdp64 = os.path.join(args.dir, "data64.fdp")
        for _ in range(args.repeat):
            if "load" in steps:
                measure("load_float64", "load", path=svm, dtype="float64")
                measure("load_float32", "load", path=svm, dtype="float32")
            if "convert" in steps:
                measure("convert_float32", "convert", path=svm, out=fdp32, dtype="float32")
                measure("convert_float64", "convert", path=svm, out=fdp64, dtype="float64")
        if "load_gz" in steps:
            measure("load_gzip_float32", "load_gz", path=gz, dtype="float32")
        if "sklearn" in steps and not args.skip_sklearn:
            measure("sklearn_float64", "sklearn", path=svm, dtype="float64")
            measure("sklearn_float32", "sklearn", path=svm, dtype="float32")
        if "epochs" in steps:
            for solver in ("dpsgd", "dpscd"):
                for dtype, fdp in (("float32", fdp32), ("float64", fdp64)):
                    measure(f"{solver}_{dtype}_memory", "epoch", path=svm, fdp=fdp, dtype=dtype,
                            solver=solver, where="memory", batch=args.batch, repeat=2)
                    measure(f"{solver}_{dtype}_mapped", "epoch", path=svm, fdp=fdp, dtype=dtype,
                            solver=solver, where="mapped", batch=args.batch, repeat=2)
        _summary(results)
    finally:
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(results, handle, indent=1)
        if not args.keep:
            for name in ("data.svm", "data.svm.gz", "data.svm.small"):
                if args.svm is None or name != "data.svm":
                    _remove(os.path.join(args.dir, name))
            for name in ("data32.fdp", "data64.fdp", "data32.fdp.warm", "data64.fdp.warm"):
                _remove(os.path.join(args.dir, name))


def readahead_syscalls(n_rows, batch=1000, steps=20, seed=0, dtype_bytes=4, index_bytes=4):
    """System calls the readahead makes per batch, before and after issue 20's batching.

    Computed with the readahead's own page arithmetic (``fastdp.io._advice._page_runs``)
    on the row layout of the generated data (about 33 entries a row, Poisson), for
    ``steps`` Poisson batches of expected size ``batch`` over ``n_rows`` rows, maps at a
    page-aligned address: before, one ``madvise`` per run of adjacent pages (``indices``
    and ``data``); now, runs merged across gaps of ``_GAP_PAGES`` pages and sent in one
    ``process_madvise`` per ``_IOV_MAX`` runs.  ``indptr`` stays in the page cache (not
    asked for) in both.
    """
    from fastdp.io import _advice

    rng = np.random.default_rng(seed)
    counts = 1 + rng.poisson(6.5, size=n_rows) + rng.poisson(26, size=n_rows)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    del counts
    before = after = runs_after = 0
    for _ in range(steps):
        rows = np.flatnonzero(rng.random(n_rows) < batch / n_rows)
        starts, ends = indptr[rows], indptr[rows + 1]
        for size in (index_bytes, dtype_bytes):
            before += _advice._page_runs(starts * size, ends * size, 0)[0].size
            merged = _advice._page_runs(starts * size, ends * size, 0, _advice._GAP_PAGES)[0].size
            runs_after += merged
            after += -(-merged // _advice._IOV_MAX)
    return {"n_rows": int(n_rows), "nnz": int(indptr[-1]), "batch": batch,
            "syscalls_per_batch_before": before / steps,
            "runs_per_batch_after": runs_after / steps,
            "syscalls_per_batch_after": after / steps}


def _remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)


def _small_copy(svm, small):
    """The first ~200 kB of ``svm`` (whole lines), for warm-ups."""
    with open(svm, "rb") as handle:
        head = handle.read(200_000)
    with open(small, "wb") as handle:
        handle.write(head.rsplit(b"\n", 1)[0] + b"\n")


def binary_main(args):
    """Build (or reuse) a binary dataset of ``--nnz`` entries and train on it."""
    fdp = os.path.join(args.dir, f"synthetic-{args.nnz:.3g}.fdp")
    small = os.path.join(args.dir, "small.svm")
    results = {"nnz_target": args.nnz, "epochs": args.epochs, "batch": args.batch}
    try:
        if not args.reuse or not os.path.isdir(fdp):
            started = time.perf_counter()
            load_before = os.getloadavg()[0]
            header = build_binary(fdp, args.nnz)
            results["build_seconds"] = time.perf_counter() - started
            print(f"built {fdp}: {header['shape'][0]} rows, {header['nnz']} entries, "
                  f"{header['index_dtype']} indices, in {results['build_seconds']:.0f} s "
                  f"(load average {load_before:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)
        if args.build_only:
            args.keep = True
            return
        with open(os.path.join(fdp, "header.json")) as handle:
            header = json.load(handle)
        results["header"] = {k: header[k] for k in ("shape", "nnz", "dtype", "index_dtype")}
        results["bytes"] = sum(os.path.getsize(os.path.join(fdp, f)) for f in os.listdir(fdp))
        X, y = next(synthetic_blocks(20_000, seed=1))
        from sklearn.datasets import dump_svmlight_file

        dump_svmlight_file(X, y, small, zero_based=False)
        n_rows = header["shape"][0]
        runs = [(api, solver, where, advice) for api in args.api.split(",")
                for solver in args.solvers.split(",") for where in args.where.split(",")
                for advice in args.advice.split(",")]
        for api, solver, where, advice in runs:
            r = run_child("train", small=small, fdp=fdp, solver=solver, where=where,
                          epochs=args.epochs, batch=args.batch, fine=False, api=api,
                          repeat=args.train_repeat, advice=advice)
            steps = int(args.epochs * n_rows / args.batch)
            r["steps"] = steps
            per_epoch = [t * n_rows / (steps * args.batch) for t in r["seconds"]]
            r["s_per_epoch"] = per_epoch
            results[f"{api}_{solver}_{where}_{advice}"] = r
            times = " then ".join(f"{t:.1f}" for t in r["seconds"])
            if r.get("step_seconds"):
                r["steps_s_per_epoch"] = [t * n_rows / (steps * args.batch)
                                          for t in r["step_seconds"]]
                times += (" (steps alone " + " then ".join(f"{t:.1f}" for t in r["step_seconds"])
                          + " s = " + " then ".join(f"{t:.0f}" for t in r["steps_s_per_epoch"])
                          + " s/epoch)")
            print(f"{api} {solver} {where} ({advice}): {steps} steps in {times} s "
                  f"(cpu {r['cpu']:.1f} s in all) = "
                  f"{' then '.join(f'{t:.0f}' for t in per_epoch)} s/epoch; read "
                  f"{r['read_bytes'] / 2**30:.2f} GiB from disk "
                  f"({r['read_bytes'] / 1e6 / sum(r['seconds']):.0f} MB/s); peak RSS "
                  f"{_gib(r['peak']):.2f} GiB (anon +{_gib(r['anon_growth']):.2f} GiB, "
                  f"file pages {_gib(r['file_peak']):.2f} GiB); load average "
                  f"{r['loadavg']:.1f}"
                  + (f"; of which the row-norm scan {r['scan_seconds']} s" if r["scan_seconds"]
                     else ""), flush=True)
    finally:
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(results, handle, indent=1)
        if not args.keep:
            _remove(fdp)
        _remove(small)


def _summary(r):
    print("\nratios")
    if "load_float64" in r:
        text_mb = r["text_bytes"] / 1e6
        print(f"  loader speed float64: {text_mb / min(r['load_float64']['seconds']):.0f} MB/s")
    if "sklearn_float64" in r:
        for dtype in ("float64", "float32"):
            ours, theirs = r[f"load_{dtype}"], r[f"sklearn_{dtype}"]
            print(f"  load {dtype}: {min(theirs['seconds']) / min(ours['seconds']):.1f}x "
                  f"scikit-learn's speed; peak {ours['growth'] / ours['csr_bytes']:.2f}x CSR "
                  f"(scikit-learn {theirs['growth'] / theirs['csr_bytes']:.2f}x)")
    for dtype in ("float32", "float64"):
        if f"convert_{dtype}" not in r or f"load_{dtype}" not in r:
            continue
        conv, load = r[f"convert_{dtype}"], r[f"load_{dtype}"]
        cpu = min(load.get("cpu_runs", [load["cpu"]])) / min(conv.get("cpu_runs", [conv["cpu"]]))
        print(f"  convert {dtype}: {min(load['seconds']) / min(conv['seconds']):.0%} of the "
              f"loader's speed ({cpu:.0%} in CPU time), peak +{conv['growth'] / 2**20:.0f} MiB "
              f"(RSS {conv['peak'] / 2**20:.0f} MiB)")
    for solver in ("dpsgd", "dpscd"):
        for dtype in ("float32", "float64"):
            if f"{solver}_{dtype}_memory" not in r:
                continue
            mem, mapped = r[f"{solver}_{dtype}_memory"], r[f"{solver}_{dtype}_mapped"]
            cold, warm = mapped["seconds"]
            print(f"  {solver} {dtype}: epoch in memory {min(mem['seconds']):.2f} s, mapped "
                  f"cold {cold:.2f} s / warm {warm:.2f} s ({warm / min(mem['seconds']):.2f}x); "
                  f"peak mapped +{_gib(mapped['growth']):.2f} GiB vs in memory "
                  f"+{_gib(mem['growth']):.2f} GiB (X {_gib(mapped['csr_bytes']):.2f} GiB)")


if __name__ == "__main__":
    main()
