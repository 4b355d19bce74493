"""Time per round of the distributed engines (seed 004): simulator against Ray actors.

    python benchmarks/compare_distributed.py [--nodes 20,4] [--dims 123,62061] [--rounds 200]
                                             [--dtypes float64,float32] [--no-ray]

20 (or 4, ...) agents on the complete graph, hinge loss, ℓ2 (a_t = t,
gamma = 20), noise sigma = 0.1; synthetic sparse rows (50 nonzeros) of unit
norm, 100 per agent. Configurations: one random edge per round (iota = 2/n)
and the all-active baseline [19], float64 and (opt-in) float32 messages.
Ray runs locally (num_cpus=2, loopback only), one actor per agent; its time
excludes cluster and actor start-up, which is reported separately. Both
engines must give bit-identical coefficients: the script checks it.
"""

import argparse
import os
import time

import numpy as np

from fastdp.datasets import make_sparse_classification
from fastdp.distributed import L2Penalty, private_dual_averaging, strongly_convex_schedule
from fastdp.preprocessing import normalize_rows


def _problem(n_nodes, dim):
    X, y = make_sparse_classification(n_nodes * 100, dim, nnz_per_row=min(50, dim // 2),
                                      random_state=0)[:2]
    return normalize_rows(X), y


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", default="20,4")
    ap.add_argument("--dims", default="123,62061")
    ap.add_argument("--dtypes", default="float64")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args(argv)
    engines = ["simulated"] + ([] if args.no_ray else ["ray"])
    print(f"load average: {os.getloadavg()[0]:.1f}")
    print("| agents | dim | gossip | messages | rounds | engine | ms/round | total s (incl. start-up) "
          "| identical |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n_nodes in (int(v) for v in args.nodes.split(",")):
        for dim in (int(d) for d in args.dims.split(",")):
            X, y = _problem(n_nodes, dim)
            for gossip in ("edge_matching", "all_active"):
                T = args.rounds if gossip == "edge_matching" else max(10, args.rounds * 2 // n_nodes)
                for dtype in args.dtypes.split(","):
                    ref = None
                    for name in engines:
                        engine = name
                        if name == "ray":
                            from fastdp.distributed.engines.ray_engine import RayEngine
                            engine = RayEngine(checkpoint_every=64)
                            engine._ensure_ray()
                        start = time.perf_counter()
                        r = private_dual_averaging(X, y, n_nodes=n_nodes, gossip=gossip,
                                                   regularizer=L2Penalty(5e-4),
                                                   schedule=strongly_convex_schedule(20.0),
                                                   sigma=0.1, n_rounds=T, random_state=0,
                                                   engine=engine, message_dtype=dtype)
                        total = time.perf_counter() - start
                        same = "—" if ref is None else str(np.array_equal(ref, r.node_coefs))
                        ref = r.node_coefs if ref is None else ref
                        print(f"| {n_nodes} | {dim} | {gossip} | {dtype} | {T} | {name} | "
                              f"{r.seconds_per_round * 1e3:.3f} | {total:.1f} | {same} |", flush=True)
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
