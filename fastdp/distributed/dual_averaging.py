"""Private distributed dual averaging with agent subsampling (spec 004, Algorithm 1).

:func:`private_dual_averaging` splits a dataset among ``n_nodes`` agents,
samples the public gossip schedule, calibrates the noise, runs the rounds on
an engine (single-process simulator by default, Ray actors on request) and
returns the weighted output average with an honest privacy report.

Privacy
-------
What is private: every record of the training set (each agent's shard).
Adjacency: replace-one (one record replaced; the shard size q is public).
Sensitivity: one per-sample subgradient of an L-Lipschitz loss, ``2L`` in L2
(rows of norm at most L, ``|loss'| <= 1``). Released: every message
``z_i + a_t (g_i + nu_i)`` of every active agent in every round and, by
post-processing, the output. The report gives three numbers side by side
(:mod:`fastdp.distributed.privacy`): fastdp's accountant on the event the run
produced (the default calibration target), the paper's argument evaluated
correctly, and the ε the paper's Theorem 1 claims (not a guarantee).
``activation="public"`` (default) treats the gossip schedule as visible, as
the messages reveal it; ``"hidden"`` is the paper's model.

The shuffling that assigns records to agents and the schedule are
data-independent. The objective values in ``history`` are not computed here;
evaluate them with :func:`objective`, a non-private diagnostic.
"""

import dataclasses
import math
import numbers

import numpy as np
import scipy.sparse as sp

from fastdp._validation import check_random_state, check_sparse_structure, check_X_y
from fastdp.distributed import privacy as dp
from fastdp.distributed.diagnostics import VirtualSequence
from fastdp.distributed.engines.base import get_engine
from fastdp.distributed.gossip import GossipSampler, get_gossip, monte_carlo_mixing_parameter
from fastdp.distributed.graphs import Graph, complete_graph, graph_from_adjacency, ring_graph
from fastdp.distributed.node import NodeProgram, NodeShard, node_keys
from fastdp.distributed.regularizers import L2Penalty, Regularizer
from fastdp.distributed.schedules import DualAveragingSchedule, strongly_convex_schedule
from fastdp.exceptions import ValidationError
from fastdp.losses import get_loss

__all__ = [
    "DistributedResult",
    "partition_rows",
    "rounds_for_epochs",
    "objective",
    "private_dual_averaging",
]

_CALIBRATIONS = ("accountant", "paper", "kov")


@dataclasses.dataclass
class DistributedResult:
    """Outcome of :func:`private_dual_averaging`.

    Attributes
    ----------
    coef : ndarray of shape (dim,)
        Network average ``(1/n) sum_i x~_i^(T)`` (released).
    node_coefs : ndarray of shape (n_nodes, dim)
        Each agent's output ``x~_i^(T)`` (released).
    z : ndarray of shape (n_nodes, dim)
        Final dual variables.
    history : list of (int, ndarray)
        ``(t, network average at round t)`` at the evaluation rounds.
    n_rounds : int
    sigma : float
        Per-coordinate noise standard deviation used.
    privacy : PrivacyReport
        The three ε side by side.
    event : DpEvent
        fastdp's event of the run.
    iota : float
        Fraction of active agents per round.
    beta : float
        Mixing parameter of the gossip (exact or Monte Carlo, see ``beta_method``).
    beta_method : str
    activation_counts : ndarray of shape (n_nodes,)
    q : int
        Records per agent.
    n_messages, message_bytes : int
    seconds : float
        Wall time of the rounds on the engine.
    engine : str
    calibration : str
    restarts : int
    message_dtype : str
        Precision of the messages on the wire.
    virtual : VirtualSequenceRecord or None
        The y^(t) diagnostic (``virtual_sequence=True``).
    """

    coef: np.ndarray
    node_coefs: np.ndarray
    z: np.ndarray
    history: list
    n_rounds: int
    sigma: float
    privacy: object
    event: object
    iota: float
    beta: float
    beta_method: str
    activation_counts: np.ndarray
    q: int
    n_messages: int
    message_bytes: int
    seconds: float
    engine: str
    calibration: str
    restarts: int = 0
    message_dtype: str = "float64"
    virtual: object = None

    @property
    def seconds_per_round(self):
        return self.seconds / max(self.n_rounds, 1)


def partition_rows(X, y, n_nodes, random_state=None):
    """Shuffle rows and deal them to ``n_nodes`` agents, ``q = floor(N / n)`` each.

    The ``N - n q`` leftover rows are dropped (spec 004 §8.8), so every agent
    has the same public q. Privacy: the permutation is data-independent.

    Returns
    -------
    shards : list of (CSR matrix, ndarray)
    """
    n = int(n_nodes)
    N = X.shape[0]
    q = N // n
    if q < 1:
        raise ValidationError(f"{N} rows cannot give every one of {n} agents a record.")
    perm = check_random_state(random_state).permutation(N)[: n * q]
    check_sparse_structure(X)  # before scipy converts it
    X = sp.csr_matrix(X)
    return [(X[perm[i * q:(i + 1) * q]], np.asarray(y)[perm[i * q:(i + 1) * q]]) for i in range(n)]


def rounds_for_epochs(epochs, q, iota):
    """Rounds of ``epochs`` passes (1 epoch = N sampled gradients = q / iota rounds)."""
    return max(1, int(math.ceil(float(epochs) * q / iota - 1e-9)))


def objective(coef, X, y, loss, regularizer):
    """``F(x) = (1/N) sum loss(<c, x>, y) + h(x)``. Reads all data: a non-private diagnostic."""
    z = np.asarray(X @ coef).ravel()
    return float(np.mean(get_loss(loss).value(z, y)) + regularizer.value(coef))


def _graph(graph, n_nodes):
    if isinstance(graph, Graph):
        if graph.n_nodes != n_nodes:
            raise ValidationError(f"graph has {graph.n_nodes} nodes; n_nodes is {n_nodes}.")
        return graph
    if graph == "complete":
        return complete_graph(n_nodes)
    if graph == "ring":
        return ring_graph(n_nodes)
    if isinstance(graph, str):
        raise ValidationError(f"graph must be 'complete', 'ring', a Graph or an adjacency matrix; "
                              f"got {graph!r}.")
    return graph_from_adjacency(graph)


def _mixing(sampler, random_state):
    try:
        return sampler.exact_mixing_parameter(), "exact"
    except ValidationError:
        beta, _ = monte_carlo_mixing_parameter(sampler, 4000, random_state)
        return beta, "monte_carlo"


def _seed_sequence(random_state):
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if random_state is None or isinstance(random_state, numbers.Integral) and not isinstance(
            random_state, (bool, np.bool_)):
        if random_state is not None and random_state < 0:
            raise ValidationError(f"random_state must be a non-negative int; got {random_state}.")
        return np.random.SeedSequence(random_state)
    rng = check_random_state(random_state)
    return np.random.SeedSequence(rng.integers(0, 2 ** 63, size=4).tolist())


def private_dual_averaging(X, y, *, n_nodes=20, graph="complete", gossip="edge_matching",
                           edges_per_round=1, n_active=None, loss="hinge", regularizer=None,
                           schedule=None, epochs=3.0, n_rounds=None, epsilon=None, delta=1e-5,
                           sigma=None, calibration="accountant", accountant="auto",
                           activation="public", delta0=0.01, lipschitz=1.0,
                           inactive_x="theory", message_dtype="float64", engine="simulated",
                           random_state=None, eval_rounds=(), virtual_sequence=False,
                           check_mixing=True):
    """Private distributed dual averaging over a gossip graph (spec 004, Algorithm 1).

    Privacy: see the module docstring. Every noise draw is keyed to
    ``(agent, round)`` and accounted in :attr:`DistributedResult.event`.

    Parameters
    ----------
    X : array-like or sparse matrix of shape (N, dim)
        Rows of L2 norm at most ``lipschitz`` (checked; normalise rows first
        with :func:`fastdp.preprocessing.normalize_rows`).
    y : array-like of shape (N,)
        Two classes (mapped to -1/+1) for the hinge and logistic losses.
    n_nodes : int, default=20
    graph : {"complete", "ring"}, Graph or adjacency matrix, default="complete"
        The supergraph.
    gossip : {"edge_matching", "edge_uniform", "node_induced", "all_active"} or GossipSampler
        ``"all_active"`` is the baseline [19] (ι = 1, fixed Metropolis matrix).
    edges_per_round : int, default=1
    n_active : int, optional
        For ``gossip="node_induced"``.
    loss : {"hinge", "logistic"}, default="hinge"
        (``"squared"`` only without noise: it is not Lipschitz.)
    regularizer : Regularizer, default=L2Penalty(5e-4)
    schedule : DualAveragingSchedule, optional
        Default: ``strongly_convex_schedule(gamma=20)`` (the paper's ℓ2 experiment).
    epochs : float, default=3.0
        Used when ``n_rounds`` is None: ``T = epochs * q / iota``.
    n_rounds : int, optional
    epsilon : float, optional
        Target ε; with ``sigma`` also None the run is not private (σ = 0).
    delta : float, default=1e-5
    sigma : float, optional
        Noise standard deviation per coordinate (overrides calibration).
    calibration : {"accountant", "paper", "kov"}, default="accountant"
        ``"accountant"``: smallest σ whose fastdp-accounted ε ≤ ``epsilon``
        (the event of this run's schedule); ``"paper"``: Theorem 1's σ (for
        reproduction; no guarantee); ``"kov"``: the corrected paper argument.
    accountant : str, default="auto"
    activation : {"public", "hidden"}, default="public"
    delta0 : float, default=0.01
        The paper's per-round δ (used by the paper and KOV numbers).
    lipschitz : float, default=1.0
    inactive_x : {"theory", "literal"}, default="theory"
        Inactive agents' primal point: ``prox(z_i, iota A_t, gamma_t)``
        (consistent with the proofs) or frozen (the paper's pseudo-code).
    message_dtype : {"float64", "float32"}, default="float64"
        Precision of the gossip payloads. ``"float32"`` halves the bytes on
        the wire (spec 004 §7.4); each message is rounded once at its sender,
        so every engine still gives the same bits. Opt-in: it changes the
        numerics slightly (measured in ``docs/distributed.md``). Rounding a
        released message is post-processing: no privacy cost.
    engine : {"simulated", "ray"} or Engine, default="simulated"
    random_state : int, SeedSequence, Generator or None
        Seeds the partition, the schedule and every agent's noise key.
    eval_rounds : iterable of int
        Rounds at which the network average is recorded in ``history``.
    virtual_sequence : {False, True, "eval", "all"}, default=False
        Record the virtual sequence ``y^(t) = prox(zbar^(t), iota A_t, gamma_t)``
        of the analysis and the consensus errors in every round
        (:mod:`fastdp.distributed.diagnostics`; O(n dim) per round, simulator
        only); ``y^(t)`` and its average ``y~^(t)`` are kept at
        ``eval_rounds`` and T (``True``/``"eval"``) or in every round
        (``"all"``). Post-processing of the messages: no privacy cost.
    check_mixing : bool, default=True
        Compute β and refuse gossip that does not mix (β ≥ 1).

    Returns
    -------
    DistributedResult
    """
    if calibration not in _CALIBRATIONS:
        raise ValidationError(f"calibration must be one of {_CALIBRATIONS}; got {calibration!r}.")
    if inactive_x not in ("theory", "literal"):
        raise ValidationError(f"inactive_x must be 'theory' or 'literal'; got {inactive_x!r}.")
    if virtual_sequence not in (False, True, "eval", "all"):
        raise ValidationError(f"virtual_sequence must be False, True, 'eval' or 'all'; "
                              f"got {virtual_sequence!r}.")
    if message_dtype not in ("float64", "float32"):
        raise ValidationError(f"message_dtype must be 'float64' or 'float32'; got {message_dtype!r}.")
    dp._check_activation(activation)
    loss_obj = get_loss(loss)
    private = not (epsilon is None and sigma is None)
    lipschitz = float(lipschitz)
    if private and loss_obj.name == "squared":
        raise ValidationError("the squared loss is not Lipschitz: private runs need 'hinge' or "
                              "'logistic'.")
    X, y, _ = check_X_y(X, y, loss_obj.task, max_row_norm=lipschitz if private else None)
    regularizer = L2Penalty(5e-4) if regularizer is None else regularizer
    if not isinstance(regularizer, Regularizer):
        raise ValidationError(f"regularizer must be a fastdp.distributed Regularizer; got {regularizer!r}.")
    schedule = strongly_convex_schedule(20.0) if schedule is None else schedule
    if not isinstance(schedule, DualAveragingSchedule):
        raise ValidationError(f"schedule must be a DualAveragingSchedule; got {schedule!r}.")

    seeds = _seed_sequence(random_state)
    part_seed, sched_seed, key_seed = seeds.spawn(3)
    n_nodes = int(n_nodes)
    graph = _graph(graph, n_nodes)
    sampler = get_gossip(gossip, graph, edges_per_round=edges_per_round, n_active=n_active)
    if not isinstance(sampler, GossipSampler):  # pragma: no cover
        raise ValidationError("gossip must be a sampler.")
    iota = sampler.iota
    beta, beta_method = (math.nan, "skipped")
    if check_mixing:
        beta, beta_method = _mixing(sampler, np.random.default_rng(sched_seed.spawn(1)[0]))
        if n_nodes > 1 and not beta < 1.0 - 1e-12:
            raise ValidationError(
                f"the gossip does not mix (beta = {beta:.6g} >= 1): the graph is disconnected or "
                "too few agents talk per round. Use a connected graph and edges_per_round >= 1.")

    shards = partition_rows(X, y, n_nodes, np.random.default_rng(part_seed))
    q = shards[0][0].shape[0]
    T = rounds_for_epochs(epochs, q, iota) if n_rounds is None else int(n_rounds)
    if T < 1:
        raise ValidationError(f"n_rounds must be >= 1; got {n_rounds}.")
    a, A, g = schedule.arrays(T)
    regularizer.check_schedule((iota * A[t], g[t]) for t in range(1, T + 2))
    plan = sampler.sample(T, np.random.default_rng(sched_seed))
    counts = plan.activation_counts

    p_max = None
    if activation == "hidden":
        try:
            p_max = float(np.max(sampler.activation_probabilities()))
        except ValidationError as exc:
            raise ValidationError("activation='hidden' needs exact activation probabilities; "
                                  "this gossip has too many outcomes. Use activation='public'.") from exc

    def make_event(s):
        per = int(math.ceil((iota if p_max is None else p_max) * n_nodes - 1e-9))
        return dp.dda_event(s, lipschitz, q, activation=activation,
                            max_active_rounds=int(counts.max()), n_rounds=T,
                            n_samples=n_nodes * q, max_active_per_round=per)

    if sigma is not None:
        sigma = float(sigma)
        if not (math.isfinite(sigma) and sigma >= 0):
            raise ValidationError(f"sigma must be a finite number >= 0; got {sigma!r}.")
        used_calibration = "given"
    elif epsilon is not None:
        eps = float(epsilon)
        if calibration == "paper":
            sigma = dp.sigma_paper(eps, delta0, T, iota, q, lipschitz).sigma
        elif calibration == "kov":
            sigma = dp.sigma_kov(eps, delta, T, iota, q, lipschitz)
        else:
            sigma = float(dp.calibrate_sigma(make_event, eps, delta, accountant))
        used_calibration = calibration
    else:
        sigma, used_calibration = 0.0, "none"

    report = dp.privacy_report(sigma, lipschitz=lipschitz, q=q, n_rounds=T, iota=iota,
                               delta=delta, delta0=delta0, activation_counts=counts,
                               n_nodes=n_nodes, activation=activation, accountant=accountant,
                               activation_probability=p_max)
    program = NodeProgram(dim=X.shape[1], loss=loss_obj.name, regularizer=regularizer,
                          schedule=schedule, iota=iota, sigma=sigma, n_rounds=T,
                          inactive_x=inactive_x, message_dtype=message_dtype,
                          max_row_norm=lipschitz if private else None)
    keys = node_keys(key_seed, n_nodes)
    node_shards = [NodeShard.from_csr(Xi, yi) for Xi, yi in shards]
    eng = get_engine(engine)
    diagnostics = None
    if virtual_sequence:
        diagnostics = VirtualSequence("all" if virtual_sequence == "all" else "eval")
    out = eng.run(program, node_shards, plan, keys, eval_rounds=eval_rounds,
                  diagnostics=diagnostics)
    return DistributedResult(
        coef=out.node_averages.mean(axis=0), node_coefs=out.node_averages, z=out.z,
        history=out.history, n_rounds=T, sigma=sigma, privacy=report, event=report.event,
        iota=iota, beta=beta, beta_method=beta_method, activation_counts=counts, q=q,
        n_messages=out.n_messages, message_bytes=out.message_bytes, seconds=out.seconds,
        engine=eng.name, calibration=used_calibration, restarts=out.restarts,
        message_dtype=message_dtype, virtual=out.virtual)
