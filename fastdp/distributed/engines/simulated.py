"""Single-process simulator of private distributed dual averaging (the default engine).

All agents live in this process. In each round only the active agents work:
each computes its message with the shared per-agent step
(:func:`fastdp.distributed.node.compute_message`, noise keyed to
``(agent, round)``); receivers that apply the same weights to the same senders
(both ends of a gossip edge, or every agent under exact averaging) share one
mixing sum and one prox step, computed in the canonical order, so the bits are
those of per-agent evaluation on a real engine. Inactive agents are never
touched: their running averages are caught up lazily.

Privacy: the simulator only models the protocol; what crosses agent
boundaries is exactly the messages (see :mod:`fastdp.distributed.node`).
``transport_hook`` lets tests observe every message a receiver uses.
"""

import time

import numpy as np

from fastdp.distributed.engines.base import Engine, EngineResult
from fastdp.distributed.node import (
    NodeState,
    apply_mix,
    averaged_iterate,
    catch_up,
    compute_message,
    mix_messages,
)

__all__ = ["SimulatedEngine"]


class SimulatedEngine(Engine):
    """All agents in one process (see the module docstring).

    Parameters
    ----------
    transport_hook : callable, optional
        Called as ``hook(t, sender, receiver, message)`` for every message a
        receiver other than the sender uses (for tests of what crosses agent
        boundaries).
    round_hook : callable, optional
        Called as ``hook(t, states)`` after every round with the list of
        :class:`~fastdp.distributed.node.NodeState` (diagnostics and tests;
        the states must not be modified).
    """

    name = "simulated"

    def __init__(self, transport_hook=None, round_hook=None):
        self.transport_hook = transport_hook
        self.round_hook = round_hook

    def __repr__(self):
        return "SimulatedEngine()"

    def run(self, program, shards, schedule, keys, eval_rounds=(), diagnostics=None):
        """Run every round; ``diagnostics`` (a
        :class:`~fastdp.distributed.diagnostics.VirtualSequence`) records y^(t) per round."""
        n = schedule.n_nodes
        T = schedule.n_rounds
        states = [NodeState.initial(program) for _ in range(n)]
        if diagnostics is not None:
            diagnostics.start(program, T, eval_rounds)
        evals = set(int(t) for t in eval_rounds)
        history = []
        hook = self.transport_hook
        start = time.perf_counter()
        for t in range(1, T + 1):
            rnd = schedule.round(t)
            if diagnostics is not None:
                diagnostics.observe(t, states)
            msgs = {int(i): compute_message(program, states[i], shards[i], keys[i], t)
                    for i in rnd.active}
            for receivers, senders, weights in rnd.groups:
                z_new = mix_messages(weights, [msgs[int(j)] for j in senders])
                x_new = program.prox_at(z_new, t + 1)
                if hook is not None:
                    for i in receivers:
                        for j in senders:
                            if j != i:
                                hook(t, int(j), int(i), msgs[int(j)])
                for i in receivers:
                    apply_mix(program, states[i], t, z_new, x_new)
            if self.round_hook is not None:
                self.round_hook(t, states)
            if t in evals:
                history.append((t, np.mean([averaged_iterate(program, s, t) for s in states],
                                           axis=0)))
        for s in states:
            catch_up(program, s, T)
        A_T = program.tables["A"][T]
        seconds = time.perf_counter() - start
        n_messages = schedule.n_messages()
        return EngineResult(
            node_averages=np.stack([s.s / A_T for s in states]),
            z=np.stack([s.z for s in states]),
            x=np.stack([s.x if program.inactive_x == "literal" else program.prox_at(s.z, T + 1)
                        for s in states]),
            history=history, n_messages=n_messages,
            message_bytes=n_messages * program.dim * program.message_itemsize, seconds=seconds,
            virtual=None if diagnostics is None else diagnostics.finish())
