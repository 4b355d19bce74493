"""Peak memory of an estimator fit against the size of X (issue 20 item 3, docs/large-data.md).

Each measurement runs in a fresh process (``child``): it imports fastdp, notes its
resident size (the baseline), builds a CSR dataset in place (rows of ``--k``
entries in stratified random columns, values uniform in ``[0, 1/sqrt(k))`` so
every row has norm below 1, labels +-1), fits ``DPLogisticRegression`` and
reports the peak resident size (``VmHWM``).  With ``--fdp DIR`` it instead runs
``fastdp train DIR`` (the memory-mapped binary dataset) in the same way.

    python benchmarks/fit_memory.py --nnz 300e6            # the table of docs/large-data.md
    python benchmarks/fit_memory.py child --n 500000 --dtype float32 --solver dpscd
    python benchmarks/fit_memory.py write-svm data.svm --n 200000   # LIBSVM text for convert

``tests/test_fit_memory.py`` runs the ``child`` and ``write-svm`` modes.  Linux only
(``/proc/self/status``).  Nothing is kept: generated files go where you say.
"""

import argparse
import json
import os
import subprocess
import sys
import time
import warnings


def status(field):
    """A ``/proc/self/status`` field in bytes (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak():
    """Reset ``VmHWM`` to the current resident size; False where the kernel refuses."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _rows(rng, n_rows, d, k):
    """Columns (n_rows, k), strictly increasing per row, and values of ``n_rows`` rows."""
    import numpy as np

    width = d // k
    columns = rng.integers(0, width, size=(n_rows, k)) + np.arange(k) * width
    values = rng.random((n_rows, k)) / np.sqrt(k)
    return columns, values


def generate(n, d, k, dtype, seed=0, chunk_rows=20_000, classes=2):
    """A CSR matrix of n rows with k entries each, built in place, and labels +-1
    (``classes > 2``: class indices 0..classes-1, uniform).

    Peak memory: the matrix plus one chunk of rows (``chunk_rows * k`` entries) of
    temporaries.
    """
    import numpy as np
    import scipy.sparse as sp

    rng = np.random.default_rng(seed)
    nnz = n * k
    index_dtype = np.int32 if max(nnz, d) < 2**31 - 1 else np.int64
    data = np.empty(nnz, dtype=dtype)
    indices = np.empty(nnz, dtype=index_dtype)
    indptr = np.arange(0, nnz + 1, k, dtype=index_dtype)
    for r0 in range(0, n, chunk_rows):
        r1 = min(n, r0 + chunk_rows)
        columns, values = _rows(rng, r1 - r0, d, k)
        data[r0 * k:r1 * k] = values.ravel()
        indices[r0 * k:r1 * k] = columns.ravel()
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    if classes > 2:
        y = rng.integers(0, classes, size=n).astype(np.float64)
    X = sp.csr_matrix((n, d), dtype=dtype)
    X.data, X.indices, X.indptr = data, indices, indptr  # no copy, no index downcast
    return X, y


def write_svm(path, n, d, k, seed=0, chunk_rows=20_000):
    """The rows of :func:`generate` as LIBSVM text (one-based columns, fixed-width fields)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    width = 7                                   # column digits ("0001234:" is valid LIBSVM)
    entry = 1 + width + 1 + 6                   # " ccccccc:0.dddd"
    line = 2 + k * entry + 1
    with open(path, "wb") as out:
        for r0 in range(0, n, chunk_rows):
            m = min(n, r0 + chunk_rows) - r0
            columns, values = _rows(rng, m, d, k)
            labels = rng.random(m) < 0.5
            text = np.empty((m, line), dtype=np.uint8)
            text[:, 0] = np.where(labels, ord("-"), ord("+"))
            text[:, 1] = ord("1")
            fields = text[:, 2:2 + k * entry].reshape(m, k, entry)
            fields[:, :, 0] = ord(" ")
            col = columns + 1
            for i in range(width):
                fields[:, :, 1 + i] = (col // 10 ** (width - 1 - i)) % 10 + ord("0")
            fields[:, :, 1 + width] = ord(":")
            fields[:, :, 2 + width] = ord("0")
            fields[:, :, 3 + width] = ord(".")
            digits = np.clip((values * 10_000).astype(np.int64), 1, 9_999)
            for i in range(4):
                fields[:, :, 4 + width + i] = (digits // 10 ** (3 - i)) % 10 + ord("0")
            text[:, -1] = ord("\n")
            out.write(text.tobytes())


def child(args):
    """One fit in this process; prints one JSON line."""
    import numpy as np

    warnings.simplefilter("ignore")
    from fastdp import cli, datasets  # noqa: F401  (imports counted in the baseline)
    from fastdp.io.binary import binary_shape
    from fastdp.linear_model import DPLogisticRegression

    baseline = status("VmRSS")
    report = {"dtype": args.dtype, "solver": args.solver, "normalize": args.normalize,
              "classes": args.classes}
    normalize = {"auto": "auto", "true": True, "false": False, "clip": "clip"}[args.normalize]
    if args.fdp:
        names = ("data.npy", "indices.npy", "indptr.npy")
        x_bytes = sum(os.path.getsize(os.path.join(args.fdp, name)) for name in names)
        n, d = binary_shape(args.fdp)
        before = status("VmRSS")
        reset = reset_peak()
        argv = ["train", args.fdp, "--model", "logistic", "--epochs", str(args.epochs),
                "--batch-size", "1000", "--seed", "0", "--solver", args.solver,
                "--normalize", {"true": "normalize", "false": "reject"}.get(args.normalize,
                                                                             args.normalize)]
        started = time.perf_counter()
        with open(os.devnull, "w") as sink:
            saved, sys.stdout = sys.stdout, sink
            try:
                code = cli.main(argv)
            finally:
                sys.stdout = saved
        if code not in (None, 0):
            raise SystemExit(f"fastdp train failed with code {code}")
        report.update(source="fdp")
    else:
        X, y = generate(args.n, args.d, args.k, np.dtype(args.dtype), classes=args.classes)
        n, d = X.shape
        x_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
        before = status("VmRSS")
        reset = reset_peak()
        started = time.perf_counter()
        DPLogisticRegression(solver=args.solver, normalize=normalize, epochs=args.epochs,
                             batch_size=1000, random_state=0).fit(X, y)
        report.update(source="memory")
    seconds = time.perf_counter() - started
    peak = status("VmHWM")
    report.update(n=int(n), d=int(d), x_bytes=int(x_bytes), baseline=baseline, before_fit=before,
                  peak=peak, peak_reset=reset, seconds=round(seconds, 2),
                  peak_over_baseline=peak - baseline,
                  fit_adds=(peak - before) if reset else None)
    print(json.dumps(report))


def run_child(*args):
    """Run ``child`` in a fresh interpreter; its JSON report."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "child", *map(str, args)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode")
    c = sub.add_parser("child")
    c.add_argument("--n", type=int, default=500_000)
    c.add_argument("--d", type=int, default=1_000_000)
    c.add_argument("--k", type=int, default=40)
    c.add_argument("--dtype", default="float64", choices=("float32", "float64"))
    c.add_argument("--solver", default="auto")
    c.add_argument("--normalize", default="auto", choices=("auto", "true", "false", "clip"))
    c.add_argument("--epochs", type=float, default=1.0)
    c.add_argument("--fdp", default=None, help="train on this binary dataset with the CLI")
    c.add_argument("--classes", type=int, default=2,
                   help="more than 2: multiclass labels (multinomial DP-SGD)")
    w = sub.add_parser("write-svm")
    w.add_argument("path")
    w.add_argument("--n", type=int, default=200_000)
    w.add_argument("--d", type=int, default=1_000_000)
    w.add_argument("--k", type=int, default=40)
    parser.add_argument("--nnz", type=float, default=20e6, help="entries of X (table mode)")
    parser.add_argument("--k", type=int, default=40)
    parser.add_argument("--d", type=int, default=1_000_000)
    args = parser.parse_args()
    if args.mode == "child":
        return child(args)
    if args.mode == "write-svm":
        return write_svm(args.path, args.n, args.d, args.k)
    n = int(args.nnz) // args.k
    print("| solver | dtype | X | peak - baseline | / size of X | fit adds | fit time |")
    print("|---|---|---|---|---|---|---|")
    for solver, label in (("auto", "DP-SGD"), ("dpscd", "DP-SCD")):
        for dtype in ("float32", "float64"):
            r = run_child("--n", n, "--d", args.d, "--k", args.k, "--dtype", dtype,
                          "--solver", solver)
            gib = 2.0**30
            adds = "" if r["fit_adds"] is None else f"{r['fit_adds'] / gib:.2f} GiB"
            print(f"| {label} | {dtype} | {r['x_bytes'] / gib:.2f} GiB | "
                  f"{r['peak_over_baseline'] / gib:.2f} GiB | "
                  f"{r['peak_over_baseline'] / r['x_bytes']:.3f} | {adds} | {r['seconds']:.0f} s |",
                  flush=True)


if __name__ == "__main__":
    main()
