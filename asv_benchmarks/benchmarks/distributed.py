"""asv benchmarks of the distributed simulator (seed 004): gossip rounds.

A round of private distributed dual averaging on 20 agents over the complete
graph, for a small (a9a-like, 123) and a high-dimensional (news20-like, 62061)
feature space: one random edge per round (iota = 0.1) and the all-active
baseline [19] (every agent sends and mixes in every round). Each timed call
runs ``ROUNDS`` rounds of the simulator; ``track_seconds_per_round`` reports
the per-round cost.
"""

import time

import numpy as np

ROUNDS = 20
N_NODES = 20


def _setup(dim, gossip, penalty, message_dtype="float64"):
    from fastdp.datasets import make_sparse_classification
    from fastdp.distributed import (
        AllActive,
        EdgeMatching,
        L1Penalty,
        L2Penalty,
        complete_graph,
        convex_schedule,
        strongly_convex_schedule,
    )
    from fastdp.distributed.dual_averaging import partition_rows
    from fastdp.distributed.node import NodeProgram, NodeShard, node_keys
    from fastdp.preprocessing import normalize_rows

    X, y = make_sparse_classification(N_NODES * 50, dim, nnz_per_row=min(50, dim // 2),
                                      random_state=0)[:2]
    X = normalize_rows(X)
    shards = [NodeShard.from_csr(Xi, yi) for Xi, yi in partition_rows(X, y, N_NODES, 0)]
    graph = complete_graph(N_NODES)
    sampler = EdgeMatching(graph, 1) if gossip == "edge_matching" else AllActive(graph)
    reg, sched = ((L2Penalty(5e-4), strongly_convex_schedule(20.0)) if penalty == "l2"
                  else (L1Penalty(5e-4), convex_schedule(0.01)))
    program = NodeProgram(dim, "hinge", reg, sched, sampler.iota, 0.1, ROUNDS,
                          message_dtype=message_dtype)
    plan = sampler.sample(ROUNDS, random_state=0)
    keys = node_keys(np.random.SeedSequence(0), N_NODES)
    return program, shards, plan, keys


class SimulatorRounds:
    """``ROUNDS`` rounds of the simulator."""

    params = ([123, 62061], ["edge_matching", "all_active"], ["l2", "l1"])
    param_names = ["dim", "gossip", "penalty"]
    timeout = 600

    def setup(self, dim, gossip, penalty):
        from fastdp.distributed import SimulatedEngine

        self.args = _setup(dim, gossip, penalty)
        self.engine = SimulatedEngine()
        self.engine.run(*self.args)          # warm tables and caches

    def time_rounds(self, dim, gossip, penalty):
        self.engine.run(*self.args)

    def track_seconds_per_round(self, dim, gossip, penalty):
        start = time.perf_counter()
        self.engine.run(*self.args)
        return (time.perf_counter() - start) / ROUNDS

    track_seconds_per_round.unit = "seconds"


class MessagePrecision:
    """``ROUNDS`` one-edge rounds, float64 against (opt-in) float32 messages."""

    params = ([123, 62061], ["float64", "float32"])
    param_names = ["dim", "message_dtype"]
    timeout = 600

    def setup(self, dim, message_dtype):
        from fastdp.distributed import SimulatedEngine

        self.args = _setup(dim, "edge_matching", "l2", message_dtype)
        self.engine = SimulatedEngine()
        self.engine.run(*self.args)

    def time_rounds(self, dim, message_dtype):
        self.engine.run(*self.args)
