"""Bytes and time per query of the line-search family on the data-parallel engine (issue 21).

    python benchmarks/bench_line_search_comm.py [--baseline PATH] [--dims 1000,1000000]
        [--rows 20000] [--lot 1000] [--solvers dp_blsgd,dp_blgd] [--repeat 3] [--no-ray]
        [--json benchmarks/results/line_search_comm.json]

Runs the same fits with fastdp imported from this checkout ("after") and,
with ``--baseline``, from another checkout ("before", e.g. a worktree of the
commit before the change; it must have its kernels built), one subprocess per
checkout, side by side, and prints per solver, d and engine:

* bytes per query and per iteration, to + from the workers
  (``distributed_stats_``: model values sent, sparse partial sums, lot
  columns and supports received);
* ms per query (the workers' queries, transport included) and ms per
  iteration (the whole solve: queries plus the driver's loop, its dense noise
  included; start-up and shard loading excluded), the fastest of ``--repeat``
  runs (after one warm-up fit);
* the ratio before / after of each.

Data: synthetic rows with 20 nonzeros of unit norm (``bench_data_parallel.problem``),
``--rows`` rows, logistic loss, epsilon 1; ``dp_blsgd`` with lots of ``--lot``
rows for one epoch, ``dp_blgd`` full batch (its default iterations).
Engines: 2 in-process workers over 2 shards, and 2 Ray actors over 2 shards
(local cluster, loopback).  The machine is shared: the load average is
printed with every row.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def measure(args):
    """The fits of one checkout (fastdp as imported); a list of result dicts."""
    import numpy as np

    sys.path.insert(0, HERE)
    from bench_data_parallel import problem

    from fastdp.distributed.data_parallel import (LocalWorkers, RayWorkers, array_source,
                                                  fit_distributed)
    from fastdp.linear_model import DPLogisticRegression
    from fastdp.sampling_blocks import BlockPoissonSampler

    block = 1024
    out = []
    warm_X, warm_y = problem(4 * block, 100)     # compile and load the kernels first
    fit_distributed(array_source(warm_X, np.where(warm_y > 0, 1.0, 0.0), n_shards=2,
                                 block_size=block),
                    DPLogisticRegression(epsilon=1.0, batch_size=200, epochs=1, solver="dp_blsgd",
                                         sampler=BlockPoissonSampler(batch_size=200,
                                                                     block_size=block)),
                    engine=LocalWorkers(2))
    for d in [int(v) for v in args.dims.split(",")]:
        X, y = problem(args.rows, d)
        y = np.where(y > 0, 1.0, 0.0)
        source = array_source(X, y, n_shards=2, block_size=block)
        engines = [("local2", lambda: LocalWorkers(2))]
        if not args.no_ray:
            engines.append(("ray2", lambda: RayWorkers(n_workers=2)))
        for solver in args.solvers.split(","):
            for name, make in engines:
                length = {"epochs": 1} if solver.startswith("dp_blsgd") else {}
                est = DPLogisticRegression(
                    epsilon=1.0, batch_size=args.lot, random_state=0, solver=solver,
                    accountant="rdp", sampler=BlockPoissonSampler(batch_size=args.lot,
                                                                  block_size=block), **length)
                best = None
                for _ in range(args.repeat):     # the fastest of a few runs (a shared machine)
                    started = time.perf_counter()
                    fit = fit_distributed(source, est, engine=make())
                    wall = time.perf_counter() - started
                    run = fit.distributed_stats_
                    if best is None or (run["seconds_workers"] + run["seconds_driver"] <
                                        best["seconds_workers"] + best["seconds_driver"]):
                        best = run
                st = best
                it, q = max(fit.n_iter_, 1), max(st["n_queries"], 1)
                moved = st["bytes_to_workers"] + st["bytes_from_workers"]
                solve = st["seconds_workers"] + st["seconds_driver"]
                out.append({"solver": solver, "d": d, "engine": name, "n_iter": fit.n_iter_,
                            "n_queries": st["n_queries"], "bytes_per_query": moved / q,
                            "bytes_per_iter": moved / it,
                            "bytes_to_per_query": st["bytes_to_workers"] / q,
                            "ms_per_query": 1e3 * st["seconds_workers"] / q,
                            "ms_per_iter": 1e3 * solve / it, "wall_s": wall,
                            "load": os.getloadavg()[0],
                            "coef_head": fit.coef_.ravel()[:3].tolist()})
                print(json.dumps(out[-1]), file=sys.stderr, flush=True)
    return out


def _run(path, argv):
    env = dict(os.environ, PYTHONPATH=path, RAY_USAGE_STATS_ENABLED="0")
    # cwd: Ray's workers put the driver's working directory first on their path
    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--measure"] + argv,
                          env=env, cwd=path, check=True, stdout=subprocess.PIPE, text=True)
    return json.loads(done.stdout)


def _size(b):
    return f"{b / 1e6:.2f} MB" if b >= 1e5 else f"{b / 1e3:.1f} KB"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=None, help="checkout of the code before")
    parser.add_argument("--dims", default="1000,1000000")
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--lot", type=int, default=1000)
    parser.add_argument("--solvers", default="dp_blsgd,dp_blgd")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args)))
        return
    argv = [a for a in sys.argv[1:] if not a.startswith("--json") and a != args.json]
    if args.baseline:
        argv = [a for a in argv if not a.startswith("--baseline") and a != args.baseline]
    after = _run(os.path.dirname(HERE), argv)
    before = _run(os.path.abspath(args.baseline), argv) if args.baseline else None
    print("| solver | d | engine | load | bytes/query before → after (×) | bytes/iter "
          "before → after | ms/query before → after (×) | ms/iter before → after (×) |")
    print("|---|---|---|---|---|---|---|---|")
    for k, a in enumerate(after):
        b = before[k] if before else None
        if b is not None and b["coef_head"] != a["coef_head"]:
            print(f"WARNING: {a['solver']} d={a['d']} {a['engine']}: coefficients differ",
                  file=sys.stderr)

        def pair(key, fmt, ratio=True):
            if b is None:
                return fmt(a[key])
            r = f" ({b[key] / a[key]:.1f}×)" if ratio and a[key] > 0 else ""
            return f"{fmt(b[key])} → {fmt(a[key])}{r}"

        load = f"{b['load']:.1f} / {a['load']:.1f}" if b else f"{a['load']:.1f}"
        print(f"| {a['solver']} | {a['d']:.0e} | {a['engine']} | {load} | "
              f"{pair('bytes_per_query', _size)} | {pair('bytes_per_iter', _size, False)} | "
              f"{pair('ms_per_query', lambda v: f'{v:.1f}')} | "
              f"{pair('ms_per_iter', lambda v: f'{v:.1f}')} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"after": after, "before": before}, fh, indent=1)


if __name__ == "__main__":
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    main()
