"""Bytes read from disk and wall time of a short DP-SGD fit of a cold memory-mapped dataset.

Issue 20: a DP-SGD estimator fit with a row map (``normalize=True``,
``fit_intercept=True``) used to sum the squared norms of all mapped rows in one pass
over X before training; the kernels now sum each row's norm when they read it.  This
measures what that pass cost on data that is not in the page cache: it builds a
float32 binary dataset (``benchmarks/large_data.py: build_binary``, about 33 entries a
row), drops its pages from the page cache (``posix_fadvise(DONTNEED)``, only this
file's pages), and runs, in a fresh process, ``open_binary`` and a
``DPLogisticRegression(solver="dpsgd", normalize=True, fit_intercept=True)`` fit of
``--epochs`` epochs, reporting ``read_bytes`` of ``/proc/self/io`` and the wall time.
Run it with ``PYTHONPATH`` set to each tree to compare two builds::

    PYTHONPATH=<tree> python3 benchmarks/mapped_norms_cold.py --nnz 5e7 --epochs 0.005
"""

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, os, sys, time
import numpy as np
import scipy.sparse as sp
args = json.loads(sys.argv[1])
from fastdp.io import open_binary
from fastdp.linear_model import DPLogisticRegression
if args["up_front"]:                                # the norms as before: a scan of X first
    from fastdp._mapped_rows import MappedRows
    MappedRows.known_kernel_sq_norms = MappedRows.kernel_sq_norms

def fit(X, y, epochs):
    return DPLogisticRegression(epsilon=1.0, solver="dpsgd", epochs=epochs,
                                batch_size=args["batch"], normalize=True, fit_intercept=True,
                                num_threads=1, random_state=0).fit(X, y)

rng = np.random.default_rng(0)                      # warm-up: imports, numba, kernels
small = sp.random(2000, 50, density=0.2, format="csr", random_state=0, dtype=np.float32)
fit(small, np.where(rng.random(2000) < 0.5, 1.0, -1.0), 1)
for name in os.listdir(args["fdp"]):                # cold: only this dataset's pages
    fd = os.open(os.path.join(args["fdp"], name), os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)

def read_bytes():
    with open("/proc/self/io") as io:
        return {k: int(v) for k, v in (l.split(": ") for l in io)}["read_bytes"]

before = read_bytes()
start = time.perf_counter()
X, y = open_binary(args["fdp"])
model = fit(X, y, args["epochs"])
seconds = time.perf_counter() - start
print(json.dumps({"read_bytes": read_bytes() - before, "seconds": seconds,
                  "n_iter": int(model.n_iter_) if hasattr(model, "n_iter_") else None,
                  "data_bytes": int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes),
                  "loadavg": os.getloadavg()[0]}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fdp", default="/tmp/fastdp_mapped_norms_cold.fdp")
    parser.add_argument("--nnz", type=float, default=5e7, help="entries of the dataset")
    parser.add_argument("--epochs", type=float, default=0.005)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--up-front", action="store_true",
                        help="sum the mapped rows' norms in a scan of X before training, as "
                             "before (to attribute the bytes)")
    args = parser.parse_args()
    if not os.path.exists(args.fdp):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from large_data import build_binary

        build_binary(args.fdp, args.nnz)
        os.sync()
    for _ in range(args.repeat):
        out = subprocess.run([sys.executable, "-c", CHILD,
                              json.dumps({"fdp": args.fdp, "epochs": args.epochs,
                                          "batch": args.batch, "up_front": args.up_front})],
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        label = " up-front norms" if args.up_front else ""
        print(f"epochs={args.epochs}{label} read {r['read_bytes'] / 1e6:.1f} MB of "
              f"{r['data_bytes'] / 1e6:.1f} MB in {r['seconds']:.2f} s "
              f"(load {r['loadavg']:.1f})", flush=True)


if __name__ == "__main__":
    main()
