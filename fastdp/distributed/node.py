"""The per-agent step of private distributed dual averaging, shared by every engine.

An agent ``i`` holds its private shard ``D_i`` (q rows of a CSR matrix and
their labels) and its state: the dual variable ``z_i``, the primal point
``x_i``, the lazy running sum ``s_i = sum_{tau <= acc_through} a_tau x_i^(tau)``.
In a round where it is active it

1. draws one local sample ``xi`` uniformly from its q rows and Gaussian noise
   ``nu ~ N(0, sigma^2 I_m)``, both from a random stream keyed to
   ``(agent key, round)`` (:func:`node_generator`);
2. releases the message ``m_i = z_i + a_t (g_i + nu)`` with ``g_i`` the
   per-sample subgradient of the loss at ``x_i^(t)``
   (:func:`compute_message`);
3. mixes ``z_i <- sum_j w_ij m_j`` over its senders in increasing ``j``
   (:func:`mix_messages`) and takes the prox step
   ``x_i <- prox(z_i, iota A_{t+1}, gamma_{t+1})`` (:func:`apply_mix`).

Because the noise of ``(i, t)`` is a deterministic function of the agent's key
and the round, a retried or replayed step reproduces the same message bit for
bit: it never releases a second, fresh draw of a message that may already be
out, so replays cost no privacy beyond what was accounted.

Privacy (one message): what is private is every record of ``D_i``;
adjacency replace-one (one record of one agent replaced, shard sizes public);
the per-sample subgradient has L2 sensitivity ``2 L`` (``|loss'| <= 1`` and
rows of norm at most ``L``); the message releases ``a_t (g + nu)`` plus
public post-processing ``z_i``, a Gaussian mechanism with noise multiplier
``sigma / (2 L)`` on a sample of one of q records. The accounting of whole runs
is in :mod:`fastdp.distributed.privacy`.
"""

import dataclasses
import math

import numpy as np
import scipy.sparse as sp

from fastdp._validation import check_X
from fastdp.exceptions import ValidationError
from fastdp.losses import get_loss

__all__ = [
    "NodeProgram",
    "NodeShard",
    "NodeState",
    "validate_shard",
    "node_keys",
    "node_generator",
    "sample_subgradient",
    "compute_message",
    "mix_messages",
    "apply_mix",
    "catch_up",
    "averaged_iterate",
    "current_primal",
]

_INACTIVE_X = ("theory", "literal")

try:  # shared compiled GLM kernels, when built
    from fastdp._kernels import _glm as _glm_kernels
except ImportError:  # pragma: no cover - depends on the build
    _glm_kernels = None


@dataclasses.dataclass
class NodeShard:
    """One agent's private data: CSR arrays of its q rows and their labels.

    Never leaves the agent; engines pass it once to the agent that owns it.
    The arrays are canonical CSR (column indices strictly increasing in every
    row), as the compiled kernels require: :meth:`from_csr` and
    :func:`validate_shard` make them so; a shard built from other arrays is
    refused (ValidationError) by :func:`sample_subgradient`.
    """

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    y: np.ndarray

    @property
    def n_samples(self):
        return len(self.indptr) - 1

    @classmethod
    def from_csr(cls, X, y):
        """The shard of the rows of sparse ``X`` (any format) and labels ``y``.

        ``X`` is brought to canonical CSR once, here, by
        :func:`fastdp._validation.check_X` (a copy with each row's entries
        sorted by column, duplicates summed, only when needed: canonical CSR,
        e.g. a partition of validated data, is kept as it is, bit for bit).
        Sorting a row's entries changes nothing but the summation order of
        its dot products.
        """
        X = check_X(X)
        if not sp.issparse(X):
            X = sp.csr_matrix(X)
        return cls(np.ascontiguousarray(X.data), np.ascontiguousarray(X.indices),
                   np.ascontiguousarray(X.indptr), np.ascontiguousarray(y, dtype=np.float64))


def validate_shard(shard, program, n_rows):
    """Check a shard an agent loaded itself (``shard_loader``) before it is used.

    The driver validates the data it partitions; a shard loaded inside an
    agent never passed through it, so the agent checks what the privacy
    analysis and the compiled kernels assume: canonical CSR arrays with
    ``program.dim`` columns and finite values, exactly ``n_rows`` rows (the
    public shard size the noise was calibrated for), labels in {-1, +1}, and
    rows of norm at most ``program.max_row_norm`` when the run is private.

    Parameters
    ----------
    shard : NodeShard
    program : NodeProgram
    n_rows : int
        The shard size the run was planned and calibrated with.

    Returns
    -------
    shard : NodeShard
        With canonical, contiguous arrays and float64 labels.

    Raises
    ------
    ValidationError
        If any of the above fails; the message names the agent's data.
    """
    if not isinstance(shard, NodeShard):
        raise ValidationError(f"shard_loader must return a NodeShard; got {type(shard).__name__}.")
    indptr = np.asarray(shard.indptr)
    if indptr.ndim != 1 or len(indptr) != int(n_rows) + 1:
        raise ValidationError(
            f"the loaded shard has {len(indptr) - 1 if indptr.ndim == 1 else '?'} rows; the run was "
            f"calibrated for {int(n_rows)} (shard sizes are public and fix the noise): load the "
            "same rows the run was planned with.")
    try:
        X = sp.csr_matrix((shard.data, shard.indices, indptr), shape=(int(n_rows), program.dim))
    except (ValueError, TypeError, IndexError) as exc:
        raise ValidationError(f"the loaded shard's CSR arrays are inconsistent: {exc}") from None
    X = check_X(X, max_row_norm=program.max_row_norm)
    y = np.asarray(shard.y, dtype=np.float64)
    if y.shape != (int(n_rows),) or not np.all((y == 1.0) | (y == -1.0)):
        raise ValidationError("the loaded shard's labels must be one per row, each -1 or +1.")
    return NodeShard.from_csr(X, y)


@dataclasses.dataclass
class NodeProgram:
    """Public constants every agent knows (identical on every agent).

    Attributes
    ----------
    dim : int
    loss : str
    regularizer : fastdp.distributed.regularizers.Regularizer
    schedule : fastdp.distributed.schedules.DualAveragingSchedule
    iota : float
    sigma : float
        Per-coordinate noise standard deviation (0: non-private).
    n_rounds : int
    inactive_x : {"theory", "literal"}
    message_dtype : {"float64", "float32"}, default="float64"
        Precision of the messages on the wire. ``"float32"`` rounds each
        message once, at the sender, before anyone (the sender included)
        mixes it: half the bytes, slightly different numerics. Rounding a
        released message is post-processing (no privacy cost); the state
        ``z``, ``x`` and the averages stay float64.
    max_row_norm : float or None, default=None
        The row-norm bound L the privacy analysis assumes (None: not private,
        unchecked). Shards an agent loads itself are checked against it
        (:func:`validate_shard`).
    """

    dim: int
    loss: str
    regularizer: object
    schedule: object
    iota: float
    sigma: float
    n_rounds: int
    inactive_x: str = "theory"
    message_dtype: str = "float64"
    max_row_norm: object = None

    def __post_init__(self):
        self._tables = None
        self._loss = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tables"] = None          # rebuilt on the receiving side
        state["_loss"] = None
        return state

    @property
    def message_itemsize(self):
        """Bytes per message coordinate on the wire."""
        return np.dtype(self.message_dtype).itemsize

    @property
    def tables(self):
        """Schedule arrays and the regularizer's lazy-averaging tables (built once)."""
        if self._tables is None:
            a, A, g = self.schedule.arrays(self.n_rounds)
            self._tables = self.regularizer.lazy_tables(a, A, g, self.iota)
        return self._tables

    @property
    def loss_object(self):
        if getattr(self, "_loss", None) is None:
            self._loss = get_loss(self.loss)
        return self._loss

    def prox_at(self, z, t):
        """``prox(z, iota A_t, gamma_t)``."""
        tb = self.tables
        return self.regularizer.prox(z, self.iota * tb["A"][t], tb["gamma"][t])


@dataclasses.dataclass
class NodeState:
    """Mutable state of one agent (see the module docstring)."""

    z: np.ndarray
    x: np.ndarray
    s: np.ndarray
    acc_through: int = 0

    @classmethod
    def initial(cls, program):
        z = np.zeros(program.dim)
        return cls(z=z, x=program.prox_at(z, 1), s=np.zeros(program.dim), acc_through=0)

    def copy(self):
        return NodeState(self.z.copy(), self.x.copy(), self.s.copy(), int(self.acc_through))


def node_keys(seed_sequence, n_nodes):
    """128-bit Philox keys of the agents, derived from one ``SeedSequence``."""
    return [np.random.SeedSequence(seed_sequence.entropy,
                                   spawn_key=tuple(seed_sequence.spawn_key) + (1, i))
            .generate_state(2, np.uint64) for i in range(n_nodes)]


_GENERATORS = {}


def node_generator(key, t):
    """Generator of agent ``key`` in round ``t``: Philox with the round in the high counter words.

    Streams of different rounds never overlap (each has 2**128 blocks), and
    the same ``(key, t)`` always gives the same draws: the state equals that of
    ``Generator(Philox(key=key, counter=t << 128))``. The generator object is
    cached per key and reset by the next call with the same key (4x cheaper
    than building a new one); draw from it before calling again.
    """
    k = np.asarray(key, dtype=np.uint64)
    cache_key = k.tobytes()
    entry = _GENERATORS.get(cache_key)
    if entry is None:
        bitgen = np.random.Philox(key=k)
        entry = _GENERATORS[cache_key] = (bitgen, np.random.Generator(bitgen), bitgen.state)
        if len(_GENERATORS) > 4096:          # bound the cache (many runs in one process)
            _GENERATORS.clear()
            _GENERATORS[cache_key] = entry
    bitgen, gen, state = entry
    counter = state["state"]["counter"]
    counter[:] = 0
    counter[2] = int(t) & 0xFFFFFFFFFFFFFFFF
    counter[3] = int(t) >> 64
    state["buffer_pos"] = 4
    state["has_uint32"] = 0
    state["uinteger"] = 0
    bitgen.state = state
    return gen


def current_primal(program, state, t):
    """``x_i^(t)``: the stored point (literal mode) or ``prox(z_i, iota A_t, gamma_t)``."""
    if program.inactive_x == "literal":
        return state.x
    return program.prox_at(state.z, t)


def sample_subgradient(shard, row, x, loss, out):
    """``out += loss'(<c_row, x>, y_row) c_row`` (the shared GLM kernel when built)."""
    if _glm_kernels is not None:
        # the kernel checks the structure of the one row it reads (O(its nnz)): the
        # shard must be canonical CSR (NodeShard.from_csr, validate_shard)
        _glm_kernels.gradient_sum(shard.data, shard.indices, shard.indptr, shard.y,
                                  np.array([row], dtype=np.int64), x, loss.code, out)
        return out
    lo, hi = shard.indptr[row], shard.indptr[row + 1]
    idx, vals = shard.indices[lo:hi], shard.data[lo:hi]
    d = _derivative(loss, float(np.dot(vals, x[idx])), float(shard.y[row]))
    out[idx] += d * vals
    return out


def _derivative(loss, z, y):
    """Scalar ``loss'(z, y)`` with the conventions of :mod:`fastdp.losses` (hinge: 0 at the kink)."""
    if loss.name == "hinge":
        return -y if y * z < 1.0 else 0.0
    if loss.name == "logistic":
        m = y * z
        return -y / (1.0 + math.exp(m)) if m < 700 else -y * math.exp(-m)
    return float(loss.derivative(z, y))


def compute_message(program, state, shard, key, t):
    """The message ``z_i + a_t (g_i + nu_i)`` of an active agent in round ``t``.

    Draws, from :func:`node_generator` ``(key, t)``, first the sample index
    then the noise, so every engine consumes the stream identically. With
    ``program.message_dtype == "float32"`` the message is rounded to float32
    here, once, so every receiver (the sender included) mixes the same bits.
    """
    rng = node_generator(key, t)
    row = int(rng.integers(shard.n_samples))
    if program.sigma > 0:
        buf = rng.standard_normal(program.dim)
        buf *= program.sigma
    else:
        buf = np.zeros(program.dim)
    x_t = current_primal(program, state, t)
    sample_subgradient(shard, row, x_t, program.loss_object, buf)
    buf *= program.tables["a"][t]
    buf += state.z
    if program.message_dtype == "float32":
        return buf.astype(np.float32)
    return buf


def _float64(message):
    return message if message.dtype == np.float64 else message.astype(np.float64)


def mix_messages(weights, messages):
    """``sum_j w_j m_j`` in float64, in the given (canonical, increasing-j) order.

    float32 messages are widened exactly to float64 before the products.
    """
    out = weights[0] * _float64(messages[0])
    for w, m in zip(weights[1:], messages[1:]):
        out += w * _float64(m)
    return out


def catch_up(program, state, t_through):
    """Add ``a_tau x^(tau)`` for ``tau = acc_through + 1 .. t_through`` to ``s`` (z, x constant)."""
    t1 = state.acc_through + 1
    if t_through < t1:
        return
    state.s += _pending_sum(program, state, t1, t_through)
    state.acc_through = int(t_through)


def _pending_sum(program, state, t1, t2):
    tb = program.tables
    if program.inactive_x == "literal":
        return state.x * (tb["A"][t2] - tb["A"][t1 - 1])
    return program.regularizer.weighted_prox_sum(state.z, tb, t1, t2)


def apply_mix(program, state, t, z_new, x_new=None):
    """End of round ``t`` for an active agent: catch up the average, set ``z``, prox step.

    ``x_new`` may be passed when already computed for the same ``z_new`` (the
    simulator shares it within a group of receivers); it must equal
    ``prox(z_new, iota A_{t+1}, gamma_{t+1})``.
    """
    catch_up(program, state, t)
    state.z = z_new
    state.x = program.prox_at(z_new, t + 1) if x_new is None else x_new


def averaged_iterate(program, state, t):
    """``x~_i^(t) = sum_{tau <= t} a_tau x_i^(tau) / A_t`` without changing the state."""
    s = state.s
    if t > state.acc_through:
        s = s + _pending_sum(program, state, state.acc_through + 1, t)
    return s / program.tables["A"][t]
