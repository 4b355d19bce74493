"""The data-parallel engine on a multi-node Ray cluster (``ray.cluster_utils.Cluster``, issue 36).

One cluster for the module: a head and two more nodes of one CPU each, every
service on 127.0.0.1 (three raylets on this machine stand for three
machines).  It is not the ``ray_cluster`` fixture's local Ray: that one is shut
down before this file runs (``tests/distributed/conftest.py``), and the
scheduler runs this file in the Ray unit (``tests/_schedule.py`` looks for the
text ray_cluster).  References: the single-machine fit with the keyed
sampler and the default shards (bits, epsilon, ledger charge).

Default run: one fit on three workers, one per node, equal to the single
machine bit for bit, charged once.  ``slow``: one and two workers, and a node
removed during DP-SGD and during DP-SCD (the run recovers with the same bits
and one charge); the node is added back after each.
"""
import os

import numpy as np
import pytest

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
ray = pytest.importorskip("ray")

from shard_setup import shard_estimator  # noqa: E402

from fastdp.distributed.data_parallel import RayWorkers, array_source, fit_distributed  # noqa: E402
from fastdp.privacy.ledger import PrivacyLedger  # noqa: E402

N_NODES = 3


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    args = dict(num_cpus=1, node_ip_address="127.0.0.1")
    nodes = Cluster(initialize_head=True, head_node_args=dict(args, include_dashboard=False))
    for _ in range(N_NODES - 1):
        nodes.add_node(**args)
    nodes.wait_for_nodes()
    ray.init(address=nodes.address, log_to_driver=False, configure_logging=False)
    try:
        yield nodes
    finally:
        ray.shutdown()
        nodes.shutdown()


def alive_nodes():
    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])


def fit_on(engine, X, y, **params):
    """``fit_distributed`` over the default shards of (X, y); returns (estimator, ledger)."""
    ledger = PrivacyLedger(epsilon=10.0, delta=1e-5)
    est = shard_estimator(ledger=ledger, **params)
    with engine:
        fit_distributed(array_source(X, y, block_size=est.sampler.block_size), est,
                        engine=engine)
    return est, ledger


class _Singles(dict):
    """The single-machine fits (no engine) and their ledgers, by solver, fitted when asked."""

    def __init__(self, data):
        super().__init__()
        self.data = data

    def __missing__(self, solver):
        ledger = PrivacyLedger(epsilon=10.0, delta=1e-5)
        self[solver] = (shard_estimator(solver=solver, ledger=ledger).fit(*self.data), ledger)
        return self[solver]


@pytest.fixture(scope="module")
def single(shard_data):
    return _Singles(shard_data)


class PlacedWorkers(RayWorkers):
    """``RayWorkers`` that records the node of every worker before the fit closes it."""

    def close(self):
        if self.actors:
            self.nodes = self.worker_nodes()
        super().close()


def assert_same(fit, ledger, reference):
    ref, ref_ledger = reference
    assert np.array_equal(fit.coef_, ref.coef_) and np.array_equal(fit.intercept_, ref.intercept_)
    assert fit.epsilon_ == ref.epsilon_ and fit.privacy_event_ == ref.privacy_event_
    assert ledger.spent() == ref_ledger.spent() > 0
    assert len(ledger.entries) == 1


def test_one_worker_per_node_same_bits_charged_once(cluster, shard_data, single):
    assert len(alive_nodes()) == N_NODES
    engine = PlacedWorkers(n_workers=N_NODES)
    est, ledger = fit_on(engine, *shard_data)
    assert sorted(engine.nodes) == alive_nodes()     # one worker on every node
    assert est.distributed_stats_["restarts"] == 0
    assert_same(est, ledger, single["dpsgd"])


@pytest.mark.slow
@pytest.mark.parametrize("n_workers", [1, 2])
def test_fewer_workers_same_bits(cluster, shard_data, single, n_workers):
    est, ledger = fit_on(RayWorkers(n_workers=n_workers), *shard_data)
    assert_same(est, ledger, single["dpsgd"])


class NodeLoss(RayWorkers):
    """``RayWorkers`` that removes the node of worker ``victim`` (not the head) just before
    the ``at``-th step call of the run (DP-SGD or DP-SCD step)."""

    def __init__(self, cluster, victim, at, **kw):
        super().__init__(**kw)
        self._cluster, self._victim, self._at, self._calls = cluster, victim, at, 0
        self.removed = None

    def _call(self, method, args):
        if method == "step" and self.removed is None:
            self._calls += 1
            if self._calls == self._at:
                node_id = self.worker_nodes()[self._victim]
                node = next(n for n in self._cluster.worker_nodes if n.node_id == node_id)
                self._cluster.remove_node(node)
                self.removed = node_id
        return super()._call(method, args)


@pytest.mark.slow
@pytest.mark.parametrize("solver,at", [("dpsgd", 9), ("dpscd", 20)])
def test_removed_node_recovers_with_same_bits_and_one_charge(cluster, shard_data, single,
                                                             solver, at):
    """Three workers, one per node; a non-head node is removed mid-run (DP-SCD: in its
    second epoch, after a checkpoint); the worker restarts on a live node."""
    head = cluster.head_node.node_id
    engine = NodeLoss(cluster, victim=None, at=at, n_workers=N_NODES)
    # the victim: a worker on a node other than the head (placement is by node id)
    order = alive_nodes()
    engine._victim = next(w for w, node in enumerate(order) if node != head)
    try:
        est, ledger = fit_on(engine, *shard_data, solver=solver)
        assert engine.removed is not None and engine.removed != head
        assert est.distributed_stats_["restarts"] >= 1
        assert_same(est, ledger, single[solver])
    finally:
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
