"""Gossip samplers: W^(t) properties, activation, exact and Monte-Carlo β (spec 004 A3)."""
import math

import numpy as np
import pytest

from fastdp.distributed.gossip import (
    AllActive,
    EdgeMatching,
    GossipSchedule,
    InducedSubgraph,
    UniformEdges,
    get_gossip,
    monte_carlo_mixing_parameter,
    round_matrix,
)
from fastdp.distributed.graphs import Graph, complete_graph, grid_graph, ring_graph
from fastdp.exceptions import ValidationError

K20 = complete_graph(20)

SAMPLERS = [
    EdgeMatching(K20, 1), EdgeMatching(K20, 2), UniformEdges(K20, 2), InducedSubgraph(K20, 4),
    AllActive(K20), EdgeMatching(ring_graph(8), 1), EdgeMatching(grid_graph(3, 3), 2),
    InducedSubgraph(ring_graph(8), 3),
]


@pytest.mark.parametrize("sampler", SAMPLERS, ids=repr)
def test_round_matrices_are_valid(sampler):
    schedule = sampler.sample(300, random_state=0)
    n = sampler.n_nodes
    for t in range(1, 301):
        rnd = schedule.round(t)
        W = round_matrix(rnd, n)
        assert np.array_equal(W, W.T) and np.all(W >= 0)
        assert np.allclose(W.sum(axis=1), 1.0, rtol=0, atol=1e-15)
        inactive = np.setdiff1d(np.arange(n), rnd.active)
        assert np.array_equal(W[inactive], np.eye(n)[inactive])
        if isinstance(sampler, EdgeMatching):
            assert len(rnd.active) == sampler.n_active
            assert len(np.unique(rnd.edges)) == 2 * sampler.k    # disjoint edges
        if isinstance(sampler, InducedSubgraph):
            assert len(rnd.active) == sampler.n_active
        # every receiver's senders are sorted and include itself (canonical order)
        for receivers, senders, weights in rnd.groups:
            assert np.all(np.diff(senders) > 0)
            assert set(receivers) <= set(senders)
            assert math.isclose(math.fsum(weights), 1.0, abs_tol=1e-15)


def test_matching_pairs_average_and_uniform_edges_can_overlap():
    rnd = EdgeMatching(K20, 2).sample(1, random_state=1).round(1)
    for receivers, senders, weights in rnd.groups:
        assert np.array_equal(receivers, senders) and np.array_equal(weights, [0.5, 0.5])
    # path i-j-l: weights 1/3 and 2/3 (spec 004 §2.2)
    sched = GossipSchedule.from_rounds(4, [([0, 1, 2], [[0, 1], [1, 2]])])
    W = round_matrix(sched.round(1), 4)
    assert np.allclose(W[:3, :3], [[2 / 3, 1 / 3, 0], [1 / 3, 1 / 3, 1 / 3], [0, 1 / 3, 2 / 3]])


@pytest.mark.parametrize("sampler, expected", [
    (EdgeMatching(K20, 1), math.sqrt(18 / 19)),
    (EdgeMatching(K20, 2), math.sqrt(17 / 19)),
    (UniformEdges(K20, 2), 0.948258),
    (InducedSubgraph(K20, 4), 0.917663),
    (AllActive(K20), 0.0),
], ids=["1-edge", "2-matching", "2-edges-overlap", "induced-K4", "all-active"])
def test_exact_mixing_parameter(sampler, expected):
    tol = 1e-9 if expected in (0.0, math.sqrt(18 / 19), math.sqrt(17 / 19)) else 5e-7
    assert sampler.exact_mixing_parameter() == pytest.approx(expected, abs=tol)


def test_monte_carlo_mixing_parameter_and_activation_frequency():
    sampler = EdgeMatching(K20, 1)
    n_samples = 20000
    beta, freq = monte_carlo_mixing_parameter(sampler, n_samples, random_state=7)
    # the spectral radius of a noisy mean is biased upwards (about +1.4e-3 at 20000 rounds,
    # spread 3e-4 over seeds): tolerance 3e-3
    assert beta == pytest.approx(math.sqrt(18 / 19), abs=3e-3)
    # per-node activation frequency: iota +- 4.5 standard errors (false alarm < 1.4e-4 over 20 nodes)
    se = math.sqrt(0.1 * 0.9 / n_samples)
    assert np.all(np.abs(freq - 0.1) < 4.5 * se)
    assert np.allclose(sampler.activation_probabilities(), 0.1, atol=1e-15)


def test_ring_and_general_graph_mixing_below_one():
    assert 0 < EdgeMatching(ring_graph(8), 1).exact_mixing_parameter() < 1
    disconnected = Graph(4, [[0, 1], [2, 3]])
    assert EdgeMatching(disconnected, 1).exact_mixing_parameter() == pytest.approx(1.0, abs=1e-12)
    # agents on a ring are active with unequal... equal probability by symmetry
    assert np.allclose(EdgeMatching(ring_graph(8), 1).activation_probabilities(), 0.25)


def test_schedule_is_reproducible_and_counts():
    s1 = EdgeMatching(K20, 2).sample(500, random_state=3)
    s2 = EdgeMatching(K20, 2).sample(500, random_state=3)
    assert all(np.array_equal(s1.round(t).edges, s2.round(t).edges) for t in (1, 250, 500))
    assert s1.activation_counts.sum() == 500 * 4
    assert s1.n_messages() == 500 * 4
    node = 5
    rounds = s1.active_rounds(node)
    assert len(rounds) == s1.activation_counts[node]
    assert all(node in s1.active(t) for t in rounds)
    fixed = AllActive(K20).sample(10)
    assert fixed.fixed and np.all(fixed.activation_counts == 10)
    assert np.array_equal(fixed.active_rounds(0), np.arange(1, 11))


def test_validation():
    with pytest.raises(ValidationError):
        EdgeMatching(complete_graph(3), 2)
    with pytest.raises(ValidationError):
        get_gossip("nope", K20)
    with pytest.raises(ValidationError, match="n_active"):
        get_gossip("node_induced", K20)
    with pytest.raises(ValidationError):
        EdgeMatching(K20, 1).sample(10).round(11)
