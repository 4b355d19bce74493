"""The virtual sequence y^(t) of the analysis, recorded per round (spec 004 §2.1, §2.7, eq. (8)).

The proofs of the paper follow the *virtual* iterate

    ``y^(t) = prox(zbar^(t), iota A_t, gamma_t)``,   ``zbar^(t) = (1/n) sum_i z_i^(t)``,

and its weighted average ``y~^(t) = sum_{tau <= t} a_tau y^(tau) / A_t``
(Theorem 2 bounds ``A_t E[F(y~^(t)) - F*]``). :class:`VirtualSequence`
records, in every round t = 1 .. T, from the state the agents hold at the
start of round t (``z_i^(t)``, ``x_i^(t)``):

* ``z_consensus[t]  = ||z^(t) - 1 (x) zbar^(t)||^2 / a_t^2``  (the quantity of eq. (31)),
* ``x_deviation[t]  = (1/n) sum_i ||x_i^(t) - y^(t)||``       (Lemma 4.5, eq. (18)),
* ``x_deviation_sq[t] = (1/n) sum_i ||x_i^(t) - y^(t)||^2``   (eq. (19)),

plus ``y^(t)`` and ``y~^(t)`` at the requested rounds (``keep="eval"``) or in
every round (``keep="all"``; T x dim floats). Here ``x_i^(t)`` is the point
agent i uses in round t: ``prox(z_i^(t), iota A_t, gamma_t)`` in the
theory-consistent mode, the frozen point in the literal mode.

Cost: O(n dim) per round (it reads every agent's z), which is why it is
recorded only when asked. Only the in-process simulator records it (it needs
every z in every round); the engines give identical bits, so record it there.

Privacy: ``y^(t)`` is a function of the ``z_i``, which are post-processing of
released messages; the diagnostic costs no privacy. The objective values a
user may compute from it read the data and are non-private diagnostics.
"""

import dataclasses

import numpy as np

from fastdp.distributed.node import current_primal
from fastdp.exceptions import ValidationError

__all__ = ["VirtualSequence", "VirtualSequenceRecord"]

_KEEP = ("eval", "all")


@dataclasses.dataclass
class VirtualSequenceRecord:
    """What :class:`VirtualSequence` recorded over rounds ``t = 1 .. T``.

    Attributes
    ----------
    rounds : ndarray of int, shape (T,)
        ``1 .. T``.
    z_consensus, x_deviation, x_deviation_sq : ndarray of shape (T,)
        Per-round scalars (see the module docstring), entry ``t - 1`` for round t.
    y : ndarray of shape (T, dim) or None
        ``y^(t)`` of every round (``keep="all"`` only).
    history : list of (int, ndarray, ndarray)
        ``(t, y^(t), y~^(t))`` at the requested rounds (and always at T).
    y_final, y_average : ndarray of shape (dim,)
        ``y^(T)`` and ``y~^(T)``.
    """

    rounds: np.ndarray
    z_consensus: np.ndarray
    x_deviation: np.ndarray
    x_deviation_sq: np.ndarray
    y: object
    history: list
    y_final: np.ndarray
    y_average: np.ndarray


class VirtualSequence:
    """Per-round recorder of ``y^(t)`` and the consensus errors (see the module docstring).

    Parameters
    ----------
    keep : {"eval", "all"}, default="eval"
        Keep ``y^(t)`` and ``y~^(t)`` at the engine's evaluation rounds and at
        T, or ``y^(t)`` in every round as well.

    Notes
    -----
    An engine calls :meth:`start` once, :meth:`observe` at the start of every
    round t with the agents' states, and :meth:`finish`.
    """

    def __init__(self, keep="eval"):
        if keep not in _KEEP:
            raise ValidationError(f"keep must be one of {_KEEP}; got {keep!r}.")
        self.keep = keep
        self.record = None

    def start(self, program, n_rounds, eval_rounds=()):
        T = int(n_rounds)
        self._program = program
        self._keep_at = set(int(t) for t in eval_rounds) | {T}
        self._T = T
        self._z_cons = np.zeros(T)
        self._dev = np.zeros(T)
        self._dev_sq = np.zeros(T)
        self._y_all = np.zeros((T, program.dim)) if self.keep == "all" else None
        self._y_sum = np.zeros(program.dim)
        self._history = []
        self._y_last = None

    def observe(self, t, states):
        """Record round ``t`` from the agents' states at its start (``z_i^(t)``, ``x_i^(t)``)."""
        p = self._program
        tb = p.tables
        Z = np.stack([s.z for s in states])
        zbar = Z.mean(axis=0)
        y = p.prox_at(zbar, t)
        X = np.stack([current_primal(p, s, t) for s in states])
        dist_sq = np.sum((X - y) ** 2, axis=1)
        self._z_cons[t - 1] = np.sum((Z - zbar) ** 2) / tb["a"][t] ** 2
        self._dev[t - 1] = np.mean(np.sqrt(dist_sq))
        self._dev_sq[t - 1] = np.mean(dist_sq)
        self._y_sum += tb["a"][t] * y
        if self._y_all is not None:
            self._y_all[t - 1] = y
        if t in self._keep_at:
            self._history.append((int(t), y, self._y_sum / tb["A"][t]))
        self._y_last = y

    def finish(self):
        """The :class:`VirtualSequenceRecord` (also kept as ``self.record``)."""
        T = self._T
        self.record = VirtualSequenceRecord(
            rounds=np.arange(1, T + 1), z_consensus=self._z_cons, x_deviation=self._dev,
            x_deviation_sq=self._dev_sq, y=self._y_all, history=self._history,
            y_final=self._y_last, y_average=self._y_sum / self._program.tables["A"][T])
        return self.record
