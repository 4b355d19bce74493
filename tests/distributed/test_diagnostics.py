"""The y^(t) diagnostic against an independent dense implementation of Algorithm 1 and closed forms."""
import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.datasets import make_sparse_classification
from fastdp.distributed import (
    EdgeMatching,
    L1Penalty,
    L2Penalty,
    SimulatedEngine,
    UniformEdges,
    VirtualSequence,
    complete_graph,
    convex_schedule,
    private_dual_averaging,
    ring_graph,
    strongly_convex_schedule,
)
from fastdp.distributed.dual_averaging import partition_rows
from fastdp.distributed.engines.ray_engine import RayEngine
from fastdp.distributed.gossip import round_matrix
from fastdp.distributed.node import NodeProgram, NodeShard, node_generator, node_keys
from fastdp.exceptions import ValidationError
from fastdp.preprocessing import normalize_rows

DIM = 12


@pytest.fixture(scope="module")
def data():
    X, y = make_sparse_classification(240, DIM, 4, random_state=3)[:2]
    return normalize_rows(X), y


def _closed_form_prox(penalty, z, alpha, gamma):
    """Spec 004 §2.1 cases 1-3, written out (independent of fastdp.distributed.regularizers)."""
    kind, lam = penalty
    if kind == "l2":
        return -z / (alpha * lam + gamma)
    return -np.sign(z) * np.maximum(np.abs(z) - alpha * lam, 0.0) / gamma


def _reference(shards, keys, plan, T, penalty, schedule, iota, sigma, inactive_x):
    """Dense Algorithm 1 with W^(t) as matrices; returns per-round y, consensus errors."""
    n = len(shards)
    dense = [sp.csr_matrix((s.data, s.indices, s.indptr), shape=(len(s.y), DIM)).toarray()
             for s in shards]
    a, A, g = schedule.arrays(T)
    Z = np.zeros((n, DIM))
    Xs = np.stack([_closed_form_prox(penalty, Z[i], iota * A[1], g[1]) for i in range(n)])
    ys, cons, dev, dev_sq = [], [], [], []
    for t in range(1, T + 1):
        if inactive_x == "theory":
            Xs = np.stack([_closed_form_prox(penalty, Z[i], iota * A[t], g[t]) for i in range(n)])
        zbar = Z.sum(axis=0) / n
        yv = _closed_form_prox(penalty, zbar, iota * A[t], g[t])
        ys.append(yv)
        cons.append(((Z - zbar) ** 2).sum() / a[t] ** 2)
        d = np.sqrt(((Xs - yv) ** 2).sum(axis=1))
        dev.append(d.mean())
        dev_sq.append((d ** 2).mean())
        active = plan.active(t)
        M = Z.copy()
        for i in active:
            gen = node_generator(keys[i], t)
            row = gen.integers(len(shards[i].y))
            nu = sigma * gen.standard_normal(DIM) if sigma > 0 else np.zeros(DIM)
            c, lab = dense[i][row], shards[i].y[row]
            grad = -lab * c if lab * (c @ Xs[i]) < 1 else np.zeros(DIM)
            M[i] = Z[i] + a[t] * (grad + nu)
        Z = round_matrix(plan.round(t), n) @ M
        if inactive_x == "literal":
            for i in active:
                Xs[i] = _closed_form_prox(penalty, Z[i], iota * A[t + 1], g[t + 1])
    return np.array(ys), np.array(cons), np.array(dev), np.array(dev_sq)


@pytest.mark.parametrize("inactive_x", ["theory", "literal"])
@pytest.mark.parametrize("penalty, schedule, sampler", [
    (("l2", 0.05), strongly_convex_schedule(2.0), EdgeMatching(complete_graph(6), 2)),
    (("l1", 0.01), convex_schedule(0.7), UniformEdges(ring_graph(6), 2)),
], ids=["l2-matching", "l1-ring-uniform"])
def test_virtual_sequence_matches_dense_reference(data, inactive_x, penalty, schedule, sampler):
    X, y = data
    n, T, sigma = sampler.n_nodes, 40, 0.3
    shards = [NodeShard.from_csr(Xi, yi) for Xi, yi in partition_rows(X, y, n, 1)]
    reg = L2Penalty(penalty[1]) if penalty[0] == "l2" else L1Penalty(penalty[1])
    program = NodeProgram(DIM, "hinge", reg, schedule, sampler.iota, sigma, T, inactive_x)
    plan = sampler.sample(T, random_state=2)
    keys = node_keys(np.random.SeedSequence(4), n)
    rec = VirtualSequence(keep="all")
    out = SimulatedEngine().run(program, shards, plan, keys, eval_rounds=[7, 20], diagnostics=rec)
    ys, cons, dev, dev_sq = _reference(shards, keys, plan, T, penalty, schedule, sampler.iota,
                                       sigma, inactive_x)
    v = out.virtual
    assert v is rec.record and np.array_equal(v.rounds, np.arange(1, T + 1))
    scale = np.abs(ys).max()
    assert np.allclose(v.y, ys, rtol=1e-10, atol=1e-12 * scale)
    assert np.allclose(v.z_consensus, cons, rtol=1e-9, atol=1e-12)
    assert np.allclose(v.x_deviation, dev, rtol=1e-9, atol=1e-12 * scale)
    assert np.allclose(v.x_deviation_sq, dev_sq, rtol=1e-9, atol=1e-12 * scale ** 2)
    a, A, _ = schedule.arrays(T)
    assert [t for t, _, _ in v.history] == [7, 20, T]
    for t, yt, ybar in v.history:
        assert np.array_equal(yt, v.y[t - 1])
        ref_bar = (a[1:t + 1, None] * ys[:t]).sum(axis=0) / A[t]
        assert np.allclose(ybar, ref_bar, rtol=1e-10, atol=1e-12 * scale)
    assert np.array_equal(v.y_final, v.y[-1]) and np.array_equal(v.y_average, v.history[-1][2])
    assert cons[1:].max() > 0 and dev[1:].max() > 0          # the reference is not trivial


def test_exact_averaging_has_no_consensus_error(data):
    """W = 11ᵀ/n with every agent active: z_i = zbar after each round, so x_i = y and x~_i = y~."""
    X, y = data
    r = private_dual_averaging(X, y, n_nodes=5, gossip="all_active", regularizer=L2Penalty(0.05),
                               schedule=strongly_convex_schedule(1.0), sigma=0.4, n_rounds=30,
                               random_state=0, virtual_sequence=True)
    v = r.virtual
    assert v.y is None and [t for t, _, _ in v.history] == [30]
    assert np.all(v.z_consensus <= 1e-24 * np.maximum(1.0, np.abs(r.z).max()) ** 2)
    assert np.all(v.x_deviation <= 1e-12 * np.abs(v.y_final).max())
    assert np.allclose(r.node_coefs, v.y_average, rtol=1e-12, atol=1e-15)


def test_diagnostic_is_post_processing_and_simulator_only(data):
    X, y = data
    kw = dict(n_nodes=4, regularizer=L2Penalty(0.05), sigma=0.5, n_rounds=25, random_state=1)
    plain = private_dual_averaging(X, y, **kw)
    diag = private_dual_averaging(X, y, virtual_sequence="all", **kw)
    assert plain.virtual is None
    assert np.array_equal(plain.node_coefs, diag.node_coefs)      # recording changes nothing
    assert np.array_equal(plain.privacy.epsilon, diag.privacy.epsilon)
    with pytest.raises(ValidationError, match="simulated"):
        RayEngine().run(None, [], None, [], diagnostics=VirtualSequence())
    with pytest.raises(ValidationError, match="virtual_sequence"):
        private_dual_averaging(X, y, virtual_sequence="sometimes", **kw)
    with pytest.raises(ValidationError, match="keep"):
        VirtualSequence(keep="some")
