"""Random gossip: which agents are active in a round and how they mix (spec 004, Alg. G).

A gossip *sampler* draws, independently in every round, a set of active agents
and a set of edges of the supergraph among them; the round's mixing matrix
``W^(t)`` is the Metropolis matrix of that sampled subgraph (degrees taken in
the sampled subgraph, spec 004 §8.2), with identity rows and columns for the
inactive agents (§8.3). Every ``W^(t)`` is symmetric, doubly stochastic and
nonnegative.

Samplers
--------
:class:`EdgeMatching` (default; the paper's experiments as spec 004 decides)
    ``k`` pairwise disjoint edges, uniform among k-matchings on the complete
    graph (sequential uniform draws on other graphs); ``n_active = 2k``;
    every sampled pair averages (weights 1/2).
:class:`UniformEdges`
    ``k`` distinct edges uniformly, possibly sharing nodes (the literal
    reading of "k edges sampled uniformly"; ``n_active`` varies).
:class:`InducedSubgraph`
    ``n_active`` agents uniformly; Metropolis weights on the subgraph they
    induce (isolated active agents keep ``w_ii = 1``).
:class:`AllActive`
    every agent active, the fixed Metropolis matrix of the supergraph (the
    baseline [19] of the paper; ``W = 11ᵀ/n`` on the complete graph).

The mixing parameter β of Assumption 2(iii), ``β² = ρ(E[WᵀW] − 11ᵀ/n)``, is
available exactly by enumeration (:meth:`GossipSampler.exact_mixing_parameter`)
and by Monte Carlo (:func:`monte_carlo_mixing_parameter`).

Canonical order
---------------
A round is a list of *groups*: receivers that apply the same weights to the
same senders. Agent ``i`` sets ``z_i = sum_j w_ij m_j`` over its senders
(itself included) in increasing ``j``; both engines use this order, which is
what makes their results bit-identical.

Privacy: the schedule is drawn from its own random stream, independently of
the data and of the noise, and is public (the messages reveal it anyway).
It decides how often each agent is active, which the accountant uses.
"""

import dataclasses
import fractions
import functools
import itertools
import math

import numpy as np

from fastdp._validation import check_integer, check_random_state
from fastdp.distributed.graphs import Graph
from fastdp.exceptions import ValidationError

__all__ = [
    "GossipRound",
    "GossipSchedule",
    "GossipSampler",
    "EdgeMatching",
    "UniformEdges",
    "InducedSubgraph",
    "AllActive",
    "get_gossip",
    "round_matrix",
    "mixing_parameter",
    "monte_carlo_mixing_parameter",
]

_CHUNK = 1 << 15
_BETA_CACHE = {}


@dataclasses.dataclass(frozen=True)
class GossipRound:
    """One round of gossip.

    Attributes
    ----------
    active : ndarray of int64
        Sorted active agents.
    edges : ndarray of shape (n_edges, 2)
        Sampled edges (``i < j``) among the active agents.
    groups : tuple of (receivers, senders, weights)
        Receivers (sorted int64 array) that all compute ``sum_j w_j m_j``
        over ``senders`` (sorted, receivers included) with ``weights``.
    """

    active: np.ndarray
    edges: np.ndarray
    groups: tuple

    @property
    def n_messages(self):
        """Number of point-to-point messages: ``sum_i |N_i|`` = 2 x edges."""
        return 2 * len(self.edges)


def _groups(active, edges):
    """Metropolis weights of the sampled subgraph, grouped by identical rows."""
    if len(edges) and len(np.unique(edges)) == 2 * len(edges):
        half = np.array([0.5, 0.5])
        groups = [(e, e, half) for e in edges]               # a matching: pairs average
        if len(active) != 2 * len(edges):
            for i in np.setdiff1d(active, edges.ravel(), assume_unique=True):
                groups.append((np.array([i]), np.array([i]), np.ones(1)))
        groups.sort(key=lambda g: g[0][0])
        return tuple(groups)
    nbrs = {int(i): [] for i in active}
    for i, j in edges:
        nbrs[int(i)].append(int(j))
        nbrs[int(j)].append(int(i))
    deg = {i: len(v) for i, v in nbrs.items()}
    rows = {}
    for i in sorted(nbrs):
        senders = sorted(nbrs[i] + [i])
        exact = [fractions.Fraction(0) if j == i else fractions.Fraction(1, 1 + max(deg[i], deg[j]))
                 for j in senders]
        exact[senders.index(i)] = 1 - sum(exact)   # exact rational self-weight
        w = np.array([float(v) for v in exact])
        key = (tuple(senders), w.tobytes())
        rows.setdefault(key, []).append(i)
    return tuple((np.array(r, dtype=np.int64), np.array(k[0], dtype=np.int64),
                  np.frombuffer(k[1], dtype=np.float64).copy())
                 for k, r in sorted(rows.items(), key=lambda kv: kv[1][0]))


def round_matrix(gossip_round, n_nodes):
    """Dense ``W^(t)`` of a round (identity rows for inactive agents)."""
    W = np.eye(n_nodes)
    for receivers, senders, weights in gossip_round.groups:
        for i in receivers:
            W[i, :] = 0.0
            W[i, senders] = weights
    return W


class GossipSchedule:
    """Pre-sampled gossip rounds ``t = 1 .. n_rounds`` (data-independent, public).

    Attributes
    ----------
    n_nodes, n_rounds : int
    activation_counts : ndarray of shape (n_nodes,)
        Number of rounds in which each agent is active.
    """

    def __init__(self, n_nodes, n_rounds, active_ptr, active, edge_ptr, edges, fixed=False):
        self.n_nodes = int(n_nodes)
        self.n_rounds = int(n_rounds)
        self._active_ptr = active_ptr
        self._active = active
        self._edge_ptr = edge_ptr
        self._edges = edges
        self.fixed = bool(fixed)
        self._fixed_round = None
        if self.fixed:
            self.activation_counts = np.full(self.n_nodes, self.n_rounds, dtype=np.int64)
        else:
            self.activation_counts = np.bincount(active, minlength=self.n_nodes).astype(np.int64)

    def __len__(self):
        return self.n_rounds

    def __repr__(self):
        return f"GossipSchedule(n_nodes={self.n_nodes}, n_rounds={self.n_rounds}, fixed={self.fixed})"

    def _slot(self, t):
        if not 1 <= t <= self.n_rounds:
            raise ValidationError(f"round must lie in [1, {self.n_rounds}]; got {t}.")
        return 0 if self.fixed else t - 1

    def active(self, t):
        """Sorted active agents of round ``t``."""
        s = self._slot(t)
        return self._active[self._active_ptr[s]:self._active_ptr[s + 1]]

    def edges(self, t):
        s = self._slot(t)
        return self._edges[self._edge_ptr[s]:self._edge_ptr[s + 1]]

    def round(self, t):
        """The :class:`GossipRound` of round ``t`` (1-based)."""
        if self.fixed and self._fixed_round is not None:
            return self._fixed_round
        active, edges = self.active(t), self.edges(t)
        r = GossipRound(active, edges, _groups(active, edges))
        if self.fixed:
            self._fixed_round = r
        return r

    def active_rounds(self, node):
        """Sorted rounds (1-based) in which ``node`` is active."""
        if self.fixed:
            return np.arange(1, self.n_rounds + 1)
        counts = np.diff(self._active_ptr)
        rounds = np.repeat(np.arange(1, self.n_rounds + 1), counts)
        return rounds[self._active == node]

    def n_messages(self):
        """Total number of point-to-point messages over all rounds."""
        per = 2 * np.diff(self._edge_ptr)
        return int(per[0] * self.n_rounds if self.fixed else per.sum())

    @classmethod
    def from_rounds(cls, n_nodes, rounds):
        """Build from a list of ``(active, edges)`` pairs."""
        actives = [np.sort(np.asarray(a, dtype=np.int64)) for a, _ in rounds]
        edge_list = [np.sort(np.asarray(e, dtype=np.int64).reshape(-1, 2), axis=1) for _, e in rounds]
        return cls(n_nodes, len(rounds), _ptr(actives), _cat(actives, (0,)),
                   _ptr(edge_list), _cat(edge_list, (0, 2)))


def _ptr(parts):
    return np.r_[0, np.cumsum([len(p) for p in parts])].astype(np.int64)


def _cat(parts, empty_shape):
    return np.concatenate(parts) if parts else np.zeros(empty_shape, dtype=np.int64)


#: A count of rounds, edges or agents: an int >= 1.
_positive_int = functools.partial(check_integer, low=1)


class GossipSampler:
    """Base class of the round samplers (see the module docstring).

    Subclasses implement :meth:`_sample_round`, :meth:`_outcomes` and the
    nominal number of active agents ``n_active``.
    """

    name = "gossip"
    max_outcomes = 2_000_000

    def __init__(self, graph):
        if not isinstance(graph, Graph):
            raise ValidationError(f"graph must be a fastdp.distributed.Graph; got {graph!r}.")
        self.graph = graph
        self.n_nodes = graph.n_nodes

    @property
    def iota(self):
        """Nominal fraction of active agents per round (ι = n_active / n)."""
        return self.n_active / self.n_nodes

    def __repr__(self):
        return f"{type(self).__name__}({self.graph!r}, n_active={self.n_active})"

    # -- sampling --------------------------------------------------------------
    def sample(self, n_rounds, random_state=None):
        """Draw ``n_rounds`` rounds; returns a :class:`GossipSchedule`."""
        n_rounds = _positive_int("n_rounds", n_rounds)
        rng = check_random_state(random_state)
        rounds = [self._sample_round(rng) for _ in range(n_rounds)]
        return GossipSchedule.from_rounds(self.n_nodes, rounds)

    def _sample_round(self, rng):
        raise NotImplementedError

    # -- exact analysis -----------------------------------------------------------
    def outcomes(self):
        """Every possible round as ``(probability, active, edges)`` (exact enumeration).

        Raises
        ------
        ValidationError
            When there are more than ``max_outcomes`` outcomes.
        """
        out = list(self._outcomes())
        total = math.fsum(p for p, _, _ in out)
        if abs(total - 1.0) > 1e-9:  # pragma: no cover - internal consistency
            raise RuntimeError(f"outcome probabilities sum to {total}")
        return out

    def _outcomes(self):
        raise NotImplementedError

    def _check_count(self, count):
        if count > self.max_outcomes:
            raise ValidationError(
                f"{count} possible rounds is too many to enumerate exactly; use "
                "monte_carlo_mixing_parameter instead.")

    def expected_gram(self):
        """Exact ``E[W^(t)ᵀ W^(t)]`` as an (n, n) array."""
        n = self.n_nodes
        acc = np.zeros((n, n))
        for p, active, edges in self.outcomes():
            W = round_matrix(GossipRound(active, edges, _groups(active, edges)), n)
            acc += p * (W.T @ W)
        return acc

    def exact_mixing_parameter(self):
        """Exact β = sqrt(ρ(E[WᵀW] − 11ᵀ/n)) by enumeration of all rounds (cached)."""
        key = (type(self).__name__, self.n_active, getattr(self, "k", None), self.n_nodes,
               self.graph.edges.tobytes())
        if key not in _BETA_CACHE:
            _BETA_CACHE[key] = mixing_parameter(self.expected_gram())
        return _BETA_CACHE[key]

    def activation_probabilities(self):
        """Exact probability that each agent is active in a round."""
        p = np.zeros(self.n_nodes)
        for prob, active, _ in self.outcomes():
            p[active] += prob
        return p


def mixing_parameter(expected_gram):
    """β = sqrt(ρ(G − 11ᵀ/n)) of an expected Gram matrix ``G = E[WᵀW]``."""
    G = np.asarray(expected_gram, dtype=np.float64)
    n = G.shape[0]
    M = G - np.full((n, n), 1.0 / n)
    rho = float(np.max(np.abs(np.linalg.eigvalsh(0.5 * (M + M.T)))))
    if rho < 64 * np.finfo(float).eps * n:   # rounding noise of an exact 0 (e.g. W = 11ᵀ/n)
        rho = 0.0
    return math.sqrt(rho)


def monte_carlo_mixing_parameter(sampler, n_samples=20000, random_state=None):
    """Monte-Carlo estimate of β from ``n_samples`` sampled rounds.

    Also returns the empirical activation frequency of every agent.

    Returns
    -------
    beta : float
    activation_frequency : ndarray of shape (n_nodes,)
    """
    schedule = sampler.sample(n_samples, random_state)
    n = sampler.n_nodes
    acc = np.zeros((n, n))
    if schedule.fixed:
        W = round_matrix(schedule.round(1), n)
        return mixing_parameter(W.T @ W), np.ones(n)
    for t in range(1, n_samples + 1):
        W = round_matrix(schedule.round(t), n)
        acc += W.T @ W
    return mixing_parameter(acc / n_samples), schedule.activation_counts / n_samples


class EdgeMatching(GossipSampler):
    """``edges_per_round`` disjoint edges per round; their endpoints are active.

    On the complete graph the matching is uniform (2k distinct agents drawn
    without replacement, paired consecutively); on other graphs the edges are
    drawn one after another, each uniform among the edges not touching the
    ones already drawn. ``n_active = 2 * edges_per_round``; each pair
    averages its messages (Metropolis weights 1/2).
    """

    name = "edge_matching"

    def __init__(self, graph, edges_per_round=1):
        super().__init__(graph)
        self.k = _positive_int("edges_per_round", edges_per_round)
        if 2 * self.k > self.n_nodes:
            raise ValidationError(
                f"{self.k} disjoint edges need {2 * self.k} agents; the graph has {self.n_nodes}.")
        if graph.n_edges == 0:
            raise ValidationError("the graph has no edges: no gossip is possible.")
        self.n_active = 2 * self.k

    def sample(self, n_rounds, random_state=None):
        if not self.graph.is_complete:
            return super().sample(n_rounds, random_state)
        n_rounds = _positive_int("n_rounds", n_rounds)
        rng = check_random_state(random_state)
        k2 = 2 * self.k
        picks = []
        for start in range(0, n_rounds, _CHUNK):
            size = min(_CHUNK, n_rounds - start)
            picks.append(np.argsort(rng.random((size, self.n_nodes)), axis=1)[:, :k2])
        picks = np.concatenate(picks).astype(np.int64)
        edges = np.sort(picks.reshape(n_rounds, self.k, 2), axis=2)
        edges = edges[np.arange(n_rounds)[:, None], np.argsort(edges[:, :, 0], axis=1)]
        active = np.sort(picks, axis=1)
        return GossipSchedule(self.n_nodes, n_rounds,
                              np.arange(0, n_rounds * k2 + 1, k2, dtype=np.int64), active.ravel(),
                              np.arange(0, n_rounds * self.k + 1, self.k, dtype=np.int64),
                              edges.reshape(-1, 2))

    def _sample_round(self, rng):
        edges = self.graph.edges
        chosen = []
        used = np.zeros(self.n_nodes, dtype=bool)
        for _ in range(self.k):
            free = np.flatnonzero(~(used[edges[:, 0]] | used[edges[:, 1]]))
            if len(free) == 0:
                raise ValidationError(
                    f"the graph has no matching of {self.k} edges; lower edges_per_round.")
            e = edges[free[rng.integers(len(free))]]
            used[e] = True
            chosen.append(e)
        chosen = np.array(sorted(map(tuple, chosen)), dtype=np.int64)
        return np.sort(chosen.ravel()), chosen

    def _outcomes(self):
        edges = [tuple(e) for e in self.graph.edges]
        agg = {}

        def walk(prefix, used, prob):
            if len(prefix) == self.k:
                key = tuple(sorted(prefix))
                agg[key] = agg.get(key, 0.0) + prob
                self._check_count(len(agg))
                return
            free = [e for e in edges if e[0] not in used and e[1] not in used]
            if not free:
                raise ValidationError(f"the graph has no matching of {self.k} edges.")
            for e in free:
                walk(prefix + [e], used | {e[0], e[1]}, prob / len(free))

        walk([], frozenset(), 1.0)
        for key, prob in agg.items():
            e = np.array(key, dtype=np.int64)
            yield prob, np.sort(e.ravel()), e


class UniformEdges(GossipSampler):
    """``edges_per_round`` distinct edges drawn uniformly; they may share agents.

    The literal reading of the paper; the number of active agents varies
    (``n_active`` is the nominal ``2k``), so Definition 2 does not hold.
    """

    name = "edge_uniform"

    def __init__(self, graph, edges_per_round=1):
        super().__init__(graph)
        self.k = _positive_int("edges_per_round", edges_per_round)
        if self.k > graph.n_edges:
            raise ValidationError(f"the graph has only {graph.n_edges} edges; got k = {self.k}.")
        self.n_active = min(2 * self.k, self.n_nodes)

    def _sample_round(self, rng):
        e = self.graph.edges[np.sort(rng.choice(self.graph.n_edges, self.k, replace=False))]
        return np.unique(e.ravel()), e

    def _outcomes(self):
        E = self.graph.n_edges
        self._check_count(math.comb(E, self.k))
        p = 1.0 / math.comb(E, self.k)
        for combo in itertools.combinations(range(E), self.k):
            e = self.graph.edges[list(combo)]
            yield p, np.unique(e.ravel()), e


class InducedSubgraph(GossipSampler):
    """``n_active`` agents uniformly without replacement; Metropolis weights on
    the subgraph they induce."""

    name = "node_induced"

    def __init__(self, graph, n_active):
        super().__init__(graph)
        self.n_active = _positive_int("n_active", n_active)
        if self.n_active > self.n_nodes:
            raise ValidationError(f"n_active ({self.n_active}) exceeds n_nodes ({self.n_nodes}).")
        self._adj = graph.adjacency().toarray().astype(bool)

    def _induced(self, active):
        sub = self._adj[np.ix_(active, active)]
        i, j = np.nonzero(np.triu(sub, k=1))
        return np.c_[active[i], active[j]].astype(np.int64)

    def _sample_round(self, rng):
        active = np.sort(rng.choice(self.n_nodes, self.n_active, replace=False)).astype(np.int64)
        return active, self._induced(active)

    def _outcomes(self):
        self._check_count(math.comb(self.n_nodes, self.n_active))
        p = 1.0 / math.comb(self.n_nodes, self.n_active)
        for combo in itertools.combinations(range(self.n_nodes), self.n_active):
            active = np.array(combo, dtype=np.int64)
            yield p, active, self._induced(active)


class AllActive(GossipSampler):
    """Every agent active in every round; fixed Metropolis matrix of the graph.

    The baseline [19] of the paper (ι = 1); on the complete graph
    ``W = 11ᵀ/n`` (exact averaging, β = 0).
    """

    name = "all_active"

    def __init__(self, graph):
        super().__init__(graph)
        self.n_active = self.n_nodes

    def sample(self, n_rounds, random_state=None):
        n_rounds = _positive_int("n_rounds", n_rounds)
        n = self.n_nodes
        edges = self.graph.edges
        return GossipSchedule(n, n_rounds, np.array([0, n], dtype=np.int64),
                              np.arange(n, dtype=np.int64),
                              np.array([0, len(edges)], dtype=np.int64), edges, fixed=True)

    def _outcomes(self):
        yield 1.0, np.arange(self.n_nodes, dtype=np.int64), self.graph.edges


_SAMPLERS = {
    "edge_matching": EdgeMatching,
    "edge_uniform": UniformEdges,
    "node_induced": InducedSubgraph,
    "all_active": AllActive,
}


def get_gossip(gossip, graph, *, edges_per_round=1, n_active=None):
    """Return a sampler from a name or pass a :class:`GossipSampler` through.

    Parameters
    ----------
    gossip : {"edge_matching", "edge_uniform", "node_induced", "all_active"} or GossipSampler
    graph : Graph
    edges_per_round : int, default=1
        For the edge samplers.
    n_active : int, optional
        For ``"node_induced"``.
    """
    if isinstance(gossip, GossipSampler):
        return gossip
    if gossip not in _SAMPLERS:
        raise ValidationError(f"unknown gossip {gossip!r}; choose one of {sorted(_SAMPLERS)}.")
    if gossip in ("edge_matching", "edge_uniform"):
        return _SAMPLERS[gossip](graph, edges_per_round)
    if gossip == "node_induced":
        if n_active is None:
            raise ValidationError("gossip='node_induced' needs n_active.")
        return InducedSubgraph(graph, n_active)
    return AllActive(graph)
