"""Ray engine: bit-identical to the simulator; survives a killed actor (spec 004 E18).

Skipped when Ray is not installed (``pip install fastdp[ray]``). Ray runs locally
with num_cpus=2, bound to 127.0.0.1.
"""
import os

import numpy as np
import pytest

os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")   # loopback only
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray = pytest.importorskip("ray")

from fastdp.datasets import make_sparse_classification  # noqa: E402
from fastdp.distributed import (  # noqa: E402
    L1Penalty,
    L2Penalty,
    convex_schedule,
    private_dual_averaging,
    strongly_convex_schedule,
)
from fastdp.distributed.engines.ray_engine import NodeAgent, RayEngine  # noqa: E402
from fastdp.preprocessing import normalize_rows  # noqa: E402


@pytest.fixture(scope="module")
def data():
    X, y = make_sparse_classification(300, 20, 5, random_state=1)[:2]
    return normalize_rows(X), y


# float32 messages in the default run: the rounding happens in compute_message, shared by
# both engines, and test_dual_averaging.py::test_float32_messages checks it on the
# simulator (half the bytes, same seed same bits, rounded, within 1e-5); the Ray engine
# passes the messages as they are, whatever their dtype (the float64 case runs here).
@pytest.mark.parametrize("message_dtype", ["float64", pytest.param("float32",
                                                                   marks=pytest.mark.slow)])
def test_ray_equals_simulator_bit_for_bit(ray_cluster, data, message_dtype):
    X, y = data
    kw = dict(n_nodes=4, graph="ring", regularizer=L2Penalty(1e-2),
              schedule=strongly_convex_schedule(1.0), sigma=0.3, n_rounds=60, random_state=5,
              eval_rounds=[20, 60], message_dtype=message_dtype)
    sim = private_dual_averaging(X, y, **kw)
    dist = private_dual_averaging(X, y, engine=RayEngine(checkpoint_every=16), **kw)
    assert dist.engine == "ray" and dist.restarts == 0
    assert np.array_equal(sim.node_coefs, dist.node_coefs)
    assert np.array_equal(sim.z, dist.z)
    assert [t for t, _ in sim.history] == [t for t, _ in dist.history]
    assert all(np.array_equal(a, b) for (_, a), (_, b) in zip(sim.history, dist.history))
    assert sim.n_messages == dist.n_messages and sim.message_bytes == dist.message_bytes


def test_killed_actor_recovers_with_identical_result(ray_cluster, data):
    """Baseline [19] configuration (all agents active, exact averaging, literal mode, l1)."""
    X, y = data
    kw = dict(n_nodes=4, gossip="all_active", regularizer=L1Penalty(1e-3),
              schedule=convex_schedule(0.5), sigma=0.2, inactive_x="literal", n_rounds=60,
              random_state=6)
    sim = private_dual_averaging(X, y, **kw)
    dist = private_dual_averaging(X, y, engine=RayEngine(checkpoint_every=16, fail_at=(2, 37)), **kw)
    assert dist.restarts == 1
    assert np.array_equal(sim.node_coefs, dist.node_coefs)
    assert np.array_equal(sim.z, dist.z)


def test_agent_releases_only_messages(data):
    """The agent's public methods return messages (dense dim-vectors) or state, never shard data."""
    from fastdp.distributed.dual_averaging import partition_rows
    from fastdp.distributed.gossip import EdgeMatching
    from fastdp.distributed.graphs import complete_graph
    from fastdp.distributed.node import NodeProgram, NodeShard, node_keys
    X, y = data
    shard = NodeShard.from_csr(*partition_rows(X, y, 4, 0)[0])
    plan = EdgeMatching(complete_graph(4), 1).sample(30, random_state=0)
    program = NodeProgram(20, "hinge", L2Penalty(1e-2), strongly_convex_schedule(1.0), 0.5, 0.4, 30)
    agent = NodeAgent(0, program, shard, node_keys(np.random.SeedSequence(0), 4)[0],
                      plan.active_rounds(0))
    ack, msg = agent.first_message()
    assert msg.dtype == np.float64 and msg.shape == (20,)
    for t in plan.active_rounds(0):
        rnd = plan.round(int(t))
        senders = next(s for r, s, _ in rnd.groups if 0 in r)
        weights = next(w for r, _, w in rnd.groups if 0 in r)
        partner = [np.ones(20) for j in senders if j != 0]
        ack, msg = agent.advance(int(t), senders, weights, *partner)
        assert msg is None or (msg.shape == (20,) and not np.shares_memory(msg, shard.data))
