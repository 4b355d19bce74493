"""Communication graphs (supergraphs) of the distributed solvers.

A :class:`Graph` is an undirected simple graph on ``n_nodes`` agents: the
pairs of agents that *may* talk. A gossip sampler
(:mod:`fastdp.distributed.gossip`) picks, in every round, which of these edges
are used. Constructors: :func:`complete_graph`, :func:`ring_graph`,
:func:`grid_graph`, :func:`erdos_renyi_graph` and :func:`graph_from_adjacency`
(user-given adjacency matrix or edge list).

Privacy: the graph is public, chosen independently of the data; nothing here
reads private data or spends privacy.
"""

import numbers

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from fastdp._validation import check_random_state
from fastdp.exceptions import ValidationError

__all__ = [
    "Graph",
    "complete_graph",
    "ring_graph",
    "grid_graph",
    "erdos_renyi_graph",
    "graph_from_adjacency",
    "metropolis_weights",
]


def _n_nodes(n_nodes, minimum=1):
    if isinstance(n_nodes, (bool, np.bool_)) or not isinstance(n_nodes, numbers.Integral):
        raise ValidationError(f"n_nodes must be an int; got {n_nodes!r}.")
    if n_nodes < minimum:
        raise ValidationError(f"n_nodes must be >= {minimum}; got {n_nodes}.")
    return int(n_nodes)


class Graph:
    """Undirected simple graph on nodes ``0 .. n_nodes - 1``.

    Parameters
    ----------
    n_nodes : int
    edges : array-like of shape (n_edges, 2)
        Node pairs; stored canonically as ``i < j``, sorted, without
        duplicates. Self-loops are rejected.
    name : str, default="graph"

    Attributes
    ----------
    n_nodes : int
    edges : ndarray of shape (n_edges, 2), int64
    degrees : ndarray of shape (n_nodes,)
    name : str
    """

    def __init__(self, n_nodes, edges, name="graph"):
        self.n_nodes = _n_nodes(n_nodes)
        edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2) if len(edges) else np.zeros(
            (0, 2), dtype=np.int64)
        if edges.size and (edges.min() < 0 or edges.max() >= self.n_nodes):
            raise ValidationError(f"edge endpoints must lie in [0, {self.n_nodes}).")
        if np.any(edges[:, 0] == edges[:, 1]):
            raise ValidationError("self-loops are not edges of a communication graph; remove them.")
        edges = np.sort(edges, axis=1)
        edges = np.unique(edges, axis=0) if len(edges) else edges
        self.edges = edges
        self.name = str(name)
        self.degrees = np.bincount(edges.ravel(), minlength=self.n_nodes).astype(np.int64)
        self._is_complete = len(edges) == self.n_nodes * (self.n_nodes - 1) // 2

    def __repr__(self):
        return f"Graph(name={self.name!r}, n_nodes={self.n_nodes}, n_edges={self.n_edges})"

    @property
    def n_edges(self):
        return int(len(self.edges))

    @property
    def is_complete(self):
        """True when every pair of nodes is an edge."""
        return self._is_complete

    def adjacency(self):
        """Symmetric 0/1 adjacency matrix as a CSR matrix."""
        i, j = self.edges[:, 0], self.edges[:, 1]
        data = np.ones(2 * len(i))
        return sp.csr_matrix((data, (np.r_[i, j], np.r_[j, i])), shape=(self.n_nodes,) * 2)

    def neighbours(self, node):
        """Sorted neighbours of ``node``."""
        e = self.edges
        return np.sort(np.r_[e[e[:, 0] == node, 1], e[e[:, 1] == node, 0]])

    def is_connected(self):
        """True when the graph has one connected component."""
        if self.n_nodes == 1:
            return True
        return connected_components(self.adjacency(), directed=False)[0] == 1


def complete_graph(n_nodes):
    """Complete graph K_n (every pair of agents may communicate)."""
    n = _n_nodes(n_nodes)
    i, j = np.triu_indices(n, k=1)
    return Graph(n, np.c_[i, j], name=f"complete({n})")


def ring_graph(n_nodes):
    """Cycle 0 - 1 - ... - (n-1) - 0 (a path for n = 2)."""
    n = _n_nodes(n_nodes, minimum=2)
    i = np.arange(n)
    edges = np.c_[i, (i + 1) % n] if n > 2 else np.array([[0, 1]])
    return Graph(n, edges, name=f"ring({n})")


def grid_graph(n_rows, n_cols):
    """2-D grid (4-neighbourhood) with node ``r * n_cols + c`` at row r, column c."""
    r, c = _n_nodes(n_rows), _n_nodes(n_cols)
    ids = np.arange(r * c).reshape(r, c)
    edges = np.r_[np.c_[ids[:, :-1].ravel(), ids[:, 1:].ravel()],
                  np.c_[ids[:-1, :].ravel(), ids[1:, :].ravel()]]
    return Graph(r * c, edges, name=f"grid({r}x{c})")


def erdos_renyi_graph(n_nodes, p, random_state=None, max_tries=1000):
    """Connected Erdős-Rényi graph G(n, p): each pair is an edge with probability p.

    Draws are repeated (at most ``max_tries`` times) until the graph is
    connected, so the result is G(n, p) conditioned on connectivity.

    Raises
    ------
    ValidationError
        If ``p`` is outside (0, 1] or no connected draw was found.
    """
    n = _n_nodes(n_nodes)
    p = float(p)
    if not 0.0 < p <= 1.0:
        raise ValidationError(f"p must lie in (0, 1]; got {p}.")
    rng = check_random_state(random_state)
    i, j = np.triu_indices(n, k=1)
    for _ in range(int(max_tries)):
        keep = rng.random(len(i)) < p
        g = Graph(n, np.c_[i[keep], j[keep]], name=f"erdos_renyi({n}, {p:g})")
        if g.is_connected():
            return g
    raise ValidationError(
        f"no connected G({n}, {p}) graph in {max_tries} draws; increase p "
        f"(connectivity needs p above about log(n)/n = {np.log(max(n, 2)) / n:.3g}).")


def graph_from_adjacency(adjacency, name="user"):
    """Graph from a user-given symmetric adjacency matrix (dense or sparse).

    Nonzero off-diagonal entries are edges; the diagonal is ignored.

    Raises
    ------
    ValidationError
        If the matrix is not square or not symmetric.
    """
    A = sp.csr_matrix(adjacency) if not sp.issparse(adjacency) else adjacency.tocsr()
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValidationError(f"adjacency must be a square matrix; got shape {A.shape}.")
    A = (A != 0).astype(np.int8)
    A.setdiag(0)
    A.eliminate_zeros()
    if (A != A.T).nnz:
        raise ValidationError("adjacency must be symmetric: communication is two-way.")
    coo = sp.triu(A, k=1).tocoo()
    return Graph(A.shape[0], np.c_[coo.row, coo.col], name=name)


def metropolis_weights(graph):
    """Metropolis(-Hastings) mixing matrix of a graph (Xiao, Boyd, Kim 2007).

    ``w_ij = 1 / (1 + max(deg_i, deg_j))`` on edges, ``w_ii = 1 - sum_j w_ij``:
    symmetric, doubly stochastic and nonnegative.

    Returns
    -------
    W : ndarray of shape (n_nodes, n_nodes)
    """
    n = graph.n_nodes
    W = np.zeros((n, n))
    d = graph.degrees
    i, j = graph.edges[:, 0], graph.edges[:, 1]
    w = 1.0 / (1.0 + np.maximum(d[i], d[j]))
    W[i, j] = w
    W[j, i] = w
    W[np.arange(n), np.arange(n)] = 1.0 - W.sum(axis=1)
    return W
