"""Per-step cost of data-parallel DP-SGD against the single-machine kernel (issue 21).

    python benchmarks/bench_data_parallel.py [--lots 1000,10000,100000] [--dims 1000,1000000]
                                             [--steps 20] [--workers 1,2] [--no-ray]
                                             [--json benchmarks/results/data_parallel.json]

Synthetic sparse rows (20 nonzeros, unit norm), n = min(4 L, 400000) rows
(q = L / n), logistic loss, sigma = 1, clip 1.  For each (L, d):

* ``kernel``: the single-machine compiled DP-SGD (``dpsgd``, Poisson
  sampler, lazy noise), seconds per step of a whole run;
* ``grad``: the clipped-gradient kernel alone on one lot of L rows (the
  compute a worker does), seconds;
* ``keyed``: ``dpsgd`` with ``sampler="block_poisson"`` (the data-parallel step
  loop in this process, one shard: block sampling, column unions, keyed lazy
  noise on the driver, no transport);
* ``ray k``: ``fit``-equivalent steps on k Ray actors (local cluster, loopback),
  seconds per step (start-up and shard loading excluded) and bytes per step
  (model coordinates sent + sparse partial sums and next-lot columns received).

Ray runs with ``num_cpus=2``; on a shared 2-core machine the Ray numbers
include contention (the ``k = 2`` workers share the cores with the driver).
"""

import argparse
import json
import math
import os
import time

import numpy as np
import scipy.sparse as sp

from fastdp._kernels import _glm
from fastdp._validation import check_X
from fastdp.distributed.data_parallel import LocalWorkers, RayWorkers, array_source
from fastdp.distributed.data_parallel.driver import run_dpsgd
from fastdp.distributed.data_parallel.worker import WorkerSetup
from fastdp.sampling_blocks import BlockPoissonSampler, sampling_key
from fastdp.solvers.sgd import dpsgd

NNZ = 20


def problem(n, d, seed=0):
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.integers(0, d, size=(n, NNZ)), axis=1)
    indptr = np.arange(0, n * NNZ + 1, NNZ, dtype=np.int64)
    data = rng.standard_normal(n * NNZ)
    X = sp.csr_matrix((data, cols.ravel().astype(np.int64), indptr), shape=(n, d))
    X.sum_duplicates()
    X.sort_indices()
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.diags(1.0 / np.maximum(norms, 1e-12)) @ X
    X = check_X(X.tocsr())
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    return X, y


def time_kernel(X, y, L, steps, sampler):
    n = X.shape[0]
    epochs = steps * L / n
    started = time.perf_counter()
    res = dpsgd(X, y, loss="logistic", lam=1e-4, epochs=epochs, batch_size=L, clip=1.0,
                noise_multiplier=1.0, sampler=sampler, random_state=0)
    return (time.perf_counter() - started) / res.n_iter


def time_grad(X, y, L):
    rows = np.sort(np.random.default_rng(1).choice(X.shape[0], L, replace=False)).astype(np.int64)
    theta = np.zeros(X.shape[1])
    out = np.zeros(X.shape[1])
    best = math.inf
    for _ in range(5):
        started = time.perf_counter()
        _glm.clipped_gradient_sum(X.data, X.indices, X.indptr, y, rows, theta,
                                  _glm.LOSS_LOGISTIC, 1.0, out)
        best = min(best, time.perf_counter() - started)
    return best


def time_engine(engine, X, y, L, steps):
    n, d = X.shape
    block_size = 4096 if n >= 8 * 4096 else 512
    n_shards = max(getattr(engine, "n_workers", 1), 1)
    source = array_source(X, y, n_shards=n_shards, block_size=block_size)
    sampler = BlockPoissonSampler(batch_size=L, block_size=block_size)
    setup = WorkerSetup(n_rows=n, n_features=d, shift=0, classes=None, row_map=None,
                        max_row_norm=None, loss_code=_glm.LOSS_LOGISTIC, clip=1.0,
                        sampler=sampler, sampling_key=sampling_key(np.random.default_rng(0)),
                        n_steps=steps)
    engine.open(source)
    engine.prepare(setup)
    try:
        started = time.perf_counter()
        _, stats = run_dpsgd(engine, n_features=d, epoch_ends=[steps], rho=1 - 1e-4,
                             kappa=1.0 / L, noise_std=1.0,
                             noise_key=sampling_key(np.random.default_rng(1)))
        seconds = (time.perf_counter() - started) / steps
    finally:
        engine.close()
    per = stats.per_step()
    return {"seconds": seconds, "bytes": per["bytes_to_workers"] + per["bytes_from_workers"],
            "driver_seconds": per["seconds_driver"], "wait_seconds": per["seconds_workers"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lots", default="1000,10000,100000")
    parser.add_argument("--dims", default="1000,1000000")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    for d in [int(v) for v in args.dims.split(",")]:
        for L in [int(v) for v in args.lots.split(",")]:
            n = min(4 * L, 400_000)
            X, y = problem(n, d)
            row = {"L": L, "d": d, "n": n, "load": os.getloadavg()[0],   # a shared machine
                   "kernel": time_kernel(X, y, L, args.steps, "poisson"),
                   "grad": time_grad(X, y, L),
                   "keyed": time_kernel(X, y, L, args.steps, "block_poisson")}
            local = time_engine(LocalWorkers(1), X, y, L, args.steps)
            row["local_bytes"] = local["bytes"]
            if not args.no_ray:
                for k in [int(v) for v in args.workers.split(",")]:
                    row[f"ray{k}"] = time_engine(RayWorkers(n_workers=k), X, y, L,
                                                 args.steps)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    main()
