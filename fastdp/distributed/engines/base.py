"""Engine interface and the record an engine returns."""

import dataclasses

import numpy as np

from fastdp.exceptions import ValidationError

__all__ = ["Engine", "EngineResult", "get_engine"]


@dataclasses.dataclass
class EngineResult:
    """What an engine hands back after ``n_rounds`` rounds.

    Attributes
    ----------
    node_averages : ndarray of shape (n_nodes, dim)
        ``x~_i^(T)``, the a_t-weighted average of each agent's iterates (released).
    z : ndarray of shape (n_nodes, dim)
        Final dual variables (post-processing of released messages).
    x : ndarray of shape (n_nodes, dim)
        Final primal points ``prox(z_i, iota A_{T+1}, gamma_{T+1})``.
    history : list of (int, ndarray)
        ``(t, mean_i x~_i^(t))`` at the requested evaluation rounds.
    n_messages : int
        Point-to-point messages sent.
    message_bytes : int
        Bytes of message payload sent (``n_messages * dim * itemsize``, 8 or 4).
    seconds : float
        Wall time of the rounds (excluding start-up).
    restarts : int
        Agents recreated after a failure (Ray engine).
    virtual : VirtualSequenceRecord or None
        The y^(t) diagnostic, when asked (simulator only).
    """

    node_averages: np.ndarray
    z: np.ndarray
    x: np.ndarray
    history: list
    n_messages: int
    message_bytes: int
    seconds: float
    restarts: int = 0
    virtual: object = None


class Engine:
    """Base class: ``run(program, shards, schedule, keys, eval_rounds, diagnostics)``."""

    name = "engine"

    def run(self, program, shards, schedule, keys, eval_rounds=(), diagnostics=None):  # pragma: no cover
        raise NotImplementedError


def get_engine(engine):
    """``"simulated"`` / ``"ray"`` or an :class:`Engine` instance."""
    if isinstance(engine, Engine):
        return engine
    if engine in (None, "simulated"):
        from fastdp.distributed.engines.simulated import SimulatedEngine
        return SimulatedEngine()
    if engine == "ray":
        from fastdp.distributed.engines.ray_engine import RayEngine
        return RayEngine()
    raise ValidationError(f"engine must be 'simulated', 'ray' or an Engine; got {engine!r}.")
