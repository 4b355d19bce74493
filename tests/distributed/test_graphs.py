"""Graphs: constructors, Metropolis weights, validation."""
import numpy as np
import pytest
import scipy.sparse as sp

from fastdp.distributed.graphs import (
    Graph,
    complete_graph,
    erdos_renyi_graph,
    graph_from_adjacency,
    grid_graph,
    metropolis_weights,
    ring_graph,
)
from fastdp.exceptions import ValidationError


def test_sizes_and_degrees():
    assert complete_graph(20).n_edges == 190
    assert complete_graph(20).is_complete
    r = ring_graph(8)
    assert r.n_edges == 8 and np.all(r.degrees == 2) and not r.is_complete
    g = grid_graph(3, 4)
    assert g.n_nodes == 12 and g.n_edges == 3 * 3 + 2 * 4
    assert sorted(g.degrees) == sorted([2] * 4 + [3] * 6 + [4] * 2)
    assert list(r.neighbours(0)) == [1, 7]


@pytest.mark.parametrize("graph", [complete_graph(7), ring_graph(8), grid_graph(3, 3),
                                   erdos_renyi_graph(12, 0.3, random_state=1)])
def test_metropolis_is_symmetric_doubly_stochastic(graph):
    W = metropolis_weights(graph)
    assert np.allclose(W, W.T, atol=0) and np.all(W >= 0)
    assert np.allclose(W.sum(axis=0), 1, atol=1e-15) and np.allclose(W.sum(axis=1), 1, atol=1e-15)
    A = graph.adjacency().toarray()
    off = ~np.eye(graph.n_nodes, dtype=bool)
    assert np.array_equal(W[off] > 0, A[off] > 0)


def test_metropolis_complete_is_exact_average():
    assert np.allclose(metropolis_weights(complete_graph(5)), np.full((5, 5), 0.2), atol=1e-16)


def test_erdos_renyi_connected_and_reproducible():
    g1 = erdos_renyi_graph(15, 0.25, random_state=3)
    g2 = erdos_renyi_graph(15, 0.25, random_state=3)
    assert g1.is_connected() and np.array_equal(g1.edges, g2.edges)


def test_from_adjacency_round_trip_and_errors():
    r = ring_graph(6)
    g = graph_from_adjacency(r.adjacency())
    assert np.array_equal(g.edges, r.edges)
    assert np.array_equal(graph_from_adjacency(r.adjacency().toarray()).edges, r.edges)
    bad = np.zeros((3, 3))
    bad[0, 1] = 1
    with pytest.raises(ValidationError, match="symmetric"):
        graph_from_adjacency(bad)
    with pytest.raises(ValidationError, match="square"):
        graph_from_adjacency(sp.csr_matrix(np.ones((2, 3))))
    with pytest.raises(ValidationError, match="self-loops"):
        Graph(3, [[1, 1]])
    with pytest.raises(ValidationError):
        Graph(3, [[0, 3]])
    with pytest.raises(ValidationError, match="p must"):
        erdos_renyi_graph(5, 0.0)


def test_disconnected_detected():
    assert not Graph(4, [[0, 1], [2, 3]]).is_connected()
