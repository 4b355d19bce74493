"""Per-step cost of keyed Poisson sampling (the splitting tree) per worker (issue 36).

    python benchmarks/bench_keyed_sampling.py [--rows 4200000,100000000] [--rate 1e-4]
                                              [--workers 1,8] [--steps 200]
                                              [--json benchmarks/results/keyed_sampling.json]

For each n and each k: the CPU time (``time.process_time``, so other
processes on a shared machine count less) and the wall time per lot of
``BlockPoissonSampler.lot`` restricted to worker 0's rows of the default
shards spread over k workers (k = 1: all n rows), averaged over ``--steps``
lots after one warm-up lot (numba compilation).  For reference, the plain
sequential :class:`~fastdp.sampling.PoissonSampler` (one machine, all rows):
the same two times per step of its stream.
"""

import argparse
import json
import time

import numpy as np

from fastdp.distributed.data_parallel.executors import shard_assignment
from fastdp.sampling import PoissonSampler
from fastdp.sampling_blocks import (
    DEFAULT_BLOCK_SIZE,
    BlockPoissonSampler,
    block_ranges,
    default_shard_count,
    keyed_streams,
    sampling_key,
)


def worker_range(n, k):
    """Rows ``[start, stop)`` of worker 0 of k over the default shards."""
    shards = block_ranges(n, DEFAULT_BLOCK_SIZE, default_shard_count(n, DEFAULT_BLOCK_SIZE))
    mine = shard_assignment(len(shards), min(k, len(shards)))[0]
    return shards[mine[0]][0], shards[mine[-1]][1]


def per_step(fn, steps):
    """(CPU seconds, wall seconds) per call of ``fn(t)``, t = 2 .. steps + 1."""
    fn(1)
    cpu, wall = time.process_time(), time.perf_counter()
    for t in range(2, steps + 2):
        fn(t)
    return (time.process_time() - cpu) / steps, (time.perf_counter() - wall) / steps


def measure(n, q, k, steps):
    sampler = BlockPoissonSampler(q)
    streams = keyed_streams(sampling_key(np.random.default_rng(0)))
    start, stop = worker_range(n, k)
    sizes = []

    def lot(t):
        sizes.append(sampler.lot(streams, n, t, start, stop).size)

    cpu, wall = per_step(lot, steps)
    return {"n": n, "q": q, "workers": k, "rows": stop - start, "mean_lot": float(np.mean(sizes)),
            "cpu_us": cpu * 1e6, "wall_us": wall * 1e6}


def measure_plain(n, q, steps):
    stream = PoissonSampler(q).stream(n, np.random.default_rng(0))
    cpu, wall = per_step(lambda t: stream.take(1), steps)
    return {"n": n, "q": q, "sampler": "poisson", "cpu_us": cpu * 1e6, "wall_us": wall * 1e6}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="4200000,100000000")
    parser.add_argument("--rate", type=float, default=1e-4)
    parser.add_argument("--workers", default="1,8")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json")
    args = parser.parse_args()
    results = []
    for n in map(int, args.rows.split(",")):
        for k in map(int, args.workers.split(",")):
            results.append(measure(n, args.rate, k, args.steps))
            print(json.dumps(results[-1]))
        results.append(measure_plain(n, args.rate, max(10, args.steps // 10)))
        print(json.dumps(results[-1]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
