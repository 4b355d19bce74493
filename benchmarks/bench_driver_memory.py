"""Peak RSS of the data-parallel driver for n and 10 n rows (issue 21: driver memory independent of n).

Each measurement runs in a fresh process (``ru_maxrss`` is a lifetime peak):
the workers (Ray actors, separate processes) generate their own shards with a
seeded synthetic loader, so the rows never exist in the driver; the driver
reports its peak RSS before Ray starts, after Ray starts, and after the fit.
By default the lot is a fixed fraction of n (q = 1 %), so both sizes run the
same number of steps; ``--lot L`` fixes the lot instead (10x the steps for
10x the rows), which separates the effect of n from that of the lot's
touched columns.  The model width d is the same.

    python benchmarks/bench_driver_memory.py --rows 200000 2000000 --solvers dpsgd dpscd
"""
import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np


@dataclasses.dataclass(frozen=True)
class SyntheticRows:
    """Rows ``[start, stop)`` of a seeded sparse classification set (generated where loaded)."""

    n_features: int
    nnz: int
    seed: int = 0

    def __call__(self, start, stop):
        import scipy.sparse as sp

        rng = np.random.default_rng([self.seed, start])
        n = stop - start
        cols = np.sort(rng.choice(self.n_features, size=(n, self.nnz)), axis=1)
        keep = np.ones_like(cols, dtype=bool)
        keep[:, 1:] = cols[:, 1:] != cols[:, :-1]
        counts = keep.sum(axis=1)
        X = sp.csr_matrix((rng.standard_normal(int(counts.sum())) / np.sqrt(self.nnz),
                           cols[keep], np.concatenate(([0], np.cumsum(counts)))),
                          shape=(n, self.n_features))
        w = np.sin(np.arange(self.n_features))
        y = (X @ w + 0.1 * rng.standard_normal(n) > 0).astype(np.float64)
        return X, y


def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(n_rows, solver, n_features, nnz, workers, lot=None):
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from fastdp.distributed.data_parallel import RayWorkers, Source, fit_distributed
    from fastdp.linear_model import DPLogisticRegression
    from fastdp.sampling_blocks import BlockPoissonSampler

    out = {"n_rows": n_rows, "solver": solver, "n_features": n_features, "nnz_per_row": nnz,
           "workers": workers, "lot": lot or n_rows // 100, "peak_rss_mb_start": peak_mb()}
    engine = RayWorkers(n_workers=workers)
    engine._ray()
    out["peak_rss_mb_ray_started"] = peak_mb()
    L = n_rows // 100 if lot is None else lot
    source = Source(SyntheticRows(n_features, nnz), n_rows, n_shards=2 * workers,
                    block_size=4096, name="synthetic", n_features=n_features)
    est = DPLogisticRegression(epsilon=1.0, batch_size=L, epochs=1, random_state=0,
                               solver=solver, sampler=BlockPoissonSampler(batch_size=L))
    started = time.perf_counter()
    fit = fit_distributed(source, est, engine=engine)
    out["seconds"] = time.perf_counter() - started
    out["steps"] = fit.n_iter_
    out["peak_rss_mb_after_fit"] = peak_mb()
    out["epsilon"] = fit.epsilon_
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[200_000, 2_000_000])
    parser.add_argument("--solvers", nargs="+", default=["dpsgd", "dpscd"])
    parser.add_argument("--features", type=int, default=100_000)
    parser.add_argument("--nnz", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lot", type=int, default=None,
                        help="fixed expected lot size (default: n / 100)")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.rows[0], args.solvers[0], args.features, args.nnz,
                                 args.workers, args.lot)))
        return 0
    results = []
    for solver in args.solvers:
        for n in args.rows:
            cmd = [sys.executable, __file__, "--one", "--rows", str(n), "--solvers", solver,
                   "--features", str(args.features), "--nnz", str(args.nnz),
                   "--workers", str(args.workers)] + (["--lot", str(args.lot)] if args.lot else [])
            line = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            results.append(json.loads(line.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
